"""Bayesian binning into quantiles, BBQ (Naeini, Cooper, Hauskrecht, AAAI 2015):
`fit_bayesian_binning` and `BayesianBinning`.

BBQ averages many histogram-binning models instead of choosing one. For a column (the
probability of class 1 for a binary classifier, each class's probability one-vs-rest
otherwise) with n held-out probabilities, model M_B splits [0, 1] into B equal-frequency
bins (the interior edges are the (b / B)-quantiles of the held-out p, NumPy's linear
interpolation; tied edges are merged, so a model can have fewer than B bins), for every B
from max(1, floor(n^(1/3) / C)) to ceil(C n^(1/3)) (C = 10 in the paper). Each bin has a
Beta prior of equivalent sample size N' / B centred on the bin's midpoint p_b:
alpha_b = (N' / B) p_b, beta_b = (N' / B) (1 - p_b) (N' = 2). A model's score is its
marginal likelihood, the BDeu score (uniform prior over models):

    P(D | M) = prod_b  Gamma(N'/B) / Gamma(n_b + N'/B)
                     * Gamma(m_b + alpha_b) / Gamma(alpha_b)
                     * Gamma(n_b - m_b + beta_b) / Gamma(beta_b),

with n_b the held-out examples in bin b and m_b the positive ones among them. A new
probability p is mapped to the score-weighted mean, over the models, of the posterior mean
(m_b + alpha_b) / (n_b + N'/B) of the bin of each model that holds p. With k >= 2 columns the
k calibrated values are renormalized to sum to 1.

The average of piecewise-constant maps is piecewise constant on the union of the models'
edges, so the fitted map is stored as one histogram (`edges`, `values` per column) and
served like `HistogramBinning`. Models whose normalized weight is below 1e-12 are left out
of that sum (they change no output by more than 1e-12).

netcal's `BBQ` (1.4) scores models by BIC or AIC with maximum-likelihood bin values and an
"elbow" cut instead of the BDeu score (its documentation says BDeu is not supported): the
two agree only approximately (tests/calibration/binning/test_bayesian.py measures how
closely).

Reference: Naeini, Cooper, Hauskrecht, "Obtaining Well Calibrated Probabilities Using
Bayesian Binning", AAAI 2015.
"""

import math

import keras
import numpy as np

from keras_normkit._validation import check_int, check_number
from keras_normkit.calibration import _bins, _one_vs_rest, _validation
from keras_normkit.calibration.binning._lookup import LookupTableWrapper
from keras_normkit.calibration.binning.histogram import (
    HistogramBinningMap,
    histogram_tables,
    ops_histogram,
)

__all__ = ["BayesianBinning", "BayesianBinningMap", "fit_bayesian_binning"]

#: Models whose normalized weight is below this are left out of the average.
MIN_WEIGHT = 1e-12


class BayesianBinningMap(HistogramBinningMap):
    """A fitted BBQ map: per column, the averaged histogram and the models it averages.

    Attributes:
        edges: One increasing array per column of the interior edges of the averaged map
            (the union of the kept models' edges).
        values: One array per column of its values (one more than edges), in [0, 1].
        num_bins: One array per column of the number of bins of each kept model (`None`
            for a map read back from a wrapper's weights).
        model_weights: One array per column of the kept models' normalized BDeu scores.

    `predict(probabilities)` maps each column's probability to the value of its interval
    and, for k >= 2 columns, renormalizes the rows to sum to 1 (shapes as the fitted
    probabilities: `(n,)`/`(n, 1)` for a binary classifier, `(n, k)` otherwise).
    """

    def __init__(self, edges, values, num_bins=None, model_weights=None):
        super().__init__(edges, values)
        self.num_bins = num_bins
        self.model_weights = model_weights

    def _summary(self):
        models = "?" if self.num_bins is None else [len(b) for b in self.num_bins]
        return f"columns={self.num_columns}, models per column={models}"


def _check_prior_strength(prior_strength):
    return check_number("prior_strength", prior_strength, 0.0, strict_minimum=True)


def _check_bin_range_factor(bin_range_factor):
    return check_number("bin_range_factor", bin_range_factor, 1.0)


def bin_range(num_examples, bin_range_factor):
    """The numbers of bins B of the averaged models: n^(1/3) / C .. C n^(1/3)."""
    root = num_examples ** (1.0 / 3.0)
    low = max(1, math.floor(root / bin_range_factor))
    return range(low, max(low, math.ceil(bin_range_factor * root)) + 1)


# log Γ elementwise from the standard library: the core needs only Keras and NumPy (SciPy is
# an extra), and the arrays here have one entry per bin.
_gammaln = np.vectorize(math.lgamma, otypes=[np.float64])


def _model(sorted_p, positives_before, num_bins, prior_strength):
    """Edges, log BDeu score and posterior bin means of the B-bin equal-frequency model."""
    n = len(sorted_p)
    quantiles = np.interp(np.arange(1, num_bins) / num_bins * (n - 1), np.arange(n), sorted_p)
    edges = np.unique(quantiles)
    edges = edges[edges < sorted_p[-1]]
    # Bin b is (e_{b-1}, e_b]: the examples up to e_b are those at or before its right end.
    ends = np.concatenate([np.searchsorted(sorted_p, edges, side="right"), [n]])
    starts = np.concatenate([[0], ends[:-1]])
    counts = ends - starts
    positives = positives_before[ends] - positives_before[starts]
    lows = np.concatenate([[0.0], edges])
    highs = np.concatenate([edges, [1.0]])
    strength = prior_strength / len(counts)
    alpha = strength * 0.5 * (lows + highs)
    beta = strength - alpha
    log_score = float(
        np.sum(
            _gammaln(strength)
            - _gammaln(counts + strength)
            + _gammaln(positives + alpha)
            - _gammaln(alpha)
            + _gammaln(counts - positives + beta)
            - _gammaln(beta)
        )
    )
    return edges, log_score, (positives + alpha) / (counts + strength)


def _fit_column(p, targets, prior_strength, bin_range_factor):
    order = np.argsort(p, kind="stable")
    sorted_p = p[order]
    positives_before = np.concatenate([[0.0], np.cumsum(targets[order])])
    models, seen = [], set()
    for num_bins in bin_range(len(p), bin_range_factor):
        edges, log_score, means = _model(sorted_p, positives_before, num_bins, prior_strength)
        key = edges.tobytes()
        if key not in seen:  # tied quantiles can make two B give the same binning
            seen.add(key)
            models.append((num_bins, edges, log_score, means))
    log_scores = np.array([m[2] for m in models])
    weights = np.exp(log_scores - log_scores.max())
    weights /= weights.sum()
    kept = [i for i in range(len(models)) if weights[i] >= MIN_WEIGHT]
    kept_weights = weights[kept] / weights[kept].sum()
    union = np.unique(np.concatenate([models[i][1] for i in kept]))
    # The value on (u_{j-1}, u_j] (and above the last edge): each model's bin holding it.
    right_ends = np.concatenate([union, [np.inf]])
    values = np.zeros(len(right_ends))
    for i, w in zip(kept, kept_weights, strict=True):
        _, edges, _, means = models[i]
        values += w * means[np.searchsorted(edges, right_ends, side="left")]
    num_bins = np.array([models[i][0] for i in kept])
    return union, np.clip(values, 0.0, 1.0), num_bins, kept_weights


def fit_bayesian_binning(probabilities, labels, prior_strength=2.0, bin_range_factor=10.0):
    """BBQ: the BDeu-weighted average of equal-frequency histogram-binning models.

    For each column (the probability of class 1 for a binary classifier, each class's
    probability one-vs-rest otherwise), fits one equal-frequency binning model for every
    number of bins B from n^(1/3) / C to C n^(1/3) (C = `bin_range_factor`), scores each by
    its marginal likelihood under Beta priors of equivalent sample size N' / B centred on
    the bins' midpoints (the BDeu score, N' = `prior_strength`), and maps a probability to
    the score-weighted mean of the models' posterior bin means. For k >= 2 the k values are
    renormalized to sum to 1 (a row of zeros becomes uniform). It may change the predicted
    class.

    Args:
        probabilities: `(n, k)` softmax probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier (not logits: they are rejected).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        prior_strength: The equivalent sample size N' > 0 of the Beta priors, shared by the
            B bins of a model (default 2, as in the paper).
        bin_range_factor: C >= 1 of the range of B (default 10, as in the paper).

    Returns:
        A `BayesianBinningMap` (`edges`, `values`, `num_bins`, `model_weights` per column;
        `predict(p)`).

    Raises:
        ValueError: for bad input, or when the labels are all one class (every model would
            then predict that class with certainty, ignoring the classifier).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_bayesian_binning
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(5000)  # probabilities of class 1, too extreme: the truth is
    >>> y = (rng.random(5000) < 0.25 + 0.5 * p).astype(int)  # 0.25 + 0.5 p
    >>> fitted = fit_bayesian_binning(p, y)
    >>> np.round(fitted.predict(np.array([0.1, 0.5, 0.9])), 1).tolist()
    [0.3, 0.5, 0.7]

    Reference: Naeini, Cooper, Hauskrecht, "Obtaining Well Calibrated Probabilities Using
    Bayesian Binning", AAAI 2015.
    """
    prior_strength = _check_prior_strength(prior_strength)
    bin_range_factor = _check_bin_range_factor(bin_range_factor)
    columns, labels, _ = _one_vs_rest.probability_columns(probabilities, labels)
    return _fit_columns(columns, labels, prior_strength, bin_range_factor)


def _fit_columns(columns, labels, prior_strength, bin_range_factor):
    _validation.check_two_classes(
        labels,
        "Bayesian binning (BBQ)",
        "every model would predict that class with certainty, a constant map that ignores "
        "the classifier",
    )
    num_columns = columns.shape[1]
    fitted = [
        _fit_column(
            columns[:, j],
            _one_vs_rest.targets(labels, j, num_columns),
            prior_strength,
            bin_range_factor,
        )
        for j in range(num_columns)
    ]
    edges, values, num_bins, weights = zip(*fitted, strict=True)
    return BayesianBinningMap(edges, values, num_bins, weights)


@keras.saving.register_keras_serializable(package="keras_normkit")
class BayesianBinning(LookupTableWrapper):
    """Bayesian binning into quantiles (BBQ) of a trained classifier.

    `calibrate(x, y)` fits, for each column (class 1's probability for a binary
    classifier; each class's probability, one-vs-rest, otherwise), equal-frequency
    histogram-binning models with B = n^(1/3) / C .. C n^(1/3) bins, and averages their
    posterior bin means weighted by their BDeu marginal likelihoods (see
    `fit_bayesian_binning`). The average is one piecewise-constant map per column, stored
    as non-trainable weights `bin_edges` (interior edges rounded down to float32, padded
    with 1) and `bin_values` of shape `(c, num_breakpoints)` and served by a binary search
    in `keras.ops` (saved with the model, kept by `model.export()`); for k >= 2 classes the
    k values are renormalized to sum to 1. It may change the argmax. The size of the
    weights is fixed when they are created (Keras cannot add weights to a built layer): by
    the first `calibrate`, as twice what its fit needs, or, for a wrapper built before, as
    1024; a later fit needing more raises a `ValueError` giving the size to pass. Before
    `calibrate`, calling, predicting with or exporting the wrapper, and reading
    `calibration_map_`, raise `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default: softmax, or sigmoid for `k = 1`) or `"logits"`
            (the calibrated logits) for the wrapper's output.
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        prior_strength: Equivalent sample size N' > 0 of each model's Beta priors
            (default 2).
        bin_range_factor: C >= 1 of the range of numbers of bins (default 10).
        num_breakpoints: Size of the table weights (>= 2), or `None` (default) to let the
            first `calibrate` choose it (see above); restored by `from_config`.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.

    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import BayesianBinning
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2000, 1)).astype("float32")
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-x[:, 0]))).astype("int32")
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Rescaling(4.0)])
    >>> calibrated = BayesianBinning(model).calibrate(x, y, verbose=0)
    >>> p = keras.ops.convert_to_numpy(calibrated(x[:3]))
    >>> p.shape, bool(np.all((0 <= p) & (p <= 1)))
    ((3, 1), True)
    >>> fitted = calibrated.calibration_map_  # one averaged histogram per column
    >>> len(fitted.values[0]) == len(fitted.edges[0]) + 1
    True

    Reference: Naeini, Cooper, Hauskrecht, "Obtaining Well Calibrated Probabilities Using
    Bayesian Binning", AAAI 2015.
    """

    _tables = (("bin_edges", "ones"), ("bin_values", "zeros"))
    _fit_name = "BBQ"

    def __init__(
        self,
        model,
        output="probabilities",
        model_output="auto",
        prior_strength=2.0,
        bin_range_factor=10.0,
        num_breakpoints=None,
        **kwargs,
    ):
        prior_strength = _check_prior_strength(prior_strength)
        bin_range_factor = _check_bin_range_factor(bin_range_factor)
        if num_breakpoints is not None:
            num_breakpoints = check_int("num_breakpoints", num_breakpoints, 2)
        super().__init__(model, output=output, model_output=model_output, **kwargs)
        self.prior_strength = prior_strength
        self.bin_range_factor = bin_range_factor
        self._init_tables(num_breakpoints)

    def _map_columns(self, columns):
        return ops_histogram(self.bin_edges, self.bin_values, columns)

    def _fit(self, logits, labels):
        fitted = _fit_columns(
            self._numpy_columns(logits), labels, self.prior_strength, self.bin_range_factor
        )
        edges = [_bins.round_down_to_dtype(e) for e in fitted.edges]
        self._assign_tables(edges, fitted.values, first_fill=1.0)

    @property
    def calibration_map_(self):
        """The fitted `BayesianBinningMap` (from the weights); `NotCalibratedError` before."""
        self._check_calibrated_map()
        return BayesianBinningMap(*histogram_tables(self.bin_edges, self.bin_values))

    def get_config(self):
        return {
            **super().get_config(),
            "prior_strength": self.prior_strength,
            "bin_range_factor": self.bin_range_factor,
            "num_breakpoints": self.num_breakpoints,
        }
