"""Isotonic calibration (Zadrozny & Elkan, KDD 2002): `fit_isotonic_calibration` and
`IsotonicCalibration`.

For each column (the probability of class 1 for a binary classifier, each class's
probability one-vs-rest otherwise) the non-decreasing function f minimizing
sum_i (f(p_i) - [y_i = class])^2 is fitted by pool-adjacent-violators (PAV), and a new
probability is mapped by linear interpolation between the fitted points, clipped to the
first and last fitted value outside them: exactly scikit-learn's
`IsotonicRegression(increasing=True, out_of_bounds="clip")`, including its handling of tied
probabilities (sorted by p; points closer than float64 resolution, 1e-15, to the first
of their group are one point whose target is the group's mean and whose weight is its size)
and of its thresholds (the first and last point of every constant run). With k >= 2
columns the k calibrated values are renormalized to sum to 1 (a row of zeros, possible
where every class's map is 0, becomes uniform).

PAV runs in NumPy after one sort: each pass pools every maximal non-increasing run of
adjacent blocks at once (a valid sequence of adjacent-violator pools, ties included as in
scikit-learn: the pooled mean of a non-increasing run is still >= the next value); when a
pass removes less than a tenth of the blocks, the remaining blocks are finished by the
classic single-pass stack algorithm. The work is O(n log n) for the sort plus O(blocks)
per pass, and the blocks shrink geometrically on calibration data
(`benchmarks/DECISIONS.md#isotonic-pav`).

References: Zadrozny & Elkan, "Transforming classifier scores into accurate multiclass
probability estimates", KDD 2002; Guo, Pleiss, Sun, Weinberger, "On Calibration of Modern
Neural Networks", ICML 2017, arXiv:1706.04599, Section 4.1.
"""

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_int
from keras_normkit.calibration import _one_vs_rest, _validation
from keras_normkit.calibration._one_vs_rest import OneVsRestMap
from keras_normkit.calibration.binning import _lookup
from keras_normkit.calibration.binning._lookup import LookupTableWrapper

__all__ = ["IsotonicCalibration", "IsotonicCalibrationMap", "fit_isotonic_calibration"]

#: Points closer than this to the first point of their group are ties (scikit-learn's rule
#: for float64 input, `np.finfo(np.float64).resolution`).
RESOLUTION = float(np.finfo(np.float64).resolution)

#: Size of the threshold weights of a wrapper built before its first `calibrate`.
DEFAULT_NUM_BREAKPOINTS = LookupTableWrapper.DEFAULT_NUM_BREAKPOINTS


class IsotonicCalibrationMap(OneVsRestMap):
    """A fitted isotonic map: per column, the thresholds of a piecewise-linear function.

    Attributes:
        x_thresholds: One increasing array per column of fitted probabilities (as
            scikit-learn's `IsotonicRegression.X_thresholds_`).
        y_thresholds: One non-decreasing array per column of their calibrated values in
            [0, 1] (`y_thresholds_`).

    `predict(probabilities)` interpolates linearly between the thresholds (values outside
    them are clipped to the first/last one) and, for k >= 2 columns, renormalizes the rows
    to sum to 1 (a row of zeros becomes uniform). Shapes as the fitted probabilities:
    `(n,)`/`(n, 1)` for a binary classifier, `(n, k)` otherwise.
    """

    def __init__(self, x_thresholds, y_thresholds):
        self.x_thresholds = [np.asarray(x, np.float64) for x in x_thresholds]
        self.y_thresholds = [np.asarray(y, np.float64) for y in y_thresholds]

    _per_column = "x_thresholds"

    def _map_column(self, column, values):
        return np.interp(values, self.x_thresholds[column], self.y_thresholds[column])

    def _summary(self):
        return f"columns={self.num_columns}, thresholds={[len(x) for x in self.x_thresholds]}"


def _tie_groups(x):
    """Group starts of sorted `x`: scikit-learn's `_make_unique` rule, vectorized.

    A point starts a new group when it is at least `RESOLUTION` above the first point of
    the current group. That is decided by the gap to the previous point unless the gap is
    positive but below the resolution; only those rare points are walked one by one.
    """
    gaps = np.diff(x)
    start = np.concatenate([[True], gaps >= RESOLUTION])
    for j in np.flatnonzero((gaps > 0) & (gaps < RESOLUTION)) + 1:
        first = j - 1
        while not start[first]:
            first -= 1
        start[j] = x[j] - x[first] >= RESOLUTION
    return start


def _sequential_pav(values, weights, sums, sizes):
    """Single-pass stack PAV on weighted blocks (O(blocks))."""
    v, w, s, c = [], [], [], []
    for vi, wi, si, ci in zip(
        values.tolist(), weights.tolist(), sums.tolist(), sizes.tolist(), strict=True
    ):
        while v and v[-1] > vi:
            v.pop()
            wi += w.pop()
            si += s.pop()
            ci += c.pop()
            vi = si / wi
        v.append(vi)
        w.append(wi)
        s.append(si)
        c.append(ci)
    return np.array(v), np.array(c, dtype=np.int64)


def pool_adjacent_violators(y, weights, sums=None):
    """The non-decreasing fit minimizing sum_i w_i (f_i - y_i)^2, one value per point.

    Vectorized passes pool every maximal non-increasing run of blocks; once a pass removes
    less than a tenth of the blocks, the stack algorithm finishes. `sums` (the
    w_i y_i, if known exactly, e.g. label counts of tied points) avoids forming w_i y_i.
    """
    values = np.asarray(y, np.float64).copy()
    weights = np.asarray(weights, np.float64).copy()
    sums = values * weights if sums is None else np.asarray(sums, np.float64).copy()
    sizes = np.ones(len(values), np.int64)
    while len(values) > 1:
        if not (values[:-1] > values[1:]).any():
            break
        start = np.concatenate([[True], values[:-1] < values[1:]])
        group = np.cumsum(start) - 1
        before = len(values)
        weights = np.bincount(group, weights)
        sums = np.bincount(group, sums)
        sizes = np.bincount(group, sizes).astype(np.int64)
        values = sums / weights
        if len(values) > 0.9 * before:
            values, sizes = _sequential_pav(values, weights, sums, sizes)
            break
    return np.repeat(values, sizes)


def isotonic_thresholds(x, y):
    """Thresholds `(x_t, y_t)` of the increasing isotonic fit of targets `y` on `x` (1-D).

    Equal to scikit-learn's `IsotonicRegression().fit(x, y)`'s `X_thresholds_` and
    `y_thresholds_` for float64 input (to rounding): ties pooled, PAV, and only the first
    and last point of each constant run kept.
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    order = np.argsort(x, kind="stable")  # the order within ties changes no group sum
    x, y = x[order], y[order]
    start = _tie_groups(x)
    group = np.cumsum(start) - 1
    unique_x = x[start]
    counts = np.bincount(group).astype(np.float64)
    sums = np.bincount(group, y)
    fitted = pool_adjacent_violators(sums / counts, counts, sums)
    keep = np.ones(len(fitted), dtype=bool)
    keep[1:-1] = (fitted[1:-1] != fitted[:-2]) | (fitted[1:-1] != fitted[2:])
    return unique_x[keep], fitted[keep]


def fit_isotonic_calibration(probabilities, labels):
    """Isotonic calibration: the non-decreasing map closest (least squares) to the labels.

    For each column (the probability of class 1 for a binary classifier; each class's
    probability, one-vs-rest, for k >= 2 classes) PAV finds the non-decreasing f minimizing
    sum_i (f(p_i) - [y_i = class])^2 over the held-out examples; a new probability is
    mapped by linear interpolation between the fitted thresholds (clipped outside them), as
    scikit-learn's `IsotonicRegression(out_of_bounds="clip")`, ties included. For k >= 2
    the k values are renormalized to sum to 1 (a row of zeros becomes uniform). It may
    change the predicted class; it needs more held-out data than a parametric map.

    Args:
        probabilities: `(n, k)` softmax probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier (not logits: they are rejected).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.

    Returns:
        An `IsotonicCalibrationMap` (`x_thresholds`, `y_thresholds` per column;
        `predict(p)`).

    Raises:
        ValueError: for bad input, or when the labels are all one class (the fit would be
            the constant 0 or 1, ignoring the classifier).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_isotonic_calibration
    >>> p = np.array([0.1, 0.3, 0.4, 0.6, 0.8, 0.9])  # probabilities of class 1
    >>> fitted = fit_isotonic_calibration(p, [0, 1, 0, 0, 1, 1])
    >>> fitted.y_thresholds[0].tolist()  # 0.3, 0.4, 0.6 pooled: mean label 1/3
    [0.0, 0.3333333333333333, 0.3333333333333333, 1.0, 1.0]
    >>> fitted.predict(np.array([0.2, 0.7])).round(4).tolist()  # linear in between
    [0.1667, 0.6667]

    References: Zadrozny & Elkan, KDD 2002; Guo et al., ICML 2017, arXiv:1706.04599,
    Section 4.1.
    """
    columns, labels, _ = _one_vs_rest.probability_columns(probabilities, labels)
    return _fit_columns(columns, labels)


def _fit_columns(columns, labels):
    _validation.check_two_classes(
        labels,
        "Isotonic calibration",
        "the fit would be the constant 0 or 1, a map that ignores the classifier and gives "
        "the other classes probability 0",
    )
    num_columns = columns.shape[1]
    fitted = [
        isotonic_thresholds(columns[:, j], _one_vs_rest.targets(labels, j, num_columns))
        for j in range(num_columns)
    ]
    x, y = zip(*fitted, strict=True)
    return IsotonicCalibrationMap(x, y)


@keras.saving.register_keras_serializable(package="keras_normkit")
class IsotonicCalibration(LookupTableWrapper):
    """Isotonic calibration of a trained classifier: a fitted non-decreasing map.

    `calibrate(x, y)` fits, for each column (class 1's probability for a binary
    classifier; each class's probability, one-vs-rest, otherwise), the non-decreasing map
    f closest in squared error to the held-out labels (PAV, see `fit_isotonic_calibration`,
    equal to scikit-learn's `IsotonicRegression`). The wrapper maps a probability by
    linear interpolation between the fitted thresholds (clipped outside them) and, for
    k >= 2 classes, renormalizes the k values to sum to 1 (a row of zeros becomes
    uniform). It may change the argmax. The thresholds are non-trainable weights
    `x_thresholds` and `y_thresholds` of shape `(c, num_breakpoints)` (each column padded
    with its last point), recorded in `get_config`, so `.keras` files reload without
    `custom_objects` and `model.export()` serves the map (a binary search and one
    interpolation in `keras.ops`). Their size is fixed when they are created, since Keras
    cannot add weights to a built layer: by the first `calibrate`, as twice the
    breakpoints its fit needs (so recalibrating on similar data fits), or, for a wrapper
    built before (called, wired into a model), as 1024. A later fit needing more raises a
    `ValueError` that gives the size to pass. Before `calibrate`, calling, predicting with
    or exporting the wrapper, and reading `calibration_map_`, raise `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default: softmax, or sigmoid for `k = 1`) or `"logits"`
            (the calibrated logits) for the wrapper's output.
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.
        num_breakpoints: Size of the threshold weights (>= 2), or `None` (default) to let
            the first `calibrate` choose it (see above); restored by `from_config`.

    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import IsotonicCalibration
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2000, 1)).astype("float32")
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-x[:, 0]))).astype("int32")
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Rescaling(4.0)])
    >>> calibrated = IsotonicCalibration(model).calibrate(x, y, verbose=0)
    >>> p = keras.ops.convert_to_numpy(calibrated(np.array([[-1.0], [0.0], [1.0]])))
    >>> bool(np.all(np.diff(p[:, 0]) >= 0))  # non-decreasing
    True

    References: Zadrozny & Elkan, KDD 2002; Guo et al., "On Calibration of Modern Neural
    Networks", ICML 2017, arXiv:1706.04599, Section 4.1.
    """

    _tables = (("x_thresholds", "zeros"), ("y_thresholds", "zeros"))
    _fit_name = "isotonic"

    def __init__(
        self,
        model,
        output="probabilities",
        model_output="auto",
        num_breakpoints=None,
        **kwargs,
    ):
        if num_breakpoints is not None:
            num_breakpoints = check_int("num_breakpoints", num_breakpoints, 2)
        super().__init__(model, output=output, model_output=model_output, **kwargs)
        self._init_tables(num_breakpoints)

    def _map_columns(self, columns):
        x = ops.cast(self.x_thresholds, columns.dtype)
        y = ops.cast(self.y_thresholds, columns.dtype)
        size = self.num_breakpoints
        p = ops.minimum(ops.maximum(columns, x[:, 0]), x[:, -1])
        index = _lookup.ops_count_below(x, p, strict=False) - 1
        index = ops.clip(index, 0, size - 2)
        x0, x1 = _lookup.ops_gather(x, index), _lookup.ops_gather(x, index + 1)
        y0, y1 = _lookup.ops_gather(y, index), _lookup.ops_gather(y, index + 1)
        width = x1 - x0
        positive = ops.greater(width, 0.0)
        t = ops.where(positive, (p - x0) / ops.where(positive, width, 1.0), 0.0)
        return y0 + t * (y1 - y0)

    def _fit(self, logits, labels):
        fitted = _fit_columns(self._numpy_columns(logits), labels)
        self._assign_tables(fitted.x_thresholds, fitted.y_thresholds)

    @property
    def calibration_map_(self):
        """The fitted `IsotonicCalibrationMap` (from the weights); `NotCalibratedError` before."""
        self._check_calibrated_map()
        xs = ops.convert_to_numpy(self.x_thresholds).astype(np.float64)
        ys = ops.convert_to_numpy(self.y_thresholds).astype(np.float64)
        kept_x, kept_y = [], []
        for x, y in zip(xs, ys, strict=True):
            size = int(np.argmax(x == x[-1])) + 1  # drop the padding (repeats of the last)
            kept_x.append(x[:size])
            kept_y.append(y[:size])
        return IsotonicCalibrationMap(kept_x, kept_y)

    def get_config(self):
        return {**super().get_config(), "num_breakpoints": self.num_breakpoints}
