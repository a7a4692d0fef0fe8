"""Regularizers: Keras re-exports and the Parseval penalty against a NumPy reference."""

import math
import os
import tempfile

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit import regularizers
from keras_normkit.regularizers import L1, L1L2, L2, ParsevalRegularizer
from tests.conftest import requires_tensorflow


def numpy_parseval_penalty(w, factor, conv_scaling=True):
    """factor/2 ||W^T W - I||^2 on the reshaped (and scaled) kernel, smaller Gram side."""
    w = np.asarray(w, dtype="float64")
    m = w.reshape(-1, w.shape[-1])
    if conv_scaling and w.ndim > 2:
        m = m * math.sqrt(np.prod(w.shape[:-2]))
    gram = m.T @ m if m.shape[1] <= m.shape[0] else m @ m.T
    return factor / 2 * np.sum((gram - np.eye(len(gram))) ** 2)


def test_l1_l2_are_keras_classes():
    assert L1 is keras.regularizers.L1
    assert L2 is keras.regularizers.L2
    assert L1L2 is keras.regularizers.L1L2
    x = np.array([[1.0, -2.0], [0.5, 0.0]], "float32")
    np.testing.assert_allclose(float(L1L2(l1=0.1, l2=0.2)(x)), 0.1 * 3.5 + 0.2 * 5.25, rtol=1e-6)


PENALTY_CASES = [
    ((20, 8), True),  # tall Dense kernel: W^T W (8 x 8)
    ((8, 20), True),  # wide Dense kernel: W W^T (8 x 8)
    ((12, 12), True),
    ((3, 3, 4, 6), True),  # Conv2D: (36, 6) scaled by 3
    ((3, 3, 4, 6), False),
    ((3, 3, 4, 64), True),  # Conv2D wide after reshape: (36, 64)
    ((5, 3, 7), True),  # Conv1D: (15, 7) scaled by sqrt(5)
    ((2, 2, 2, 3, 5), True),  # Conv3D
]


def test_penalty_matches_numpy():
    for shape, conv_scaling in PENALTY_CASES:
        w = np.random.default_rng(0).normal(size=shape).astype("float32") * 0.3
        penalty = ParsevalRegularizer(factor=0.7, conv_scaling=conv_scaling)(w)
        expected = numpy_parseval_penalty(w, 0.7, conv_scaling)
        np.testing.assert_allclose(float(penalty), expected, rtol=1e-4, err_msg=str(shape))


def test_wide_penalty_is_full_gram_penalty_minus_constant():
    # ||W^T W - I_out||^2 = ||W W^T - I_in||^2 + (out - in): the smaller side only drops a
    # constant, so it is the same penalty up to that constant (and has the same gradient).
    w = np.random.default_rng(1).normal(size=(5, 9))
    full = 0.5 * 2.0 * np.sum((w.T @ w - np.eye(9)) ** 2)
    ours = float(ParsevalRegularizer(factor=2.0)(w.astype("float32")))
    np.testing.assert_allclose(ours, full - 2.0 / 2 * (9 - 5), rtol=1e-4)


@requires_tensorflow
def test_gradient_is_two_w_times_gram_residual():
    import tensorflow as tf

    w = tf.Variable(np.random.default_rng(2).normal(size=(10, 4)).astype("float32"))
    with tf.GradientTape() as tape:
        penalty = ParsevalRegularizer(factor=0.5)(w)
    grad = tape.gradient(penalty, w).numpy()
    wn = w.numpy().astype("float64")
    np.testing.assert_allclose(grad, 0.5 * 2 * wn @ (wn.T @ wn - np.eye(4)), rtol=1e-4, atol=1e-5)


def test_zero_on_parseval_frames_and_positive_on_scaled_orthogonal():
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.normal(size=(16, 6)))
    assert float(ParsevalRegularizer(1.0)(q.astype("float32"))) < 1e-10
    assert float(ParsevalRegularizer(1.0)(q.T.astype("float32"))) < 1e-10
    # A conv kernel whose reshaped matrix has orthonormal columns / 3 is Parseval with scaling.
    q, _ = np.linalg.qr(rng.normal(size=(3 * 3 * 4, 8)))
    kernel = (q / 3.0).reshape(3, 3, 4, 8).astype("float32")
    assert float(ParsevalRegularizer(1.0)(kernel)) < 1e-10
    assert float(ParsevalRegularizer(1.0, conv_scaling=False)(kernel)) > 1.0
    # Keras's OrthogonalRegularizer normalizes rows: it cannot see a scale of 3.
    q8, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    scaled = (3.0 * q8).astype("float32")
    assert float(keras.regularizers.OrthogonalRegularizer(1.0)(scaled)) < 1e-6
    np.testing.assert_allclose(float(ParsevalRegularizer(1.0)(scaled)), 0.5 * 8 * 64, rtol=1e-4)


@given(
    rows=st.integers(1, 12),
    cols=st.integers(1, 12),
    factor=st.floats(0.0, 10.0),
    seed=st.integers(0, 1000),
)
def test_penalty_property(rows, cols, factor, seed):
    w = np.random.default_rng(seed).normal(size=(rows, cols)).astype("float32")
    penalty = float(ParsevalRegularizer(factor)(w))
    np.testing.assert_allclose(
        penalty, numpy_parseval_penalty(w, factor), rtol=1e-4, atol=1e-4 * (1 + factor)
    )


def test_model_losses_and_keras_round_trip():
    regularizer = ParsevalRegularizer(factor=0.01, conv_scaling=False)
    inputs = keras.Input((6, 6, 3))
    h = keras.layers.Conv2D(5, 3, kernel_regularizer=regularizer)(inputs)
    h = keras.layers.Flatten()(h)
    outputs = keras.layers.Dense(4, kernel_regularizer=ParsevalRegularizer(0.02))(h)
    model = keras.Model(inputs, outputs)
    x = np.random.default_rng(0).normal(size=(2, 6, 6, 3)).astype("float32")
    model(x)
    expected = numpy_parseval_penalty(model.layers[1].kernel.numpy(), 0.01, False)
    expected += numpy_parseval_penalty(model.layers[3].kernel.numpy(), 0.02)
    np.testing.assert_allclose(float(sum(model.losses)), expected, rtol=1e-4)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
    loaded_regularizer = loaded.layers[1].kernel_regularizer
    assert isinstance(loaded_regularizer, ParsevalRegularizer)
    assert loaded_regularizer.get_config() == {"factor": 0.01, "conv_scaling": False}
    np.testing.assert_allclose(float(sum(loaded.losses)), expected, rtol=1e-4)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_get_config_and_registration():
    regularizer = ParsevalRegularizer(factor=3e-3, conv_scaling=False)
    config = regularizer.get_config()
    assert config == {"factor": 3e-3, "conv_scaling": False}
    restored = keras.regularizers.deserialize(keras.regularizers.serialize(regularizer))
    assert isinstance(restored, ParsevalRegularizer) and restored.get_config() == config
    assert "ParsevalRegularizer" in regularizers.__all__


BAD_ARGUMENTS = [
    ({"factor": -1.0}, ValueError, "factor"),
    ({"factor": float("nan")}, ValueError, "factor"),
    ({"factor": "big"}, TypeError, "factor"),
    ({"factor": True}, TypeError, "factor"),
    ({"conv_scaling": "yes"}, TypeError, "conv_scaling"),
]


def test_bad_arguments():
    for kwargs, error, name in BAD_ARGUMENTS:
        with pytest.raises(error, match=name):
            ParsevalRegularizer(**kwargs)
    with pytest.raises(ValueError, match="rank >= 2"):
        ParsevalRegularizer(1.0)(np.ones(4, "float32"))
