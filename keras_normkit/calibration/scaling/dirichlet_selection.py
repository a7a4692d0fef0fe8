"""ODIR's regularization weights chosen by cross-validation on the held-out data:
`select_dirichlet_regularization`.

Dirichlet calibration has k^2 + k parameters; on a small held-out set that a strong
classifier separates (few or no errors), a weak penalty lets the fit grow without bound (the
NLL keeps falling, L-BFGS does not converge) and the map overfits. Kull et al. (2019) choose
lambda and mu by cross-validation; this does it for a grid of (lambda, mu) pairs:

    CV(lambda, mu) = (1/K) sum_f NLL_f(lambda, mu),

where NLL_f is the mean negative log-likelihood, on fold f, of the map fitted (with
`fit_dirichlet_calibration`) on the other K - 1 folds. The rows are shuffled once (`seed`)
and cut into K folds of equal size (the first n mod K one row larger). The pair of lowest
CV wins; ties go to the stronger penalty (the simpler map).

Reference: Kull, Perelló-Nieto, Kängsepp, Silva Filho, Song, Flach, "Beyond temperature
scaling: Obtaining well-calibrated multiclass probabilities with Dirichlet calibration",
NeurIPS 2019, arXiv:1910.12656, Section 5 (hyperparameters by cross-validation).
"""

import warnings
from typing import NamedTuple

import numpy as np

from keras_normkit._validation import check_int, check_seed
from keras_normkit.calibration import _validation
from keras_normkit.calibration.cross_fitting import fold_bounds
from keras_normkit.calibration.metrics.scores import negative_log_likelihood
from keras_normkit.calibration.scaling.affine import check_l2
from keras_normkit.calibration.scaling.dirichlet import fit_dirichlet_calibration

__all__ = ["DirichletRegularization", "select_dirichlet_regularization"]

#: lambda = mu on a log grid, from nearly unregularized to a map held near the temperature one.
DEFAULT_GRID = tuple((w, w) for w in (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0))


class DirichletRegularization(NamedTuple):
    """The chosen ODIR weights and the cross-validated NLL of every pair of the grid."""

    off_diagonal_l2: float
    bias_l2: float
    scores: dict  # (lambda, mu) -> mean held-out NLL over the folds


def select_dirichlet_regularization(
    logits, labels, grid=DEFAULT_GRID, cv=5, seed=0, max_iter=1000, gtol=1e-7
):
    """Dirichlet calibration's ODIR weights (lambda, mu) by K-fold cross-validation.

    For each pair of `grid`, the mean over K folds of the NLL on the fold of the map fitted
    on the other folds (`fit_dirichlet_calibration`); the pair of lowest mean NLL is
    returned, ties to the larger lambda + mu. Fits that reach `max_iter` (weak penalties on
    separable folds) are scored as they are, without a warning.

    Args:
        logits: `(n, k)` logits, or `(n,)`/`(n, 1)` logits of a binary classifier.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        grid: Non-empty sequence of `(off_diagonal_l2, bias_l2)` pairs, each >= 0 (default:
            lambda = mu in 1e-4, 1e-3, ..., 10).
        cv: Number of folds K, 2 <= K <= n.
        seed: Seed of the one shuffle of the rows before they are cut into folds.
        max_iter: L-BFGS iterations per fit.
        gtol: L-BFGS tolerance per fit.

    Returns:
        A `DirichletRegularization(off_diagonal_l2, bias_l2, scores)`; pass the first two to
        `DirichletCalibration` or `fit_dirichlet_calibration` to fit on all the rows.

    Raises:
        ValueError: for bad input, or when a training part of a fold holds one class only.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import select_dirichlet_regularization
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(300, 4)) * 2
    >>> p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    >>> y = (p.cumsum(1) > rng.random((300, 1))).argmax(1)
    >>> chosen = select_dirichlet_regularization(3 * z, y, cv=3)
    >>> len(chosen.scores), chosen.scores[(chosen.off_diagonal_l2, chosen.bias_l2)] > 0
    (6, True)

    Reference: Kull et al., NeurIPS 2019, arXiv:1910.12656, Section 5.
    """
    pairs = _check_grid(grid)
    checked, _ = _validation.check_logits(logits)
    n = len(checked)
    cv = check_int("cv", cv, 2, n)
    seed = check_seed(seed)
    labels = np.asarray(labels)
    if len(labels) != n:
        raise ValueError(
            f"`labels` must have one row per row of `logits` ({n}). Received {len(labels)}."
        )
    order = np.random.default_rng(seed).permutation(n)
    bounds = fold_bounds(n, cv)
    folds = [order[bounds[i] : bounds[i + 1]] for i in range(cv)]
    scores = {}
    for pair in pairs:
        losses = []
        for i, held in enumerate(folds):
            fit_rows = np.concatenate([f for j, f in enumerate(folds) if j != i])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "did not converge"
                fitted = fit_dirichlet_calibration(
                    checked[fit_rows], labels[fit_rows], *pair, max_iter=max_iter, gtol=gtol
                )
            losses.append(negative_log_likelihood(fitted.predict(checked[held]), labels[held]))
        scores[pair] = float(np.mean(losses))
    best = min(pairs, key=lambda pair: (scores[pair], -(pair[0] + pair[1])))
    return DirichletRegularization(best[0], best[1], scores)


def _check_grid(grid):
    try:
        pairs = [tuple(pair) for pair in grid]
    except TypeError:
        pairs = None
    if not pairs or any(len(pair) != 2 for pair in pairs):
        raise ValueError(
            "`grid` must be a non-empty sequence of (off_diagonal_l2, bias_l2) pairs. "
            f"Received: {grid!r}"
        )
    return [
        (check_l2(a, "off_diagonal_l2 in `grid`"), check_l2(b, "bias_l2 in `grid`"))
        for a, b in pairs
    ]
