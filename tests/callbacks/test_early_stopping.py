"""EarlyStopping: Prechelt's criteria on scripted loss sequences, a real fit, and resumption."""

import inspect
import os
import warnings

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit.callbacks import BackupAndRestore, EarlyStopping
from keras_normkit.callbacks.early_stopping import generalization_loss, training_progress
from tests.callbacks.interrupt import Interrupt


class FakeModel:
    """Stands in for a model: its "weights" are the number of the epoch that produced them."""

    def __init__(self):
        self.stop_training = False
        self.epoch = None
        self.metrics = []

    def get_weights(self):
        return [np.array(self.epoch)]

    def set_weights(self, weights):
        self.epoch = int(weights[0])


def drive(callback, val, train=None, monitor="val_loss", model=None, first_epoch=0, end=True):
    """Run the callback over scripted per-epoch values; return the fake model."""
    model = model or FakeModel()
    callback.set_model(model)
    model.stop_training = False
    callback.on_train_begin()
    for epoch in range(first_epoch, len(val)):
        callback.on_epoch_begin(epoch)
        model.epoch = epoch  # the weights after this epoch
        logs = {monitor: val[epoch]}
        if train is not None:
            logs[monitor.removeprefix("val_")] = train[epoch]
        callback.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    if end:
        callback.on_train_end()
    return model


# --------------------------------------------------------------------------- the formulas


def _formulas_by_hand():
    assert generalization_loss(0.77, 0.7) == pytest.approx(10.0)
    assert generalization_loss(0.7, 0.7) == 0.0
    # P_3 of (1.0, 0.9, 0.8): 1000 * (2.7 / (3 * 0.8) - 1) = 125.
    assert training_progress([1.0, 0.9, 0.8]) == pytest.approx(125.0)
    assert training_progress([0.5, 0.5]) == 0.0


# --------------------------------------------------------------------------- GL


GL_VAL = [1.0, 0.8, 0.7, 0.72, 0.74, 0.76, 0.78]


def _generalization_loss_stops_after_first_epoch_above_alpha():
    # E_opt = 0.7 from epoch 2; GL(3) = 2.86, GL(4) = 5.71 > 5.
    stop = EarlyStopping(criterion="generalization_loss", alpha=5.0, restore_best_weights=True)
    model = drive(stop, GL_VAL)
    assert (stop.stopped_epoch, stop.best_epoch) == (4, 2)
    assert model.epoch == 2  # best weights restored
    assert stop.trace[3]["GL"] == pytest.approx(100 * (0.72 / 0.7 - 1))
    assert stop.stop_reason.startswith("GL")
    # alpha = 10: GL(6) = 11.4 is the first above 10.
    stop = EarlyStopping(criterion="generalization_loss", alpha=10.0)
    model = drive(stop, GL_VAL)
    assert stop.stopped_epoch == 6
    assert model.epoch == 6 and stop.best_weights is None  # Keras's default: no restoring


def _generalization_loss_with_min_delta():
    val = [1.0, 0.9, 0.87, 0.93, 0.96, 0.99]
    # Without min_delta E_opt = 0.87 and GL(3) = 6.9 > 5.
    stop = EarlyStopping(criterion="generalization_loss", alpha=5.0)
    drive(stop, val)
    assert (stop.stopped_epoch, stop.best_epoch) == (3, 2)
    # min_delta = 0.05: 0.87 does not improve on 0.9 by more than 0.05, so E_opt = 0.9,
    # GL(3) = 3.3, GL(4) = 6.7 > 5.
    stop = EarlyStopping(
        criterion="generalization_loss", alpha=5.0, min_delta=0.05, restore_best_weights=True
    )
    model = drive(stop, val)
    assert (stop.stopped_epoch, stop.best_epoch, model.epoch) == (4, 1, 1)


def _generalization_loss_with_baseline():
    val = [1.04, 1.06, 1.08, 1.1]
    # Without baseline E_opt = 1.04: GL(3) = 5.8 <= 10, no stop.
    stop = EarlyStopping(criterion="generalization_loss", alpha=10.0)
    drive(stop, val)
    assert (stop.stopped_epoch, stop.stop_reason, stop.best_epoch) == (0, None, 0)
    # Baseline 0.96 is a value already reached: GL(0) = 8.3, GL(1) = 10.4 > 10.
    stop = EarlyStopping(criterion="generalization_loss", alpha=10.0, baseline=0.96)
    drive(stop, val)
    assert stop.stopped_epoch == 1


def _generalization_loss_with_start_from_epoch():
    val = [5.0, 0.5, 1.0, 0.9, 0.8, 0.85, 0.9]
    # From epoch 0: E_opt = 0.5 and GL(2) = 100 > 10.
    stop = EarlyStopping(criterion="generalization_loss", alpha=10.0)
    drive(stop, val)
    assert stop.stopped_epoch == 2
    # Epochs 0 and 1 ignored: E_opt = 0.8 at epoch 4, GL(5) = 6.25, GL(6) = 12.5 > 10.
    stop = EarlyStopping(
        criterion="generalization_loss", alpha=10.0, start_from_epoch=2, restore_best_weights=True
    )
    model = drive(stop, val)
    assert (stop.stopped_epoch, stop.best_epoch, model.epoch) == (6, 4, 4)


# --------------------------------------------------------------------------- PQ


PQ_TRAIN = [1.0, 0.9, 0.8, 0.79, 0.785, 0.78, 0.7, 0.6, 0.5]
PQ_VAL = [1.0, 0.9, 0.95, 0.97, 0.98, 0.99, 0.9, 0.9, 0.9]


def _progress_quotient_is_checked_at_strip_ends():
    # Strip 1 (epochs 0-2): P = 125, GL(2) = 5.56, PQ = 0.044.
    # Strip 2 (epochs 3-5): P = 1000 * (2.355 / 2.34 - 1) = 6.41, GL(5) = 10, PQ = 1.56 > 0.5.
    # (GL(3) = 7.8 already, but epoch 3 ends no strip.)
    stop = EarlyStopping(
        criterion="progress_quotient", alpha=0.5, strip_length=3, restore_best_weights=True
    )
    model = drive(stop, PQ_VAL, PQ_TRAIN)
    assert (stop.stopped_epoch, stop.best_epoch, model.epoch) == (5, 1, 1)
    assert stop.trace[2]["P"] == pytest.approx(125.0)
    assert stop.trace[5]["PQ"] == pytest.approx(10.0 / (1000 * (2.355 / 2.34 - 1)))
    assert "PQ" not in stop.trace[3]
    # alpha = 2: PQ(5) = 1.56 is not enough; strip 3 has GL(8) = 0, so no stop at all.
    stop = EarlyStopping(criterion="progress_quotient", alpha=2.0, strip_length=3)
    drive(stop, PQ_VAL, PQ_TRAIN)
    assert (stop.stopped_epoch, stop.stop_reason) == (0, None)


def _progress_quotient_strips_count_from_start_from_epoch():
    # Ignoring epoch 0, strips are epochs 1-3 and 4-6.
    # Strip 1: train (0.9, 0.8, 0.79): P = 1000 * (2.49 / 2.37 - 1) = 50.6;
    #          val E_opt = 0.9, GL(3) = 7.78, PQ = 0.154.
    # Strip 2: train (0.785, 0.78, 0.7): P = 1000 * (2.265 / 2.1 - 1) = 78.6;
    #          GL(6) = 0, PQ = 0.
    stop = EarlyStopping(
        criterion="progress_quotient", alpha=0.1, strip_length=3, start_from_epoch=1
    )
    drive(stop, PQ_VAL, PQ_TRAIN)
    assert stop.stopped_epoch == 3
    assert stop.trace[2]["P"] == pytest.approx(1000 * (2.49 / 2.37 - 1))
    stop = EarlyStopping(
        criterion="progress_quotient", alpha=0.2, strip_length=3, start_from_epoch=1
    )
    drive(stop, PQ_VAL, PQ_TRAIN)
    assert (stop.stopped_epoch, stop.stop_reason) == (0, None)


# --------------------------------------------------------------------------- UP


UP_VAL = [1.0, 0.9, 0.8, 0.85, 0.7, 0.75, 0.8, 0.9, 1.0, 1.1]


def _up_counts_consecutive_rising_strips():
    # strip_length 2: strips end at epochs 1, 3, 5, 7, 9 with 0.9, 0.85, 0.75, 0.9, 1.1.
    # Rises at 7 (0.9 > 0.75) and 9 (1.1 > 0.9). Mid-strip rises (epoch 3: 0.85 > 0.8) do
    # not count.
    stop = EarlyStopping(criterion="up", alpha=2, strip_length=2, restore_best_weights=True)
    model = drive(stop, UP_VAL)
    assert (stop.stopped_epoch, stop.best_epoch, model.epoch) == (9, 4, 4)
    stop = EarlyStopping(criterion="up", alpha=1, strip_length=2)
    drive(stop, UP_VAL)
    assert stop.stopped_epoch == 7
    # strip_length 1: the first rise is at epoch 3 (0.85 > 0.8).
    stop = EarlyStopping(criterion="up", alpha=1, strip_length=1)
    drive(stop, UP_VAL)
    assert stop.stopped_epoch == 3
    # UP_3 never triggers (only two rises in a row).
    stop = EarlyStopping(criterion="up", alpha=3, strip_length=2)
    drive(stop, UP_VAL)
    assert (stop.stopped_epoch, stop.stop_reason) == (0, None)
    # Rises must be consecutive: strip ends 0.9, 1.0 (rise), 0.8, 0.85 (rise), 0.7, 0.75, 0.8.
    stop = EarlyStopping(criterion="up", alpha=2, strip_length=1)
    drive(stop, [0.9, 1.0, 0.8, 0.85, 0.7, 0.75, 0.8])
    assert stop.stopped_epoch == 6


def _up_with_min_delta_and_start_from_epoch():
    val = [1.0, 0.9, 0.92, 0.95, 0.9, 0.85, 0.83, 1.0]
    # strip_length 2, ends at 1, 3, 5, 7 with 0.9, 0.95, 0.85, 1.0: first rise at 3 (+0.05).
    stop = EarlyStopping(criterion="up", alpha=1, strip_length=2)
    drive(stop, val)
    assert stop.stopped_epoch == 3
    # min_delta 0.1: +0.05 is no rise; +0.15 at epoch 7 is.
    stop = EarlyStopping(criterion="up", alpha=1, strip_length=2, min_delta=0.1)
    drive(stop, val)
    assert stop.stopped_epoch == 7
    # start_from_epoch 1: strips end at 2, 4, 6 with 0.92, 0.9, 0.83: no rise.
    stop = EarlyStopping(criterion="up", alpha=1, strip_length=2, start_from_epoch=1)
    drive(stop, val)
    assert (stop.stopped_epoch, stop.stop_reason) == (0, None)


# --------------------------------------------------------------------------- patience


def _patience_by_hand():
    val = [1.0, 0.9, 0.95, 0.96, 0.8, 0.85, 0.86, 0.87]
    stop = EarlyStopping(patience=2, restore_best_weights=True)
    model = drive(stop, val)
    assert (stop.stopped_epoch, stop.best_epoch, model.epoch) == (3, 1, 1)
    stop = EarlyStopping(patience=3)
    drive(stop, val)
    assert (stop.stopped_epoch, stop.best_epoch) == (7, 4)
    # baseline 0.85: epochs 0 and 1 improve on the best but not on the baseline, so the
    # wait is not reset (1, 2, 3): stop at epoch 2, as Keras does.
    stop = EarlyStopping(patience=3, baseline=0.85)
    drive(stop, val)
    assert (stop.stopped_epoch, stop.best_epoch) == (2, 1)


@given(
    val=st.lists(st.floats(0.1, 2.0), min_size=1, max_size=25),
    patience=st.integers(0, 4),
    min_delta=st.sampled_from([0.0, 0.05]),
    baseline=st.sampled_from([None, 0.5]),
    start=st.integers(0, 3),
    restore=st.sampled_from([None, False, True]),
)
def test_patience_matches_keras_early_stopping(val, patience, min_delta, baseline, start, restore):
    """Same arguments (or defaults), same stop epoch, best epoch and value, final weights."""
    kwargs = dict(patience=patience, min_delta=min_delta, baseline=baseline, start_from_epoch=start)
    if restore is not None:
        kwargs["restore_best_weights"] = restore
    ours = EarlyStopping(**kwargs)
    theirs = keras.callbacks.EarlyStopping(**kwargs)
    ours_model = drive(ours, val)
    theirs_model = drive(theirs, val)
    assert ours.stopped_epoch == theirs.stopped_epoch
    assert ours.wait == theirs.wait
    assert ours.best_epoch == theirs.best_epoch
    assert ours_model.epoch == theirs_model.epoch
    if ours.best is not None:
        assert ours.best == theirs.best


# --------------------------------------------------------------------------- resumption


@given(
    criterion=st.sampled_from(["patience", "generalization_loss", "progress_quotient", "up"]),
    val=st.lists(st.floats(0.1, 2.0), min_size=3, max_size=20),
    train_drop=st.floats(0.5, 0.99),
    cut=st.integers(1, 19),
    lag=st.booleans(),
)
def test_interrupted_and_resumed_runs_stop_like_an_uninterrupted_one(
    criterion, val, train_drop, cut, lag
):
    cut = min(cut, len(val) - 1)
    train = list(np.cumprod([train_drop] * len(val)))
    kwargs = {"criterion": criterion, "strip_length": 2, "restore_best_weights": True}
    if criterion != "patience":
        kwargs["alpha"] = 2 if criterion == "up" else 1.0
    else:
        kwargs["patience"] = 2
    whole = EarlyStopping(**kwargs)
    drive(whole, val, train)
    # The interrupted run sees epochs 0..cut-1 (and with `lag`, also epoch `cut`, whose
    # backup was not written), then is resumed from epoch `cut` like BackupAndRestore does.
    split = EarlyStopping(**kwargs)
    seen = cut + 1 if lag else cut
    model = drive(split, val[:seen], train[:seen], end=False)
    if model.stop_training:  # stopped before the interruption: nothing to resume
        return
    drive(split, val, train, model=model, first_epoch=cut)
    for name in ("stopped_epoch", "best_epoch", "best", "stop_reason", "trace"):
        assert getattr(split, name) == getattr(whole, name), name
    assert model.epoch == whole.model.epoch


def _resuming_after_an_epoch_the_backup_missed():
    # Interrupted after epoch 3 was processed but before its backup: resumed at epoch 3.
    val = [1.0, 0.9, 0.95, 0.96, 0.97, 0.98]
    whole = EarlyStopping(patience=3)
    drive(whole, val)
    split = EarlyStopping(patience=3)
    model = drive(split, val[:4], end=False)
    drive(split, val, model=model, first_epoch=3)
    assert whole.stopped_epoch == split.stopped_epoch == 4
    assert split.trace == whole.trace


def _a_new_fit_from_epoch_zero_starts_afresh():
    stop = EarlyStopping(criterion="generalization_loss", alpha=5.0)
    drive(stop, GL_VAL)
    assert stop.stopped_epoch == 4
    drive(stop, [1.0, 0.9, 0.8])
    assert (stop.stopped_epoch, stop.best_epoch, len(stop.trace)) == (0, 2, 3)
    assert stop.stop_reason is None


# --------------------------------------------------------------------------- errors, config


def _missing_monitor_warns_once():
    stop = EarlyStopping(monitor="val_loss", criterion="generalization_loss", alpha=1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        drive(stop, [1.0, 2.0, 3.0], monitor="val_accuracy_typo")
    messages = [str(w.message) for w in caught if "val_loss" in str(w.message)]
    assert len(messages) == 1 and "val_accuracy_typo" in messages[0]
    assert (stop.stopped_epoch, stop.stop_reason) == (0, None)


BAD = [
    (dict(criterion="gl", alpha=5.0), ValueError, "criterion"),
    (dict(criterion="generalization_loss"), ValueError, "alpha"),
    (dict(criterion="up", alpha=1.5), TypeError, "alpha"),  # the number of strips: an int
    (dict(criterion="up", alpha=0), ValueError, "alpha"),
    (dict(criterion="generalization_loss", alpha=-1.0), ValueError, "alpha"),
    (dict(alpha=3.0), ValueError, "alpha"),
    (dict(criterion="up", alpha=2, strip_length=0), ValueError, "strip_length"),
    (dict(patience=-1), ValueError, "patience"),
    (dict(criterion="generalization_loss", alpha=5.0, patience=3), ValueError, "patience"),
    (dict(mode="maximize"), ValueError, "mode"),
    (dict(criterion="generalization_loss", alpha=5.0, mode="max"), ValueError, "mode"),
    (dict(monitor="loss", criterion="progress_quotient", alpha=1.0), ValueError, "monitor"),
    (dict(criterion="up", alpha=2, baseline=0.5), ValueError, "baseline"),
    (dict(min_delta=-0.1), ValueError, "min_delta"),
    (dict(start_from_epoch=-2), ValueError, "start_from_epoch"),
    (dict(patience=2.0), TypeError, "patience"),
    (dict(min_delta=float("inf")), ValueError, "min_delta"),
    (dict(monitor=3), TypeError, "monitor"),
]


def _bad_input_names_the_argument():
    for kwargs, error, name in BAD:
        with pytest.raises(error, match=name) as info:
            EarlyStopping(**kwargs)
        assert "Received" in str(info.value), kwargs


def _maximized_monitor_is_rejected_by_prechelt_criteria():
    stop = EarlyStopping(monitor="val_accuracy", criterion="up", alpha=1)
    with pytest.raises(ValueError, match="val_accuracy"):
        drive(stop, [0.5, 0.6], monitor="val_accuracy")
    stop = EarlyStopping(monitor="val_accuracy", patience=1)  # patience handles max
    drive(stop, [0.5, 0.6, 0.55, 0.58], monitor="val_accuracy")
    assert (stop.stopped_epoch, stop.best_epoch, stop.best) == (2, 1, 0.6)


def _config_is_the_constructor_arguments():
    stop = EarlyStopping(criterion="up", alpha=3, strip_length=4, start_from_epoch=2)
    config = stop.get_config()
    parameters = inspect.signature(EarlyStopping).parameters.values()
    assert set(config) == {p.name for p in parameters if p.kind != p.VAR_KEYWORD}
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(stop))
    assert clone.get_config() == config


def _removed_backup_dir_names_what_to_use():
    with pytest.raises(ValueError, match=r"was removed.*BackupAndRestore\(backup_dir\)"):
        EarlyStopping(monitor="loss", backup_dir="/tmp/backup")
    with pytest.raises(TypeError, match="Unrecognized keyword arguments: \\['patiance'\\]"):
        EarlyStopping(patiance=3)
    # The configs of earlier versions hold `"backup_dir": None`: they still load, warning-free.
    config = {**EarlyStopping(patience=2).get_config(), "backup_dir": None}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        restored = EarlyStopping.from_config(config)
    assert restored.patience == 2 and "backup_dir" not in restored.get_config()


# --------------------------------------------------------------------------- real training


def digits(n_train=100):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    return (x[:n_train], y[:n_train]), (x[n_train : n_train + 200], y[n_train : n_train + 200])


def overfitting_model(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [keras.Input((64,)), keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)]
    )
    model.compile(
        keras.optimizers.Adam(0.03),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


class WeightsRecorder(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.weights = {}

    def on_epoch_end(self, epoch, logs=None):
        self.weights[epoch] = self.model.get_weights()


def test_real_fit_stops_and_restores_the_best_weights():
    (x, y), val = digits()
    model = overfitting_model()
    recorder = WeightsRecorder()
    stop = EarlyStopping(criterion="generalization_loss", alpha=5.0, restore_best_weights=True)
    history = model.fit(
        x, y, validation_data=val, epochs=40, batch_size=50, callbacks=[recorder, stop], verbose=0
    )
    val_loss = history.history["val_loss"]
    assert stop.stop_reason is not None and len(val_loss) == stop.stopped_epoch + 1 < 40
    assert stop.best_epoch == int(np.argmin(val_loss))
    assert val_loss[-1] > 1.05 * min(val_loss)
    for got, best in zip(model.get_weights(), recorder.weights[stop.best_epoch], strict=True):
        np.testing.assert_array_equal(got, best)
    assert not np.array_equal(model.get_weights()[0], recorder.weights[stop.stopped_epoch][0])


RESUMED_STOP = dict(criterion="generalization_loss", alpha=5.0, restore_best_weights=True)


def uninterrupted_stop():
    """The run the resumed ones must reproduce: `(data, fit kwargs, initial weights, the
    EarlyStopping, the final weights)`."""
    (x, y), val = digits()
    fit = dict(validation_data=val, epochs=40, batch_size=50, shuffle=False, verbose=0)
    model = overfitting_model()
    initial = model.get_weights()
    whole = EarlyStopping(**RESUMED_STOP)
    model.fit(x, y, callbacks=[whole], **fit)
    assert whole.stop_reason is not None and whole.stopped_epoch > 4
    return (x, y), fit, initial, whole, model.get_weights()


@pytest.mark.slow
def test_backup_and_restore_resume_gives_the_same_stop_and_weights(tmp_path):
    (x, y), fit, initial, whole, expected = uninterrupted_stop()
    model = overfitting_model()
    model.set_weights(initial)
    split = EarlyStopping(**RESUMED_STOP)
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    with pytest.raises(RuntimeError, match="Interrupting"):
        model.fit(x, y, callbacks=[backup, split, Interrupt(whole.stopped_epoch - 2)], **fit)
    history = model.fit(x, y, callbacks=[backup, split], **fit)
    assert len(history.history["loss"]) == 3  # resumed two epochs before the stop
    assert (split.stopped_epoch, split.best_epoch) == (whole.stopped_epoch, whole.best_epoch)
    for got, want in zip(model.get_weights(), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_resume_in_a_new_process_with_our_backup(tmp_path):
    """A new model and new callback instances (as after a crash) resume from the backup."""
    (x, y), fit, initial, whole, expected = uninterrupted_stop()
    backup_dir = str(tmp_path / "backup")
    model = overfitting_model()
    model.set_weights(initial)
    first = EarlyStopping(**RESUMED_STOP)
    with pytest.raises(RuntimeError, match="Interrupting"):
        model.fit(
            x,
            y,
            callbacks=[BackupAndRestore(backup_dir), first, Interrupt(whole.stopped_epoch - 2)],
            **fit,
        )

    resumed_model = overfitting_model()  # a fresh process would rebuild everything
    second = EarlyStopping(**RESUMED_STOP)
    history = resumed_model.fit(x, y, callbacks=[BackupAndRestore(backup_dir), second], **fit)
    assert len(history.history["loss"]) == 3  # resumed two epochs before the stop
    assert (second.stopped_epoch, second.best_epoch) == (whole.stopped_epoch, whole.best_epoch)
    assert second.trace == whole.trace
    for got, want in zip(resumed_model.get_weights(), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert not os.path.exists(backup_dir)  # deleted at the end, as Keras deletes its own


def test_generalization_loss_criterion():
    """GL_alpha by hand: alpha, min_delta, baseline, start_from_epoch."""
    _formulas_by_hand()
    _generalization_loss_stops_after_first_epoch_above_alpha()
    _generalization_loss_with_min_delta()
    _generalization_loss_with_baseline()
    _generalization_loss_with_start_from_epoch()


def test_progress_quotient_criterion():
    """PQ_alpha by hand: strips, start_from_epoch."""
    _progress_quotient_is_checked_at_strip_ends()
    _progress_quotient_strips_count_from_start_from_epoch()


def test_up_criterion():
    """UP_s by hand: consecutive strips, min_delta, start_from_epoch."""
    _up_counts_consecutive_rising_strips()
    _up_with_min_delta_and_start_from_epoch()


def test_patience_criterion_and_directions():
    """Keras's patience rule by hand, mode max."""
    _patience_by_hand()
    _maximized_monitor_is_rejected_by_prechelt_criteria()


def test_restarts():
    """Resuming after a missed backup; a new fit from epoch 0 starts afresh."""
    _resuming_after_an_epoch_the_backup_missed()
    _a_new_fit_from_epoch_zero_starts_afresh()


def test_errors_warnings_and_config():
    """Bad input, a missing monitor, get_config."""
    _missing_monitor_warns_once()
    _bad_input_names_the_argument()
    _config_is_the_constructor_arguments()
    _removed_backup_dir_names_what_to_use()
