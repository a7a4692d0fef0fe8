"""TensorFlow is an optional extra: what needs it says which extra to install."""

import subprocess
import sys

import pytest

from keras_normkit.backend.optional import import_optional, import_tensorflow


@pytest.fixture
def without_tensorflow(monkeypatch):
    """Make `import tensorflow` fail as it does where the package is not installed."""
    monkeypatch.setitem(sys.modules, "tensorflow", None)


def test_import_tensorflow_names_the_extra(without_tensorflow):
    with pytest.raises(
        ImportError,
        match=r"`export` needs the `tensorflow` package.*"
        r'pip install "keras_normkit\[tensorflow\]"',
    ):
        import_tensorflow("`export`")


def test_unknown_module_names_itself_as_the_extra():
    with pytest.raises(ImportError, match=r'pip install "keras_normkit\[no_such_module_xyz\]"'):
        import_optional("no_such_module_xyz", "this feature")


def test_import_optional_returns_the_module():
    assert import_optional("json", "json things").dumps([1]) == "[1]"


def test_export_helpers_raise_the_import_error(without_tensorflow):
    from keras_normkit.export import convert_to_tflite, export_saved_model

    for function in (export_saved_model, convert_to_tflite):
        with pytest.raises(ImportError, match=r"keras_normkit\[tensorflow\]"):
            function(None, "unused")


def test_the_package_imports_without_loading_tensorflow():
    """On a backend other than TensorFlow, importing every public module loads no TensorFlow."""
    code = (
        "import os, sys; os.environ['KERAS_BACKEND'] = 'jax'; "
        "sys.modules['tensorflow'] = None; "  # as if it were not installed
        "import keras_normkit; "
        "from keras_normkit import activations, calibration, callbacks, constraints, export, "
        "initializers, layers, metrics, plotting, regularizers, schedules, utils; "
        "print('ok')"
    )
    pytest.importorskip("jax")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
