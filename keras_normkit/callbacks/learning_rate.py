"""Learning-rate callbacks: `LearningRateMonitor` and a schedule-aware `ReduceLROnPlateau`."""

import math

import keras
import numpy as np

from keras_normkit import schedules
from keras_normkit._validation import check_bool, check_choice, check_int, check_number
from keras_normkit.backend import keras_compat
from keras_normkit.callbacks._monitor import get_monitor_value, resolve_sign
from keras_normkit.callbacks.stateful import StatefulCallback

LearningRateSchedule = keras.optimizers.schedules.LearningRateSchedule


# --------------------------------------------------------------------------- helpers


def _inner_optimizer(optimizer):
    """The optimizer that holds the learning rate (unwraps `LossScaleOptimizer`)."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def current_learning_rate(optimizer):
    """The learning rate the optimizer applies at its next step, as a Python float."""
    optimizer = _inner_optimizer(optimizer)
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


def track_schedule_multiplier(model):
    """Wrap the model's schedule in `schedules.Scaled` and track the multiplier variable.

    A float learning rate already lives in an optimizer variable and needs nothing. A
    schedule is wrapped (once) so that its rate can be scaled by assigning the multiplier;
    the multiplier is tracked as an optimizer variable, so it is part of the optimizer state
    (weights checkpoints, JAX's functional state). If the wrapping changed the train step,
    the model's cached train function is dropped so that the next `fit` retraces it.
    Returns the `Scaled` schedule, or `None` for a float learning rate.
    """
    optimizer = _inner_optimizer(model.optimizer)
    learning_rate = keras_compat.optimizer_learning_rate(optimizer)
    if isinstance(learning_rate, keras.Variable):
        return None
    if not isinstance(learning_rate, LearningRateSchedule):
        raise TypeError(
            "The optimizer's learning rate must be a float or a LearningRateSchedule to be "
            f"scaled. Received: learning_rate={learning_rate!r}"
        )
    retrace = False
    if not isinstance(learning_rate, schedules.Scaled):
        learning_rate = schedules.Scaled(learning_rate)
        optimizer.learning_rate = learning_rate  # the public setter accepts a schedule
        retrace = True
    if keras_compat.track_optimizer_variable(optimizer, learning_rate.multiplier):
        retrace = True
    if retrace and getattr(model, "train_function", None) is not None:
        model.train_function = None
    return learning_rate


def untrack_schedule_multiplier(model):
    """Stop tracking the multiplier (its value stays in the schedule's config).

    Called when training ends, so that a model saved afterwards has the same optimizer
    variables as one rebuilt from its config.
    """
    optimizer = _inner_optimizer(model.optimizer)
    learning_rate = keras_compat.optimizer_learning_rate(optimizer)
    if isinstance(learning_rate, schedules.Scaled):
        keras_compat.untrack_optimizer_variable(optimizer, learning_rate.multiplier)


def scale_learning_rate(model, factor, min_lr=0.0):
    """Multiply the model's learning rate by `factor` (not below `min_lr`); return the new rate.

    Works for a float learning rate (assigns the optimizer variable) and for a schedule
    wrapped by `track_schedule_multiplier` (assigns the `Scaled` multiplier, so every later
    step of the schedule is scaled too). Callbacks install the wrapper in `set_model`, before
    the train step is traced.
    """
    optimizer = _inner_optimizer(model.optimizer)
    old = current_learning_rate(optimizer)
    new = max(old * factor, min_lr)
    learning_rate = keras_compat.optimizer_learning_rate(optimizer)
    if isinstance(learning_rate, keras.Variable):
        optimizer.learning_rate = new  # the public setter assigns the variable
    elif isinstance(learning_rate, schedules.Scaled):
        multiplier = float(keras.ops.convert_to_numpy(learning_rate.multiplier))
        learning_rate.multiplier.assign(multiplier * (new / old if old > 0 else 0.0))
    else:
        raise RuntimeError(
            "The optimizer's schedule must be wrapped by `track_schedule_multiplier(model)` "
            f"before training to be scaled. Received: learning_rate={learning_rate!r}"
        )
    return new


# --------------------------------------------------------------------------- callbacks


@keras.saving.register_keras_serializable(package="keras_normkit")
class LearningRateMonitor(StatefulCallback):
    """Write the optimizer's current learning rate into `logs["learning_rate"]`.

    At the end of every epoch `logs["learning_rate"]` is set to `optimizer.learning_rate`
    (for a schedule, its value at the optimizer's step, i.e. the rate of the next step, as
    Keras's own callbacks log it), so it reaches `History`, `CSVLogger`, `TensorBoard` and
    the progress bar. With `per_step=True` it is also written into the batch logs and kept
    in `.steps` as `(step, learning_rate)` pairs; this reads the rate back from the device
    at every batch, so use it for inspection, not for long runs.

    Put it before the callbacks that read the logs (Keras adds `History` and the progress
    bar after yours).

    Args:
        per_step: Also log the rate after every batch.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.callbacks import LearningRateMonitor
    >>> from keras_normkit.schedules import NaturalExpDecay
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    >>> model.compile(keras.optimizers.SGD(NaturalExpDecay(0.1, 0.1)), loss="mse")
    >>> history = model.fit(np.ones((8, 4)), np.ones((8, 1)), batch_size=4, epochs=2,
    ...                     callbacks=[LearningRateMonitor()], verbose=0)
    >>> [round(lr, 5) for lr in history.history["learning_rate"]]  # 0.1 * exp(-0.1 * 2k)
    [0.08187, 0.06703]

    Reference: PyTorch Lightning's `LearningRateMonitor`; Keras's `LearningRateScheduler`
    logs the rate the same way.
    """

    def __init__(self, per_step=False):
        super().__init__()
        self.per_step = check_bool("per_step", per_step)
        self.steps = []

    def on_train_begin(self, logs=None):
        self.steps = []

    def get_state(self):
        return {"steps": [list(pair) for pair in self.steps]}

    def set_state(self, state):
        self.steps = [tuple(pair) for pair in state["steps"]]

    def on_epoch_begin(self, epoch, logs=None):
        self.restore_from_backup()  # when BackupAndRestore resumes this fit: the saved state

    def on_train_batch_end(self, batch, logs=None):
        if not self.per_step:
            return
        optimizer = _inner_optimizer(self.model.optimizer)
        rate = current_learning_rate(optimizer)
        self.steps.append((int(keras.ops.convert_to_numpy(optimizer.iterations)), rate))
        if logs is not None:
            logs["learning_rate"] = rate

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = current_learning_rate(self.model.optimizer)
        self.notify_backup(epoch)  # the state after this epoch is final

    def get_config(self):
        return {"per_step": self.per_step}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@keras.saving.register_keras_serializable(package="keras_normkit")
class ReduceLROnPlateau(StatefulCallback):
    """Multiply the learning rate by `factor` when a metric stops improving; schedules too.

    Same rule and arguments as `keras.callbacks.ReduceLROnPlateau`: after `patience` epochs
    without an improvement larger than `min_delta`, `lr <- max(lr * factor, min_lr)`, then
    `cooldown` epochs without counting. Keras's version raises a `TypeError` when the
    optimizer holds a schedule; this one wraps the schedule in `keras_normkit.schedules.Scaled`
    and multiplies its multiplier variable, so the schedule keeps running at a reduced scale.
    During `fit` the multiplier is an optimizer variable (saved in weights checkpoints such as
    `BackupAndRestore`'s); it is also stored in the schedule's config, so a `.keras` file
    saved after `fit` reloads with the reduced rate. Put it before `BackupAndRestore` in the
    callback list, so that each backup sees the epoch's reduction. A full `.keras` file saved
    *during* `fit` (e.g. `ModelCheckpoint(save_weights_only=False)`) holds the multiplier as
    an extra optimizer variable that a model rebuilt from its config lacks: Keras then skips
    loading the optimizer state (with a warning); use weights checkpoints during `fit`. The
    rate after this callback's epoch-end update is written to `logs["learning_rate"]`.
    Its counters (best value, wait, cooldown, reductions) are saved and restored by
    `keras_normkit.callbacks.BackupAndRestore`, so a resumed run reduces when an
    uninterrupted one would (with our `BackupAndRestore` the list order does not matter).

    Args:
        monitor: Quantity to be monitored.
        factor: Float in (0, 1), the multiplier of the learning rate.
        patience: Number of epochs with no improvement after which the rate is reduced.
        verbose: 0 (silent) or 1 (a message at every reduction).
        mode: `"auto"`, `"min"` or `"max"` (`"auto"`: max for accuracy-like names).
        min_delta: Threshold for measuring a new optimum.
        cooldown: Epochs to wait after a reduction before counting again.
        min_lr: Lower bound on the learning rate.

    Example:

    >>> from keras_normkit.callbacks import ReduceLROnPlateau
    >>> callback = ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=3)

    Reference: `keras.callbacks.ReduceLROnPlateau`.
    """

    def __init__(
        self,
        monitor="val_loss",
        factor=0.1,
        patience=10,
        verbose=0,
        mode="auto",
        min_delta=1e-4,
        cooldown=0,
        min_lr=0.0,
    ):
        super().__init__()
        if not isinstance(monitor, str):
            raise TypeError(f"`monitor` must be a string. Received: monitor={monitor!r}")
        self.monitor = monitor
        self.factor = check_number(
            "factor", factor, 0.0, 1.0, strict_minimum=True, strict_maximum=True
        )
        self.patience = check_int("patience", patience, 0)
        self.verbose = verbose
        self.mode = check_choice("mode", mode, ("auto", "min", "max"))
        self.min_delta = check_number("min_delta", min_delta, 0.0)
        self.cooldown = check_int("cooldown", cooldown, 0)
        self.min_lr = check_number("min_lr", min_lr, 0.0)
        self._sign = None
        self._reset()

    def _reset(self):
        self._best = None  # times the sign of the direction: smaller is better
        self.wait = 0
        self.cooldown_counter = 0
        self.reductions = []

    @property
    def best(self):
        """The best monitored value so far (in the monitor's units), or `None`."""
        return None if self._best is None else self._sign * self._best

    def in_cooldown(self):
        """Whether the epochs after a reduction are still being skipped (as in Keras)."""
        return self.cooldown_counter > 0

    def set_model(self, model):
        super().set_model(model)
        if getattr(model, "optimizer", None) is not None:
            track_schedule_multiplier(model)

    def on_train_begin(self, logs=None):
        self._reset()

    def get_state(self):
        return {
            "sign": self._sign,
            "best": self._best,
            "wait": self.wait,
            "cooldown_counter": self.cooldown_counter,
            "reductions": [list(r) for r in self.reductions],
        }

    def set_state(self, state):
        self._sign = state["sign"]
        self._best = state["best"]
        self.wait = state["wait"]
        self.cooldown_counter = state["cooldown_counter"]
        self.reductions = [tuple(r) for r in state["reductions"]]

    def on_train_end(self, logs=None):
        untrack_schedule_multiplier(self.model)

    def on_epoch_begin(self, epoch, logs=None):
        self.restore_from_backup()  # when BackupAndRestore resumes this fit: the saved state

    def on_epoch_end(self, epoch, logs=None):
        self._reduce_on_plateau(epoch, logs if logs is not None else {})
        self.notify_backup(epoch)  # the state after this epoch is final

    def _reduce_on_plateau(self, epoch, logs):
        logs["learning_rate"] = current_learning_rate(self.model.optimizer)
        current = get_monitor_value(self, logs, self.monitor)
        if current is None:
            return
        if self._sign is None:
            self._sign = resolve_sign(self, self.monitor, self.mode, self.model)
        current = self._sign * current
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self._best is None or current < self._best - self.min_delta:
            self._best = current
            self.wait = 0
            return
        if self.in_cooldown():
            return
        self.wait += 1
        if self.wait < self.patience:
            return
        old = logs["learning_rate"]
        if old > np.float32(self.min_lr) and math.isfinite(old):
            new = scale_learning_rate(self.model, self.factor, self.min_lr)
            self.reductions.append((epoch, new))
            logs["learning_rate"] = new
            if self.verbose:
                print(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new}.")
            self.cooldown_counter = self.cooldown
            self.wait = 0

    def get_config(self):
        return {
            "monitor": self.monitor,
            "factor": self.factor,
            "patience": self.patience,
            "verbose": self.verbose,
            "mode": self.mode,
            "min_delta": self.min_delta,
            "cooldown": self.cooldown,
            "min_lr": self.min_lr,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
