"""`CalibrationWrapper`, the Keras model every calibration wrapper is, and `NotCalibratedError`.

A calibration wrapper is a `keras.Model` subclass of `CalibrationWrapper`:
`wrapper(x) = softmax(f(z(x)))` (or a one-vs-rest map, see `_one_vs_rest.py`), where z are
the wrapped classifier's logits and f the fitted map. The map's parameters are
non-trainable weights, so the wrapper saves to `.keras` (no `custom_objects`), exports with
`model.export()`, and serves like any Keras model; its call path uses `keras.ops` only (any
backend). `calibrate(x, y)` runs the classifier once over held-out data (`collect.py`),
then fits the map in NumPy (each method's own module: `scaling/temperature.py`,
`scaling/affine.py`, `binning/isotonic.py`, ...). Until then the wrapper refuses to predict
(or export) and raises `NotCalibratedError`, rather than silently applying the identity map
(on JAX, a larger model that contains an uncalibrated wrapper loses its weights when its
`predict` raises: Keras's JAX loop detaches them until the loop ends; calibrate before
serving); loading a saved calibrated wrapper (`.keras` or `load_weights`) restores it
calibrated, and `set_weights` marks it calibrated.

A subclass creates its weights in `_create_calibration_weights(num_classes)` (and says
whether they exist in `_calibration_weights_created`), maps logits to calibrated logits in
`_apply` (`keras.ops`) and fits the map in `_fit(logits, labels)` (NumPy; `logits` may be a
memmap).

A classifier whose last layer applies softmax or sigmoid is handled by recovering its
logits as log-probabilities: softmax(log p / T) = softmax(z / T) exactly, since softmax is
shift-invariant (binary: log(p / (1 - p)) = z). Probabilities that underflowed to 0 in
float32 are floored at the smallest normal float32 before the log (a warning says so);
a classifier that outputs logits is used as is and loses nothing.

Reference: Guo, Pleiss, Sun, Weinberger, "On Calibration of Modern Neural Networks",
ICML 2017, arXiv:1706.04599.
"""

import warnings

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_string_choice
from keras_normkit.backend import keras_compat
from keras_normkit.calibration import collect

__all__ = ["CalibrationWrapper", "NotCalibratedError"]

_TINY = float(np.finfo(np.float32).tiny)
# Key of the calibration flag next to a wrapper's variables in a `.keras`/`.weights.h5` file.
_CALIBRATED_KEY = "calibrated"


class NotCalibratedError(ValueError, AttributeError):
    """A calibration wrapper was used before `calibrate` fitted its map.

    Subclasses both `ValueError` and `AttributeError`, as scikit-learn's `NotFittedError`
    does, so `hasattr(wrapper, "temperature_")` is `False` before calibration and existing
    `except ValueError` handlers keep working.

    Example:

    >>> import keras
    >>> from keras_normkit.calibration import NotCalibratedError, TemperatureScaling
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    >>> wrapper = TemperatureScaling(model)
    >>> hasattr(wrapper, "temperature_")  # not calibrated yet
    False
    >>> issubclass(NotCalibratedError, ValueError)
    True
    """


_OUTPUTS = ("probabilities", "logits")
_MODEL_OUTPUTS = ("auto", "logits", "probabilities")


def output_layer(model):
    """The layer producing a functional/sequential model's output (None if unknown). Shared
    with `keras_normkit.uncertainty`."""
    try:
        outputs = model.outputs
    except (AttributeError, ValueError):
        outputs = None
    if outputs and len(outputs) == 1:
        layer = keras_compat.producing_layer(outputs[0])
        if layer is not None:
            return layer
    layers = getattr(model, "layers", None)
    return layers[-1] if layers else None


def detect_model_output(model):
    """'probabilities' if the last layer is a softmax/sigmoid, else 'logits'."""
    layer = output_layer(model)
    if isinstance(layer, keras.layers.Softmax):
        return "probabilities"
    activation = getattr(getattr(layer, "activation", None), "__name__", None)
    return "probabilities" if activation in ("softmax", "sigmoid") else "logits"


def static_num_classes(model, exact_rank=False):
    """The last dimension of the model's single output if it is known statically, else None
    (the checks of `check_output_shape`). Shared with `keras_normkit.uncertainty`."""
    try:
        outputs = model.outputs
    except (AttributeError, ValueError):
        return None
    if not outputs:
        return None
    if len(outputs) != 1:
        raise ValueError(
            "The wrapped model must have a single output of shape (batch, num_classes). "
            f"Received a model with {len(outputs)} outputs."
        )
    return check_output_shape(outputs[0].shape, exact_rank)


def check_output_shape(shape, exact_rank=False):
    """The number of classes of an output `shape` `(batch, ..., num_classes)` (exactly
    `(batch, num_classes)` with `exact_rank`); a `ValueError` for any other shape."""
    if len(shape) < 2 or (exact_rank and len(shape) != 2) or shape[-1] == 0:
        raise ValueError(
            "The wrapped model must output logits or probabilities of shape (batch, "
            f"num_classes) (num_classes = 1 for a binary classifier). Received an output of "
            f"shape {tuple(shape)}."
        )
    return shape[-1]


class CalibrationWrapper(keras.Model):
    """The base of every calibration wrapper: a trained classifier and a fitted map.

    Holds the wrapped classifier and what every wrapper shares: recovering logits from a
    softmax/sigmoid output, `calibrate(x, y)` (collect the held-out logits, fit the map),
    refusing to predict before it (`NotCalibratedError`), the output activation, the
    calibration flag saved with the weights, and the config. Not registered and not meant
    to be built directly: a subclass (`TemperatureScaling`, `IsotonicCalibration`, ...)
    adds the map's weights, its `keras.ops` form and its NumPy fit.

    Args:
        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default) or `"logits"`: the wrapper's output.
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.
    """

    def __init__(self, model, output="probabilities", model_output="auto", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(model, keras.Model):
            raise TypeError(
                f"`model` must be a trained keras.Model. Received: model={model!r} "
                f"of type {type(model).__name__}"
            )
        check_string_choice("output", output, _OUTPUTS)
        check_string_choice("model_output", model_output, _MODEL_OUTPUTS)
        self.classifier = model
        self.output_type = output
        self._is_calibrated = False
        if model_output == "auto":
            model_output = detect_model_output(model)
            if model_output == "probabilities":
                warnings.warn(
                    f"The last layer of {model.name!r} applies softmax/sigmoid: its logits are "
                    "recovered as log-probabilities (probabilities that underflowed to 0 are "
                    "floored at 1.2e-38). For exact logits, wrap a model whose last layer is "
                    "linear, or pass model_output='probabilities' to silence this warning.",
                    stacklevel=3,
                )
        self.model_output = model_output
        num_classes = static_num_classes(model)
        self._check_num_classes(num_classes)
        self.num_classes = num_classes
        if num_classes is not None:
            self._create_calibration_weights(num_classes)

    # -- subclass hooks ------------------------------------------------------------------

    def _create_calibration_weights(self, num_classes):
        raise NotImplementedError

    def _calibration_weights_created(self):
        raise NotImplementedError

    def _create_weights_for_calibration(self, num_classes):
        """Called by `calibrate` before `_fit` when the weights do not exist yet."""
        self._create_calibration_weights(num_classes)

    def _apply(self, logits):
        raise NotImplementedError

    def _fit(self, logits, labels):
        raise NotImplementedError

    # -- Keras ---------------------------------------------------------------------------

    def _check_num_classes(self, num_classes):
        if num_classes == 1 and self.model_output == "probabilities":
            layer = output_layer(self.classifier)
            activation = getattr(getattr(layer, "activation", None), "__name__", None)
            if activation == "softmax" or isinstance(layer, keras.layers.Softmax):
                raise ValueError(
                    "The wrapped model ends with a softmax over a single unit, whose output is "
                    "always 1: it carries no information to calibrate. Expected >= 2 softmax "
                    "units, or a single sigmoid/logit unit for a binary classifier."
                )

    def build(self, input_shape):
        if not self._calibration_weights_created():
            spec = self.classifier.compute_output_spec(keras.KerasTensor(input_shape))
            if isinstance(spec, (list, tuple, dict)):
                raise ValueError(
                    "The wrapped model must have a single output of shape (batch, "
                    f"num_classes). Received a structure of outputs: {spec}"
                )
            self.num_classes = check_output_shape(spec.shape)
            self._create_calibration_weights(self.num_classes)
        self.built = True

    def _logits(self, outputs):
        """The classifier's logits (in float32) from its outputs, with `keras.ops`."""
        if isinstance(outputs, (list, tuple, dict)):
            raise ValueError(
                "The wrapped model must have a single output of shape (batch, num_classes). "
                f"Received a {type(outputs).__name__} of outputs."
            )
        z = ops.cast(outputs, "float32")
        if self.model_output == "logits":
            return z
        if z.shape[-1] == 1:
            return ops.log(ops.maximum(z, _TINY)) - ops.log(ops.maximum(1.0 - z, _TINY))
        return ops.log(ops.maximum(z, _TINY))

    def _numpy_logits(self, outputs):
        """NumPy twin of `_logits` for the collected predictions (same float32 arithmetic)."""
        if isinstance(outputs, (list, tuple, dict)):
            raise ValueError(
                "The wrapped model must have a single output of shape (batch, num_classes). "
                f"Received a {type(outputs).__name__} of outputs."
            )
        z = np.asarray(outputs, dtype=np.float32)
        if z.ndim < 2:
            check_output_shape(z.shape)
        if self.model_output == "logits":
            return z
        tiny = np.float32(_TINY)
        if z.shape[-1] == 1:
            return np.log(np.maximum(z, tiny)) - np.log(np.maximum(np.float32(1) - z, tiny))
        return np.log(np.maximum(z, tiny))

    @property
    def is_calibrated(self):
        """Whether the map was fitted by `calibrate` (or loaded from a calibrated save)."""
        return self._is_calibrated

    def __getattr__(self, name):
        # A fitted-attribute property (`temperature_`) raises `NotCalibratedError`, an
        # AttributeError, so Python then calls `__getattr__`: on the PyTorch backend (layers
        # are `torch.nn.Module`s) that would replace it with a bare "has no attribute" error.
        # Calling the property again here lets its own error through on every backend.
        attribute = getattr(type(self), name, None)
        if isinstance(attribute, property):
            return attribute.__get__(self, type(self))
        parent = getattr(super(), "__getattr__", None)
        if parent is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return parent(name)

    def _check_calibrated(self, what="be called (or predict, evaluate, export)"):
        if not self._is_calibrated:
            raise NotCalibratedError(
                f"This {type(self).__name__} instance ({self.name!r}) is not calibrated yet, "
                f"so it cannot {what}: call `calibrate(x_val, y_val)` with held-out data "
                "first (before calibration its map is the identity, which would silently "
                "return the uncalibrated probabilities)."
            )

    def save_own_variables(self, store):
        super().save_own_variables(store)
        store[_CALIBRATED_KEY] = np.array(self._is_calibrated)

    def set_weights(self, weights):
        """Set the weights (the classifier's and the map's); the wrapper counts as calibrated.

        For a map fitted elsewhere, e.g. copied from another wrapper's `get_weights()`.
        """
        super().set_weights(weights)
        self._is_calibrated = True

    def load_own_variables(self, store):
        # Files written before the flag existed hold calibrated wrappers: no flag = calibrated.
        keys = list(store.keys())
        calibrated = True
        if _CALIBRATED_KEY in keys:
            calibrated = bool(np.asarray(store[_CALIBRATED_KEY]))
        super().load_own_variables({k: store[k] for k in keys if k != _CALIBRATED_KEY})
        self._is_calibrated = calibrated

    # Checked before Keras's loop starts, not only in `call` (at trace time): on JAX,
    # `predict`/`evaluate` detach the variables' values for the loop and only reattach them at
    # its end, so an error raised while tracing would leave the wrapped classifier without
    # weights. (A model that merely contains an uncalibrated wrapper raises from `call`; on
    # JAX its weights are then lost: reload or rebuild it.)
    def predict(self, *args, **kwargs):
        self._check_calibrated()
        return super().predict(*args, **kwargs)

    def predict_on_batch(self, *args, **kwargs):
        self._check_calibrated()
        return super().predict_on_batch(*args, **kwargs)

    def evaluate(self, *args, **kwargs):
        self._check_calibrated()
        return super().evaluate(*args, **kwargs)

    def test_on_batch(self, *args, **kwargs):
        self._check_calibrated()
        return super().test_on_batch(*args, **kwargs)

    def _probabilities(self, logits):
        """The calibrated probabilities from the classifier's logits (`keras.ops`).

        `(batch, k)`, or `(batch, 1)` (class 1) for a single binary logit. What
        `CrossFittedCalibration` averages over its members.
        """
        calibrated = self._apply(logits)
        if calibrated.shape[-1] == 1:
            return ops.sigmoid(calibrated)
        return ops.softmax(calibrated, axis=-1)

    def call(self, inputs, training=False):
        self._check_calibrated()
        logits = self._apply(self._logits(self.classifier(inputs, training=training)))
        if self.output_type == "logits":
            return logits
        if logits.shape[-1] == 1:
            return ops.sigmoid(logits)
        return ops.softmax(logits, axis=-1)

    def _output_from_probabilities(self, q):
        """The wrapper's output for a map that gives calibrated probabilities `q` directly.

        `q` itself, or for `output="logits"` log-probabilities (floored at 1.2e-38), or the
        log-odds of the calibrated probability for one column: softmax/sigmoid of them gives
        `q` back.
        """
        if self.output_type == "probabilities":
            return q
        floored = ops.maximum(q, _TINY)
        if q.shape[-1] == 1:
            return ops.log(floored) - ops.log(ops.maximum(1.0 - q, _TINY))
        return ops.log(floored)

    def calibrate(
        self,
        x,
        y=None,
        batch_size=None,
        verbose="auto",
        max_memory_bytes=collect.DEFAULT_MAX_MEMORY_BYTES,
    ):
        """Fit the calibration map on held-out data; returns `self`.

        Runs the wrapped classifier once over the data (in inference mode, with a progress
        bar), collecting its logits batch by batch (spilled to a temporary memmap file
        beyond `max_memory_bytes`), then fits the map in NumPy with the method's own fit
        function (e.g. `fit_temperature` for `TemperatureScaling`).

        Args:
            x: Held-out inputs (NumPy arrays) or a batched `tf.data.Dataset` of `(x, y)`.
                Never the training data: a classifier is over-confident on it by design.
            y: Integer labels `(n,)` or one-hot `(n, k)` when `x` is an array; `None` for a
                dataset.
            batch_size: Batch size for arrays (default 256).
            verbose: `"auto"`/1 for a progress bar, 0 for silence.
            max_memory_bytes: Memory budget of the collected logits (default 1 GiB).

        Returns:
            `self`, calibrated: from now on the wrapper predicts, saves and exports the
            fitted map (before, calling it raises `NotCalibratedError`).
        """

        # Only TensorFlow models have a `distribute_strategy`.
        strategy = getattr(self.classifier, "distribute_strategy", None)
        replicas = 1 if strategy is None else strategy.num_replicas_in_sync

        first_batch = []

        def predict_batch(x_batch):
            if not first_batch:
                first_batch.append(keras.tree.map_structure(lambda a: a[:1], x_batch))
            if replicas > 1:
                # predict_on_batch under a multi-replica strategy returns every replica's
                # copy of the batch (Keras 3.15); predict splits and gathers it correctly.
                logits = self.classifier.predict(
                    x_batch, batch_size=len(keras.tree.flatten(x_batch)[0]), verbose=0
                )
            else:
                logits = self.classifier.predict_on_batch(x_batch)
            return self._numpy_logits(logits)

        with collect.collect_logits(
            predict_batch, x, y, batch_size, verbose, max_memory_bytes
        ) as data:
            if not self._calibration_weights_created():
                self.num_classes = data.logits.shape[1]
                self._create_weights_for_calibration(self.num_classes)
            self._fit(data.logits, data.labels)
        self._is_calibrated = True
        # One call on one example records the input structure, as a first call of any Keras
        # model does: saving then does not warn of an unbuilt model, and `export` (which
        # needs a called model on Keras 3.10) works.
        self(first_batch[0])
        return self

    def compute_output_shape(self, input_shape):
        return self.classifier.compute_output_shape(input_shape)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "model": keras.saving.serialize_keras_object(self.classifier),
            "output": self.output_type,
            "model_output": self.model_output,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["model"] = keras.saving.deserialize_keras_object(config["model"])
        return cls(**config)
