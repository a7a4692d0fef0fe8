"""Histogram binning (Zadrozny & Elkan, ICML 2001): `fit_histogram_binning` and `HistogramBinning`.

The predicted probability p of a column (the probability of class 1 for a binary
classifier, each class's probability one-vs-rest otherwise) is split into M bins; every
bin's calibrated value theta_m is the fraction of positive labels among the held-out
examples in it (the squared-loss minimizer). Bins are B_1 = [0, e_1], B_m = (e_{m-1}, e_m]
and B_M = (e_{M-1}, 1], as in Guo et al. (2017) and scikit-learn's `calibration_curve`:

* `strategy="uniform"`: equal width, e_m = m / M (the bins of `expected_calibration_error`).
* `strategy="quantile"`: equal mass, e_m = the (m / M)-quantile of the held-out p (NumPy's
  linear interpolation, as `calibration_curve(strategy="quantile")`). Edges that coincide
  because of tied probabilities, and edges at the largest held-out p, are dropped (their
  bins could hold no held-out example), so a column can have fewer than M bins.

A bin with fewer than `min_samples_per_bin` held-out examples (default 1: no empty bin)
raises a `ValueError` saying which bin of which column; with `min_samples_per_bin=0` an
empty bin keeps its centre as its value. With k >= 2 columns the k calibrated values are
renormalized to sum to 1 (a row of zeros becomes uniform).

References: Zadrozny & Elkan, "Obtaining calibrated probability estimates from decision
trees and naive Bayesian classifiers", ICML 2001; Guo, Pleiss, Sun, Weinberger, "On
Calibration of Modern Neural Networks", ICML 2017, arXiv:1706.04599, Section 4.1.
"""

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_int, check_string_choice
from keras_normkit.calibration import _bins, _one_vs_rest, _validation
from keras_normkit.calibration._one_vs_rest import OneVsRestMap, OneVsRestWrapper
from keras_normkit.calibration.binning import _lookup

__all__ = ["HistogramBinning", "HistogramBinningMap", "fit_histogram_binning"]

STRATEGIES = ("uniform", "quantile")


def _check_strategy(strategy):
    return check_string_choice("strategy", strategy, STRATEGIES)


def _check_min_samples(min_samples_per_bin):
    return check_int("min_samples_per_bin", min_samples_per_bin, 0)


class HistogramBinningMap(OneVsRestMap):
    """A fitted histogram-binning map: per column, interior bin edges and bin values.

    Attributes:
        edges: One array per column of its interior edges e_1 < ... < e_{M'-1} (M' <= M
            bins; the outer edges are 0 and 1).
        values: One array per column of its M' bin values theta_m in [0, 1].
        counts: One array per column of the number of held-out examples per bin (`None`
            for a map read back from a wrapper's weights).

    `predict(probabilities)` applies it: each column's probability is replaced by the value
    of its bin, and for k >= 2 columns the rows are renormalized to sum to 1 (a row of
    zeros becomes uniform). Input and output shapes are those of the fitted probabilities:
    `(n,)`/`(n, 1)` for a binary classifier, `(n, k)` otherwise.
    """

    def __init__(self, edges, values, counts=None):
        self.edges = [np.asarray(e, np.float64) for e in edges]
        self.values = [np.asarray(v, np.float64) for v in values]
        self.counts = None if counts is None else [np.asarray(c, np.int64) for c in counts]

    _per_column = "values"

    def _map_column(self, column, values):
        return self.values[column][np.searchsorted(self.edges[column], values, side="left")]

    def _summary(self):
        return f"columns={self.num_columns}, bins per column={[len(v) for v in self.values]}"


def _interior_edges(p, num_bins, strategy):
    if strategy == "uniform":
        return _bins.equal_width_edges(num_bins)
    quantiles = np.percentile(p, np.linspace(0.0, 1.0, num_bins + 1) * 100)[1:-1]
    edges = np.unique(quantiles)
    return edges[edges < p.max()]


def _fit_column(p, t, num_bins, strategy, min_samples_per_bin, column, num_columns):
    edges = _interior_edges(p, num_bins, strategy)
    index = np.searchsorted(edges, p, side="left")
    counts = np.bincount(index, minlength=len(edges) + 1)
    sums = np.bincount(index, weights=t, minlength=len(edges) + 1)
    short = np.flatnonzero(counts < min_samples_per_bin)
    if short.size:
        m = int(short[0])
        low = 0.0 if m == 0 else edges[m - 1]
        high = 1.0 if m == len(edges) else edges[m]
        what = "the positive class" if num_columns == 1 else f"class {column}"
        raise ValueError(
            f"Histogram binning needs at least min_samples_per_bin={min_samples_per_bin} "
            f"held-out example(s) in every bin. With num_bins={num_bins} and "
            f"strategy={strategy!r}, bin {m} ({'[' if m == 0 else '('}{low:.4g}, {high:.4g}]) "
            f"of the probabilities of {what} holds {int(counts[m])} of {len(p)} examples "
            f"({short.size} bin(s) below the minimum). Use fewer bins, strategy='quantile', "
            "more held-out data, or min_samples_per_bin=0 (an empty bin then keeps its "
            "centre as its value)."
        )
    lows = np.concatenate([[0.0], edges])
    highs = np.concatenate([edges, [1.0]])
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(counts > 0, sums / np.maximum(counts, 1), 0.5 * (lows + highs))
    return edges, values, counts


def fit_histogram_binning(
    probabilities, labels, num_bins=15, strategy="uniform", min_samples_per_bin=1
):
    """Histogram binning: each bin's calibrated value is the mean held-out label in it.

    For each column (the probability of class 1 for a binary classifier, each class's
    probability one-vs-rest for k >= 2 classes), the held-out probabilities are split into
    M bins B_m (`strategy="uniform"`: e_m = m / M; `"quantile"`: e_m = the (m/M)-quantile of
    the held-out p; B_1 = [0, e_1], B_m = (e_{m-1}, e_m]) and bin m gets the value
    theta_m = (1/|B_m|) sum_{i in B_m} [y_i = class], the squared-loss minimizer. A new
    probability in B_m is mapped to theta_m; for k >= 2 the k values are renormalized to
    sum to 1 (a row of zeros becomes uniform). Binning can change the predicted class.

    Args:
        probabilities: `(n, k)` softmax probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier (not logits: they are rejected).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        num_bins: Number of bins M (15 in Guo et al.).
        strategy: `"uniform"` (equal width) or `"quantile"` (equal mass; tied edges are
            merged), the names of scikit-learn's `calibration_curve`.
        min_samples_per_bin: Smallest number of held-out examples a bin may hold (default
            1; a `ValueError` names the first bin below it). 0 allows empty bins, which then
            keep their centre as value.

    Returns:
        A `HistogramBinningMap` (`edges`, `values`, `counts` per column; `predict(p)`).

    Raises:
        ValueError: for bad input; when the labels are all one class (every bin would get
            the value 0 or 1, ignoring the classifier); or when a bin holds fewer than
            `min_samples_per_bin` examples.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_histogram_binning
    >>> p = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.9])  # probabilities of class 1
    >>> fitted = fit_histogram_binning(p, [0, 0, 1, 0, 1, 1], num_bins=2)
    >>> fitted.values[0].tolist()  # bins [0, 0.5] and (0.5, 1]
    [0.3333333333333333, 0.6666666666666666]
    >>> fitted.predict(np.array([0.05, 0.95])).round(4).tolist()
    [0.3333, 0.6667]

    References: Zadrozny & Elkan, ICML 2001; Guo et al., ICML 2017, arXiv:1706.04599,
    Section 4.1.
    """
    num_bins = _validation.check_num_bins(num_bins)
    strategy = _check_strategy(strategy)
    min_samples_per_bin = _check_min_samples(min_samples_per_bin)
    columns, labels, _ = _one_vs_rest.probability_columns(probabilities, labels)
    return _fit_columns(columns, labels, num_bins, strategy, min_samples_per_bin)


def _fit_columns(columns, labels, num_bins, strategy, min_samples_per_bin):
    _validation.check_two_classes(
        labels,
        "Histogram binning",
        "every bin would get the value 0 or 1, a constant map that ignores the classifier "
        "and gives the other classes probability 0",
    )
    num_columns = columns.shape[1]
    fitted = [
        _fit_column(
            columns[:, j],
            _one_vs_rest.targets(labels, j, num_columns),
            num_bins,
            strategy,
            min_samples_per_bin,
            j,
            num_columns,
        )
        for j in range(num_columns)
    ]
    edges, values, counts = zip(*fitted, strict=True)
    return HistogramBinningMap(edges, values, counts)


def ops_histogram(bin_edges, bin_values, columns):
    """The histogram map in `keras.ops`: the value of the bin of each `columns[i, j]`.

    `bin_edges` `(c, S)` holds each column's interior edges (padded with 1), `bin_values`
    `(c, S)` its bin values; bin m is (e_{m-1}, e_m], found by a binary search.
    """
    edges = ops.cast(bin_edges, columns.dtype)
    values = ops.cast(bin_values, columns.dtype)
    index = _lookup.ops_count_below(edges, columns, strict=True)
    return _lookup.ops_gather(values, ops.minimum(index, values.shape[-1] - 1))


def histogram_tables(bin_edges, bin_values):
    """Per column, the interior edges and bin values stored in padded table weights."""
    edges = ops.convert_to_numpy(bin_edges).astype(np.float64)
    values = ops.convert_to_numpy(bin_values).astype(np.float64)
    kept_edges, kept_values = [], []
    for e, v in zip(edges, values, strict=True):
        real = e[e < 1.0]
        kept_edges.append(real)
        kept_values.append(v[: len(real) + 1])
    return kept_edges, kept_values


@keras.saving.register_keras_serializable(package="keras_normkit")
class HistogramBinning(OneVsRestWrapper):
    """Histogram binning of a trained classifier: p -> theta_m for p in bin B_m.

    `calibrate(x, y)` splits each column's held-out probability (class 1's for a binary
    classifier; each class's, one-vs-rest, otherwise) into M bins, equal-width
    (`strategy="uniform"`, edges m / M) or equal-mass (`"quantile"`), and sets each bin's
    value theta_m to the fraction of positive held-out labels in it (see
    `fit_histogram_binning`). The wrapper maps a probability in bin B_m to theta_m and,
    for k >= 2 classes, renormalizes the k values to sum to 1 (a row of zeros becomes
    uniform). It may change the argmax. The edges and values are non-trainable weights
    `bin_edges` `(c, M)` (interior edges rounded down to float32, which keeps every float32
    probability in its bin; padded with 1) and `bin_values` `(c, M)`, so the map is saved
    with the model and served by `model.export()`; the lookup is a binary search in
    `keras.ops`. Before `calibrate`, calling, predicting with or exporting the wrapper, and
    reading `calibration_map_`, raise `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default: softmax, or sigmoid for `k = 1`) or `"logits"`
            (the calibrated logits) for the wrapper's output.
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.
        num_bins: Number of bins M (default 15, as in Guo et al.).
        strategy: `"uniform"` (equal width, default) or `"quantile"` (equal mass).
        min_samples_per_bin: Smallest number of held-out examples per bin (default 1):
            `calibrate` raises a `ValueError` naming a bin below it. 0 allows empty bins,
            which keep their centre as value.

    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import HistogramBinning
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2000, 1)).astype("float32")
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-x[:, 0]))).astype("int32")
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Rescaling(4.0)])
    >>> calibrated = HistogramBinning(model, num_bins=10).calibrate(x, y, verbose=0)
    >>> p = keras.ops.convert_to_numpy(calibrated(x[:3]))
    >>> p.shape, bool(np.all((0 <= p) & (p <= 1)))
    ((3, 1), True)

    References: Zadrozny & Elkan, ICML 2001; Guo et al., "On Calibration of Modern Neural
    Networks", ICML 2017, arXiv:1706.04599, Section 4.1.
    """

    def __init__(
        self,
        model,
        output="probabilities",
        model_output="auto",
        num_bins=15,
        strategy="uniform",
        min_samples_per_bin=1,
        **kwargs,
    ):
        num_bins = _validation.check_num_bins(num_bins)
        strategy = _check_strategy(strategy)
        min_samples_per_bin = _check_min_samples(min_samples_per_bin)
        super().__init__(model, output=output, model_output=model_output, **kwargs)
        self.num_bins = num_bins
        self.strategy = strategy
        self.min_samples_per_bin = min_samples_per_bin
        if self.num_classes is not None:
            self._create_calibration_weights(self.num_classes)

    def _create_calibration_weights(self, num_classes):
        if getattr(self, "num_bins", None) is None:  # called by the base __init__: later
            return
        shape = (self._num_columns(num_classes), self.num_bins)
        self.bin_edges = self.add_weight(
            shape=shape, initializer="ones", trainable=False, name="bin_edges"
        )
        self.bin_values = self.add_weight(
            shape=shape, initializer="zeros", trainable=False, name="bin_values"
        )

    def _calibration_weights_created(self):
        return getattr(self, "bin_values", None) is not None

    def _map_columns(self, columns):
        return ops_histogram(self.bin_edges, self.bin_values, columns)

    def _fit(self, logits, labels):
        fitted = _fit_columns(
            self._numpy_columns(logits),
            labels,
            self.num_bins,
            self.strategy,
            self.min_samples_per_bin,
        )
        edges = [_bins.round_down_to_dtype(e) for e in fitted.edges]
        _lookup.assign_table_pair(
            self.bin_edges, edges, self.bin_values, fitted.values, first_fill=1.0
        )

    @property
    def calibration_map_(self):
        """The fitted `HistogramBinningMap` (from the weights); `NotCalibratedError` before."""
        self._check_calibrated_map()
        return HistogramBinningMap(*histogram_tables(self.bin_edges, self.bin_values))

    def get_config(self):
        return {
            **super().get_config(),
            "num_bins": self.num_bins,
            "strategy": self.strategy,
            "min_samples_per_bin": self.min_samples_per_bin,
        }
