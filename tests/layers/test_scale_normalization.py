"""`ScaleNormalization`: NumPy reference, properties, conformance, mixed precision, bad input."""

import math

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from keras_normkit.layers import ScaleNormalization
from tests.conformance import LayerConformanceTestCase
from tests.conftest import requires_tensorflow, requires_xla


def np_scale_norm(x, g, axis=-1, eps=1e-5):
    """g * x / max(||x||, eps), the norm over `axis` (Nguyen & Salazar 2019)."""
    x = x.astype("float64")
    norm = np.sqrt((x**2).sum(axis=axis, keepdims=True))
    return g * x / np.maximum(norm, eps)


class ScaleNormalizationConformanceTest(LayerConformanceTestCase):
    def test_last_axis(self):
        self.run_conformance_test(
            ScaleNormalization,
            {},
            input_shape=(3, 4, 5),
            expected_output_shape=(3, 4, 5),
            supports_masking=True,
            expected_num_trainable_weights=1,
            dynamic_axes=(1,),
        )

    def test_two_axes(self):
        self.run_conformance_test(
            ScaleNormalization,
            {"axis": [-2, -1], "epsilon": 1e-3},
            input_shape=(2, 3, 4, 5),
            expected_output_shape=(2, 3, 4, 5),
            supports_masking=True,
        )


@pytest.mark.parametrize("axis,d", [(-1, 5), (1, 3), ([1, 2], 12), ([2, -1], 20)])
def test_matches_numpy_and_init_is_sqrt_d(axis, d):
    x = np.random.default_rng(0).normal(size=(2, 3, 4, 5)).astype("float32")
    layer = ScaleNormalization(axis=axis)
    y = keras.ops.convert_to_numpy(layer(x))
    assert float(keras.ops.convert_to_numpy(layer.scale)) == pytest.approx(math.sqrt(d))
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    np.testing.assert_allclose(y, np_scale_norm(x, math.sqrt(d), np_axis), rtol=1e-5, atol=1e-6)
    layer.scale.assign(0.7)
    y = keras.ops.convert_to_numpy(layer(x))
    np.testing.assert_allclose(y, np_scale_norm(x, 0.7, np_axis), rtol=1e-5, atol=1e-6)


@settings(max_examples=20)
@given(
    x=hnp.arrays(
        "float32",
        (3, 6),
        elements=st.floats(-1e3, 1e3, width=32, allow_subnormal=False),
    ),
    a=st.floats(1e-2, 1e2),
)
def test_properties(x, a):
    """Rows end on the sphere of radius g; positive rescaling of a row changes nothing."""
    layer = ScaleNormalization()
    y = keras.ops.convert_to_numpy(layer(x)).astype("float64")
    norms = np.linalg.norm(x.astype("float64"), axis=-1)
    big = norms > 1e-3
    np.testing.assert_allclose(np.linalg.norm(y[big], axis=-1), math.sqrt(6), rtol=1e-5)
    np.testing.assert_allclose(y, np_scale_norm(x, math.sqrt(6)), rtol=1e-4, atol=1e-5)
    y_scaled = keras.ops.convert_to_numpy(layer(x * np.float32(a))).astype("float64")
    big_scaled = np.linalg.norm(x.astype("float64") * a, axis=-1) > 1e-3
    keep = big & big_scaled
    np.testing.assert_allclose(y_scaled[keep], y[keep], rtol=1e-4, atol=1e-5)


@requires_tensorflow  # tf.GradientTape
def test_zero_input_and_gradient_are_finite():
    layer = ScaleNormalization()
    x = keras.ops.zeros((2, 4))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(x)), 0.0)
    import tensorflow as tf

    xv = tf.Variable(np.zeros((2, 4), "float32"))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(xv))
    grads = tape.gradient(loss, [xv, layer.scale.value])
    assert all(np.isfinite(g.numpy()).all() for g in grads)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_large_inputs(policy):
    """Squares overflow float16 (x=300: x^2 > 65504): the norm is taken in float32."""
    x = np.full((2, 8), 300.0, "float32")
    layer = ScaleNormalization(dtype=policy)
    y = layer(keras.ops.cast(x, policy.split("_")[1]))
    assert keras.backend.standardize_dtype(y.dtype) == policy.split("_")[1]
    assert layer.scale.dtype == "float32"
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(keras.ops.cast(y, "float32")), 1.0, rtol=1e-2
    )


@requires_xla
def test_trains_scale_under_xla():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype("float32")
    model = keras.Sequential([keras.Input((4,)), ScaleNormalization()])
    model.compile(keras.optimizers.SGD(1.0), "mse", jit_compile=True)
    target = 3.0 * x / np.linalg.norm(x, axis=-1, keepdims=True)
    model.fit(x, target, epochs=20, batch_size=32, verbose=0)  # g -> 3 geometrically
    assert float(keras.ops.convert_to_numpy(model.layers[0].scale)) == pytest.approx(3.0, abs=0.05)


def test_bad_arguments():
    for epsilon in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="`epsilon`.*Received: epsilon="):
            ScaleNormalization(epsilon=epsilon)
    for epsilon in ("1e-5", True):
        with pytest.raises(TypeError, match="`epsilon`.*Received: epsilon="):
            ScaleNormalization(epsilon=epsilon)
    for axis in ("last", 1.5, [], None):
        with pytest.raises(TypeError, match="`axis`.*Received: axis="):
            ScaleNormalization(axis=axis)
    with pytest.raises(ValueError, match="`axis` must not repeat"):
        ScaleNormalization(axis=[1, 1])
    with pytest.raises(ValueError, match="out of bounds"):
        ScaleNormalization(axis=3)(np.zeros((2, 3), "float32"))
    with pytest.raises(ValueError, match="batch axis"):
        ScaleNormalization(axis=0)(np.zeros((2, 3), "float32"))
    with pytest.raises(ValueError, match="must be known"):
        ScaleNormalization(axis=1).build((None, None, 3))
