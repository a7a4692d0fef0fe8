"""Temperature scaling (Guo et al., ICML 2017): `fit_temperature`, `TemperatureScalingMap` and
`TemperatureScaling`.

p = softmax(z / T) with one parameter T > 0, fitted by a safeguarded Newton iteration in
log T (so T > 0 by construction). With beta = 1/T the NLL
L(beta) = mean_i [logsumexp(beta z_i) - beta z_i[y_i]] is convex, with
L'(beta) = mean_i (E_p[z_i] - z_i[y_i]) and L''(beta) = mean_i Var_p[z_i] >= 0, so L' is
monotone and its root (when there is one) is found by Newton steps in log beta, kept
inside a bracket by bisection. A root exists exactly when L'(0) < 0 < L'(inf), i.e. when
the logits beat a uniform guess but not every example is already predicted correctly;
otherwise the optimal T is infinite or zero and a `ValueError` says so.

All passes over the logits run in row chunks of ~8 MB, so `logits` may be a
`numpy.memmap` far larger than memory. A single binary logit z is the two-class softmax of
(0, z): sigmoid(z / T) = softmax((0, z) / T)[1].

Reference: Guo, Pleiss, Sun, Weinberger, "On Calibration of Modern Neural Networks",
ICML 2017, arXiv:1706.04599, Section 4.2.
"""

import math
import warnings

import keras
import numpy as np
from keras import ops

from keras_normkit.calibration import _arrays, _numeric, _validation
from keras_normkit.calibration.base import CalibrationWrapper
from keras_normkit.calibration.scaling._deprecated import FloatReturn
from keras_normkit.calibration.scaling._map import ScalingMap

__all__ = ["TemperatureScaling", "TemperatureScalingMap", "fit_temperature"]

#: Shifted logits are kept in memory between Newton steps when they take at most this.
CACHE_BYTES = 256 * 2**20


class _TemperatureObjective:
    """L'(beta) and L''(beta) of the NLL, from logits shifted by their row maximum.

    d = z - max_j z_j <= 0 is computed once per chunk (and kept in memory when `logits` is
    an in-memory array of at most `CACHE_BYTES`; a memmap is re-read at every step). The
    elementwise work runs in the logits' precision (float32 for float32 logits, else
    float64); per-row moments are combined in float64.
    """

    def __init__(self, logits, labels):
        self.logits, self.labels, self.n = logits, labels, len(logits)
        self.dtype = np.float32 if logits.dtype in (np.float16, np.float32) else np.float64
        width = logits.shape[1] + (logits.shape[1] == 1)
        self.slices = _arrays.chunk_slices(self.n, width)
        cache = not isinstance(logits, np.memmap)
        cache = cache and self.n * width * np.dtype(self.dtype).itemsize <= CACHE_BYTES
        self.cache = [] if cache else None
        # d_y per row: kept (n float64) only with the in-memory cache; for a memmap it is
        # gathered again per chunk, so memory stays bounded whatever n.
        self.label_offsets = np.empty(self.n) if cache else None
        # L'(0) = mean(mean_j d_j - d_y) and L'(inf) = mean(-d_y) (max_j d_j = 0).
        slope_at_zero = sum_label_offsets = 0.0
        for rows in self.slices:
            d = self._shifted(rows)
            d_y = self._label_offsets(d, rows)
            sum_label_offsets += float(d_y.sum())
            slope_at_zero += float(np.sum(d.mean(axis=1).astype(np.float64) - d_y))
            if self.cache is not None:
                self.label_offsets[rows] = d_y
                self.cache.append(d)
        self.slope_at_zero = slope_at_zero / self.n
        self.slope_at_infinity = -sum_label_offsets / self.n

    def _label_offsets(self, d, rows):
        labels = np.asarray(self.labels[rows])
        return d[np.arange(len(d)), labels].astype(np.float64)

    def _shifted(self, rows):
        z = np.asarray(_arrays.read_rows(self.logits, rows), dtype=self.dtype)
        z = _numeric.two_class_logits(z)  # binary: softmax over (0, z)
        return z - z.max(axis=1, keepdims=True)

    def derivatives(self, beta):
        """(L'(beta), L''(beta))."""
        first = second = 0.0
        beta_ = self.dtype(beta)
        for i, rows in enumerate(self.slices):
            if self.cache is not None:
                d, d_y = self.cache[i], self.label_offsets[rows]
            else:
                d = self._shifted(rows)
                d_y = self._label_offsets(d, rows)
            e = np.multiply(d, beta_)
            np.exp(e, out=e)
            # Row sums over k classes in the working precision (pairwise summation), then
            # float64 for the per-row moments and the sum over rows.
            s0 = e.sum(axis=1).astype(np.float64)
            e *= d
            s1 = e.sum(axis=1).astype(np.float64)
            s2 = np.einsum("ij,ij->i", e, d).astype(np.float64)
            mean = s1 / s0
            first += float(np.sum(mean - d_y))
            second += float(np.sum(np.maximum(s2 / s0 - mean * mean, 0.0)))
        return first / self.n, second / self.n


class TemperatureScalingMap(FloatReturn, ScalingMap):
    """A fitted temperature scaling: p = softmax(z / T).

    Attributes:
        temperature: The temperature T > 0 (a Python float).

    `predict(logits)` returns softmax(z / T) for logits `(n, k)`, or sigmoid(z / T), the
    probability of class 1, for one binary logit `(n,)`/`(n, 1)`, in the shape of `logits`.

    Deprecated, for one release: keras_normkit 0.1.0's `fit_temperature` returned T as a
    float; the map still acts as that float (`float(m)`, `round(m, 3)`, `z / m`,
    comparisons) with a `DeprecationWarning`. Read `m.temperature` instead.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import TemperatureScalingMap
    >>> fitted = TemperatureScalingMap(2.0)
    >>> fitted.predict(np.array([[2.0, 0.0]])).round(4).tolist()  # softmax((1, 0))
    [[0.7311, 0.2689]]
    """

    def __init__(self, temperature):
        self.temperature = float(temperature)

    def _probabilities(self, z):
        return _numeric.softmax(z / self.temperature)

    def __repr__(self):
        return f"TemperatureScalingMap(temperature={self.temperature:.6g})"


def fit_temperature(logits, labels, max_iter=100, tol=1e-7):
    """Temperature scaling: the T > 0 minimizing the NLL of softmax(logits / T) on held-out data.

    Solves min_T -(1/n) sum_i log softmax(z_i / T)[y_i] (for a single binary logit,
    sigmoid(z_i / T)) by Newton's method on log T, safeguarded by bisection: the NLL is
    convex in 1/T, so the iteration converges to the unique optimum in a handful of steps
    and T can neither go negative nor diverge. Dividing logits by a positive T never
    changes the argmax, so accuracy is unchanged.

    Args:
        logits: `(n, k)` pre-softmax logits, or `(n,)`/`(n, 1)` logits of a binary
            classifier. Not probabilities: a warning is issued if the rows look like them.
            May be a `numpy.memmap`; it is read in chunks and never copied whole.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        max_iter: Maximum number of Newton steps.
        tol: Stop when a step in log T is below `tol` (Newton converges quadratically, so the
            error of the returned log T is then far below `tol`).

    Returns:
        A `TemperatureScalingMap`: `temperature` is T, a Python float (T > 1 softens
        over-confident predictions); `predict(logits)` applies it. (keras_normkit 0.1.0
        returned T itself; the map still acts as that float for one release, with a
        `DeprecationWarning`.)

    Raises:
        ValueError: for bad input (see the module docstring); when the labels are all one
            class (they then carry no information on the classifier's calibration); or when
            the optimal T is not finite and positive: every example is already classified
            correctly (the NLL keeps falling as T -> 0), or the logits predict the labels no
            better than a uniform guess (the NLL keeps falling as T -> infinity).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_temperature
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(20000, 10)) * 2
    >>> p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    >>> y = (p.cumsum(1) > rng.random((20000, 1))).argmax(1)  # y ~ softmax(z): calibrated
    >>> fitted = fit_temperature(2.5 * z, y)  # over-confident logits: T recovers 2.5
    >>> round(fitted.temperature, 1)
    2.5
    >>> fitted.predict(2.5 * z).shape  # softmax(2.5 z / T): about softmax(z)
    (20000, 10)

    Reference: Guo et al., ICML 2017, arXiv:1706.04599, Section 4.2.
    """
    logits, labels, _ = _validation.check_logits_and_labels(logits, labels)
    _validation.check_two_classes(
        labels,
        "Temperature scaling",
        "the temperature it would return is arbitrary, set only by how many of these "
        "examples happen to be misclassified",
    )
    _validation.warn_if_probabilities(logits)
    objective = _TemperatureObjective(logits, labels)
    if objective.slope_at_zero >= 0:
        raise ValueError(
            "Temperature scaling has no finite optimum: the logits predict the labels no "
            f"better than a uniform guess (mean logit of the label minus mean logit = "
            f"{-objective.slope_at_zero:.3g} <= 0), so the NLL keeps decreasing as "
            "T -> infinity. Check that labels and logits are aligned."
        )
    if objective.slope_at_infinity <= 0:
        raise ValueError(
            "Temperature scaling has no finite optimum: every example's label already has "
            "the largest logit, so the NLL keeps decreasing as T -> 0. Calibrate on held-out "
            "data the model was not trained on, with at least one misclassified example."
        )
    # Newton in u = log(beta) = -log T, kept in a bracket of the root of the increasing L'.
    u, lo, hi = 0.0, -math.inf, math.inf
    for _ in range(max_iter):
        beta = math.exp(u)
        first, second = objective.derivatives(beta)
        if first > 0:
            hi = min(hi, u)
        else:
            lo = max(lo, u)
        # Newton on f(u) = NLL(e^u): f' = beta L', f'' = beta^2 L'' + beta L'. Where f is
        # not convex, a Newton step on the root of L' (curvature beta L'') instead.
        curvature = beta * second + first
        if curvature <= 0:
            curvature = beta * second
        step = -first / curvature if curvature > 0 else -math.copysign(2.0, first)
        step = max(-2.0, min(2.0, step))  # a factor e^2 at most per step
        candidate = u + step
        if not lo < candidate < hi:
            candidate = 0.5 * (lo + hi) if math.isfinite(lo + hi) else u + step
        if abs(candidate - u) <= tol or first == 0.0:
            u = candidate
            break
        u = candidate
    else:
        warnings.warn(
            f"fit_temperature did not converge in {max_iter} Newton steps "
            f"(last step {abs(step):.3g} in log T); returning T={math.exp(-u):.6g}.",
            stacklevel=2,
        )
    return TemperatureScalingMap(math.exp(-u))


@keras.saving.register_keras_serializable(package="keras_normkit")
class TemperatureScaling(CalibrationWrapper):
    """Temperature scaling of a trained classifier: p = softmax(z / T), T > 0.

    One scalar T, fitted by `calibrate(x, y)` to minimize the NLL on held-out data (Newton
    in log T, see `fit_temperature`), softens (T > 1) or sharpens (T < 1) the predicted
    probabilities without changing any argmax, so accuracy is unchanged. Binary
    classifiers with one logit use sigmoid(z / T). T is a non-trainable weight: it is
    saved with the model and kept by `model.export()`. Before `calibrate`, calling,
    predicting with or exporting the wrapper, and reading `temperature_` or
    `calibration_map_`, raise `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default: softmax, or sigmoid for `k = 1`) or `"logits"`
            (the calibrated logits) for the wrapper's output.
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.

    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import TemperatureScaling
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(512, 8)).astype("float32")
    >>> y = (x[:, 0] + 0.5 * rng.normal(size=512) > 0).astype("int32")
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
    >>> kernel = np.zeros((8, 2), "float32")
    >>> kernel[0] = [-5.0, 5.0]  # logits (-5 x0, 5 x0): too sharp for labels with noise
    >>> model.layers[0].set_weights([kernel, np.zeros(2, "float32")])
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

    @property
    def calibration_map_(self):
        """The fitted `TemperatureScalingMap` (from the weights); `NotCalibratedError` before."""
        self._check_calibrated("report a fitted map")
        return TemperatureScalingMap(ops.convert_to_numpy(self.temperature))

    def _apply(self, logits):
        return ops.divide(logits, ops.cast(self.temperature, logits.dtype))

    def _fit(self, logits, labels):
        self.temperature.assign(fit_temperature(logits, labels).temperature)
