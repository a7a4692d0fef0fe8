"""`MomentumSchedule`: write a scheduled momentum into the optimizer before every step."""

import keras
import numpy as np

from keras_normkit.backend import keras_compat
from keras_normkit.backend.scheduled_hyperparameter import ScheduledHyperparameter
from keras_normkit.callbacks.learning_rate import _inner_optimizer


def _innermost(optimizer):
    """The optimizer that holds the hyperparameters, through any wrappers
    (`LossScaleOptimizer`, `AdaptiveGradientClipping`)."""
    while True:
        inner = _inner_optimizer(optimizer)
        if inner is optimizer:
            return optimizer
        optimizer = inner


def _attribute(optimizer):
    """`"beta_1"` for the Adam family, `"momentum"` for SGD and RMSprop, else an error."""
    for name in ("beta_1", "momentum"):
        if isinstance(getattr(optimizer, name, None), (int, float)):
            return name
    raise ValueError(
        "MomentumSchedule needs an optimizer with a `momentum` (SGD, RMSprop) or a `beta_1` "
        f"(Adam, AdamW, Nadam, Adamax, Lion, Lamb). Received: {type(optimizer).__name__}"
    )


@keras.saving.register_keras_serializable(package="keras_normkit")
class MomentumSchedule(keras.callbacks.Callback):
    """Set the optimizer's momentum from a schedule before every training step.

    Before each step `t` (the optimizer's `iterations`), the momentum
    `schedule.momentum(t)` is written into SGD's (or RMSprop's) `momentum`, or into the
    `beta_1` of an Adam-family optimizer, so that the step computes with it: e.g. the
    cyclical momentum of `keras_normkit.schedules.OneCycle`, which falls while the rate
    rises (PyTorch's `OneCycleLR(cycle_momentum=True)`). Give the same `OneCycle` as the
    optimizer's learning rate to get the whole one-cycle policy.

    The value reaches the compiled train step on every backend. Keras's optimizers read
    `momentum` as a Python float when the step is traced (a constant of the compiled step
    afterwards): on TensorFlow and JAX this callback replaces it, for the duration of
    `fit`, by a scalar variable tracked among the optimizer's variables (it compares and
    serializes as the float it replaced, so the optimizer still decides to keep its
    momentum slots and its config stays a number); on PyTorch, whose steps run eagerly, it
    sets the float. When `fit` ends, the optimizer holds the last momentum written
    (`last_value`), as a float. The step counter is the optimizer's, so a `fit` resumed by `BackupAndRestore`
    continues the schedule where it was. On JAX each write first syncs the running `fit`'s
    state to the variables (a host-side copy of references per step).

    With `model.compile(steps_per_execution=k)` Keras calls the callbacks every `k`
    steps: the momentum is then written every `k` steps (the value of the first of them).

    SGD and RMSprop must be created with a non-zero `momentum` (Keras creates their
    momentum slots only then). Wrapped optimizers (`LossScaleOptimizer`,
    `keras_normkit.optimizers.AdaptiveGradientClipping`) are looked through.

    Args:
        schedule: An object with a `momentum(step)` method (`keras_normkit.schedules.OneCycle`)
            or a function of the step returning the momentum.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.callbacks import MomentumSchedule
    >>> from keras_normkit.schedules import OneCycle
    >>> schedule = OneCycle(0.1, total_steps=8, warmup_fraction=0.5)
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(keras.optimizers.SGD(schedule, momentum=0.9), loss="mse")
    >>> _ = model.fit(np.ones((16, 2)), np.ones((16, 1)), batch_size=4, epochs=2,
    ...               callbacks=[MomentumSchedule(schedule)], verbose=0)
    >>> round(model.optimizer.momentum, 4)  # the last one written, at step 7 of 8
    0.9354

    Reference: L. N. Smith, "A disciplined approach to neural network hyper-parameters:
    Part 1", arXiv:1803.09820, 2018 (cyclical momentum); PyTorch's `OneCycleLR`.
    """

    def __init__(self, schedule):
        super().__init__()
        if not (callable(getattr(schedule, "momentum", None)) or callable(schedule)):
            raise TypeError(
                "`schedule` must have a `momentum(step)` method (e.g. "
                "keras_normkit.schedules.OneCycle) or be a function of the step. Received: "
                f"schedule={schedule!r} of type {type(schedule).__name__}"
            )
        self.schedule = schedule
        self._hyperparameter = None
        self.last_value = None

    def momentum(self, step):
        """The momentum of the schedule at `step`, a Python float."""
        function = getattr(self.schedule, "momentum", None) or self.schedule
        return float(np.asarray(function(step)))

    def set_model(self, model):
        super().set_model(model)
        if self._hyperparameter is not None:
            self._hyperparameter.remove()
            self._hyperparameter = None
        if getattr(model, "optimizer", None) is None:
            return
        optimizer = _innermost(model.optimizer)
        attribute = _attribute(optimizer)
        if attribute == "momentum" and float(optimizer.momentum) == 0.0:
            raise ValueError(
                f"MomentumSchedule needs {type(optimizer).__name__}(momentum > 0): Keras "
                "creates the momentum slots only for a non-zero momentum. Received: "
                "momentum=0.0"
            )
        # Installed before Keras traces the train step (`set_model` runs before
        # `make_train_function` in `fit`); a step traced by an earlier `fit` is dropped.
        self._hyperparameter = ScheduledHyperparameter(optimizer, attribute)
        if getattr(model, "train_function", None) is not None:
            model.train_function = None

    def on_train_batch_begin(self, batch, logs=None):
        optimizer = _innermost(self.model.optimizer)
        hyperparameter = self._hyperparameter
        if hyperparameter is None:
            return
        keras_compat.sync_jax_training_state(self.model)  # the step counter, on JAX
        step = int(keras.ops.convert_to_numpy(optimizer.iterations))
        self.last_value = self.momentum(step)
        hyperparameter.write(self.model, self.last_value)

    def on_train_end(self, logs=None):
        if self._hyperparameter is not None:
            self._hyperparameter.remove()
            self._hyperparameter = None

    def get_config(self):
        return {"schedule": keras.saving.serialize_keras_object(self.schedule)}

    @classmethod
    def from_config(cls, config):
        return cls(keras.saving.deserialize_keras_object(config["schedule"]))
