"""`ConvexCombination` layer: math, simplex constraint, conformance, bad input."""

import keras
import numpy as np
import pytest

from keras_normkit.constraints import Simplex
from keras_normkit.layers import ConvexCombination
from tests.conformance import LayerConformanceTestCase
from tests.conftest import requires_xla


class ConvexCombinationConformanceTest(LayerConformanceTestCase):
    def test_conformance(self):
        # A tuple of inputs: Keras's generator data adapter (used by `run_layer_test`'s
        # training step) cannot build a tf.data signature from a list.
        rng = np.random.default_rng(0)
        self.run_conformance_test(
            ConvexCombination,
            {},
            input_data=tuple(rng.normal(size=(4, 3, 5)).astype("float32") for _ in range(3)),
            expected_output_shape=(4, 3, 5),
            expected_num_trainable_weights=1,
        )


def test_matches_numpy_weighted_sum():
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(5, 2, 3)).astype("float32") for _ in range(4)]
    layer = ConvexCombination()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(xs)), np.mean(xs, 0), rtol=1e-6)
    alpha = np.array([0.1, 0.6, 0.0, 0.3], "float32")
    layer.alpha.assign(alpha)
    expected = np.einsum("k,kabc->abc", alpha, np.stack(xs))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(xs)), expected, rtol=1e-5)
    assert isinstance(layer.alpha.constraint, Simplex)


def test_alpha_stays_on_simplex_while_training():
    # Branch 0 is the target: alpha should move towards (1, 0, 0) and stay on the simplex.
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=(64, 4)).astype("float32") for _ in range(3)]
    inputs = [keras.Input((4,)) for _ in range(3)]
    model = keras.Model(inputs, ConvexCombination()(inputs))
    model.compile(keras.optimizers.SGD(0.5), "mse")
    alphas = []
    for _ in range(6):
        model.train_on_batch(xs, xs[0])
        alphas.append(keras.ops.convert_to_numpy(model.layers[-1].alpha))
    alphas = np.array(alphas)
    assert np.all(alphas >= 0)
    np.testing.assert_allclose(alphas.sum(1), 1.0, atol=1e-6)
    np.testing.assert_allclose(alphas[-1], [1.0, 0.0, 0.0], atol=1e-3)


def test_mixed_precision():
    layer = ConvexCombination(dtype="mixed_float16")
    y = layer([np.ones((2, 3), "float32"), np.zeros((2, 3), "float32")])
    assert keras.backend.standardize_dtype(y.dtype) == "float16"
    assert keras.backend.standardize_dtype(layer.alpha.dtype) == "float32"
    np.testing.assert_allclose(keras.ops.convert_to_numpy(y), 0.5)


@requires_xla
def test_xla_training_stays_on_simplex():
    x = keras.Input((8,))
    h = keras.layers.Dense(8)(x)
    model = keras.Model(x, ConvexCombination()([x, h]))
    model.compile("adam", "mse", jit_compile=True)
    data = np.random.default_rng(0).normal(size=(16, 8)).astype("float32")
    model.fit(data, data, epochs=2, verbose=0)
    alpha = keras.ops.convert_to_numpy(model.layers[-1].alpha)
    assert np.all(alpha >= 0) and abs(alpha.sum() - 1) < 1e-6


def test_compute_output_shape_merges_known_dims():
    layer = ConvexCombination()
    assert layer.compute_output_shape([(None, 3), (4, 3)]) == (4, 3)


def test_bad_inputs():
    with pytest.raises(ValueError, match="at least 2"):
        ConvexCombination()([np.ones((2, 3), "float32")])
    with pytest.raises(ValueError, match="same shape"):
        ConvexCombination()([np.ones((2, 3), "float32"), np.ones((2, 4), "float32")])
    with pytest.raises(ValueError, match="list"):
        ConvexCombination()(np.ones((2, 3), "float32"))
