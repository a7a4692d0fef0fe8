"""The split-conformal threshold: the ceil((n + 1)(1 - alpha))-th smallest score."""

import math

import numpy as np

from keras_normkit.uncertainty import _arrays

__all__ = ["conformal_quantile"]


def minimum_calibration_size(alpha):
    """The smallest n with ceil((n + 1)(1 - alpha)) <= n, i.e. n >= (1 - alpha) / alpha."""
    n = max(1, math.ceil((1.0 - alpha) / alpha - 1e-9))
    while math.ceil((n + 1) * (1.0 - alpha) - 1e-9) > n:
        n += 1
    return n


def quantile_rank(num_scores, alpha):
    """ceil((n + 1)(1 - alpha)), guarded against round-off (0.9 * 10 = 9.000000000000002)."""
    return math.ceil((num_scores + 1) * (1.0 - alpha) - 1e-9)


def conformal_quantile(scores, alpha):
    """The split-conformal threshold: the ceil((n + 1)(1 - alpha))-th smallest of n scores.

    For n exchangeable calibration scores s_1..s_n and a new score s_{n+1},
    P(s_{n+1} <= tau) >= 1 - alpha with tau this order statistic (Vovk et al. 2005;
    Angelopoulos & Bates 2021, Section 1.1); with continuous (tie-free) scores also
    P(s_{n+1} <= tau) <= 1 - alpha + 1 / (n + 1). It is NumPy's
    `np.quantile(scores, ceil((n + 1)(1 - alpha)) / n, method="lower")`, as MAPIE computes
    it. The (n + 1) is the finite-sample correction the guarantee needs. The official RAPS
    code takes `np.quantile(E, 1 - alpha, interpolation="higher")` instead, the
    (ceil((n - 1)(1 - alpha)) + 1)-th smallest: without the correction, it is one rank lower
    for some n (n = 11, alpha = 0.1: the 10th of 11, expected coverage 10/12 = 0.83).

    Args:
        scores: `(n,)` non-conformity scores of the calibration examples (large = unusual).
        alpha: Miscoverage level in (0, 1): the guarantee is coverage >= 1 - alpha.

    Returns:
        The threshold tau, a Python float.

    Raises:
        ValueError: when ceil((n + 1)(1 - alpha)) > n: there are too few calibration scores
            for this alpha (at least (1 - alpha) / alpha are needed: 9 for alpha = 0.1, 19 for
            alpha = 0.05); the only valid threshold would be infinite (every label in every
            set).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import conformal_quantile
    >>> conformal_quantile(np.arange(1.0, 20.0), alpha=0.1)  # n = 19: the 18th smallest
    18.0

    Reference: Vovk, Gammerman, Shafer, "Algorithmic Learning in a Random World", 2005;
    Angelopoulos & Bates, "A Gentle Introduction to Conformal Prediction", arXiv:2107.07511.
    """
    alpha = _arrays.check_alpha(alpha)
    scores = _arrays.check_scores(scores, "scores")
    n = len(scores)
    rank = quantile_rank(n, alpha)
    if rank > n:
        raise ValueError(
            f"Too few calibration examples for alpha={alpha}: the threshold is the "
            f"ceil((n + 1)(1 - alpha)) = {rank}-th smallest of n = {n} scores, which does not "
            f"exist. Use at least {minimum_calibration_size(alpha)} calibration examples, or a "
            "larger alpha."
        )
    return float(np.partition(scores, rank - 1)[rank - 1])
