"""`EarlyStopping` with Prechelt's criteria (GL, PQ, UP) besides Keras's patience rule."""

import math

import keras

from keras_normkit._validation import check_bool, check_choice, check_int, check_number
from keras_normkit.callbacks._monitor import get_monitor_value, resolve_sign
from keras_normkit.callbacks.stateful import StatefulCallback, weights_state

CRITERIA = ("patience", "generalization_loss", "progress_quotient", "up")


def generalization_loss(value, optimum):
    """Prechelt's `GL = 100 * (E_va / E_opt - 1)`, in percent (`inf` when `E_opt = 0 < E_va`)."""
    if optimum == 0.0:
        return 0.0 if value <= 0.0 else math.inf
    return 100.0 * (value / optimum - 1.0)


def training_progress(strip):
    """Prechelt's `P_k = 1000 * (sum(strip) / (k * min(strip)) - 1)` over a strip of losses."""
    smallest = min(strip)
    if smallest == 0.0:
        return math.inf if max(strip) > 0.0 else 0.0
    return 1000.0 * (sum(strip) / (len(strip) * smallest) - 1.0)


def _check_removed_arguments(kwargs):
    """Raise for `EarlyStopping`'s removed `backup_dir` (a path) and unknown arguments.

    `backup_dir=None` is accepted: the configs of earlier versions hold it.
    """
    backup_dir = kwargs.pop("backup_dir", None)
    if backup_dir is not None:
        raise ValueError(
            "`EarlyStopping(backup_dir=...)` was removed. Pass "
            "`keras_normkit.callbacks.BackupAndRestore(backup_dir)` to `fit` instead: it saves "
            "and restores the state of `EarlyStopping` and of every keras_normkit callback. "
            f"Received: backup_dir={backup_dir!r}"
        )
    if kwargs:
        raise TypeError(f"Unrecognized keyword arguments: {sorted(kwargs)}")


@keras.saving.register_keras_serializable(package="keras_normkit")
class EarlyStopping(StatefulCallback):
    """Stop training by Prechelt's GL, PQ or UP criterion, or by Keras's patience rule.

    With `E_va(t)` the monitored validation error after epoch `t` and
    `E_opt(t) = min_{t' <= t} E_va(t')`, the generalization loss is
    `GL(t) = 100 * (E_va(t) / E_opt(t) - 1)` (percent). Training is split into strips of
    `k = strip_length` epochs; over the strip ending at `t` the training progress is
    `P_k(t) = 1000 * (sum_strip E_tr / (k * min_strip E_tr) - 1)` (per mille), with `E_tr` the
    training counterpart of the monitor (`"loss"` for `"val_loss"`). The criteria:

    - `"generalization_loss"` (GL_alpha): stop after the first epoch with `GL(t) > alpha`.
    - `"progress_quotient"` (PQ_alpha): at the end of each strip, stop when
      `GL(t) / P_k(t) > alpha`.
    - `"up"` (UP_s, `s = alpha`): at the end of each strip, stop when the error at the end
      of the strip is higher than at the end of the previous strip, `s` strips in a row.
    - `"patience"`: Keras's rule, stop after `patience` epochs without an improvement larger
      than `min_delta` (if `baseline` is set, only improvements beating it reset the count).

    Epochs before `start_from_epoch` are ignored entirely (strips count from it). An epoch
    improves on the best when it beats it by more than `min_delta`; `E_opt` is that best value
    (for GL and PQ, `baseline` acts as a value already reached: `E_opt = min(best, baseline)`),
    and UP counts a rise only when it exceeds `min_delta`. The criteria other than patience
    assume a positive error that is minimized. With `restore_best_weights=True` (opt-in, as in
    Keras), the weights of the best epoch are restored whenever training ends, stopped or
    not. As in Keras, `best_epoch` and `stopped_epoch` are 0-based and `stopped_epoch` is 0
    when training was not stopped; `stop_reason` (a string, `None` when not stopped) tells the
    two apart; `trace` lists the criterion's values per epoch. If `fit` is interrupted and
    resumed, the state of the epoch before the resumed one (best value and weights,
    counters, strip) is used, so the run stops where an uninterrupted one would:
    `keras_normkit.callbacks.BackupAndRestore` saves it with the model (`get_state` /
    `set_state`), so a new process resumes with a new instance; with Keras's own
    `BackupAndRestore`, only the same instance resumes (from memory). The `backup_dir`
    argument of earlier versions is removed: passing a path raises a `ValueError` that
    names `BackupAndRestore`.

    Args:
        monitor: Quantity to be monitored, e.g. `"val_loss"`.
        criterion: `"patience"`, `"generalization_loss"`, `"progress_quotient"` or `"up"`.
        alpha: alpha (percent for GL, a quotient for PQ) or `s` (an integer >= 1, for UP);
            required by those criteria, not accepted by `"patience"`.
        strip_length: Integer >= 1, `k` (used by PQ and UP).
        patience: Integer >= 0 (the `"patience"` criterion only).
        min_delta: Float >= 0, the smallest change that counts as an improvement or a rise.
        mode: `"auto"`, `"min"` or `"max"` (`"max"` only with `"patience"`).
        baseline: Optional float (not used by `"up"`).
        restore_best_weights: Restore the best epoch's weights when training ends (default
            `False`, as in Keras: the model keeps the weights of the last epoch).
        start_from_epoch: Integer >= 0, epochs to ignore at the start.
        verbose: 0 or 1 (messages when stopping and restoring).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.callbacks import EarlyStopping
    >>> stop = EarlyStopping(monitor="loss", criterion="generalization_loss", alpha=5.0,
    ...                      restore_best_weights=True)
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(keras.optimizers.SGD(3.0), loss="mse")  # too large: diverges
    >>> x = np.random.default_rng(0).normal(size=(32, 2))
    >>> history = model.fit(x, x @ [[1.0], [2.0]], epochs=100, callbacks=[stop], verbose=0)
    >>> stop.stopped_epoch, stop.best_epoch, stop.stop_reason[:2]
    (1, 0, 'GL')

    Reference: L. Prechelt, "Early Stopping - But When?", in Neural Networks: Tricks of the
    Trade, LNCS 1524, Springer, 1998.
    """

    def __init__(
        self,
        monitor="val_loss",
        criterion="patience",
        alpha=None,
        strip_length=5,
        patience=0,
        min_delta=0,
        mode="auto",
        baseline=None,
        restore_best_weights=False,
        start_from_epoch=0,
        verbose=0,
        **kwargs,
    ):
        super().__init__()
        _check_removed_arguments(kwargs)
        if not isinstance(monitor, str):
            raise TypeError(f"`monitor` must be a string. Received: monitor={monitor!r}")
        check_choice("criterion", criterion, CRITERIA)
        check_choice("mode", mode, ("auto", "min", "max"))
        if criterion == "patience":
            if alpha is not None:
                raise ValueError(
                    f"`alpha` is not used by criterion='patience'. Received: alpha={alpha!r}"
                )
        else:
            if alpha is None:
                raise ValueError(f"criterion={criterion!r} needs `alpha`. Received: alpha=None")
            if criterion == "up":
                alpha = check_int("alpha", alpha, 1)
            else:
                alpha = check_number("alpha", alpha, 0.0)
            if patience != 0:
                raise ValueError(
                    f"`patience` is only used by criterion='patience'. Received: "
                    f"patience={patience!r} with criterion={criterion!r}"
                )
            if mode == "max":
                raise ValueError(
                    f"criterion={criterion!r} needs an error to minimize. Received: mode='max'"
                )
        if criterion == "progress_quotient" and not monitor.startswith("val_"):
            raise ValueError(
                "criterion='progress_quotient' compares a validation quantity with its training "
                f"counterpart, so `monitor` must start with 'val_'. Received: monitor={monitor!r}"
            )
        if criterion == "up" and baseline is not None:
            raise ValueError(f"`baseline` is not used by criterion='up'. Received: {baseline!r}")
        self.monitor = monitor
        self.criterion = criterion
        self.alpha = alpha
        self.strip_length = check_int("strip_length", strip_length, 1)
        self.patience = check_int("patience", patience, 0)
        self.min_delta = check_number("min_delta", min_delta, 0.0)
        self.mode = mode
        self.baseline = None if baseline is None else check_number("baseline", baseline)
        self.restore_best_weights = check_bool("restore_best_weights", restore_best_weights)
        self.start_from_epoch = check_int("start_from_epoch", start_from_epoch, 0)
        self.verbose = verbose
        self.training_monitor = monitor.removeprefix("val_") or "loss"
        self._sign = None
        self._snapshots = {}
        self._completed = True
        self._reset()

    # ----------------------------------------------------------------- state

    _STATE = (
        "_best",
        "best_epoch",
        "best_weights",
        "wait",
        "stopped_epoch",
        "stop_reason",
        "epochs_seen",
        "strip",
        "previous_strip_value",
        "rises",
        "trace",
    )

    def _reset(self):
        self._best = None  # times the sign of the direction: smaller is better
        self.best_epoch = 0  # as Keras: 0 until an epoch is monitored
        self.best_weights = None
        self.wait = 0
        self.stopped_epoch = 0  # as Keras: 0 unless stopped (then `stop_reason` is set)
        self.stop_reason = None
        self.epochs_seen = 0
        self.strip = []
        self.previous_strip_value = None
        self.rises = 0
        self.trace = []

    def _snapshot(self, epoch):
        """Keep the state after `epoch` in memory (and the one before it), for a resume."""
        state = {name: getattr(self, name) for name in self._STATE}
        state["strip"] = list(self.strip)
        state["trace"] = list(self.trace)
        self._snapshots = {e: s for e, s in self._snapshots.items() if e >= epoch - 1}
        self._snapshots[epoch] = state

    def get_state(self):
        """The counters, best value and weights, strip and trace after the last epoch."""
        state = {name: getattr(self, name) for name in self._STATE}
        state["best_weights"] = weights_state(self.best_weights)
        state["strip"] = list(self.strip)
        state["trace"] = [dict(row) for row in self.trace]
        state["sign"] = self._sign
        return state

    def set_state(self, state):
        state = dict(state)
        self._sign = state.pop("sign")
        self._restore_snapshot(state)
        self.trace = [dict(row) for row in self.trace]
        self._snapshots = {}
        self._starting = False  # the resumed state replaces the in-memory one
        self._completed = False

    def _restore_snapshot(self, state):
        for name, value in state.items():
            setattr(self, name, list(value) if isinstance(value, list) else value)
        # States saved by versions that marked "not stopped" / "no best epoch yet" with None.
        self.stopped_epoch = self.stopped_epoch or 0
        self.best_epoch = self.best_epoch or 0

    def on_train_begin(self, logs=None):
        self._starting = True

    def on_epoch_begin(self, epoch, logs=None):
        self.restore_from_backup()  # when BackupAndRestore resumes this fit: the saved state
        if not getattr(self, "_starting", False):
            return
        self._starting = False
        # Resumed by Keras's `BackupAndRestore` after an interruption of this instance's fit:
        # the state after the epoch before, kept in memory.
        previous = None if self._completed else self._snapshots.get(epoch - 1)
        if epoch > 0 and previous is not None:
            self._restore_snapshot(previous)
        else:
            self._reset()
            self._snapshots = {}
        self._completed = False

    @property
    def best(self):
        """The best monitored value so far (in the monitor's units), or `None`."""
        return None if self._best is None else self._sign * self._best

    # ----------------------------------------------------------------- criteria

    def _improves(self, value, reference):
        return reference is None or value < reference - self.min_delta

    def _stop(self, epoch, reason):
        self.stopped_epoch = epoch
        self.stop_reason = reason
        self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self._monitor(epoch, logs)
        self._snapshot(epoch)
        self.notify_backup(epoch)  # the state after this epoch is final

    def _monitor(self, epoch, logs):
        if epoch < self.start_from_epoch:
            return
        current = get_monitor_value(self, logs, self.monitor)
        if current is None:
            return
        if self._sign is None:
            self._sign = resolve_sign(self, self.monitor, self.mode, self.model)
            if self._sign < 0 and self.criterion != "patience":
                raise ValueError(
                    f"criterion={self.criterion!r} needs an error to minimize, but "
                    f"monitor={self.monitor!r} is maximized. Use criterion='patience'."
                )
        value = self._sign * current
        self.epochs_seen += 1
        self.wait += 1
        row = {"epoch": epoch, self.monitor: current}
        self._improved = self._improves(value, self._best)
        if self._improved:
            self._best = value
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            baseline = None if self.baseline is None else self._sign * self.baseline
            if self.criterion == "patience" and self._improves(value, baseline):
                self.wait = 0
        getattr(self, "_check_" + self.criterion)(epoch, value, logs, row)
        self.trace.append(row)

    def _check_patience(self, epoch, value, logs, row):
        row["wait"] = self.wait
        if not self._improved and self.wait >= self.patience and epoch > 0:
            self._stop(epoch, f"no improvement for {self.wait} epochs (patience {self.patience})")

    def _optimum(self):
        return self._best if self.baseline is None else min(self._best, self.baseline)

    def _check_generalization_loss(self, epoch, value, logs, row):
        gl = row["GL"] = generalization_loss(value, self._optimum())
        if gl > self.alpha:
            self._stop(epoch, f"GL = {gl:.4g} > alpha = {self.alpha:g}")

    def _end_of_strip(self):
        return self.epochs_seen % self.strip_length == 0

    def _check_progress_quotient(self, epoch, value, logs, row):
        gl = row["GL"] = generalization_loss(value, self._optimum())
        training = get_monitor_value(self, logs, self.training_monitor)
        if training is None:
            return
        self.strip.append(training)
        if not self._end_of_strip():
            return
        progress = row["P"] = training_progress(self.strip)
        self.strip = []
        if gl <= 0.0:
            quotient = 0.0
        else:
            quotient = math.inf if progress == 0.0 else gl / progress
        row["PQ"] = quotient
        if quotient > self.alpha:
            self._stop(epoch, f"PQ = GL / P = {gl:.4g} / {progress:.4g} > alpha = {self.alpha:g}")

    def _check_up(self, epoch, value, logs, row):
        if not self._end_of_strip():
            return
        previous, self.previous_strip_value = self.previous_strip_value, value
        if previous is not None and value > previous + self.min_delta:
            self.rises += 1
        else:
            self.rises = 0
        row["rises"] = self.rises
        if self.rises >= self.alpha:
            self._stop(epoch, f"UP: the error rose over {self.rises} consecutive strips")

    def on_train_end(self, logs=None):
        self._completed = True
        if self.stop_reason is not None and self.verbose:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping ({self.stop_reason})")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose:
                print(f"Restoring model weights from the end of epoch {self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)

    def get_config(self):
        return {
            "monitor": self.monitor,
            "criterion": self.criterion,
            "alpha": self.alpha,
            "strip_length": self.strip_length,
            "patience": self.patience,
            "min_delta": self.min_delta,
            "mode": self.mode,
            "baseline": self.baseline,
            "restore_best_weights": self.restore_best_weights,
            "start_from_epoch": self.start_from_epoch,
            "verbose": self.verbose,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
