"""LearningRateMonitor and ReduceLROnPlateau (float rates and schedules, saving, resuming)."""

import csv
import inspect
import warnings

import keras
import numpy as np
import pytest

from keras_normkit.callbacks import LearningRateMonitor, ReduceLROnPlateau
from keras_normkit.schedules import CyclicalLearningRate, NaturalExpDecay, Scaled
from tests.callbacks.interrupt import Interrupt

RNG = np.random.default_rng(0)
X = RNG.normal(size=(16, 3)).astype("float32")
Y = (X @ np.array([[1.0], [-2.0], [0.5]]) + 0.1).astype("float32")


def linear_model(learning_rate):
    """y = x w (no bias) with plain SGD: one step changes w by exactly -lr * grad."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, use_bias=False)])
    model.compile(keras.optimizers.SGD(learning_rate), loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def effective_learning_rate(model):
    """The rate the compiled train step really applies, measured from one SGD step."""
    w = model.get_weights()[0]
    grad = 2.0 / len(X) * X.T @ (X @ w - Y)
    model.train_on_batch(X, Y)
    step = w - model.get_weights()[0]
    return float(np.sum(step * grad) / np.sum(grad * grad))


def drive(callback, model, values, monitor="val_loss"):
    callback.set_model(model)
    callback.on_train_begin()
    rates = []
    for epoch, value in enumerate(values):
        callback.on_epoch_begin(epoch)
        logs = {monitor: value}
        callback.on_epoch_end(epoch, logs)
        rates.append(float(model.optimizer.learning_rate))  # the rate of the next epoch
    callback.on_train_end()
    return rates


# --------------------------------------------------------------------------- monitor


def test_learning_rate_monitor_logs_the_schedule_per_epoch_and_per_step(tmp_path):
    schedule = NaturalExpDecay(0.1, 0.05)
    model = linear_model(schedule)
    monitor = LearningRateMonitor(per_step=True)
    path = tmp_path / "log.csv"
    history = model.fit(
        X,
        Y,
        batch_size=8,
        epochs=3,
        callbacks=[monitor, keras.callbacks.CSVLogger(str(path))],
        verbose=0,
    )
    # The rate logged after epoch e is the rate of the next step, 0.1 * exp(-0.05 * 2(e+1)).
    expected = [0.1 * np.exp(-0.05 * 2 * (e + 1)) for e in range(3)]
    np.testing.assert_allclose(history.history["learning_rate"], expected, rtol=1e-6)
    steps, rates = zip(*monitor.steps, strict=True)
    assert steps == (1, 2, 3, 4, 5, 6)
    np.testing.assert_allclose(rates, [0.1 * np.exp(-0.05 * s) for s in steps], rtol=1e-6)
    with open(path) as f:
        column = [float(row["learning_rate"]) for row in csv.DictReader(f)]
    np.testing.assert_allclose(column, expected, rtol=1e-6)


# --------------------------------------------------------------------------- plateau, float


PLATEAU_VALUES = [1.0, 0.9, 0.91, 0.92, 0.93, 0.85, 0.9, 0.95, 0.96, 0.97, 0.98]


def test_reduce_on_plateau_with_a_float_rate_matches_keras():
    for kwargs in (
        dict(factor=0.5, patience=2),
        dict(factor=0.5, patience=1, cooldown=2),
        dict(factor=0.1, patience=0, min_lr=0.0005),
        dict(factor=0.5, patience=1, min_delta=0.06),
    ):
        ours, theirs = linear_model(0.01), linear_model(0.01)
        got = drive(ReduceLROnPlateau(**kwargs), ours, PLATEAU_VALUES)
        want = drive(keras.callbacks.ReduceLROnPlateau(**kwargs), theirs, PLATEAU_VALUES)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=str(kwargs))
        assert float(ours.optimizer.learning_rate) == pytest.approx(want[-1], rel=1e-6)
    # By hand for patience 2: reductions at epochs 3 (0.9 not beaten twice), 7 and 9.
    rates = drive(ReduceLROnPlateau(factor=0.5, patience=2), linear_model(0.01), PLATEAU_VALUES)
    expected = [0.01] * 3 + [0.005] * 4 + [0.0025] * 2 + [0.00125] * 2
    np.testing.assert_allclose(rates, expected, rtol=1e-6)


def test_keras_reduce_on_plateau_fails_with_a_schedule_ours_does_not():
    with pytest.raises(TypeError):
        drive(
            keras.callbacks.ReduceLROnPlateau(factor=0.5, patience=0),
            linear_model(NaturalExpDecay(0.1, 0.01)),
            [1.0, 2.0],
        )
    drive(
        ReduceLROnPlateau(factor=0.5, patience=0),
        linear_model(NaturalExpDecay(0.1, 0.01)),
        [1.0, 2.0],
    )


# --------------------------------------------------------------------------- plateau, schedule


def test_reduce_on_plateau_scales_a_schedule_in_the_compiled_step(tmp_path):
    schedule = CyclicalLearningRate(0.01, 0.05, step_size=3)
    model = linear_model(schedule)
    callback = ReduceLROnPlateau(factor=0.5, patience=1)
    rates = drive(callback, model, [1.0, 1.1, 1.2, 1.3])  # reductions at epochs 1, 2, 3
    assert [epoch for epoch, _ in callback.reductions] == [1, 2, 3]
    assert rates[-1] == pytest.approx(0.125 * float(schedule(0)), rel=1e-6)
    scaled = model.optimizer._learning_rate
    assert isinstance(scaled, Scaled) and float(scaled.multiplier) == pytest.approx(0.125)
    # The traced train step reads the multiplier: the applied rate is 1/8 of the schedule's.
    for step in range(4):
        expected = 0.125 * float(schedule(step))
        assert effective_learning_rate(model) == pytest.approx(expected, rel=1e-4)
    # Saved and reloaded (no custom_objects): same step, same reduced rate, same next step.
    path = tmp_path / "reduced.keras"
    model.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "Skipping variable loading for optimizer"
        loaded = keras.models.load_model(path)
    assert int(loaded.optimizer.iterations) == 4
    assert float(loaded.optimizer.learning_rate) == pytest.approx(0.125 * float(schedule(4)))
    assert effective_learning_rate(loaded) == pytest.approx(0.125 * float(schedule(4)), rel=1e-4)


def test_reduce_on_plateau_during_fit_with_a_schedule():
    schedule = NaturalExpDecay(0.05, 0.01)
    model = linear_model(schedule)
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0)  # traced without the multiplier
    callback = ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0, min_delta=100.0)
    history = model.fit(X, Y, batch_size=8, epochs=3, callbacks=[callback], verbose=0)
    # min_delta is huge: every epoch after the first is a plateau, so two reductions.
    expected = [0.05 * np.exp(-0.01 * 2 * (e + 2)) * 0.5 ** min(e, 2) for e in range(3)]
    np.testing.assert_allclose(history.history["learning_rate"], expected, rtol=1e-5)
    assert effective_learning_rate(model) == pytest.approx(expected[-1], rel=1e-4)
    # After fit the multiplier is no longer an optimizer variable (its value is in the config).
    assert len(model.optimizer.variables) == 1


def _bad_input_and_config():
    for kwargs, name in (
        (dict(factor=1.0), "factor"),
        (dict(factor=0.0), "factor"),
        (dict(mode="up"), "mode"),
        (dict(patience=-1), "patience"),
        (dict(min_lr=-1.0), "min_lr"),
        (dict(min_delta=-1.0), "min_delta"),
        (dict(factor=float("nan")), "factor"),
    ):
        with pytest.raises(ValueError, match=name):
            ReduceLROnPlateau(**kwargs)
    for kwargs, name in (
        (dict(cooldown=1.5), "cooldown"),
        (dict(patience="3"), "patience"),
        (dict(factor="0.5"), "factor"),
    ):
        with pytest.raises(TypeError, match=name):
            ReduceLROnPlateau(**kwargs)
    with pytest.raises(TypeError, match="per_step"):
        LearningRateMonitor(per_step="yes")
    for callback in (ReduceLROnPlateau(factor=0.3, cooldown=2), LearningRateMonitor(True)):
        config = callback.get_config()
        assert set(config) == set(inspect.signature(type(callback)).parameters)
        clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(callback))
        assert clone.get_config() == config


def _missing_monitor_warns_once():
    callback = ReduceLROnPlateau(monitor="val_los", patience=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        drive(callback, linear_model(0.01), [1.0, 2.0, 3.0], monitor="val_loss")
    assert sum("val_los`" in str(w.message) for w in caught) == 1


# --------------------------------------------------------------------------- resuming


class RateProbe(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.rate = getattr(self, "rate", None) or float(self.model.optimizer.learning_rate)


@pytest.mark.slow
def test_multiplier_is_restored_by_backup_and_restore_in_a_new_model(tmp_path):
    def fresh():
        keras.utils.set_random_seed(0)
        return linear_model(NaturalExpDecay(0.05, 0.01))

    backup = str(tmp_path / "backup")
    model = fresh()
    plateau = ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0, min_delta=100.0)
    with pytest.raises(RuntimeError):
        model.fit(
            X,
            Y,
            batch_size=8,
            epochs=4,
            verbose=0,
            # The plateau callback goes first so the backup of an epoch sees its reduction.
            callbacks=[plateau, keras.callbacks.BackupAndRestore(backup), Interrupt(2)],
        )
    assert float(model.optimizer._learning_rate.multiplier) == 0.5  # reduced after epoch 1
    # As after a restart: a new model compiled with the plain schedule, a new callback.
    model = fresh()
    probe = RateProbe()
    model.fit(
        X,
        Y,
        batch_size=8,
        epochs=4,
        verbose=0,
        callbacks=[
            ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0, min_delta=100.0),
            keras.callbacks.BackupAndRestore(backup),
            probe,
        ],
    )
    # Epoch 2 starts at step 4 with the multiplier 0.5 from the backup.
    assert probe.rate == pytest.approx(0.5 * 0.05 * np.exp(-0.01 * 4), rel=1e-5)


def test_errors_warnings_and_config():
    """Bad input, config, a missing monitor warns once."""
    _bad_input_and_config()
    _missing_monitor_warns_once()
