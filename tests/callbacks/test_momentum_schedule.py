"""`MomentumSchedule`: the scheduled momentum reaches the compiled train step (SGD's
`momentum`, Adam's `beta_1`): the weights after a few steps equal the optimizer run by hand in
NumPy under the schedule; saving during `fit`; errors."""

import keras
import numpy as np
import pytest

from keras_normkit.callbacks import MomentumSchedule
from keras_normkit.optimizers import AdaptiveGradientClipping
from keras_normkit.schedules import OneCycle
from tests.conftest import requires_xla

STEPS = 6  # 12 examples in batches of 4: 3 steps an epoch, 2 epochs
SCHEDULE = dict(maximal_learning_rate=0.2, total_steps=STEPS, warmup_fraction=0.5)


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 3)).astype("float32")
    y = rng.normal(size=(12, 2)).astype("float32")
    return x, y


def _model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])


def _gradients(w, b, x, y):
    """Of the mean squared error over all entries, for `x @ w + b`."""
    error = x @ w + b - y
    return 2.0 * x.T @ error / error.size, 2.0 * error.sum(0) / error.size


def _by_hand(optimizer_name, weights, x, y, schedule, momentum_of_step):
    w, b = (v.astype("float64") for v in weights)
    slots = {"m": [np.zeros_like(w), np.zeros_like(b)], "v": [np.zeros_like(w), np.zeros_like(b)]}
    for t in range(STEPS):
        start = (t % 3) * 4
        grads = _gradients(w, b, x[start : start + 4], y[start : start + 4])
        lr = float(schedule(t))
        mu = momentum_of_step(t)
        params = [w, b]
        for i, g in enumerate(grads):
            if optimizer_name == "sgd":  # Keras's SGD: m <- mu m - lr g; w <- w + m
                slots["m"][i] = mu * slots["m"][i] - lr * g
                params[i] = params[i] + slots["m"][i]
            else:  # Keras's Adam, with beta_1 = mu at this step
                beta_2, eps, k = 0.999, 1e-7, t + 1
                alpha = lr * np.sqrt(1 - beta_2**k) / (1 - mu**k)
                slots["m"][i] = slots["m"][i] + (g - slots["m"][i]) * (1 - mu)
                slots["v"][i] = slots["v"][i] + (g * g - slots["v"][i]) * (1 - beta_2)
                params[i] = params[i] - alpha * slots["m"][i] / (np.sqrt(slots["v"][i]) + eps)
        w, b = params
    return [w, b]


def _check(optimizer_name, jit_compile, wrap=False):
    x, y = _data()
    schedule = OneCycle(**SCHEDULE, base_momentum=0.5, max_momentum=0.95)
    model = _model()
    initial = model.get_weights()
    if optimizer_name == "sgd":
        optimizer = keras.optimizers.SGD(schedule, momentum=0.9)
    else:
        optimizer = keras.optimizers.Adam(schedule)
    if wrap:  # through a wrapper (a very large clipping: AGC never acts)
        optimizer = AdaptiveGradientClipping(optimizer, clipping=1e6)
    model.compile(optimizer, "mse", jit_compile=jit_compile)
    callback = MomentumSchedule(schedule)
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=[callback])
    expected = _by_hand(optimizer_name, initial, x, y, schedule, schedule.momentum)
    # float32 rounding: Adam's m / sqrt(v) amplifies it (TensorFlow: 3e-6 seen).
    atol = 2e-6 if optimizer_name == "sgd" else 1e-5
    for actual, want in zip(model.get_weights(), expected, strict=True):
        np.testing.assert_allclose(actual, want, rtol=2e-5, atol=atol)
    # Not vacuous: with the momentum the optimizer started with (0.9), the weights differ
    # by far more than the tolerance.
    other = _by_hand(optimizer_name, initial, x, y, schedule, lambda t: 0.9)
    assert np.abs(other[0] - expected[0]).max() > 1e-2
    # After fit: a plain float, the last value written (step 5 of 6).
    inner = model.optimizer.inner_optimizer if wrap else model.optimizer
    attribute = "momentum" if optimizer_name == "sgd" else "beta_1"
    value = getattr(inner, attribute)
    assert type(value) is float and value == pytest.approx(schedule.momentum(STEPS - 1))
    assert callback.last_value == pytest.approx(schedule.momentum(STEPS - 1))


@pytest.mark.parametrize("optimizer_name", ["sgd", "adam"])
def test_scheduled_momentum_reaches_the_traced_step(optimizer_name):
    _check(optimizer_name, jit_compile=False)


@requires_xla
@pytest.mark.parametrize("optimizer_name", ["sgd", "adam"])
def test_scheduled_momentum_reaches_the_xla_step(optimizer_name):
    _check(optimizer_name, jit_compile=True)


def test_through_an_optimizer_wrapper():
    _check("sgd", jit_compile="auto", wrap=True)


def test_a_second_fit_continues_the_schedule():
    """The step counter is the optimizer's: two fits of one epoch = one fit of two."""
    x, y = _data()
    schedule = OneCycle(**SCHEDULE, base_momentum=0.5, max_momentum=0.95)
    model = _model()
    initial = model.get_weights()
    model.compile(keras.optimizers.SGD(schedule, momentum=0.9), "mse")
    for _ in range(2):
        model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0,
                  callbacks=[MomentumSchedule(schedule)])  # fmt: skip
    expected = _by_hand("sgd", initial, x, y, schedule, schedule.momentum)
    for actual, want in zip(model.get_weights(), expected, strict=True):
        np.testing.assert_allclose(actual, want, rtol=2e-5, atol=2e-6)


def test_saving_during_fit_keeps_a_plain_config(tmp_path):
    x, y = _data()
    schedule = OneCycle(**SCHEDULE)
    model = _model()
    model.compile(keras.optimizers.SGD(schedule, momentum=0.9), "mse")
    path = str(tmp_path / "during.keras")

    class Save(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.save(path)

    model.fit(x, y, batch_size=4, epochs=1, verbose=0,
              callbacks=[MomentumSchedule(schedule), Save()])  # fmt: skip
    reloaded = keras.models.load_model(path)
    assert isinstance(reloaded.optimizer.momentum, float)
    np.testing.assert_allclose(reloaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_function_of_the_step_is_a_schedule():
    callback = MomentumSchedule(lambda step: 0.9 - 0.01 * step)
    assert callback.momentum(3) == pytest.approx(0.87)
    config = MomentumSchedule(OneCycle(0.1, 10)).get_config()
    clone = MomentumSchedule.from_config(config)
    assert isinstance(clone.schedule, OneCycle) and clone.schedule.total_steps == 10


def test_bad_arguments_and_optimizers():
    with pytest.raises(TypeError, match="`schedule` must have a `momentum"):
        MomentumSchedule(0.9)
    x, y = _data()
    for optimizer, message in [
        (keras.optimizers.SGD(0.1), r"SGD\(momentum > 0\)"),
        (keras.optimizers.Adagrad(0.1), "needs an optimizer with a `momentum`"),
    ]:
        model = _model()
        model.compile(optimizer, "mse")
        with pytest.raises(ValueError, match=message):
            model.fit(x, y, verbose=0, callbacks=[MomentumSchedule(OneCycle(0.1, 10))])


def test_resumed_by_backup_and_restore(tmp_path):
    """Interrupted after epoch 1, resumed by a new model and callbacks: the weights equal the
    uninterrupted run's (the schedule continues from the optimizer's restored step)."""
    from keras_normkit.callbacks import BackupAndRestore
    from tests.callbacks.interrupt import Interrupt

    x, y = _data()
    schedule = OneCycle(**SCHEDULE, base_momentum=0.5, max_momentum=0.95)

    def fit(callbacks):
        model = _model()
        model.compile(keras.optimizers.SGD(schedule, momentum=0.9), "mse")
        model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0,
                  callbacks=[MomentumSchedule(schedule), *callbacks])  # fmt: skip
        return model

    whole = fit([])
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="Interrupting"):
        fit([BackupAndRestore(backup), Interrupt(1)])
    resumed = fit([BackupAndRestore(backup)])
    for a, b in zip(resumed.get_weights(), whole.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
