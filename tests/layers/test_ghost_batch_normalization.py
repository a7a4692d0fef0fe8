"""`GhostBatchNormalization`: each virtual batch normalized on its own (against Keras's BN and
NumPy), the moving statistics, inference at any batch size, a partial last batch, errors."""

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_normkit.layers import GhostBatchNormalization
from tests.conformance import LayerConformanceTestCase
from tests.conftest import max_examples, requires_tensorflow, requires_xla


def _np(x):
    return keras.ops.convert_to_numpy(x)


def np_ghost_bn(x, v, epsilon, gamma, beta, axis=-1):
    """Hoffer et al. (2017), Algorithm 1: consecutive virtual batches of v examples (the last
    one what is left), each normalized with its own mean and biased variance; returns the
    output and the size-weighted averages of the groups' means and variances."""
    x = x.astype("float64")
    axis = axis % x.ndim
    reduce = tuple(a for a in range(x.ndim) if a != axis)
    outs, means, variances, sizes = [], [], [], []
    for start in range(0, len(x), v):
        chunk = x[start : start + v]
        mean = chunk.mean(axis=reduce, keepdims=True)
        var = chunk.var(axis=reduce, keepdims=True)
        shape = [1] * x.ndim
        shape[axis] = -1
        outs.append(
            (chunk - mean) / np.sqrt(var + epsilon) * gamma.reshape(shape) + beta.reshape(shape)
        )
        means.append(mean.ravel())
        variances.append(var.ravel())
        sizes.append(chunk.size)
    w = np.array(sizes, "float64")[:, None] / sum(sizes)
    return np.concatenate(outs), (w * np.array(means)).sum(0), (w * np.array(variances)).sum(0)


def _random_weights(layer, seed=0):
    rng = np.random.default_rng(seed)
    c = layer.gamma.shape[0]
    layer.gamma.assign(rng.uniform(0.5, 2.0, c).astype("float32"))
    layer.beta.assign(rng.normal(size=c).astype("float32"))
    layer.moving_mean.assign(rng.normal(size=c).astype("float32"))
    layer.moving_variance.assign(rng.uniform(0.5, 2.0, c).astype("float32"))


class GhostBatchNormalizationConformanceTest(LayerConformanceTestCase):
    def test_conformance(self):
        self.run_conformance_test(
            GhostBatchNormalization,
            {"virtual_batch_size": 2, "momentum": 0.9},
            input_shape=(4, 3, 5),
            expected_output_shape=(4, 3, 5),
            expected_num_trainable_weights=2,
            expected_num_non_trainable_weights=2,
            supports_masking=True,
            atol=1e-5,
        )


@pytest.mark.parametrize(
    "shape,v,axis",
    [((12, 3), 4, -1), ((10, 3), 4, -1), ((6, 5, 5, 2), 3, -1), ((7, 2, 4), 2, 1), ((3, 4), 8, -1)],
    ids=["dense", "remainder", "conv", "channels_first", "smaller_batch"],
)
def test_training_equals_batch_norm_on_each_virtual_batch(shape, v, axis):
    x = np.random.default_rng(1).normal(loc=2.0, scale=3.0, size=shape).astype("float32")
    layer = GhostBatchNormalization(v, axis=axis, momentum=0.75, epsilon=1e-3)
    layer.build(x.shape)
    _random_weights(layer)
    before_mean, before_var = _np(layer.moving_mean), _np(layer.moving_variance)
    y = _np(layer(x, training=True))
    # Keras's own BatchNormalization, called on each virtual batch separately.
    reference = keras.layers.BatchNormalization(axis=axis, epsilon=1e-3)
    reference.build(x.shape)
    reference.set_weights([_np(layer.gamma), _np(layer.beta), before_mean, before_var])
    chunks = [_np(reference(x[i : i + v], training=True)) for i in range(0, len(x), v)]
    np.testing.assert_allclose(y, np.concatenate(chunks), atol=2e-5)
    # NumPy: the output and the one moving-average update with the groups' averages.
    expected, mean, var = np_ghost_bn(x, v, 1e-3, _np(layer.gamma), _np(layer.beta), axis)
    np.testing.assert_allclose(y, expected, atol=2e-5)
    np.testing.assert_allclose(_np(layer.moving_mean), 0.75 * before_mean + 0.25 * mean, rtol=1e-5)
    np.testing.assert_allclose(
        _np(layer.moving_variance), 0.75 * before_var + 0.25 * var, rtol=1e-5
    )


def test_inference_uses_the_moving_statistics_at_any_batch_size():
    layer = GhostBatchNormalization(4)
    layer.build((None, 3))
    _random_weights(layer)
    reference = keras.layers.BatchNormalization()
    reference.build((None, 3))
    reference.set_weights(layer.get_weights())
    for n in (1, 3, 9):
        x = np.random.default_rng(n).normal(size=(n, 3)).astype("float32")
        np.testing.assert_allclose(_np(layer(x)), _np(reference(x)), atol=1e-6)
    layer.trainable = False  # frozen: moving statistics in training too, as Keras's BN
    x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
    np.testing.assert_allclose(_np(layer(x, training=True)), _np(reference(x)), atol=1e-6)


def test_mask_excludes_entries_from_the_statistics():
    x = np.random.default_rng(2).normal(size=(4, 5, 2)).astype("float32")
    mask = np.ones((4, 5), bool)
    mask[1, 3:] = False
    mask[2, :2] = False
    layer = GhostBatchNormalization(2, epsilon=0.0, center=False, scale=False)
    y = _np(layer(x, training=True, mask=mask))
    for start in (0, 2):
        chunk, m = x[start : start + 2], mask[start : start + 2]
        values = chunk[m]  # (entries, channels)
        expected = (chunk - values.mean(0)) / values.std(0)
        np.testing.assert_allclose(y[start : start + 2][m], expected[m], atol=1e-5)


@settings(max_examples=max_examples(12))
@given(n=st.integers(1, 13), v=st.integers(1, 6), channels=st.integers(1, 3))
def test_property_any_batch_and_virtual_size(n, v, channels):
    x = np.random.default_rng(n * 7 + v).normal(size=(n, 2, channels)).astype("float32")
    layer = GhostBatchNormalization(v, epsilon=1e-2)
    layer.build(x.shape)
    _random_weights(layer, seed=v)
    y = _np(layer(x, training=True))
    expected, _, _ = np_ghost_bn(x, v, 1e-2, _np(layer.gamma), _np(layer.beta))
    np.testing.assert_allclose(y, expected, atol=3e-5)


def _fit_moving_statistics(jit_compile):
    """fit with batches of 10 and a last batch of 5, virtual batches of 4: the moving
    statistics after the epoch equal the NumPy replay of the updates."""
    x = np.random.default_rng(3).normal(loc=1.0, scale=2.0, size=(25, 3)).astype("float32")
    layer = GhostBatchNormalization(4, momentum=0.5)
    model = keras.Sequential([keras.Input((3,)), layer])
    model.compile(keras.optimizers.SGD(0.0), "mse", jit_compile=jit_compile)
    model.fit(x, np.zeros_like(x), batch_size=10, epochs=1, shuffle=False, verbose=0)
    mean, var = np.zeros(3), np.ones(3)
    for start in range(0, 25, 10):
        _, m, v = np_ghost_bn(x[start : start + 10], 4, 1e-3, np.ones(3), np.zeros(3))
        mean, var = 0.5 * mean + 0.5 * m, 0.5 * var + 0.5 * v
    np.testing.assert_allclose(_np(layer.moving_mean), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(layer.moving_variance), var, rtol=1e-5)


def test_fit_with_a_partial_last_batch():
    _fit_moving_statistics(jit_compile=False)


@requires_xla
def test_fit_with_a_partial_last_batch_xla():
    _fit_moving_statistics(jit_compile=True)


@requires_tensorflow
def test_unknown_batch_size_in_a_tf_function():
    import tensorflow as tf

    layer = GhostBatchNormalization(4, epsilon=1e-3)
    layer.build((None, 3))
    step = tf.function(
        lambda x: layer(x, training=True), input_signature=[tf.TensorSpec([None, 3])]
    )
    for n in (8, 6, 3):
        x = np.random.default_rng(n).normal(size=(n, 3)).astype("float32")
        expected, _, _ = np_ghost_bn(x, 4, 1e-3, np.ones(3), np.zeros(3))
        np.testing.assert_allclose(step(x).numpy(), expected, atol=2e-5)


def test_config():
    layer = GhostBatchNormalization(16, axis=1, momentum=0.9, epsilon=1e-5, center=False)
    config = layer.get_config()
    assert config["virtual_batch_size"] == 16 and config["axis"] == 1
    clone = GhostBatchNormalization.from_config(config)
    assert clone.virtual_batch_size == 16 and clone.momentum == 0.9 and not clone.center
    # Keras's defaults for the shared arguments.
    defaults, ours = keras.layers.BatchNormalization().get_config(), GhostBatchNormalization(2)
    for key in ("axis", "momentum", "epsilon", "center", "scale"):
        assert ours.get_config()[key] == defaults[key]


def test_bad_arguments():
    with pytest.raises(ValueError, match="`virtual_batch_size` must be an integer >= 1"):
        GhostBatchNormalization(0)
    with pytest.raises(TypeError, match="`virtual_batch_size` must be an integer"):
        GhostBatchNormalization(2.5)
    with pytest.raises(TypeError, match="`virtual_batch_size` must be an integer"):
        GhostBatchNormalization("32")
    with pytest.raises(ValueError, match="renormalization"):
        GhostBatchNormalization(4, renorm=True)
    if keras.backend.backend() == "tensorflow":
        with pytest.raises(ValueError, match="synchronize"):
            GhostBatchNormalization(4, synchronized=True)
    layer = GhostBatchNormalization(2, axis=0)
    with pytest.raises(ValueError, match="cannot be the batch axis"):
        layer(np.ones((4, 3), "float32"), training=True)
