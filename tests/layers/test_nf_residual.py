"""`NFResidual` and `SkipInit`: the formulas, the analytic variance, config and conformance."""

import math

import keras
import numpy as np
import pytest

from keras_normkit.layers import NFResidual, SkipInit, WeightStandardization
from tests.conformance import LayerConformanceTestCase


def _np(x):
    return keras.ops.convert_to_numpy(x)


def _branch(units, activation="relu"):
    return keras.Sequential(
        [
            keras.layers.Activation(activation),
            WeightStandardization(keras.layers.Dense(units), activation=activation),
            keras.layers.Activation(activation),
            WeightStandardization(keras.layers.Dense(units), activation=activation),
        ]
    )


class NFResidualConformanceTest(LayerConformanceTestCase):
    def test_identity_skip(self):
        self.run_conformance_test(
            NFResidual,
            {"branch": _branch(5), "alpha": 0.3, "beta": 1.2},
            input_shape=(3, 5),
            expected_output_shape=(3, 5),
            expected_num_trainable_weights=6,
            atol=1e-5,
        )

    def test_transition(self):
        self.run_conformance_test(
            NFResidual,
            {
                "branch": _branch(4),
                "shortcut": WeightStandardization(keras.layers.Dense(4)),
                "beta": 1.5,
            },
            input_shape=(3, 5),
            expected_output_shape=(3, 4),
            atol=1e-5,
        )


class SkipInitConformanceTest(LayerConformanceTestCase):
    def test_gate(self):
        self.run_conformance_test(
            SkipInit,
            {"initial_value": 0.5},
            input_shape=(3, 4, 2),
            expected_output_shape=(3, 4, 2),
            expected_num_trainable_weights=1,
            supports_masking=True,
        )


def test_formula_against_numpy():
    """h + alpha * f(h / beta), and shortcut(h / beta) + alpha * f(h / beta)."""
    rng = np.random.default_rng(0)
    h = rng.normal(size=(6, 5)).astype("float32") * 2.0
    branch = keras.layers.Dense(5, activation="tanh")
    shortcut = keras.layers.Dense(5, use_bias=False)
    block = NFResidual(branch, alpha=0.3, beta=2.0)
    y = _np(block(h))
    f = _np(branch(h / 2.0))
    np.testing.assert_allclose(y, h + 0.3 * f, atol=1e-6)
    transition = NFResidual(branch, shortcut=shortcut, alpha=0.3, beta=2.0)
    y = _np(transition(h))
    np.testing.assert_allclose(y, _np(shortcut(h / 2.0)) + 0.3 * f, atol=1e-6)


def test_output_variance_rule():
    assert NFResidual(keras.layers.Dense(2), alpha=0.2, beta=1.5).output_variance == (
        pytest.approx(1.5**2 + 0.04)
    )
    transition = NFResidual(keras.layers.Dense(2), shortcut=keras.layers.Dense(2), beta=3.0)
    assert transition.output_variance == pytest.approx(1.04)


def test_stage_of_blocks_follows_one_plus_k_alpha_squared():
    """Gaussian input, scaled-WS branches: the variance after k blocks is 1 + k alpha^2
    (within 5 %), reset to 1 + alpha^2 by a transition; channel means stay near 0."""
    keras.utils.set_random_seed(0)
    alpha = 0.3
    inputs = keras.Input((128,))
    h, variance, outputs = inputs, 1.0, []
    for k in range(6):
        shortcut = None
        if k == 3:
            shortcut = keras.Sequential(
                [
                    keras.layers.ReLU(),
                    WeightStandardization(keras.layers.Dense(128), activation="relu"),
                ]
            )
        block = NFResidual(_branch(128), shortcut, alpha=alpha, beta=math.sqrt(variance))
        h, variance = block(h), block.output_variance
        outputs.append(h)
    x = np.random.default_rng(1).normal(size=(8192, 128)).astype("float32")
    values = keras.Model(inputs, outputs).predict(x, verbose=0, batch_size=8192)
    expected = [1 + alpha**2, 1 + 2 * alpha**2, 1 + 3 * alpha**2] + [
        1 + alpha**2,
        1 + 2 * alpha**2,
        1 + 3 * alpha**2,
    ]
    measured = [v.var(axis=0).mean() for v in values]
    np.testing.assert_allclose(measured, expected, rtol=0.05)
    assert max((v.mean(axis=0) ** 2).mean() for v in values) < 0.05


def test_skip_init_starts_as_the_identity_and_learns():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    gate = SkipInit()
    branch = gate(keras.layers.Dense(4)(inputs))
    model = keras.Model(inputs, keras.layers.Add()([inputs, branch]))
    x = np.random.default_rng(2).normal(size=(64, 4)).astype("float32")
    np.testing.assert_array_equal(model.predict(x, verbose=0), x)
    model.compile(keras.optimizers.SGD(0.1), "mse")
    model.fit(x, 2.0 * x, epochs=2, batch_size=16, verbose=0)
    assert abs(float(_np(gate.gate))) > 1e-3  # the gate receives a gradient and moves


def test_bad_arguments():
    with pytest.raises(TypeError, match="`branch` must be a keras.layers.Layer"):
        NFResidual(lambda x: x)
    with pytest.raises(TypeError, match="`shortcut` must be a keras.layers.Layer"):
        NFResidual(keras.layers.Dense(2), shortcut="conv")
    with pytest.raises(ValueError, match="`alpha` must be a number > 0"):
        NFResidual(keras.layers.Dense(2), alpha=0.0)
    with pytest.raises(ValueError, match="`beta` must be a number > 0"):
        NFResidual(keras.layers.Dense(2), beta=-1.0)
    with pytest.raises(TypeError, match="`initial_value` must be a number"):
        SkipInit(initial_value="zero")
