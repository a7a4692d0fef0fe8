"""Every `>>>` example in the docstrings of keras_normkit runs as a doctest.

One test per docstring that has examples, named after the object (for example
`test_docstring_example[keras_normkit.layers.selu.SELU]`). Each example runs in a fresh,
empty namespace: it must import what it uses, as a reader copying it would. Examples that
need TensorFlow itself (`tf.*`, SavedModel or TFLite export) are skipped on other backends.
On failure the message shows the doctest report (the example, what was expected, what came).
"""

import doctest
import importlib
import os
import pkgutil
import re

import keras
import pytest

import keras_normkit

os.environ.setdefault("MPLBACKEND", "Agg")

OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

# An example needs TensorFlow when it names `tf`, imports tensorflow or exports a model.
_NEEDS_TENSORFLOW = re.compile(
    r"\btf\.|\bimport tensorflow\b|\bfrom tensorflow\b|export_saved_model|convert_to_tflite"
    r"|\.export\(|tflite|saved_model"
)


def _modules():
    """keras_normkit and every module under it, private ones included, in a stable order."""
    modules = [keras_normkit]
    for info in pkgutil.walk_packages(keras_normkit.__path__, prefix="keras_normkit."):
        modules.append(importlib.import_module(info.name))
    return sorted(modules, key=lambda module: module.__name__)


def _collect_doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = {}
    for module in _modules():
        # `find` keeps only the objects defined in `module`, so a re-export is found once.
        for test in finder.find(module, module.__name__):
            if test.examples and test.name not in tests:
                tests[test.name] = test
    return [tests[name] for name in sorted(tests)]


DOCTESTS = _collect_doctests()


# Objects that do not exist on every backend, with the backends their examples run on. Each
# one's docstring says so, and it raises a clear error elsewhere (tested with the object).
_BACKEND_LIMITED = {}  # none at present


def _needs_tensorflow(test):
    return test.name.startswith("keras_normkit.export") or any(
        _NEEDS_TENSORFLOW.search(example.source) for example in test.examples
    )


def _params():
    skip_tf = pytest.mark.skipif(
        keras.backend.backend() != "tensorflow",
        reason="doctest example needs TensorFlow (tf.*, SavedModel/TFLite export)",
    )
    params = []
    for test in DOCTESTS:
        marks = [skip_tf] if _needs_tensorflow(test) else []
        backends = _BACKEND_LIMITED.get(test.name)
        if backends is not None:
            reason = f"{test.name} is implemented for {', '.join(backends)} only"
            marks.append(pytest.mark.skipif(keras.backend.backend() not in backends, reason=reason))
        params.append(pytest.param(test, id=test.name, marks=marks))
    return params


def test_backend_limited_objects_exist_and_say_so():
    """Each `_BACKEND_LIMITED` entry names a real docstring that states its backends."""
    names = {test.name: test for test in DOCTESTS}
    for name, backends in _BACKEND_LIMITED.items():
        assert name in names, name
        docstring = names[name].docstring
        for backend in backends:
            label = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}[backend]
            assert label in docstring, (name, label)


def test_docstring_examples_are_found():
    """The finder sees the examples: a broken collection must not pass as "nothing to run"."""
    assert len(DOCTESTS) >= 40
    assert sum(len(test.examples) for test in DOCTESTS) >= 150


@pytest.mark.parametrize("test", _params())
def test_docstring_example(test):
    # A fresh namespace per docstring; the seed makes unseeded Keras randomness repeatable.
    test.globs = {"__name__": test.name.rsplit(".", 1)[0]}
    keras.utils.set_random_seed(0)
    report = []
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS, verbose=False)
    try:
        result = runner.run(test, out=report.append, clear_globs=True)
    finally:
        try:
            import matplotlib.pyplot as plt
        except ImportError:  # pragma: no cover - matplotlib is an optional extra
            pass
        else:
            plt.close("all")
    if result.failed:
        location = f"{test.filename}:{(test.lineno or 0) + 1}"
        pytest.fail(
            f"{result.failed} of {result.attempted} examples of {test.name} failed "
            f"({location}):\n{''.join(report)}",
            pytrace=False,
        )
