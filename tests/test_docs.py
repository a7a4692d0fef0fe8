"""The API reference (docs/, built by `mkdocs build --strict`) lists every public name.

Fast checks on the Markdown sources, without building the site: every name in the
`__all__` of keras_normkit and of each public module has an entry (a `::: path` directive
of mkdocstrings, or a name in a directive's `members:` option), every entry points at an
existing object, every page is in the navigation and every notebook is linked.
"""

import importlib
import importlib.util
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# The modules whose `__all__` is the public API (export is TensorFlow-only, not imported
# by `import keras_normkit`, but documented like the others).
PUBLIC_MODULES = [
    "keras_normkit",
    "keras_normkit.activations",
    "keras_normkit.calibration",
    "keras_normkit.callbacks",
    "keras_normkit.constraints",
    "keras_normkit.export",
    "keras_normkit.initializers",
    "keras_normkit.layers",
    "keras_normkit.metrics",
    "keras_normkit.migration",
    "keras_normkit.ops",
    "keras_normkit.optimizers",
    "keras_normkit.plotting",
    "keras_normkit.regularizers",
    "keras_normkit.schedules",
    "keras_normkit.uncertainty",
    "keras_normkit.utils",
]

_DIRECTIVE = re.compile(r"^:::\s*(\S+)\s*$")


def parse_directives(text):
    """`{path: options}` for every `::: path` directive of a Markdown text."""
    directives, lines = {}, text.splitlines()
    for i, line in enumerate(lines):
        match = _DIRECTIVE.match(line)
        if not match:
            continue
        block = []
        for option in lines[i + 1 :]:
            if option.strip() and not option.startswith("    "):
                break
            block.append(option[4:])
        config = yaml.safe_load("\n".join(block)) or {}
        directives[match.group(1)] = config.get("options") or {}
    return directives


def documented_paths():
    """Every documented dotted path: the directives and the members they list."""
    paths = set()
    for page in sorted(DOCS.glob("**/*.md")):
        for path, options in parse_directives(page.read_text(encoding="utf-8")).items():
            paths.add(path)
            members = options.get("members")
            if isinstance(members, list):
                paths.update(f"{path}.{member}" for member in members)
    return paths


def resolve(path):
    """The object a dotted path names (a module, or an attribute of one)."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)


def _has_entry(module_name, name, paths, objects):
    if f"{module_name}.{name}" in paths:
        return True
    obj = getattr(importlib.import_module(module_name), name)
    # The same object documented under another path (e.g. its defining module).
    return not isinstance(obj, (str, int, float)) and any(obj is other for other in objects)


def test_parse_directives_reads_paths_and_members():
    text = (
        "# Page\n\n::: pkg.mod\n    options:\n      members:\n        - a\n        - b\n\n"
        "text\n\n::: pkg.mod.C\n"
    )
    assert parse_directives(text) == {"pkg.mod": {"members": ["a", "b"]}, "pkg.mod.C": {}}


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_a_docs_entry(module_name):
    module = importlib.import_module(module_name)
    assert hasattr(module, "__all__"), f"{module_name} defines no __all__"
    paths = documented_paths()
    objects = [resolve(path) for path in paths]
    missing = [name for name in module.__all__ if not _has_entry(module_name, name, paths, objects)]
    assert not missing, (
        f"{module_name}.__all__ names without an entry in docs/ "
        f"(add `::: {module_name}.NAME` to its page): {missing}"
    )


def test_every_docs_entry_exists():
    broken = []
    for path in sorted(documented_paths()):
        try:
            resolve(path)
        except (ImportError, AttributeError):
            broken.append(path)
    assert not broken, f"docs entries naming no object: {broken}"


def test_every_page_is_in_the_navigation():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(nav):
        for item in nav:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            yield from pages(value) if isinstance(value, list) else [value]

    in_nav = set(pages(config["nav"]))
    on_disk = {str(page.relative_to(DOCS)) for page in DOCS.glob("**/*.md")}
    assert on_disk == in_nav


def test_every_notebook_is_linked():
    text = (DOCS / "notebooks.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(notebooks/([\w.-]+\.ipynb)\)", text))
    notebooks = {path.name for path in (ROOT / "notebooks").glob("*.ipynb")}
    assert notebooks and linked == notebooks


def test_flush_examples_render_as_an_examples_section():
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location("griffe_examples", DOCS / "griffe_examples.py")
    extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extension)
    text = "Summary.\n\nExample:\n\n>>> 1 + 1\n2\n\nReference: a paper.\n\n>>> x = 1"
    assert extension.rewrite(text).splitlines() == [
        "Summary.",
        "",
        "Examples:",
        "    >>> 1 + 1",
        "    2",
        "",
        "Reference: a paper.",
        "",
        "```pycon",
        ">>> x = 1",
        "```",
    ]
    assert extension.rewrite("Call arguments:\n    inputs: A tensor.") == (
        "Call arguments:\n    - `inputs`: A tensor."
    )


def load_build_index():
    spec = importlib.util.spec_from_file_location("build_index", DOCS / "build_index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_home_page_is_generated_from_the_readme_and_the_api():
    """docs/index.md's install block is the README's and its API table lists every public
    name: `python docs/build_index.py` rewrites them."""
    build_index = load_build_index()
    index = (DOCS / "index.md").read_text()
    assert index == build_index.render(index, (ROOT / "README.md").read_text()), (
        "docs/index.md is out of date: run python docs/build_index.py"
    )
    # Every public module has its row.
    assert {module for module, _, _ in build_index.PAGES} == set(PUBLIC_MODULES) - {"keras_normkit"}


def test_build_index_rewrites_only_its_blocks():
    build_index = load_build_index()
    readme = "intro\n<!-- INSTALL -->\npip install x\n<!-- /INSTALL -->\nrest\n"
    index = "# home\n<!-- INSTALL -->\nold\n<!-- /INSTALL -->\nmiddle\n<!-- API_TABLE -->\n<!-- /API_TABLE -->\nend\n"
    out = build_index.render(index, readme)
    assert out.startswith("# home\n<!-- INSTALL -->\npip install x\n<!-- /INSTALL -->\nmiddle\n")
    assert out.endswith("<!-- /API_TABLE -->\nend\n")
    assert "`load_tfa_model`" in out and "[Layers](layers.md)" in out
    with pytest.raises(ValueError, match="INSTALL"):
        build_index.render(index, "no markers here")
