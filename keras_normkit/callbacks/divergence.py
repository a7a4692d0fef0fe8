"""`DivergenceGuard`: stop, or roll back and halve the learning rate, when the loss diverges."""

import math

import keras
import numpy as np

from keras_normkit._validation import check_bool, check_choice, check_number
from keras_normkit.backend import keras_compat
from keras_normkit.callbacks._monitor import get_monitor_value
from keras_normkit.callbacks._probe import probe_from_config, probe_to_config
from keras_normkit.callbacks.learning_rate import (
    _inner_optimizer,
    scale_learning_rate,
    track_schedule_multiplier,
    untrack_schedule_multiplier,
)
from keras_normkit.callbacks.stateful import StatefulCallback, weights_state


@keras.saving.register_keras_serializable(package="keras_normkit")
class DivergenceGuard(StatefulCallback):
    """Detect a diverging loss; stop, or roll back to the last good epoch and halve the rate.

    The monitored value diverges when it is NaN or infinite, or when
    `value > factor * best`, `best` being the lowest value seen at the end of an epoch (the
    ratio test applies once `best > 0`). Training losses are checked after every batch and
    at the end of every epoch; validation quantities at the end of every epoch.

    - `on_divergence="stop"`: stop training at once (like `keras.callbacks.TerminateOnNaN`,
      which only handles NaN/Inf).
    - `on_divergence="rollback"`: at the end of the epoch in which the divergence happened,
      restore the model weights and optimizer slots of the last good epoch (the optimizer's
      step keeps counting), multiply the learning rate by 0.5 (for a schedule, through the
      `keras_normkit.schedules.Scaled` multiplier) and continue. Acting at the end of the
      epoch keeps it backend-agnostic. A training loss is measured on the weights *during*
      the epoch, so the state restored is the one at the start of the last good epoch; a
      validation quantity is measured after the epoch, so it is the state at its end.

    The weights and the gradient norm are watched too, at the end of every epoch: NaN or
    infinite weights (`check_weights`), or a gradient norm `||dL/dW||_2` (over all trainable
    weights, on `probe_data` in inference mode with the compiled loss) above `max_grad_norm`
    or above `grad_norm_factor` times the median of the previous epochs' norms, count as a
    divergence of that epoch and trigger the same stop or roll-back.

    Each event is recorded in `.events` as a dict (epoch, batch, value, action, and
    `"trigger"`: `"loss"`, `"weights"` or `"grad_norm"`). `.grad_norms` lists the measured
    norms. Its state is saved by `keras_normkit.callbacks.BackupAndRestore`.

    Args:
        monitor: Quantity to watch, e.g. `"loss"` or `"val_loss"`.
        factor: Float > 1, the allowed ratio to the best value.
        on_divergence: `"stop"` or `"rollback"`.
        check_weights: Whether NaN/Inf weights count as a divergence.
        probe_data: Optional `(x, y)` or `(x, y, sample_weight)` batch for the gradient norm
            (needed by `max_grad_norm` and `grad_norm_factor`).
        max_grad_norm: Optional float > 0, an absolute bound on the gradient norm.
        grad_norm_factor: Optional float > 1, the allowed ratio to the running median.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.callbacks import DivergenceGuard
    >>> guard = DivergenceGuard(on_divergence="rollback")
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(keras.optimizers.SGD(3.0), loss="mse")  # too large: diverges
    >>> x = np.random.default_rng(0).normal(size=(64, 2))
    >>> history = model.fit(x, x @ [[1.0], [2.0]], batch_size=64, epochs=40,
    ...                     callbacks=[guard], verbose=0)
    >>> bool(np.isfinite(history.history["loss"][-1])), len(guard.events) > 0
    (True, True)

    Reference: `keras.callbacks.TerminateOnNaN`; the "halve the step on divergence" rule of
    classical line searches (e.g. Bottou, "Stochastic Gradient Descent Tricks", 2012).
    """

    def __init__(
        self,
        monitor="loss",
        factor=10.0,
        on_divergence="stop",
        check_weights=True,
        probe_data=None,
        max_grad_norm=None,
        grad_norm_factor=None,
    ):
        super().__init__()
        self.check_weights = check_bool("check_weights", check_weights)
        self.max_grad_norm = (
            None
            if max_grad_norm is None
            else check_number("max_grad_norm", max_grad_norm, 0.0, strict_minimum=True)
        )
        self.grad_norm_factor = (
            None
            if grad_norm_factor is None
            else check_number("grad_norm_factor", grad_norm_factor, 1.0, strict_minimum=True)
        )
        if probe_data is not None and (
            not isinstance(probe_data, (tuple, list)) or len(probe_data) not in (2, 3)
        ):
            raise TypeError(
                "`probe_data` must be None, (x, y) or (x, y, sample_weight). "
                f"Received: probe_data of type {type(probe_data).__name__}"
            )
        if probe_data is None and (max_grad_norm is not None or grad_norm_factor is not None):
            raise ValueError(
                "`max_grad_norm` and `grad_norm_factor` need `probe_data`. Received: "
                f"probe_data=None, max_grad_norm={max_grad_norm!r}, "
                f"grad_norm_factor={grad_norm_factor!r}"
            )
        self.probe_data = None if probe_data is None else tuple(probe_data)
        self.grad_norms = []
        self._gradients = None
        if not isinstance(monitor, str):
            raise TypeError(f"`monitor` must be a string. Received: monitor={monitor!r}")
        factor = check_number("factor", factor, 1.0, strict_minimum=True)
        check_choice("on_divergence", on_divergence, ("stop", "rollback"))
        self.monitor = monitor
        self.factor = factor
        self.on_divergence = on_divergence
        self.best = None
        self.events = []
        self._good = None
        self._diverged = None

    def set_model(self, model):
        super().set_model(model)
        if self.on_divergence == "rollback" and getattr(model, "optimizer", None) is not None:
            track_schedule_multiplier(model)

    def _is_divergent(self, value):
        if not math.isfinite(value):
            return True
        return self.best is not None and self.best > 0 and value > self.factor * self.best

    def _lr_variables(self, optimizer):
        excluded = [keras_compat.optimizer_iterations_variable(optimizer)]
        learning_rate = keras_compat.optimizer_learning_rate(optimizer)
        excluded.append(getattr(learning_rate, "multiplier", learning_rate))
        return excluded

    def _state(self):
        optimizer = _inner_optimizer(self.model.optimizer)
        excluded = self._lr_variables(optimizer)
        slots = [
            None if any(v is e for e in excluded) else keras.ops.convert_to_numpy(v)
            for v in optimizer.variables
        ]
        return self.model.get_weights(), slots

    def _restore_good_state(self):
        weights, slots = self._good
        self.model.set_weights(weights)
        optimizer = _inner_optimizer(self.model.optimizer)
        for variable, value in zip(optimizer.variables, slots, strict=False):
            if value is not None:
                variable.assign(value)

    def on_train_begin(self, logs=None):
        self._diverged = None
        if self.on_divergence == "rollback":
            self._good = self._candidate = self._state()

    def _record(self, epoch, batch, value, trigger="loss"):
        self.events.append(
            {
                "epoch": epoch,
                "batch": batch,
                "value": value,
                "action": self.on_divergence,
                "trigger": trigger,
            }
        )

    def _grad_norm(self):
        from keras_normkit.backend.gradients import gradient_function

        if self._gradients is None:
            layers = [x for x in self.model.layers if x.trainable_weights]
            self._gradients = (layers, gradient_function(self.model, layers))
        layers, function = self._gradients
        x, y, *rest = self.probe_data
        computed = function(x, y, rest[0] if rest else None)
        total = sum(
            float(np.sum(np.square(np.asarray(g, dtype="float64"))))
            for layer in layers
            for g in computed[layer.name]["weight_grads"]
        )
        return math.sqrt(total)

    def _watch_weights_and_gradients(self, epoch):
        """The trigger and value of a weights/gradient divergence at this epoch's end."""
        if self.check_weights:
            bad = sum(
                int(np.sum(~np.isfinite(w)))
                for w in self.model.get_weights()
                if w.dtype.kind == "f"
            )
            if bad:
                return "weights", float(bad)
        if self.probe_data is None:
            return None
        norm = self._grad_norm()
        previous = list(self.grad_norms)
        self.grad_norms.append(norm)
        if not math.isfinite(norm):
            return "grad_norm", norm
        if self.max_grad_norm is not None and norm > self.max_grad_norm:
            return "grad_norm", norm
        if self.grad_norm_factor is not None and previous:
            if norm > self.grad_norm_factor * float(np.median(previous)):
                return "grad_norm", norm
        return None

    def on_epoch_begin(self, epoch, logs=None):
        self.restore_from_backup()  # when BackupAndRestore resumes this fit: the saved state
        self._epoch = epoch
        self._diverged = None
        if self.on_divergence == "rollback" and not self.monitor.startswith("val_"):
            self._candidate = self._state()  # measured by this epoch's training loss

    def on_train_batch_end(self, batch, logs=None):
        if self._diverged is not None or self.monitor.startswith("val_"):
            return
        value = (logs or {}).get(self.monitor)
        if value is None:
            return
        value = float(value)
        if self._is_divergent(value):
            self._diverged = value
            self._record(getattr(self, "_epoch", None), batch, value)
            if self.on_divergence == "stop":
                self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self._watch(epoch, logs)
        self.notify_backup(epoch)  # the state after this epoch is final

    def _watch(self, epoch, logs):
        value = get_monitor_value(self, logs, self.monitor)
        if self._diverged is None and value is not None and self._is_divergent(value):
            self._diverged = value
            self._record(epoch, None, value)
            if self.on_divergence == "stop":
                self.model.stop_training = True
        if self._diverged is None:
            found = self._watch_weights_and_gradients(epoch)
            if found is not None:
                trigger, self._diverged = found
                self._record(epoch, None, self._diverged, trigger)
                if self.on_divergence == "stop":
                    self.model.stop_training = True
        if self._diverged is not None:
            if self.on_divergence == "rollback":
                self._restore_good_state()
                rate = scale_learning_rate(self.model, 0.5)
                self.events[-1]["learning_rate"] = rate
                if logs is not None and "learning_rate" in logs:
                    logs["learning_rate"] = rate
            return
        if value is not None:
            self.best = value if self.best is None else min(self.best, value)
        if self.on_divergence == "rollback":
            val = self.monitor.startswith("val_")
            self._good = self._state() if val else self._candidate

    def on_train_end(self, logs=None):
        untrack_schedule_multiplier(self.model)

    def get_state(self):
        """The best value, the events and the last good weights and optimizer slots."""

        def saved(pair):
            return None if pair is None else [weights_state(pair[0]), weights_state(pair[1])]

        return {
            "best": self.best,
            "events": [dict(e) for e in self.events],
            "good": saved(self._good),
            "candidate": saved(getattr(self, "_candidate", None)),
            "grad_norms": list(self.grad_norms),
        }

    def set_state(self, state):
        def loaded(pair):
            return None if pair is None else (list(pair[0]), list(pair[1]))

        self.best = state["best"]
        self.events = [dict(e) for e in state["events"]]
        self._good = loaded(state["good"])
        self._candidate = loaded(state["candidate"])
        self.grad_norms = list(state["grad_norms"])

    def get_config(self):
        probe = self.probe_data
        if probe is not None:
            probe = [probe_to_config(part) for part in probe]
        return {
            "monitor": self.monitor,
            "factor": self.factor,
            "on_divergence": self.on_divergence,
            "check_weights": self.check_weights,
            "probe_data": probe,
            "max_grad_norm": self.max_grad_norm,
            "grad_norm_factor": self.grad_norm_factor,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if config.get("probe_data") is not None:
            config["probe_data"] = tuple(probe_from_config(part) for part in config["probe_data"])
        return cls(**config)
