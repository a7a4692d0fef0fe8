"""Writing an optimizer hyperparameter (SGD's `momentum`, Adam's `beta_1`) between steps.

Keras's optimizers hold these as Python floats and read them when the train step is
*traced*: `ops.cast(self.momentum, dtype)` becomes a constant of the compiled step (TensorFlow's
`tf.function`, XLA, JAX's `jit`), so a float assigned later never reaches it. The way to
every backend:

- TensorFlow and JAX: the attribute becomes a `ScheduledValue`, a scalar `keras.Variable`
  that the step reads at run time, tracked among the optimizer's variables (so JAX's
  functional train step carries it in its state). Its Python comparisons (`momentum != 0`,
  `momentum > 0`, which decide when tracing whether the optimizer keeps momentum slots)
  answer for its value at installation, and it is a `float` subclass holding that value, so
  the optimizer's config (a `.keras` file saved during `fit`) still holds a plain number.
  On JAX the state of the running `fit` is synced to the variables before each write
  (`model.jax_state_sync()`), so that the next step reads the new value.
- PyTorch: Keras's torch optimizers pass the attribute to `torch._foreach_*` as a Python
  number, and the step (eager) reads it at every call: the attribute is set to the new
  float.

`ScheduledHyperparameter(optimizer, attribute)` installs it; `write(model, value)` sets the
value for the next step; `remove()` puts a plain float back (the last value written).
"""

import numbers

import keras

from keras_normkit.backend import keras_compat


class ScheduledValue(keras.Variable, float):
    """A scalar float32 variable that compares, and serializes, as a fixed Python float.

    Arithmetic and tensor conversion use the variable's current value; `==`, `!=`, `<`,
    `<=`, `>`, `>=` against a Python number use `static_value` (the value at creation), and
    so does the `float` part (what `json` and `isinstance(x, float)` see).
    """

    def __new__(cls, value, name):
        return float.__new__(cls, value)

    def __init__(self, value, name):
        super().__init__(
            initializer=float(value), shape=(), dtype="float32", trainable=False, name=name
        )
        self.static_value = float(value)

    def _compare(operator):
        def method(self, other):
            if isinstance(other, numbers.Real) and not isinstance(other, keras.Variable):
                return getattr(self.static_value, operator)(other)
            return getattr(keras.Variable, operator)(self, other)

        method.__name__ = operator
        return method

    __eq__ = _compare("__eq__")
    __ne__ = _compare("__ne__")
    __lt__ = _compare("__lt__")
    __le__ = _compare("__le__")
    __gt__ = _compare("__gt__")
    __ge__ = _compare("__ge__")
    __hash__ = object.__hash__
    del _compare


class ScheduledHyperparameter:
    """A float hyperparameter of `optimizer` (an attribute such as `"momentum"`) that can be
    set before every step of a compiled `fit`, on every backend."""

    def __init__(self, optimizer, attribute):
        self.optimizer = optimizer
        self.attribute = attribute
        self.value = float(getattr(optimizer, attribute))
        self.variable = None
        if keras.backend.backend() != "torch":
            self.variable = ScheduledValue(self.value, name=attribute)
            setattr(optimizer, attribute, self.variable)
            keras_compat.track_optimizer_variable(optimizer, self.variable)

    def write(self, model, value):
        """Set the value the next train step of `model` uses."""
        self.value = float(value)
        if self.variable is None:
            setattr(self.optimizer, self.attribute, self.value)
            return
        keras_compat.sync_jax_training_state(model)
        self.variable.assign(self.value)

    def remove(self):
        """Put a plain float (the last value written) back; stop tracking the variable."""
        if self.variable is not None:
            keras_compat.untrack_optimizer_variable(self.optimizer, self.variable)
            self.variable = None
        setattr(self.optimizer, self.attribute, self.value)
