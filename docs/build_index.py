"""Writes the generated parts of `docs/index.md`, so the site's home page cannot drift from
the README and the public API.

* The install block is the README's, copied between the `<!-- INSTALL -->` markers of both.
* The API table lists, page by page, every name of each public module's `__all__`, between
  the `<!-- API_TABLE -->` markers.

    python docs/build_index.py           # rewrites docs/index.md
    python docs/build_index.py --check   # exits 1 if docs/index.md is out of date

`tests/test_docs.py` runs the check.
"""

import argparse
import importlib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
INDEX = ROOT / "docs" / "index.md"
README = ROOT / "README.md"

# (module, page, what the page is about): one row of the API table each, in this order.
PAGES = [
    (
        "keras_normkit.activations",
        "activations.md",
        "the SELU family and its fixed points, activation gains",
    ),
    ("keras_normkit.layers", "layers.md", "layers and recurrent cells"),
    ("keras_normkit.initializers", "initializers.md", "initializers"),
    ("keras_normkit.regularizers", "regularizers.md", "regularizers (Keras's own re-exported)"),
    ("keras_normkit.constraints", "constraints.md", "constraints and their functional forms"),
    ("keras_normkit.optimizers", "optimizers.md", "optimizer wrappers (gradient transforms)"),
    ("keras_normkit.schedules", "schedules.md", "learning-rate schedules"),
    ("keras_normkit.callbacks", "callbacks.md", "training callbacks"),
    ("keras_normkit.calibration", "calibration.md", "post-hoc calibration and its measures"),
    (
        "keras_normkit.uncertainty",
        "uncertainty.md",
        "conformal sets and intervals, OOD scores, MC dropout and ensembles",
    ),
    ("keras_normkit.metrics", "metrics.md", "streaming Keras metrics"),
    ("keras_normkit.plotting", "plotting.md", "plots (matplotlib)"),
    (
        "keras_normkit.utils",
        "utils.md",
        "batch-norm and weight-standardization folding, batch-norm statistics, averaged weights",
    ),
    ("keras_normkit.ops", "ops.md", "engines that take tensors"),
    ("keras_normkit.migration", "migration.md", "loading TensorFlow Addons models"),
    ("keras_normkit.export", "export.md", "SavedModel and TFLite export (TensorFlow only)"),
]


def block(text, marker):
    """The text between `<!-- MARKER -->` and `<!-- /MARKER -->` (markers excluded)."""
    match = re.search(rf"<!-- {marker} -->\n(.*?)<!-- /{marker} -->\n", text, flags=re.DOTALL)
    if match is None:
        raise ValueError(f"no <!-- {marker} --> ... <!-- /{marker} --> block")
    return match


def api_table():
    lines = ["| Page | Contents | Names |", "| --- | --- | --- |"]
    for module, page, what in PAGES:
        names = importlib.import_module(module).__all__
        title = page.removesuffix(".md").capitalize()
        lines.append(f"| [{title}]({page}) | {what} | {', '.join(f'`{n}`' for n in names)} |")
    return "\n".join(lines) + "\n"


def render(index_text, readme_text):
    """`index_text` with its generated blocks rewritten."""
    install = block(readme_text, "INSTALL").group(1)
    for marker, body in (("INSTALL", install), ("API_TABLE", api_table())):
        match = block(index_text, marker)
        index_text = index_text[: match.start(1)] + body + index_text[match.end(1) :]
    return index_text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, exit 1 if stale")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    current = INDEX.read_text()
    wanted = render(current, README.read_text())
    if args.check:
        if current != wanted:
            print("docs/index.md is out of date: run python docs/build_index.py")
            return 1
        return 0
    INDEX.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
