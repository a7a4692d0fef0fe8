"""Prediction sets from probabilities and a threshold: `prediction_sets`, and the naive sets
of Angelopoulos et al. (2021) that take the top labels until their mass reaches 1 - alpha."""

import numpy as np

from keras_normkit._validation import check_bool, check_seed, check_string_choice
from keras_normkit.uncertainty import _arrays
from keras_normkit.uncertainty.conformal import _ranking
from keras_normkit.uncertainty.conformal.raps import check_regularization

__all__ = ["naive_prediction_sets", "prediction_sets"]


def check_thresholds(threshold, num_classes):
    """A finite threshold as `(k,)`: a number is repeated, a vector has one per class."""
    threshold = np.asarray(_arrays.to_numpy(threshold, "threshold"), dtype=np.float64)
    if threshold.ndim == 0:
        threshold = np.full(num_classes, float(threshold))
    if threshold.shape != (num_classes,):
        raise ValueError(
            f"`threshold` must be a number, or one per class, shape ({num_classes},). "
            f"Received: threshold.shape={threshold.shape}"
        )
    if not np.isfinite(threshold).all():
        raise ValueError("`threshold` must be finite.")
    return threshold


def draw_u(u, num_examples, seed):
    """`u` checked, or `num_examples` uniforms drawn with `seed` (an int, None or a Generator)."""
    if u is not None:
        return _ranking.check_u(u, num_examples)
    if not isinstance(seed, np.random.Generator):
        seed = check_seed(seed)
    return np.random.default_rng(seed).random(num_examples)


def prediction_sets(
    probabilities, threshold, score="lac", randomized=True, k_reg=0, lam=0.0, u=None, seed=None
):
    """Conformal prediction sets of `score` at a fitted threshold, as a boolean mask.

    * `"lac"`: C(x) = {y : 1 - pi_y(x) <= tau}.
    * `"aps"`, `"raps"`, randomized: C(x) = {y : s(x, y; u) <= tau}, with the score of
      `aps_scores` / `raps_scores` and one u ~ U(0, 1) per example shared by its labels:
      the top labels until their (penalized) mass reaches tau, the last one kept with the
      probability that makes the coverage exact (Romano et al. 2020, Eq. 5; Angelopoulos
      et al. 2021, Algorithm 2). Such a set may be empty.
    * not randomized: C(x) = {y : s(x, y; 0) < tau}, the top labels up to and including the
      one whose mass crosses tau (for APS exactly the paper's code's and MAPIE's
      `include_last_label=True` sets): the union of the randomized sets over u, so it covers
      at least as often (over-covers somewhat), and is never empty when k_reg >= 1. For
      RAPS their rule also keeps a label whose own penalty lam takes it past tau (they test
      the mass and penalty of the labels above it); this one does not.

    `threshold` may hold one value per class (class-conditional, "Mondrian" sets, tau_y
    for label y). Fit it with `fit_prediction_sets`, or `conformal_quantile` of the
    calibration scores.

    Args:
        probabilities: `(n, k)` softmax probabilities (`(n,)` for a binary classifier).
        threshold: tau, a number, or `(k,)` one per class.
        score: `"lac"`, `"aps"` or `"raps"`.
        randomized: APS/RAPS only: randomized sets (exact coverage) or not (never empty).
        k_reg: RAPS only: integer >= 0, top ranks free of penalty.
        lam: RAPS only: penalty >= 0 per rank beyond `k_reg`.
        u: Optional uniforms `(n,)` for the randomized sets (else drawn with `seed`).
        seed: Integer seed (or a `numpy.random.Generator`) of the uniforms, or None.

    Returns:
        A boolean array `(n, k)`: `sets[i, j]` is whether label j is in example i's set.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import prediction_sets
    >>> p = np.array([[0.6, 0.3, 0.1], [0.34, 0.33, 0.33]])
    >>> prediction_sets(p, threshold=0.75).astype(int).tolist()  # LAC: p >= 0.25
    [[1, 1, 0], [1, 1, 1]]
    >>> prediction_sets(p, 0.75, score="aps", randomized=False).astype(int).tolist()
    [[1, 1, 0], [1, 1, 1]]

    Reference: Angelopoulos, Bates, Malik, Jordan, ICLR 2021, arXiv:2009.14193; Romano,
    Sesia, Candes, NeurIPS 2020; Sadinle, Lei, Wasserman, JASA 2019.
    """
    check_string_choice("score", score, _ranking.SCORES)
    check_bool("randomized", randomized)
    k_reg, lam = check_regularization(k_reg, lam)
    if score == "aps":
        lam = 0.0
    probabilities = _arrays.check_probabilities(probabilities)
    thresholds = check_thresholds(threshold, probabilities.shape[1])
    u = draw_u(u, len(probabilities), seed) if score != "lac" and randomized else None
    return _ranking.set_mask(probabilities, thresholds, score, randomized, k_reg, lam, u)


def naive_prediction_sets(probabilities, alpha, randomized=True, u=None, seed=None):
    """The naive sets: the top labels until their mass reaches 1 - alpha (no calibration).

    The APS sets at the threshold tau = 1 - alpha, trusting the softmax as the true
    conditional distribution: they cover 1 - alpha only if the model is calibrated, and
    under-cover when it is over-confident (Angelopoulos et al. 2021, Table 1: 0.889-0.896
    for alpha = 0.1 on ImageNet, even after temperature scaling). The baseline conformal
    calibration corrects.

    Args:
        probabilities: `(n, k)` softmax probabilities.
        alpha: Nominal miscoverage level in (0, 1).
        randomized: Randomize the last label (as the paper's naive baseline) or keep it.
        u: Optional uniforms `(n,)` for the randomized sets.
        seed: Integer seed (or a `numpy.random.Generator`) of the uniforms, or None.

    Returns:
        A boolean array `(n, k)`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import naive_prediction_sets
    >>> p = np.array([[0.6, 0.3, 0.1], [0.95, 0.03, 0.02]])
    >>> naive_prediction_sets(p, alpha=0.1, randomized=False).astype(int).tolist()
    [[1, 1, 1], [1, 0, 0]]

    Reference: Angelopoulos et al., ICLR 2021, arXiv:2009.14193, Section 1 and Table 1.
    """
    alpha = _arrays.check_alpha(alpha)
    return prediction_sets(probabilities, 1.0 - alpha, "aps", randomized, 0, 0.0, u, seed)
