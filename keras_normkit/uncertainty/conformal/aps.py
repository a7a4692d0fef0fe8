"""Adaptive prediction sets (APS, Romano, Sesia & Candes 2020): s = rho_x(y) + u * pi_y(x)."""

from keras_normkit.uncertainty import _arrays
from keras_normkit.uncertainty.conformal import _ranking

__all__ = ["aps_scores"]


def aps_scores(probabilities, labels=None, u=1.0):
    """APS non-conformity scores s(x, y) = rho_x(y) + u * pi_y(x).

    Sort the probabilities pi(x) in decreasing order; rho_x(y) is the mass of the labels
    ranked above y. The score is the mass a set must reach before it takes y in: a
    set {y : s(x, y) <= tau} is the top labels until their mass reaches tau, so hard inputs
    get larger sets (coverage adapts to the difficulty, unlike LAC). With u ~ U(0, 1) drawn
    once per example (randomized) the score is continuous and the coverage exact; with u = 1
    the mass of y itself counts in full. Ties in pi are broken by class index.

    Args:
        probabilities: `(n, k)` softmax probabilities (`(n,)` for a binary classifier).
        labels: Optional integer labels `(n,)` (or one-hot).
        u: One uniform per example `(n,)`, or a number in [0, 1] for all (default 1).

    Returns:
        The scores of the given labels `(n,)`, or of every label `(n, k)`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import aps_scores
    >>> p = np.array([[0.5, 0.3, 0.2]])
    >>> aps_scores(p).round(2).tolist()  # the cumulative mass up to each label
    [[0.5, 0.8, 1.0]]
    >>> aps_scores(p, labels=[1], u=0.5).round(2).tolist()  # 0.5 + 0.5 * 0.3
    [0.65]

    Reference: Romano, Sesia, Candes, "Classification with Valid and Adaptive Coverage",
    NeurIPS 2020, arXiv:2006.02544.
    """
    probabilities = _arrays.check_probabilities(probabilities)
    u = _ranking.check_u(u, len(probabilities))
    scores = _ranking.label_scores(probabilities, u, 0, 0.0)
    if labels is None:
        return scores
    labels = _arrays.check_labels(labels, *probabilities.shape)
    return scores[range(len(labels)), labels]
