"""`TimeStopping`: stops within one batch of the deadline (a fake clock), resumes with the
remaining budget under `BackupAndRestore`, config and errors."""

import keras
import numpy as np
import pytest

from keras_normkit.callbacks import BackupAndRestore, TimeStopping
from tests.callbacks.interrupt import Interrupt


class FakeClock(keras.callbacks.Callback):
    """A clock that advances by `tick` seconds at the start of every batch (a batch "takes"
    `tick` seconds); installed as the `TimeStopping`'s clock."""

    def __init__(self, stopper, tick=1.0):
        super().__init__()
        self.now = 0.0
        self.tick = tick
        stopper._clock = lambda: self.now

    def on_train_batch_begin(self, batch, logs=None):
        self.now += self.tick


def _fit(seconds, epochs=5, callbacks=(), stopper=None, tick=1.0):
    """8 examples in batches of 2 (4 batches an epoch); returns (model, stopper, history)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.01), "mse")
    stopper = stopper or TimeStopping(seconds=seconds)
    clock = FakeClock(stopper, tick)
    history = model.fit(
        np.ones((8, 2), "float32"),
        np.ones((8, 1), "float32"),
        batch_size=2,
        epochs=epochs,
        shuffle=False,
        verbose=0,
        callbacks=[clock, stopper, *callbacks],
    )
    return model, stopper, history


def _steps(model):
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


@pytest.mark.parametrize("seconds,steps,epoch", [(5.5, 6, 1), (4.0, 4, 0), (0.5, 1, 0)])
def test_stops_at_the_first_batch_past_the_deadline(seconds, steps, epoch):
    model, stopper, history = _fit(seconds)
    assert _steps(model) == steps  # the batch that crossed the deadline is the last one
    assert stopper.stopped_epoch == epoch
    assert len(history.history["loss"]) == epoch + 1


def test_no_stop_within_the_budget(capsys):
    model, stopper, history = _fit(100.0, epochs=3)
    assert _steps(model) == 12 and stopper.stopped_epoch is None
    assert len(history.history["loss"]) == 3
    assert stopper.spent() == pytest.approx(12.0)


def test_verbose_message(capsys):
    _fit(2.5, stopper=TimeStopping(2.5, verbose=1))
    assert "Timed stopping at epoch 1 after training for 0:00:03" in capsys.readouterr().out


def test_resumes_with_the_remaining_budget(tmp_path):
    """Interrupted at epoch 2 (8 s spent, backed up): a new process resumes with 2 s left and
    stops after 2 more batches, as the uninterrupted run stops after 10."""
    whole, _, _ = _fit(10.0)
    assert _steps(whole) == 10
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="Interrupting"):
        _fit(10.0, callbacks=[BackupAndRestore(backup), Interrupt(2)])
    # New model, new callbacks, a clock that starts again at 0.
    model, stopper, history = _fit(10.0, callbacks=[BackupAndRestore(backup)])
    assert _steps(model) == 10
    assert stopper.stopped_epoch == 2
    assert stopper.spent() == pytest.approx(10.0)
    assert len(history.history["loss"]) == 1  # epoch 2 only


def test_config_round_trip():
    stopper = TimeStopping(seconds=90, verbose=1)
    assert stopper.get_config() == {"seconds": 90.0, "verbose": 1}
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(stopper))
    assert isinstance(clone, TimeStopping) and clone.seconds == 90.0
    assert TimeStopping().seconds == 86400.0  # TF-Addons' default


def test_bad_arguments():
    with pytest.raises(ValueError, match="`seconds` must be a number > 0"):
        TimeStopping(seconds=0)
    with pytest.raises(ValueError, match="`seconds` must be a number > 0"):
        TimeStopping(seconds=-5)
    with pytest.raises(TypeError, match="`seconds` must be a number"):
        TimeStopping(seconds="60")
    with pytest.raises(ValueError, match="`verbose` must be an integer"):
        TimeStopping(verbose=2)
