"""`TimeStopping`: stop training once a time budget is spent (TF-Addons' callback)."""

import datetime
import time

import keras

from keras_normkit._validation import check_int, check_number
from keras_normkit.callbacks.stateful import StatefulCallback


@keras.saving.register_keras_serializable(package="keras_normkit")
class TimeStopping(StatefulCallback):
    """Stop training when `seconds` of training time have been spent.

    The time is measured from the start of `fit` (a monotonic clock) and checked after
    every batch: training stops at the end of the first batch that ends past the budget,
    so it overruns by at most one batch (TF-Addons' `TimeStopping` checked at the end of
    epochs only, overrunning by up to an epoch; with `steps_per_execution=k`, Keras calls
    callbacks every `k` batches, and the overrun is up to `k` batches). The epoch in which it stopped is
    `stopped_epoch` (0-based; `None` if the budget was not reached), and with `verbose=1`
    a line says so when training ends.

    Under `keras_normkit.callbacks.BackupAndRestore`, the time spent until the end of each
    backed-up epoch is saved with the backup, and a resumed `fit` (in a new process too)
    continues with the remaining budget: the time of the epoch that was interrupted and is
    run again counts once, in the run that completes it.

    Args:
        seconds: Number > 0, the training time budget in seconds. Default: `86400` (one
            day, as TF-Addons).
        verbose: 0 (silent) or 1 (a line when the budget stops training).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.callbacks import TimeStopping
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", loss="mse")
    >>> stopper = TimeStopping(seconds=1e-3)  # spent by the first batch
    >>> history = model.fit(np.ones((64, 2)), np.ones((64, 1)), batch_size=8, epochs=5,
    ...                     callbacks=[stopper], verbose=0)
    >>> len(history.history["loss"]), stopper.stopped_epoch, int(model.optimizer.iterations)
    (1, 0, 1)

    Reference: TensorFlow Addons, `tfa.callbacks.TimeStopping`.
    """

    def __init__(self, seconds=86400, verbose=0):
        super().__init__()
        self.seconds = check_number("seconds", seconds, minimum=0.0, strict_minimum=True)
        self.verbose = check_int("verbose", verbose, 0, 1)
        self.stopped_epoch = None
        self._clock = time.monotonic
        self._start = None
        self._spent_before = 0.0  # restored from a backup: the time of the earlier runs
        self._spent_at_epoch_end = 0.0
        self._epoch = 0

    def spent(self):
        """The training time spent so far, in seconds (earlier runs of a resumed `fit`
        included)."""
        if self._start is None:
            return self._spent_before
        return self._spent_before + (self._clock() - self._start)

    def on_train_begin(self, logs=None):
        self._start = self._clock()
        self._spent_before = 0.0
        self._spent_at_epoch_end = 0.0
        self.stopped_epoch = None

    def get_state(self):
        return {"spent": self._spent_at_epoch_end, "stopped_epoch": self.stopped_epoch}

    def set_state(self, state):
        # The time spent until the backed-up epoch ended, plus this run's, from its start.
        self._spent_before = float(state["spent"])
        self.stopped_epoch = state["stopped_epoch"]

    def on_epoch_begin(self, epoch, logs=None):
        self.restore_from_backup()
        self._epoch = epoch

    def _check(self):
        if self.stopped_epoch is None and self.spent() >= self.seconds:
            self.stopped_epoch = self._epoch
        if self.stopped_epoch is not None:
            self.model.stop_training = True

    def on_train_batch_end(self, batch, logs=None):
        self._check()

    def on_epoch_end(self, epoch, logs=None):
        self._check()
        self._spent_at_epoch_end = self.spent()
        self.notify_backup(epoch)

    def on_train_end(self, logs=None):
        if self.verbose and self.stopped_epoch is not None:
            spent = datetime.timedelta(seconds=round(self.spent()))
            print(f"Timed stopping at epoch {self.stopped_epoch + 1} after training for {spent}")

    def get_config(self):
        return {"seconds": self.seconds, "verbose": self.verbose}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
