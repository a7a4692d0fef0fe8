"""`select_dirichlet_regularization` (`scaling/dirichlet_selection.py`): ODIR's weights by K-fold cross-validation."""

import warnings

import numpy as np
import pytest

from keras_normkit.calibration import (
    fit_dirichlet_calibration,
    negative_log_likelihood,
    select_dirichlet_regularization,
)


def _overconfident(n, k=4, scale=3.0, seed=0):
    """Labels drawn from softmax(z), logits `scale * z` (over-confident)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 1.5
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = (p.cumsum(1) > rng.random((n, 1))).argmax(1)
    return scale * z, y


def test_scores_are_the_mean_held_out_nll_of_a_manual_loop():
    """Independent computation: the same shuffle and folds, fit on K - 1, NLL on the rest."""
    z, y = _overconfident(120)
    grid = [(1e-3, 1e-3), (1.0, 0.5)]
    chosen = select_dirichlet_regularization(z, y, grid=grid, cv=3, seed=7)
    order = np.random.default_rng(7).permutation(len(y))
    folds = np.array_split(order, 3)  # 40 rows each
    for pair in grid:
        losses = []
        for i, held in enumerate(folds):
            rest = np.concatenate([f for j, f in enumerate(folds) if j != i])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted = fit_dirichlet_calibration(z[rest], y[rest], *pair)
            losses.append(negative_log_likelihood(fitted.predict(z[held]), y[held]))
        assert chosen.scores[pair] == pytest.approx(np.mean(losses), rel=1e-12)
    best = min(grid, key=chosen.scores.get)
    assert (chosen.off_diagonal_l2, chosen.bias_l2) == best


def test_on_a_small_set_the_choice_beats_a_weak_penalty_on_new_data():
    """60 held-out rows, 5 classes (30 parameters): the chosen penalty's map, fitted on all
    60, has a lower NLL on 20,000 new rows than the nearly unregularized one's."""
    z, y = _overconfident(20060, k=5, seed=3)
    small, new = slice(0, 60), slice(60, None)
    chosen = select_dirichlet_regularization(z[small], y[small], cv=5)
    assert chosen.off_diagonal_l2 > 1e-4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weak = fit_dirichlet_calibration(z[small], y[small], 1e-4, 1e-4)
    picked = fit_dirichlet_calibration(z[small], y[small], chosen.off_diagonal_l2, chosen.bias_l2)
    nll_weak = negative_log_likelihood(weak.predict(z[new]), y[new])
    nll_picked = negative_log_likelihood(picked.predict(z[new]), y[new])
    assert nll_picked < nll_weak


def test_ties_go_to_the_stronger_penalty_and_binary_logits_work():
    z, y = _overconfident(200, k=2)
    binary = z[:, 1] - z[:, 0]  # one logit of class 1
    chosen = select_dirichlet_regularization(binary, y, grid=[(0.1, 0.1), (0.1, 0.1)], cv=2)
    assert len(chosen.scores) == 1 and np.isfinite(chosen.scores[(0.1, 0.1)])
    same = [(0.5, 0.0), (0.0, 0.5)]  # two pairs, one score each; equal sums: the first
    result = select_dirichlet_regularization(binary, y, grid=same, cv=2)
    assert set(result.scores) == set(same)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"grid": []}, ValueError, "non-empty sequence of"),
        ({"grid": [(0.1,)]}, ValueError, "non-empty sequence of"),
        ({"grid": 0.1}, ValueError, "non-empty sequence of"),
        ({"grid": [(-1.0, 0.1)]}, ValueError, "off_diagonal_l2 in `grid`"),
        ({"cv": 1}, ValueError, "cv"),
        ({"cv": 1000}, ValueError, "cv"),
        ({"cv": 2.5}, TypeError, "cv"),
        ({"seed": "a"}, TypeError, "seed"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    z, y = _overconfident(50)
    with pytest.raises(error, match=match):
        select_dirichlet_regularization(z, y, **kwargs)


def test_labels_must_match_the_logits():
    z, y = _overconfident(50)
    with pytest.raises(ValueError, match="one row per row"):
        select_dirichlet_regularization(z, y[:-1])
