"""Split conformal intervals for regression: the absolute residual, and conformalized
quantile regression (CQR, Romano, Patterson & Candes 2019)."""

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_string_choice
from keras_normkit.calibration import NotCalibratedError
from keras_normkit.uncertainty import _arrays, _models
from keras_normkit.uncertainty.conformal.quantile import conformal_quantile

__all__ = [
    "ConformalRegressor",
    "average_interval_width",
    "cqr_scores",
    "interval_coverage",
    "residual_scores",
]

METHODS = ("residual", "cqr")
_CALIBRATED_KEY = "calibrated"


def _check_targets(targets, num_examples):
    targets = _arrays.to_numpy(targets, "targets")
    if targets.ndim == 2 and targets.shape[1] == 1:
        targets = targets[:, 0]
    if targets.shape != (num_examples,):
        raise ValueError(
            f"`targets` must hold one number per example, shape ({num_examples},). Received: "
            f"targets.shape={targets.shape}"
        )
    return _arrays.check_scores(targets, "targets")


def _check_intervals(intervals, name="intervals"):
    intervals = _arrays.to_numpy(intervals, name)
    if intervals.ndim != 2 or intervals.shape[1] != 2 or intervals.shape[0] == 0:
        raise ValueError(
            f"`{name}` must have shape (num_examples, 2): (lower, upper) per example. "
            f"Received: {name}.shape={intervals.shape}"
        )
    intervals = np.asarray(intervals, np.float64)
    if np.isnan(intervals).any():
        raise ValueError(f"`{name}` must not hold NaN.")
    return intervals


def residual_scores(predictions, targets):
    """Absolute-residual scores s = |y - f(x)| of a point regressor.

    Thresholded at tau, the interval [f(x) - tau, f(x) + tau] covers y with probability
    >= 1 - alpha (split conformal regression; Lei et al. 2018): of constant width, whatever
    the input's difficulty.

    Args:
        predictions: `(n,)` or `(n, 1)` point predictions f(x).
        targets: `(n,)` targets y.

    Returns:
        `(n,)` float64 scores.

    Example:

    >>> from keras_normkit.uncertainty import residual_scores
    >>> residual_scores([1.0, 2.0], [1.5, 1.0]).tolist()
    [0.5, 1.0]

    Reference: Lei, G'Sell, Rinaldo, Tibshirani, Wasserman, "Distribution-Free Predictive
    Inference for Regression", JASA 2018.
    """
    predictions = _arrays.to_numpy(predictions, "predictions")
    if predictions.ndim == 2 and predictions.shape[1] == 1:
        predictions = predictions[:, 0]
    predictions = _arrays.check_scores(predictions, "predictions")
    return np.abs(_check_targets(targets, len(predictions)) - predictions)


def cqr_scores(quantiles, targets):
    """CQR scores s = max(q_lo(x) - y, y - q_hi(x)) of a quantile regressor.

    Negative inside the band [q_lo, q_hi] (by the distance to its nearer edge), positive
    outside. Thresholded at tau, [q_lo(x) - tau, q_hi(x) + tau] covers y with probability
    >= 1 - alpha; the band adapts its width to the input (heteroscedastic noise), which
    the residual interval cannot.

    Args:
        quantiles: `(n, 2)` lower and upper quantile predictions (e.g. trained with
            `PinballLoss(quantiles=(alpha / 2, 1 - alpha / 2))`).
        targets: `(n,)` targets y.

    Returns:
        `(n,)` float64 scores.

    Example:

    >>> from keras_normkit.uncertainty import cqr_scores
    >>> cqr_scores([[0.0, 2.0], [0.0, 2.0]], [1.5, 3.0]).tolist()
    [-0.5, 1.0]

    Reference: Romano, Patterson, Candes, "Conformalized Quantile Regression", NeurIPS
    2019, arXiv:1905.03222, Eq. 6-7.
    """
    quantiles = _check_intervals(quantiles, "quantiles")
    if not np.isfinite(quantiles).all():
        raise ValueError("`quantiles` must be finite.")
    targets = _check_targets(targets, len(quantiles))
    return np.maximum(quantiles[:, 0] - targets, targets - quantiles[:, 1])


def interval_coverage(intervals, targets):
    """The fraction of targets inside their interval, mean_i [lo_i <= y_i <= hi_i].

    Args:
        intervals: `(n, 2)` (lower, upper) per example (`ConformalRegressor`'s output).
        targets: `(n,)` targets.

    Returns:
        A Python float in [0, 1].

    Example:

    >>> from keras_normkit.uncertainty import interval_coverage
    >>> interval_coverage([[0.0, 1.0], [0.0, 1.0]], [0.5, 2.0])
    0.5
    """
    intervals = _check_intervals(intervals)
    targets = _check_targets(targets, len(intervals))
    return float(((intervals[:, 0] <= targets) & (targets <= intervals[:, 1])).mean())


def average_interval_width(intervals):
    """The mean width hi - lo of the intervals (the price of the coverage).

    Args:
        intervals: `(n, 2)` (lower, upper) per example.

    Returns:
        A Python float.

    Example:

    >>> from keras_normkit.uncertainty import average_interval_width
    >>> average_interval_width([[0.0, 1.0], [1.0, 4.0]])
    2.0
    """
    intervals = _check_intervals(intervals)
    return float((intervals[:, 1] - intervals[:, 0]).mean())


@keras.saving.register_keras_serializable(package="keras_normkit")
class ConformalRegressor(keras.Model):
    """Split conformal prediction intervals around a trained regressor, as a Keras model.

    Calibrated once on held-out data (`calibrate(x, y)`), it outputs `(batch, 2)`
    intervals (lower, upper) that hold the target with probability >= 1 - alpha for
    exchangeable data:

    * `method="residual"`: the model predicts f(x) (`(batch,)` or `(batch, 1)`); with tau
      the ceil((n + 1)(1 - alpha))-th smallest |y - f(x)| on calibration data, the
      interval is [f(x) - tau, f(x) + tau].
    * `method="cqr"` (Romano et al. 2019): the model predicts two quantiles (q_lo, q_hi)
      `(batch, 2)` (train it with `PinballLoss(quantiles=(alpha / 2, 1 - alpha / 2))`);
      tau is the same quantile of max(q_lo - y, y - q_hi), and the interval
      [q_lo(x) - tau, q_hi(x) + tau] keeps the band's adaptive width.

    tau is a non-trainable weight: the wrapper saves, exports and serves; before
    calibration it raises `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` regressor (see `method` for its output).
        method: `"residual"` or `"cqr"`.
        alpha: Miscoverage level in (0, 1).
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.

    Call arguments:
        inputs: Inputs of the wrapped model.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.uncertainty import ConformalRegressor, interval_coverage
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2000, 1)).astype("float32")
    >>> y = 2 * x[:, 0] + rng.normal(size=2000).astype("float32")
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.layers[0].set_weights([np.array([[2.0]], "float32"), np.zeros(1, "float32")])
    >>> intervals = ConformalRegressor(model, alpha=0.1).calibrate(x[:1000], y[:1000])
    >>> round(intervals.threshold_, 1)  # the 0.9 quantile of |N(0, 1)| is 1.64
    1.6
    >>> 0.87 <= interval_coverage(intervals.predict(x[1000:], verbose=0), y[1000:]) <= 0.93
    True

    Reference: Lei et al., JASA 2018 (split conformal regression); Romano, Patterson,
    Candes, "Conformalized Quantile Regression", NeurIPS 2019, arXiv:1905.03222.
    """

    def __init__(self, model, method="residual", alpha=0.1, **kwargs):
        super().__init__(**kwargs)
        self.regressor = _models.check_model(model)
        self.method = check_string_choice("method", method, METHODS)
        self.alpha = _arrays.check_alpha(alpha)
        self._is_calibrated = False
        self.threshold = self.add_weight(
            shape=(), initializer="zeros", trainable=False, name="threshold"
        )

    def build(self, input_shape):
        # tau is created in __init__ and the wrapped model is built: nothing to create.
        self.built = True

    @property
    def is_calibrated(self):
        """Whether `calibrate` fitted the threshold (or a calibrated save was loaded)."""
        return self._is_calibrated

    def _check_calibrated(self, what="be called (or predict, export)"):
        if not self._is_calibrated:
            raise NotCalibratedError(
                f"This ConformalRegressor ({self.name!r}) is not calibrated yet, so it cannot "
                f"{what}: call `calibrate(x_val, y_val)` with held-out data first."
            )

    @property
    def threshold_(self):
        """The fitted tau (a float)."""
        self._check_calibrated("report a threshold")
        return float(ops.convert_to_numpy(self.threshold))

    def __getattr__(self, name):
        # See ConformalClassifier.__getattr__: keeps NotCalibratedError on PyTorch.
        attribute = getattr(type(self), name, None)
        if isinstance(attribute, property):
            return attribute.__get__(self, type(self))
        parent = getattr(super(), "__getattr__", None)
        if parent is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return parent(name)

    def _scores(self, predictions, targets):
        if self.method == "cqr":
            return cqr_scores(predictions, targets)
        return residual_scores(predictions, targets)

    def calibrate_from_predictions(self, predictions, targets):
        """Fit tau on the wrapped model's held-out predictions; returns `self`.

        Args:
            predictions: `(n,)`/`(n, 1)` point predictions, or `(n, 2)` quantiles (CQR).
            targets: `(n,)` targets.

        Returns:
            `self`, calibrated.
        """
        scores = self._scores(predictions, targets)
        self.threshold.assign(conformal_quantile(scores, self.alpha))
        self._is_calibrated = True
        return self

    def calibrate(self, x, y, batch_size=None, verbose=0):
        """Fit tau on held-out data; returns `self`.

        Args:
            x: Held-out inputs (never the training data).
            y: Their targets `(n,)`.
            batch_size: Batch size of the model's `predict` (default 256).
            verbose: Verbosity of the model's `predict`.

        Returns:
            `self`, calibrated.
        """
        predictions = self.regressor.predict(x, batch_size=batch_size or 256, verbose=verbose)
        self.calibrate_from_predictions(np.asarray(predictions, np.float64), y)
        self(keras.tree.map_structure(lambda a: np.asarray(a)[:1], x))
        return self

    def call(self, inputs):
        self._check_calibrated()
        outputs = ops.cast(self.regressor(inputs, training=False), "float32")
        tau = ops.cast(self.threshold, outputs.dtype)
        if self.method == "cqr":
            return ops.stack([outputs[:, 0] - tau, outputs[:, 1] + tau], axis=-1)
        if len(outputs.shape) == 2:
            outputs = outputs[:, 0]
        return ops.stack([outputs - tau, outputs + tau], axis=-1)

    def compute_output_shape(self, input_shape):
        shape = self.regressor.compute_output_shape(input_shape)
        return (shape[0], 2)

    def save_own_variables(self, store):
        super().save_own_variables(store)
        store[_CALIBRATED_KEY] = np.array(self._is_calibrated)

    def load_own_variables(self, store):
        keys = list(store.keys())
        calibrated = bool(np.asarray(store[_CALIBRATED_KEY])) if _CALIBRATED_KEY in keys else True
        super().load_own_variables({k: store[k] for k in keys if k != _CALIBRATED_KEY})
        self._is_calibrated = calibrated

    def predict(self, *args, **kwargs):
        self._check_calibrated()
        return super().predict(*args, **kwargs)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "model": keras.saving.serialize_keras_object(self.regressor),
            "method": self.method,
            "alpha": self.alpha,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["model"] = keras.saving.deserialize_keras_object(config["model"])
        return cls(**config)
