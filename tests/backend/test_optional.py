"""Optional dependencies: the extra to install, objects recognised without loading TensorFlow."""

import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_normkit.backend.optional import import_optional, import_tensorflow
from tests.conftest import requires_tensorflow


def _run_on_jax(code):
    """The stripped stdout of `code` run in a fresh Python (which sets the JAX backend)."""
    pytest.importorskip("jax")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


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
    assert _run_on_jax(code).endswith("ok")


def test_is_tf_dataset_without_tensorflow_loaded():
    """Recognising a dataset never imports TensorFlow (JAX backend, TensorFlow installed)."""
    code = (
        "import os, sys; os.environ['KERAS_BACKEND'] = 'jax'; "
        "import numpy as np; "
        "from keras_normkit.backend.optional import is_tf_dataset; "
        "from keras_normkit.calibration import collect_logits; "
        "from keras_normkit.utils import recompute_batch_norm_statistics; "
        "assert not any(is_tf_dataset(x) for x in (np.zeros(3), [1], None, {'a': 1})); "
        "collected = collect_logits(lambda b: b, np.eye(2, dtype='float32'), [0, 1], verbose=0); "
        "print('tensorflow' in sys.modules)"
    )
    assert _run_on_jax(code).endswith("False")


def test_is_tf_dataset_when_tensorflow_is_not_installed(without_tensorflow):
    from keras_normkit.backend.optional import is_tf_dataset

    assert not is_tf_dataset(np.zeros((2, 2)))
    assert not is_tf_dataset(iter([1, 2]))


@requires_tensorflow
def test_is_tf_dataset_recognises_every_dataset_and_nothing_else():
    import tensorflow as tf

    from keras_normkit.backend.optional import is_tf_dataset

    base = tf.data.Dataset.from_tensor_slices((np.zeros((6, 2)), np.zeros(6)))
    for dataset in (base, base.batch(2), base.map(lambda x, y: (x, y)).repeat(), base.take(1)):
        assert is_tf_dataset(dataset)
    for other in (tf.constant([1.0]), tf.Variable(1.0), iter(base), np.zeros(2), [base]):
        assert not is_tf_dataset(other)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX helper (JAX backend only)")
def test_jax_key_from_bits_changes_with_any_entry():
    import jax
    import jax.numpy as jnp

    from keras_normkit.backend.optional import jax_key_from_bits

    key = jnp.array([7, 3], jnp.uint32)
    x = np.random.default_rng(0).normal(size=(6, 5)).astype("float32")
    first = np.asarray(jax_key_from_bits(key, x))
    assert first.shape == (2,) and first.dtype == np.uint32
    # Deterministic, the same under jit, and a new key for another seed.
    np.testing.assert_array_equal(jax.jit(jax_key_from_bits)(key, x), first)
    assert not np.array_equal(jax_key_from_bits(key + 1, x), first)
    # A change of one ulp in any single entry (or a swap of two) gives another key.
    keys = {tuple(first)}
    for index in np.ndindex(x.shape):
        changed = x.copy()
        changed[index] = np.nextafter(changed[index], np.float32(np.inf))
        keys.add(tuple(np.asarray(jax_key_from_bits(key, changed)).tolist()))
    swapped = x.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    keys.add(tuple(np.asarray(jax_key_from_bits(key, swapped)).tolist()))
    assert len(keys) == x.size + 2
    for dtype in ("float16", "bfloat16", "float32"):
        assert np.asarray(jax_key_from_bits(key, jnp.asarray(x, dtype))).shape == (2,)


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_the_package_imports_and_fits_bbq_without_scipy_or_sklearn(backend):
    """The core needs only Keras and NumPy: SciPy and scikit-learn are extras, and the wheel's
    smoke test with only the `tensorflow` extra installs neither. (JAX itself needs SciPy.)"""
    pytest.importorskip(backend)
    code = (
        f"import os, sys; os.environ['KERAS_BACKEND'] = '{backend}'; "
        "sys.modules['scipy'] = None; sys.modules['sklearn'] = None; "  # as if not installed
        "import numpy as np, keras, keras_normkit; "
        "from keras_normkit import activations, calibration, callbacks, constraints, export, "
        "initializers, layers, metrics, plotting, regularizers, schedules, utils; "
        "rng = np.random.default_rng(0); p = rng.uniform(size=(400, 1)).astype('float32'); "
        "y = (rng.uniform(size=(400, 1)) < p).astype('float32'); "
        "model = keras.Sequential([keras.Input((1,)), keras.layers.Identity()]); "
        "bbq = calibration.BayesianBinning(model, output='probabilities'); "
        "bbq.calibrate(p, y); "
        "print('ok', bool(np.isfinite(bbq.predict(p, verbose=0)).all()))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok True")
