"""Regularized adaptive prediction sets (RAPS, Angelopoulos et al., ICLR 2021).

s = rho_x(y) + u * pi_y(x) + lam * max(o_x(y) - k_reg, 0), and the choice of k_reg and lam
on held-out calibration data (`select_raps_parameters`), as the paper's code does.
"""

import collections

import numpy as np

from keras_normkit._validation import check_int, check_number
from keras_normkit.uncertainty import _arrays
from keras_normkit.uncertainty.conformal import _ranking
from keras_normkit.uncertainty.conformal.quantile import conformal_quantile

__all__ = ["RAPSParameters", "raps_scores", "select_raps_parameters"]

#: The paper's grid for lam (Angelopoulos et al. 2021, Section 2.3 and their `pick_lamda_size`).
LAMBDAS = (0.001, 0.01, 0.1, 0.2, 0.5)


def check_regularization(k_reg, lam):
    """`(k_reg, lam)` checked: an integer >= 0 and a number >= 0."""
    return check_int("k_reg", k_reg, 0), check_number("lam", lam, 0.0)


def raps_scores(probabilities, labels=None, *, k_reg, lam, u=1.0):
    """RAPS non-conformity scores s(x, y) = rho_x(y) + u * pi_y(x) + lam * (o_x(y) - k_reg)+.

    APS (`aps_scores`) plus a penalty lam for each rank beyond k_reg: o_x(y) is the rank of
    y in the decreasing probabilities (1 = the top label), so labels deep in the tail,
    whose small and noisy probabilities make APS sets large, enter a set only at a high
    threshold. lam = 0 is APS.

    Args:
        probabilities: `(n, k)` softmax probabilities (`(n,)` for a binary classifier).
        labels: Optional integer labels `(n,)` (or one-hot).
        k_reg: Integer >= 0, the number of top ranks free of penalty.
        lam: Penalty >= 0 per rank beyond `k_reg`.
        u: One uniform per example `(n,)`, or a number in [0, 1] for all (default 1).

    Returns:
        The scores of the given labels `(n,)`, or of every label `(n, k)`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import raps_scores
    >>> p = np.array([[0.5, 0.3, 0.2]])
    >>> raps_scores(p, k_reg=1, lam=0.1).round(2).tolist()  # APS + 0.1 * (0, 1, 2)
    [[0.5, 0.9, 1.2]]

    Reference: Angelopoulos, Bates, Malik, Jordan, "Uncertainty Sets for Image Classifiers
    using Conformal Prediction", ICLR 2021, arXiv:2009.14193, Section 2.
    """
    k_reg, lam = check_regularization(k_reg, lam)
    probabilities = _arrays.check_probabilities(probabilities)
    u = _ranking.check_u(u, len(probabilities))
    scores = _ranking.label_scores(probabilities, u, k_reg, lam)
    if labels is None:
        return scores
    labels = _arrays.check_labels(labels, *probabilities.shape)
    return scores[range(len(labels)), labels]


RAPSParameters = collections.namedtuple("RAPSParameters", ["k_reg", "lam", "set_sizes"])
RAPSParameters.__doc__ = """The RAPS regularization chosen by `select_raps_parameters`.

Attributes:
    k_reg: The integer k_reg (the (1 - alpha) quantile of the true labels' ranks).
    lam: The chosen lam (smallest mean set size on the tuning data).
    set_sizes: `{lam: mean set size}` on the tuning data, for each lam tried (empty when
        `lam` was given).
"""


def select_raps_parameters(
    probabilities, labels, alpha, randomized=True, k_reg=None, lam=None, lambdas=LAMBDAS, seed=None
):
    """k_reg and lam for RAPS, chosen on tuning data as Angelopoulos et al.'s code does.

    * k_reg = the (1 - alpha) quantile (NumPy's "higher") of the 0-based rank of the true
      label, plus 1 (their `pick_kreg`): the number of top labels a set needs to cover
      1 - alpha of the examples, which it may take without penalty.
    * lam: for each value of `lambdas` (the paper's grid 0.001, 0.01, 0.1, 0.2, 0.5), RAPS is
      calibrated on the tuning data and the mean size of its sets on the same data is
      measured; the smallest wins (ties: the first; their `pick_lamda_size`).

    The tuning data must be apart from the calibration data the threshold is then fitted
    on (`fit_prediction_sets` holds out a part of it), or the coverage guarantee is lost.

    Args:
        probabilities: `(n, k)` softmax probabilities of the tuning examples.
        labels: Their integer labels `(n,)` (or one-hot).
        alpha: Miscoverage level in (0, 1).
        randomized: Whether the sets measured are randomized (as the sets to be served).
        k_reg: A given k_reg (then only lam is chosen), or None.
        lam: A given lam (then only k_reg is chosen), or None.
        lambdas: The grid of lam values.
        seed: Integer seed (or a `numpy.random.Generator`) of the uniform draws.

    Returns:
        A `RAPSParameters(k_reg, lam, set_sizes)`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import select_raps_parameters
    >>> rng = np.random.default_rng(0)
    >>> z = 3 * rng.normal(size=(500, 10))
    >>> p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    >>> y = (p.cumsum(1) > rng.random((500, 1))).argmax(1)
    >>> chosen = select_raps_parameters(p, y, alpha=0.1, seed=0)
    >>> 1 <= chosen.k_reg <= 10, chosen.lam in (0.001, 0.01, 0.1, 0.2, 0.5)
    (True, True)

    Reference: Angelopoulos et al., ICLR 2021, arXiv:2009.14193, Section 2.3 and Appendix E
    (code: aangelopoulos/conformal_classification, `pick_parameters`).
    """
    alpha = _arrays.check_alpha(alpha)
    probabilities = _arrays.check_probabilities(probabilities)
    labels = _arrays.check_labels(labels, *probabilities.shape)
    rng = np.random.default_rng(seed)
    if k_reg is None:
        ranks = _ranking.true_label_ranks(probabilities, labels) - 1
        k_reg = int(np.quantile(ranks, 1.0 - alpha, method="higher")) + 1
    else:
        k_reg = check_int("k_reg", k_reg, 0)
    if lam is not None:
        return RAPSParameters(k_reg, check_number("lam", lam, 0.0), {})
    if len(lambdas) == 0:
        raise ValueError("`lambdas` must hold at least one value of lam to try.")
    sizes, best = {}, None
    n = len(labels)
    for candidate in lambdas:
        candidate = check_number("lambdas", candidate, 0.0)
        u = rng.random(n)
        scores = _ranking.label_scores(probabilities, u, k_reg, candidate)[range(n), labels]
        threshold = conformal_quantile(scores, alpha)
        sets = _ranking.set_mask(
            probabilities, threshold, "raps", randomized, k_reg, candidate, rng.random(n)
        )
        sizes[candidate] = float(sets.sum(axis=1).mean())
        if best is None or sizes[candidate] < sizes[best]:
            best = candidate
    return RAPSParameters(k_reg, best, sizes)
