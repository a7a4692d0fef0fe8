"""ema_weights: the optimizer's moving average in the model for a block, exact BN statistics,
everything put back afterwards."""

import keras
import numpy as np
import pytest

from keras_normkit.utils import ema_weights

RNG = np.random.default_rng(1)
X = RNG.normal(size=(64, 4)).astype("float32")
Y = X @ RNG.normal(size=(4, 1)).astype("float32")
MOMENTUM = 0.8


def make_model(batch_norm=False, use_ema=True):
    keras.utils.set_random_seed(0)
    layers = [keras.Input((4,)), keras.layers.Dense(6, name="hidden")]
    if batch_norm:
        layers.append(keras.layers.BatchNormalization(name="bn"))
    model = keras.Sequential([*layers, keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.05, use_ema=use_ema, ema_momentum=MOMENTUM)
    model.compile(optimizer, loss="mse")
    return model


class EveryStep(keras.callbacks.Callback):
    """The trainable weights before training and after every step."""

    def __init__(self):
        super().__init__()
        self.weights = []

    def on_train_begin(self, logs=None):
        self.weights.append([np.array(v, np.float64) for v in self.model.trainable_variables])

    def on_train_batch_end(self, batch, logs=None):
        self.weights.append([np.array(v, np.float64) for v in self.model.trainable_variables])


class EvaluateWithEma(keras.callbacks.Callback):
    """At every epoch end, the weights inside the block (mid-training)."""

    def __init__(self):
        super().__init__()
        self.inside = []

    def on_epoch_end(self, epoch, logs=None):
        with ema_weights(self.model) as model:
            self.inside.append([np.array(v, np.float64) for v in model.trainable_variables])


def numpy_ema(steps):
    """w_ema = w after the first step, then m·w_ema + (1 − m)·w after every step."""
    average = steps[1]
    for weights in steps[2:]:
        average = [MOMENTUM * a + (1 - MOMENTUM) * w for a, w in zip(average, weights, strict=True)]
    return average


def test_mid_training_the_block_holds_the_moving_average_and_training_is_undisturbed():
    steps, probe = EveryStep(), EvaluateWithEma()
    model = make_model()
    model.fit(X, Y, epochs=2, batch_size=16, shuffle=False, verbose=0, callbacks=[steps, probe])
    plain_steps = EveryStep()
    plain = make_model()
    plain.fit(X, Y, epochs=2, batch_size=16, shuffle=False, verbose=0, callbacks=[plain_steps])
    # the block put every weight back: training went on exactly as without it
    for a, b in zip(steps.weights, plain_steps.weights, strict=True):
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v)
    # inside the block at the end of epoch 0 (4 steps) and 1 (8 steps): the EMA of the steps
    for epoch, inside in enumerate(probe.inside):
        expected = numpy_ema(steps.weights[: 4 * (epoch + 1) + 1])
        for got, want in zip(inside, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_batch_norm_statistics_are_recomputed_inside_and_restored_after():
    model = make_model(batch_norm=True)
    model.fit(X, Y, epochs=2, batch_size=16, verbose=0)
    before = model.get_weights()
    with ema_weights(model, batch_norm_data=X):
        hidden = keras.ops.convert_to_numpy(model.get_layer("hidden")(X)).astype(np.float64)
        bn = model.get_layer("bn")
        np.testing.assert_allclose(bn.moving_mean, hidden.mean(axis=0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bn.moving_variance, hidden.var(axis=0), rtol=1e-5, atol=1e-6)
    for a, b in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.warns(UserWarning, match="batch_norm_data"):
        with ema_weights(model):
            pass


def test_weights_are_restored_when_the_block_raises():
    model = make_model()
    model.fit(X, Y, epochs=1, batch_size=16, verbose=0)
    before = model.get_weights()
    with pytest.raises(KeyError):
        with ema_weights(model):
            raise KeyError("inside")
    for a, b in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_clear_errors():
    with pytest.raises(ValueError, match="use_ema=True"):
        with ema_weights(make_model(use_ema=False)):
            pass
    with pytest.raises(ValueError, match="use_ema=True"):
        with ema_weights(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])):
            pass
    with pytest.raises(ValueError, match="at least one step"):
        with ema_weights(make_model()):
            pass
    with pytest.raises(ValueError, match="batch_size"):
        with ema_weights(make_model(), batch_size=0):
            pass
