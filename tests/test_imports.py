"""No import circle inside keras_normkit: the modules' imports, read with `ast`, form a DAG.

Two modules that import each other (even lazily, inside a function, as `calibration.measures`
and `calibration.report` once did) can only be read together and break when either is
imported first in a new way. This test reads every module's source (nothing is imported),
builds the graph "module -> keras_normkit module it imports", and fails on any cycle, naming
it.

What an import statement points at:

- `import a.b.c` and `from a.b import c` where `a.b.c` is a module: the module `a.b.c`;
- `from a.b import name` where `name` is not a module: `a.b` (its `__init__.py`);
- relative imports are resolved against the importing module's package.

The implicit import of a module's parent packages (`import a.b.c` runs `a/__init__.py` and
`a/b/__init__.py` first) is not an edge: a package's `__init__` importing its own modules,
which import each other's modules, is how every package is built and never circular in
execution, because the package is already initializing when its modules run. An explicit
`from a.b import name` of a non-module name is an edge, since it needs `a/b/__init__.py` to
have run to its end.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "keras_normkit"


def _module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(package=PACKAGE):
    """`{dotted module name: source path}` of every module under `package`."""
    return {_module_name(path): path for path in sorted(package.rglob("*.py"))}


def imported_modules(source, module, modules, is_package=False):
    """The modules of `modules` that the statements of `source` (module `module`) import.

    Imports anywhere count: at the top, under `if`, or inside a function.
    """
    found = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in modules:
                    found.add(submodule)
                elif target in modules:
                    found.add(target)
    found.discard(module)
    return found


def import_graph(modules):
    graph = {}
    for name, path in modules.items():
        source = path.read_text(encoding="utf-8")
        graph[name] = imported_modules(source, name, modules, path.name == "__init__.py")
    return graph


def find_cycles(graph):
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(component, graph) for component in components]


def _cycle_in(component, graph):
    """A closed path `a -> b -> ... -> a` through the modules of one component."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    while True:
        following = sorted(t for t in graph[path[-1]] if t in members)
        closing = [t for t in following if t in seen]
        if closing:
            return path[path.index(closing[0]) :] + [closing[0]]
        path.append(following[0])
        seen.add(following[0])


def test_keras_normkit_has_no_import_circle():
    cycles = find_cycles(import_graph(package_modules()))
    assert not cycles, "import circles in keras_normkit:\n" + "\n".join(
        " -> ".join(cycle) for cycle in cycles
    )


def test_the_graph_sees_the_package():
    """Not vacuously green: the modules are found, and so are their imports."""
    graph = import_graph(package_modules())
    assert "keras_normkit.calibration.metrics.report" in graph
    assert (
        "keras_normkit.calibration._bootstrap" in graph["keras_normkit.calibration.metrics.report"]
    )
    assert "keras_normkit.calibration._bins" in graph["keras_normkit.metrics"]


MODULES = {
    "pkg": "",
    "pkg.a": "",
    "pkg.b": "",
    "pkg.sub": "",
    "pkg.sub.c": "",
}


@pytest.mark.parametrize(
    "source, module, is_package, expected",
    [
        ("import pkg.a", "pkg.b", False, {"pkg.a"}),
        ("from pkg import a, b", "pkg.sub.c", False, {"pkg.a", "pkg.b"}),
        ("from pkg import helper", "pkg.a", False, {"pkg"}),  # a name of pkg/__init__.py
        ("from . import b", "pkg.a", False, {"pkg.b"}),
        ("from .. import a", "pkg.sub.c", False, {"pkg.a"}),
        ("from .c import f", "pkg.sub", True, {"pkg.sub.c"}),
        ("def f():\n    from pkg.a import g", "pkg.b", False, {"pkg.a"}),  # lazy
        ("import numpy\nfrom keras import ops", "pkg.a", False, set()),
        ("from pkg.a import x", "pkg.a", False, set()),  # itself
    ],
)
def test_imported_modules_on_snippets(source, module, is_package, expected):
    assert imported_modules(source, module, MODULES, is_package) == expected


def test_find_cycles_on_graphs():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert find_cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]
    cycles = find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()})
    assert cycles == [["a", "b", "c", "a"]]
