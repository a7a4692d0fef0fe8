"""Keras models that wrap a trained classifier with a post-hoc calibration map.

`TemperatureScaling`, `VectorScaling` and `MatrixScaling` are `keras.Model` subclasses:
`wrapper(x) = softmax(f(z(x)))` where z are the wrapped classifier's logits and f the
fitted map (z / T, w * z + b, or z @ A + b). The parameters are non-trainable weights, so
the wrapper saves to `.keras` (no `custom_objects`), exports with `model.export()`, and
serves like any Keras model; its call path uses `keras.ops` only (any backend).
`calibrate(x, y)` runs the classifier once over held-out data (`collect.py`), then fits the
map in NumPy (`fitting.py`). Until then the wrapper refuses to predict (or export) and raises
`NotCalibratedError`, rather than silently applying the identity map (on JAX, a larger model
that contains an uncalibrated wrapper loses its weights when its `predict` raises: Keras's
JAX loop detaches them until the loop ends; calibrate before serving); loading a saved
calibrated wrapper (`.keras` or `load_weights`) restores it calibrated, and `set_weights`
marks it calibrated.

`HistogramBinning`, `IsotonicCalibration` and `PlattScaling` (in `binning.py`,
`isotonic.py` and `platt.py`, each next to its fit function) subclass
`_OneVsRestCalibrator` below: their maps act one-vs-rest on each class's probability (or
log-odds) and renormalize, instead of acting on the logits.

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
from keras_normkit.calibration import _one_vs_rest, _validation, collect, fitting

__all__ = ["NotCalibratedError", "TemperatureScaling", "VectorScaling", "MatrixScaling"]

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


def _output_layer(model):
    """The layer producing a functional/sequential model's output (None if unknown)."""
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


def _detect_model_output(model):
    """'probabilities' if the last layer is a softmax/sigmoid, else 'logits'."""
    layer = _output_layer(model)
    if isinstance(layer, keras.layers.Softmax):
        return "probabilities"
    activation = getattr(getattr(layer, "activation", None), "__name__", None)
    return "probabilities" if activation in ("softmax", "sigmoid") else "logits"


def _static_num_classes(model):
    """The last dimension of the model's single output if it is known statically, else None."""
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
    return _check_output_shape(outputs[0].shape)


def _check_output_shape(shape):
    if len(shape) < 2 or shape[-1] == 0:
        raise ValueError(
            "The wrapped model must output logits or probabilities of shape (batch, "
            f"num_classes) (num_classes = 1 for a binary classifier). Received an output of "
            f"shape {tuple(shape)}."
        )
    return shape[-1]


class _CalibratedClassifier(keras.Model):
    """Shared machinery: logits recovery, output activation, calibrate, config."""

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
            model_output = _detect_model_output(model)
            if model_output == "probabilities":
                warnings.warn(
                    f"The last layer of {model.name!r} applies softmax/sigmoid: its logits are "
                    "recovered as log-probabilities (probabilities that underflowed to 0 are "
                    "floored at 1.2e-38). For exact logits, wrap a model whose last layer is "
                    "linear, or pass model_output='probabilities' to silence this warning.",
                    stacklevel=3,
                )
        self.model_output = model_output
        num_classes = _static_num_classes(model)
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
            layer = _output_layer(self.classifier)
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
            self.num_classes = _check_output_shape(spec.shape)
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
            _check_output_shape(z.shape)
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

    def call(self, inputs, training=False):
        self._check_calibrated()
        logits = self._apply(self._logits(self.classifier(inputs, training=training)))
        if self.output_type == "logits":
            return logits
        if logits.shape[-1] == 1:
            return ops.sigmoid(logits)
        return ops.softmax(logits, axis=-1)

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
        beyond `max_memory_bytes`), then fits the map in NumPy (by minimum NLL for the scaling
        and Platt maps, least squares for binning and isotonic regression).

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


class _OneVsRestCalibrator(_CalibratedClassifier):
    """Shared machinery of the one-vs-rest maps (histogram binning, isotonic, Platt).

    The map acts on c columns (c = 1 for a binary classifier: the probability of class 1;
    c = k otherwise: each class's probability, or its log-odds for Platt scaling); for
    c > 1 the calibrated columns are renormalized to sum to 1 (a zero row becomes uniform).
    With `output="logits"` the wrapper returns log-probabilities (floored at 1.2e-38), or
    the log-odds of the calibrated probability for c = 1: softmax/sigmoid of them gives the
    calibrated probabilities back. The fits hold the n x c columns in float64 (the logits
    themselves may be a spilled memmap, read in chunks).
    """

    def _columns(self, logits):
        """The c columns the map reads, from the classifier's logits (keras.ops)."""
        return _one_vs_rest.ops_columns(logits)

    def _map_columns(self, columns):
        raise NotImplementedError

    def _numpy_columns(self, logits):
        """The columns to fit on, computed with the same `keras.ops` as the served graph.

        So that a value seen at fitting time is, bit for bit, the value the served graph
        compares with the fitted thresholds. Computed in row chunks (memmap OK).
        """
        parts = []
        for rows in _validation.chunk_slices(len(logits), logits.shape[1]):
            chunk = ops.convert_to_tensor(np.asarray(_validation.read_rows(logits, rows)))
            parts.append(np.asarray(ops.convert_to_numpy(self._columns(chunk)), np.float64))
        return np.concatenate(parts)

    def _num_columns(self, num_classes):
        return 1 if num_classes == 1 else num_classes

    def call(self, inputs, training=False):
        self._check_calibrated()
        logits = self._logits(self.classifier(inputs, training=training))
        q = _one_vs_rest.ops_renormalize(self._map_columns(self._columns(logits)))
        if self.output_type == "probabilities":
            return q
        floored = ops.maximum(q, _TINY)
        if q.shape[-1] == 1:
            return ops.log(floored) - ops.log(ops.maximum(1.0 - q, _TINY))
        return ops.log(floored)

    def _check_calibrated_map(self):
        self._check_calibrated("report a fitted map")


_COMMON_ARGS = """        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default: softmax, or sigmoid for `k = 1`) or `"logits"`
            (the calibrated logits) for the wrapper's output.
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`."""

_CALL_ARGS = """    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map)."""

# The classifier of the scaling wrappers' examples: two classes, labels y = [x0 + noise > 0]
# and logits (-5 x0, 5 x0), too sharp for labels with noise (over-confident).
_OVERCONFIDENT_EXAMPLE = """    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(512, 8)).astype("float32")
    >>> y = (x[:, 0] + 0.5 * rng.normal(size=512) > 0).astype("int32")
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
    >>> kernel = np.zeros((8, 2), "float32")
    >>> kernel[0] = [-5.0, 5.0]  # logits (-5 x0, 5 x0): too sharp for labels with noise
    >>> model.layers[0].set_weights([kernel, np.zeros(2, "float32")])"""

# The classifier of the one-vs-rest wrappers' examples: one logit 4 x for labels drawn with
# P(y = 1 | x) = sigmoid(x), so its probabilities are too sharp by a factor 4 in log-odds.
_ONE_LOGIT_EXAMPLE = """    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2000, 1)).astype("float32")
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-x[:, 0]))).astype("int32")
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Rescaling(4.0)])"""


@keras.saving.register_keras_serializable(package="keras_normkit")
class TemperatureScaling(_CalibratedClassifier):
    __doc__ = f"""Temperature scaling of a trained classifier: p = softmax(z / T), T > 0.

    One scalar T, fitted by `calibrate(x, y)` to minimize the NLL on held-out data (Newton
    in log T, see `fit_temperature`), softens (T > 1) or sharpens (T < 1) the predicted
    probabilities without changing any argmax, so accuracy is unchanged. Binary
    classifiers with one logit use sigmoid(z / T). T is a non-trainable weight: it is
    saved with the model and kept by `model.export()`. Before `calibrate`, calling,
    predicting with or exporting the wrapper, and reading `temperature_`, raise
    `NotCalibratedError`.

    Args:
{_COMMON_ARGS}

{_CALL_ARGS}

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import TemperatureScaling
{_OVERCONFIDENT_EXAMPLE}
    >>> calibrated = TemperatureScaling(model).calibrate(x, y, verbose=0)
    >>> calibrated.temperature_ > 1  # the classifier was over-confident
    True
    >>> tuple(calibrated(x[:2]).shape)
    (2, 2)

    Reference: Guo et al., "On Calibration of Modern Neural Networks", ICML 2017,
    arXiv:1706.04599, Section 4.2.
    """

    def _create_calibration_weights(self, num_classes):
        if getattr(self, "temperature", None) is None:
            self.temperature = self.add_weight(
                shape=(), initializer="ones", trainable=False, name="temperature"
            )

    def _calibration_weights_created(self):
        return getattr(self, "temperature", None) is not None

    def __init__(self, model, output="probabilities", model_output="auto", **kwargs):
        super().__init__(model, output=output, model_output=model_output, **kwargs)
        self._create_calibration_weights(None)

    @property
    def temperature_(self):
        """The fitted temperature T (a Python float); `NotCalibratedError` before `calibrate`."""
        self._check_calibrated("report a fitted temperature")
        return float(ops.convert_to_numpy(self.temperature))

    def _apply(self, logits):
        return ops.divide(logits, ops.cast(self.temperature, logits.dtype))

    def _fit(self, logits, labels):
        self.temperature.assign(fitting.fit_temperature(logits, labels))


class _AffineScaling(_CalibratedClassifier):
    """Shared machinery of vector and matrix scaling: softmax(affine map of z), an l2 penalty.

    A subclass passes its default `l2` to `__init__`, creates the weight that multiplies the
    logits in `_create_multiplier` (before `bias`: the order of the variables in saved
    files), returns it from `_multiplier`, and sets `_fit_function` and `_apply`.
    """

    def __init__(self, model, output, model_output, l2, **kwargs):
        l2 = fitting.check_l2(l2)
        super().__init__(model, output=output, model_output=model_output, **kwargs)
        self.l2 = l2

    def _create_multiplier(self, num_classes):
        raise NotImplementedError

    @property
    def _multiplier(self):
        raise NotImplementedError

    def _create_calibration_weights(self, num_classes):
        self._create_multiplier(num_classes)
        self.bias = self.add_weight(
            shape=(num_classes,), initializer="zeros", trainable=False, name="bias"
        )

    def _calibration_weights_created(self):
        return getattr(self, "bias", None) is not None

    def _fit(self, logits, labels):
        multiplier, bias = self._fit_function(logits, labels, l2=self.l2)
        self._multiplier.assign(multiplier.astype("float32"))
        self.bias.assign(bias.astype("float32"))

    def get_config(self):
        return {**super().get_config(), "l2": self.l2}


@keras.saving.register_keras_serializable(package="keras_normkit")
class VectorScaling(_AffineScaling):
    __doc__ = f"""Vector scaling of a trained classifier: p = softmax(w * z + b).

    A per-class scale w and bias b (2k parameters, non-trainable weights `scale` and
    `bias`), fitted by `calibrate(x, y)` to minimize NLL + l2 * (|w - mean w|^2 + |b|^2) on
    held-out data (L-BFGS from the temperature solution w = 1/T, see
    `fit_vector_scaling`). It generalizes
    temperature scaling (w = 1/T, b = 0) and may change the argmax. For a single binary
    logit it is Platt scaling, sigmoid(w z + b). Before `calibrate`, calling, predicting
    with or exporting the wrapper raise `NotCalibratedError`.

    Args:
{_COMMON_ARGS}
        l2: Non-negative weight of the penalty on the spread of w and on b (default 0.01;
            0 gives the unregularized map of Guo et al.).

{_CALL_ARGS}

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import VectorScaling
{_OVERCONFIDENT_EXAMPLE}
    >>> calibrated = VectorScaling(model, l2=1e-2).calibrate(x, y, verbose=0)
    >>> tuple(calibrated(x[:2]).shape)
    (2, 2)

    Reference: Guo et al., "On Calibration of Modern Neural Networks", ICML 2017,
    arXiv:1706.04599, Section 4.2.
    """

    _fit_function = staticmethod(fitting.fit_vector_scaling)

    def __init__(self, model, output="probabilities", model_output="auto", l2=1e-2, **kwargs):
        super().__init__(model, output, model_output, l2, **kwargs)

    def _create_multiplier(self, num_classes):
        self.scale = self.add_weight(
            shape=(num_classes,), initializer="ones", trainable=False, name="scale"
        )

    @property
    def _multiplier(self):
        return self.scale

    def _apply(self, logits):
        return logits * ops.cast(self.scale, logits.dtype) + ops.cast(self.bias, logits.dtype)


@keras.saving.register_keras_serializable(package="keras_normkit")
class MatrixScaling(_AffineScaling):
    __doc__ = f"""Matrix scaling of a trained classifier: p = softmax(z @ A + b).

    A full k x k matrix A and bias b (non-trainable weights `kernel` and `bias`), fitted
    by `calibrate(x, y)` to minimize NLL + l2 * (|off-diagonal of A|^2 + |b|^2) on held-out
    data (L-BFGS from A = I / T, see `fit_matrix_scaling`). The penalty (ODIR, Kull et al.
    2019) keeps the k^2 parameters from overfitting a small validation set; the diagonal
    is free, so temperature-like solutions cost nothing. It may change the argmax. Before
    `calibrate`, calling, predicting with or exporting the wrapper raise
    `NotCalibratedError`.

    Args:
{_COMMON_ARGS}
        l2: Non-negative weight of the off-diagonal and bias penalty (default 0.1).

{_CALL_ARGS}

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import MatrixScaling
{_OVERCONFIDENT_EXAMPLE}
    >>> calibrated = MatrixScaling(model, l2=1e-2).calibrate(x, y, verbose=0)
    >>> tuple(calibrated(x[:2]).shape)
    (2, 2)

    Reference: Guo et al., "On Calibration of Modern Neural Networks", ICML 2017,
    arXiv:1706.04599, Section 4.2; Kull et al., NeurIPS 2019, arXiv:1910.12656 (ODIR).
    """

    _fit_function = staticmethod(fitting.fit_matrix_scaling)

    def __init__(self, model, output="probabilities", model_output="auto", l2=1e-1, **kwargs):
        super().__init__(model, output, model_output, l2, **kwargs)

    def _create_multiplier(self, num_classes):
        self.kernel = self.add_weight(
            shape=(num_classes, num_classes),
            initializer="identity",
            trainable=False,
            name="kernel",
        )

    @property
    def _multiplier(self):
        return self.kernel

    def _apply(self, logits):
        return ops.matmul(logits, ops.cast(self.kernel, logits.dtype)) + ops.cast(
            self.bias, logits.dtype
        )
