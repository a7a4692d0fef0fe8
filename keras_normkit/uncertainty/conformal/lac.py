"""Least ambiguous set-valued classifier (LAC, Sadinle, Lei & Wasserman 2019): s = 1 - pi_y."""

from keras_normkit.uncertainty import _arrays

__all__ = ["lac_scores"]


def lac_scores(probabilities, labels=None):
    """LAC non-conformity scores s(x, y) = 1 - pi_y(x).

    Thresholded at tau, the set {y : pi_y(x) >= 1 - tau} has the smallest average size of
    all sets with marginal coverage 1 - alpha when pi is the true conditional distribution
    (Sadinle et al. 2019, Theorem 1); its coverage is marginal only (hard inputs get too
    small sets, easy ones sets with a single label).

    Args:
        probabilities: `(n, k)` softmax probabilities (`(n,)` for a binary classifier's
            probability of class 1).
        labels: Optional integer labels `(n,)` (or one-hot `(n, k)`).

    Returns:
        The scores of the given labels `(n,)` (calibration), or of every label `(n, k)`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import lac_scores
    >>> p = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    >>> lac_scores(p, labels=[1, 2]).round(2).tolist()
    [0.8, 0.4]

    Reference: Sadinle, Lei, Wasserman, "Least Ambiguous Set-Valued Classifiers With
    Bounded Error Levels", JASA 2019, arXiv:1609.00451.
    """
    probabilities = _arrays.check_probabilities(probabilities)
    scores = 1.0 - probabilities
    if labels is None:
        return scores
    labels = _arrays.check_labels(labels, *probabilities.shape)
    return scores[range(len(labels)), labels]
