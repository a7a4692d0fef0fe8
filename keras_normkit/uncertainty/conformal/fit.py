"""Split conformal calibration of prediction sets on arrays: `fit_prediction_sets`.

The engine of `ConformalClassifier` (which runs the model, then calls it) and of the
benchmarks (which fit thousands of splits on cached probabilities).
"""

import math

import numpy as np

from keras_normkit._validation import (
    check_bool,
    check_number,
    check_seed,
    check_string_choice,
)
from keras_normkit.uncertainty import _arrays
from keras_normkit.uncertainty.conformal import _ranking
from keras_normkit.uncertainty.conformal.quantile import (
    conformal_quantile,
    minimum_calibration_size,
)
from keras_normkit.uncertainty.conformal.raps import check_regularization, select_raps_parameters
from keras_normkit.uncertainty.conformal.sets import draw_u

__all__ = ["PredictionSetMap", "fit_prediction_sets"]


class PredictionSetMap:
    """Fitted conformal prediction sets (returned by `fit_prediction_sets`).

    Attributes:
        score: `"lac"`, `"aps"` or `"raps"`.
        threshold: The fitted tau (a float), or `(k,)` one per class (Mondrian).
        randomized: Whether `predict` randomizes (APS/RAPS).
        k_reg: RAPS's k_reg (0 for LAC and APS).
        lam: RAPS's lam (0 for LAC and APS).
        alpha: The miscoverage level it was fitted for.

    `predict(probabilities, u=None, seed=None)` returns the sets `(n, k)` as a boolean mask
    (see `prediction_sets`).
    """

    def __init__(self, score, threshold, randomized, k_reg, lam, alpha):
        self.score = score
        self.threshold = threshold
        self.randomized = bool(randomized)
        self.k_reg = int(k_reg)
        self.lam = float(lam)
        self.alpha = float(alpha)

    @property
    def thresholds(self):
        """The thresholds as an array (one per class for Mondrian sets, else a 0-d array)."""
        return np.asarray(self.threshold, np.float64)

    def predict(self, probabilities, u=None, seed=None):
        """The prediction sets `(n, k)` (bool) of `probabilities` `(n, k)`."""
        probabilities = _arrays.check_probabilities(probabilities)
        thresholds = self.thresholds
        if thresholds.ndim == 1 and thresholds.shape != (probabilities.shape[1],):
            raise ValueError(
                f"The sets were fitted on {len(thresholds)} classes. Received probabilities "
                f"of shape {probabilities.shape}."
            )
        randomized = self.randomized and self.score != "lac"
        u = draw_u(u, len(probabilities), seed) if randomized else None
        return _ranking.set_mask(
            probabilities, thresholds, self.score, self.randomized, self.k_reg, self.lam, u
        )

    def __repr__(self):
        threshold = f"{self.threshold:.6g}" if np.ndim(self.threshold) == 0 else "per class"
        return (
            f"PredictionSetMap(score={self.score!r}, threshold={threshold}, "
            f"randomized={self.randomized}, k_reg={self.k_reg}, lam={self.lam:g}, "
            f"alpha={self.alpha:g})"
        )


def calibration_scores(probabilities, labels, score, k_reg, lam, u):
    """The scores of the true labels: 1 - pi_y (LAC), else the randomized APS/RAPS score."""
    rows = np.arange(len(labels))
    if score == "lac":
        return 1.0 - probabilities[rows, labels]
    return _ranking.label_scores(probabilities, u, k_reg, lam)[rows, labels]


def _mondrian_thresholds(scores, labels, num_classes, alpha):
    needed = minimum_calibration_size(alpha)
    counts = np.bincount(labels, minlength=num_classes)
    short = np.flatnonzero(counts < needed)
    if len(short):
        listed = ", ".join(f"{c} ({counts[c]})" for c in short[:10])
        raise ValueError(
            f"Class-conditional (Mondrian) calibration needs at least {needed} calibration "
            f"examples of every class for alpha={alpha}. Classes with fewer (count): {listed}"
            + (" ..." if len(short) > 10 else "")
            + ". Use more calibration data, a larger alpha, or mondrian=False."
        )
    return np.array([conformal_quantile(scores[labels == c], alpha) for c in range(num_classes)])


def fit_prediction_sets(
    probabilities,
    labels,
    score="lac",
    alpha=0.1,
    randomized=True,
    k_reg=None,
    lam=None,
    mondrian=False,
    tuning_fraction=0.3,
    seed=None,
):
    """Split conformal prediction sets: the threshold fitted on held-out calibration data.

    1. RAPS with `k_reg` or `lam` left `None`: a random `tuning_fraction` of the examples
       (the paper's code holds out 30 %) chooses them (`select_raps_parameters`), the rest
       calibrates the threshold.
    2. The score of each calibration example's true label: 1 - pi_y for LAC; for APS/RAPS
       the randomized score rho(y) + u * pi_y + lam * (o(y) - k_reg)+ with u ~ U(0, 1), as
       the paper's Algorithm 2, its code and MAPIE compute it, whether or not the sets served
       are randomized (the non-randomized sets hold the randomized ones, so they cover at
       least as often).
    3. tau = the ceil((n + 1)(1 - alpha))-th smallest score (`conformal_quantile`), or with
       `mondrian=True` one tau_c per class from the examples of that class.

    For exchangeable calibration and test data, P(Y in C(X)) >= 1 - alpha (and, randomized,
    <= 1 - alpha + 1 / (n + 1)); with `mondrian=True` within each class. The official RAPS
    code thresholds at the plain (1 - alpha) empirical quantile, without the (n + 1)
    correction the guarantee needs; here it is applied.

    Args:
        probabilities: `(n, k)` softmax probabilities of the calibration examples (held out
            from training), e.g. softmax of `collect_logits` (after temperature scaling if
            wanted: the sets' coverage holds either way, their size is smaller with
            calibrated probabilities).
        labels: Integer labels `(n,)` (or one-hot).
        score: `"lac"`, `"aps"` or `"raps"`.
        alpha: Miscoverage level in (0, 1).
        randomized: APS/RAPS: randomized sets (exact coverage) or not (never empty,
            conservative). LAC sets are never randomized.
        k_reg: RAPS: integer >= 0, or None to choose it on tuning data.
        lam: RAPS: penalty >= 0, or None to choose it on tuning data.
        mondrian: Class-conditional thresholds (coverage 1 - alpha within every class).
        tuning_fraction: RAPS with a parameter to choose: the fraction of the examples held
            out for it, in (0, 1).
        seed: Integer seed (or a `numpy.random.Generator`) of the tuning split and the
            uniforms (None: not reproducible).

    Returns:
        A `PredictionSetMap`; `.predict(probabilities)` gives the sets.

    Raises:
        ValueError: bad arguments, labels out of range, or too few calibration examples for
            `alpha` (at least (1 - alpha) / alpha, per class with `mondrian=True`).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import coverage, fit_prediction_sets
    >>> rng = np.random.default_rng(0)
    >>> z = 3 * rng.normal(size=(4000, 10))
    >>> p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    >>> y = (p.cumsum(1) > rng.random((4000, 1))).argmax(1)  # labels drawn from p
    >>> fitted = fit_prediction_sets(p[:2000], y[:2000], "aps", alpha=0.1, seed=0)
    >>> round(coverage(fitted.predict(p[2000:], seed=1), y[2000:]), 2)
    0.9

    Reference: Angelopoulos, Bates, Malik, Jordan, ICLR 2021, arXiv:2009.14193
    (Algorithms 1-2); Romano, Sesia, Candes, NeurIPS 2020; Sadinle, Lei, Wasserman, JASA 2019.
    """
    check_string_choice("score", score, _ranking.SCORES)
    alpha = _arrays.check_alpha(alpha)
    check_bool("randomized", randomized)
    check_bool("mondrian", mondrian)
    tuning_fraction = check_number(
        "tuning_fraction", tuning_fraction, 0.0, 1.0, strict_minimum=True, strict_maximum=True
    )
    probabilities = _arrays.check_probabilities(probabilities)
    labels = _arrays.check_labels(labels, *probabilities.shape)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(check_seed(seed))
    if score != "raps":
        k_reg, lam = 0, 0.0
    elif k_reg is None or lam is None:
        if k_reg is not None or lam is not None:
            check_regularization(0 if k_reg is None else k_reg, 0.0 if lam is None else lam)
        n_tune = math.ceil(tuning_fraction * len(labels))
        order = rng.permutation(len(labels))
        tune, rest = order[:n_tune], order[n_tune:]
        if len(rest) == 0:
            raise ValueError(
                f"No calibration example is left after holding out tuning_fraction="
                f"{tuning_fraction} of {len(labels)} for choosing k_reg and lam."
            )
        chosen = select_raps_parameters(
            probabilities[tune], labels[tune], alpha, randomized, k_reg, lam, seed=rng
        )
        k_reg, lam = chosen.k_reg, chosen.lam
        probabilities, labels = probabilities[rest], labels[rest]
    else:
        k_reg, lam = check_regularization(k_reg, lam)
    u = draw_u(None, len(labels), rng)
    scores = calibration_scores(probabilities, labels, score, k_reg, lam, u)
    if mondrian:
        threshold = _mondrian_thresholds(scores, labels, probabilities.shape[1], alpha)
    else:
        threshold = conformal_quantile(scores, alpha)
    return PredictionSetMap(score, threshold, randomized, k_reg, lam, alpha)
