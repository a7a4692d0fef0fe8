"""The CI matrix holds what CONTRIBUTING.md promises: every module of keras_normkit is
imported by a test that runs on every backend.

TensorFlow runs the whole fast suite; JAX, PyTorch and the oldest Keras run the backend suite
(`--backend-suite`, `tests/conftest.py`), which leaves out the tests of scripts, documents
and benchmarks. A module is *imported* by a test file when the file imports it (`import
keras_normkit.a.b`, `from keras_normkit.a import b`, `importlib.import_module` of its name)
or imports a name that the module
defines (`from keras_normkit.layers import SELU`: `keras_normkit.layers.selu`). A public
module must be imported so by a test of the backend suite; a private one (`_cell_args`), a
package's `__init__` and `version` count when a module so imported imports them (they have
no test of their own). Were a module reached only by a TensorFlow-only test, a backend could
break it unseen.
"""

import ast
import importlib
import importlib.util
import pathlib

import pytest

from tests.conftest import EVERY_BACKEND, TENSORFLOW_SUITE_ONLY, in_backend_suite

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "keras_normkit"
TESTS = ROOT / "tests"
BACKEND_SUITE_TARGETS = ("test-jax", "test-torch", "test-keras-min")


def _package_modules():
    """Every module of the package, dotted (`keras_normkit.layers.selu`), packages included."""
    modules = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules.add(".".join(parts))
    return modules


def _imported_modules(path):
    """The keras_normkit modules that the file at `path` imports (see the module docstring)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "importlib.import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("keras_normkit")
            and importlib.util.find_spec(node.args[0].value)
        ):
            found.add(node.args[0].value)  # `importlib.import_module("keras_normkit.x")`
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("keras_normkit")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("keras_normkit"):
            found.add(node.module)
            package = importlib.import_module(node.module)
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if hasattr(package, "__path__") and importlib.util.find_spec(submodule):
                    found.add(submodule)  # `from keras_normkit.layers import selu`
                    continue
                defining = getattr(getattr(package, alias.name, None), "__module__", None)
                if isinstance(defining, str) and defining.startswith("keras_normkit"):
                    found.add(defining)
    return found


def _backend_suite_files():
    for path in sorted(TESTS.rglob("test_*.py")):
        relative = path.relative_to(TESTS).as_posix()
        if in_backend_suite(relative):
            yield path


def _module_path(module):
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _reached(modules):
    """`modules`, their packages, and every keras_normkit module these import, transitively."""
    reached, todo = set(), list(modules)
    while todo:
        module = todo.pop()
        if module in reached:
            continue
        reached.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += _imported_modules(_module_path(module))
    return reached


def _public(module):
    return not any(part.startswith("_") for part in module.split(".")[1:])


def test_every_module_is_imported_by_a_test_of_the_backend_suite():
    direct = set()
    for path in _backend_suite_files():
        direct |= _imported_modules(path)
    modules = _package_modules()
    packages = {m for m in modules if _module_path(m).name == "__init__.py"}
    must_be_direct = {m for m in modules if _public(m) and m not in packages}
    must_be_direct.discard("keras_normkit.version")
    reached = _reached(direct)
    missing = sorted(m for m in modules if m not in (direct if m in must_be_direct else reached))
    assert not missing, (
        "These modules are imported by no test that runs on every backend (add a test in the "
        f"backend suite, or import them from one): {missing}"
    )


def test_the_backend_suite_leaves_out_scripts_and_keeps_one_example():
    assert in_backend_suite("layers/test_selu.py")
    assert in_backend_suite("calibration/metrics/test_binned.py")
    assert not in_backend_suite("benchmarks/test_timing.py")
    assert not in_backend_suite("test_docs.py")
    assert not in_backend_suite("examples/test_snn_data.py")
    assert all(in_backend_suite(path) for path in EVERY_BACKEND)
    assert all((TESTS / path).exists() for path in EVERY_BACKEND)
    assert all((TESTS / entry.rstrip("/")).exists() for entry in TENSORFLOW_SUITE_ONLY)


@pytest.mark.parametrize("target", BACKEND_SUITE_TARGETS)
def test_the_makefile_runs_the_backend_suite(target):
    """`make test-jax`, `test-torch` and `test-keras-min` pass `--backend-suite` to pytest."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
    assert "--backend-suite" in recipe or "BACKEND_SUITE" in recipe, recipe
