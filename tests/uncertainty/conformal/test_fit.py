"""The coverage guarantee, as a statistical test over many random calibration/test splits of
fixed synthetic probabilities, and `fit_prediction_sets`' RAPS tuning, Mondrian thresholds and
errors."""

import math

import numpy as np
import pytest

from keras_normkit.uncertainty import (
    aps_scores,
    classwise_coverage,
    conformal_quantile,
    coverage,
    fit_prediction_sets,
    lac_scores,
    prediction_sets,
    raps_scores,
    select_raps_parameters,
)
from keras_normkit.uncertainty.conformal import _ranking
from tests.uncertainty.conformal.test_scores import probabilities

N, K = 1200, 10


@pytest.fixture(scope="module")
def pool():
    """Fixed probabilities of an over-confident classifier, labels drawn from the true ones."""
    rng = np.random.default_rng(0)
    z = 1.5 * rng.normal(size=(N, K))
    truth = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = (truth.cumsum(axis=1) > rng.random((N, 1))).argmax(axis=1)
    sharp = np.exp(2.5 * z)
    return sharp / sharp.sum(axis=1, keepdims=True), y


def _split_coverages(true_scores, n, alpha, splits, seed=0):
    """Coverage on the rest of the pool of the threshold fitted on n random examples, for
    many random splits at once: the guarantee says E[coverage] is in
    [1 - alpha, 1 - alpha + 1 / (n + 1)] (exactly ceil((n + 1)(1 - alpha)) / (n + 1) for
    continuous scores)."""
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((splits, len(true_scores))), axis=1)
    cal, test = true_scores[order[:, :n]], true_scores[order[:, n:]]
    tau = np.array([conformal_quantile(row, alpha) for row in cal])
    exact = math.ceil((n + 1) * (1 - alpha) - 1e-9) / (n + 1)
    return (test <= tau[:, None]).mean(axis=1), exact


@pytest.mark.parametrize("n", [11, 60])
@pytest.mark.parametrize("score", ["lac", "aps", "raps"])
def test_marginal_coverage_guarantee(pool, score, n):
    """Over 4000 splits the mean coverage is within 3 standard errors of its exact value
    (n = 11: 11/12 = 0.917; without the (n + 1) correction, as the RAPS code, 10/12)."""
    p, y = pool
    u = np.random.default_rng(1).random(N)  # one uniform per example, drawn once
    true_scores = {
        "lac": lambda: lac_scores(p, y),
        "aps": lambda: aps_scores(p, y, u=u),
        "raps": lambda: raps_scores(p, y, k_reg=2, lam=0.05, u=u),
    }[score]()
    coverages, exact = _split_coverages(true_scores, n, 0.1, splits=4000)
    error = 3 * coverages.std() / np.sqrt(len(coverages))
    assert abs(coverages.mean() - exact) < error + 1e-3
    assert 0.9 <= exact <= 0.9 + 1 / (n + 1)
    # the sets served are exactly {y : s(x, y) <= tau}: one split checked end to end
    rows = np.arange(N)
    tau = np.sort(true_scores[:n])[math.ceil((n + 1) * 0.9) - 1]
    sets = prediction_sets(p, tau, score, True, 2, 0.05 if score == "raps" else 0.0, u=u)
    np.testing.assert_array_equal(sets[rows, y], true_scores <= tau)


@pytest.mark.parametrize(
    "score, randomized",
    [("lac", True), ("aps", True), ("raps", True), ("aps", False), ("raps", False)],
)
def test_fit_and_predict_cover_over_splits(pool, score, randomized):
    """The whole chain (`fit_prediction_sets` then `predict`) on 150 random halves: mean
    coverage >= 1 - alpha (and, randomized, <= 1 - alpha + 1 / (n + 1)) within 4 standard
    errors; the sets without randomization are never empty and cover more."""
    p, y = pool
    rng = np.random.default_rng(5)
    coverages, sizes, empty = [], [], 0
    for _ in range(150):
        order = rng.permutation(N)
        cal, test = order[:600], order[600:]
        fitted = fit_prediction_sets(p[cal], y[cal], score, 0.1, randomized, seed=rng)
        sets = fitted.predict(p[test], seed=rng)
        coverages.append(coverage(sets, y[test]))
        sizes.append(sets.sum(axis=1).mean())
        empty += int((~sets.any(axis=1)).sum())
    coverages = np.array(coverages)
    error = 4 * coverages.std() / np.sqrt(len(coverages))
    n_cal = 600 if score != "raps" else 600 - math.ceil(0.3 * 600)
    assert coverages.mean() >= 0.9 - error
    if randomized:
        assert coverages.mean() <= 0.9 + 1 / (n_cal + 1) + error
    else:
        assert empty == 0
        assert coverages.mean() > 0.9 + 1 / (n_cal + 1)  # conservative


def test_mondrian_covers_every_class(pool):
    p, y = pool
    rng = np.random.default_rng(3)
    per_class = []
    for _ in range(60):
        order = rng.permutation(N)
        cal, test = order[:700], order[700:]
        fitted = fit_prediction_sets(p[cal], y[cal], "aps", 0.2, mondrian=True, seed=rng)
        assert np.shape(fitted.threshold) == (K,)
        per_class.append(classwise_coverage(fitted.predict(p[test], seed=rng), y[test]))
    per_class = np.nanmean(per_class, axis=0)
    assert per_class.min() >= 0.8 - 0.03, per_class


def test_mondrian_thresholds_are_per_class_quantiles():
    p, y, _ = probabilities(4, n=400, k=3)
    fitted = fit_prediction_sets(p, y, "lac", 0.1, mondrian=True, seed=0)
    scores = lac_scores(p, y)
    for c in range(3):
        s = np.sort(scores[y == c])
        assert fitted.threshold[c] == s[math.ceil((len(s) + 1) * 0.9) - 1]


def test_raps_parameters_as_the_papers_code(pool):
    """k_reg: the 'higher' (1 - alpha) quantile of the 0-based true rank, plus 1; lam: the
    grid value with the smallest mean set size, calibrated and measured on the tuning set."""
    p, y = pool
    chosen = select_raps_parameters(p[:500], y[:500], 0.1, randomized=False, seed=0)
    ranks = _ranking.true_label_ranks(p[:500], y[:500]) - 1
    assert chosen.k_reg == int(np.quantile(ranks, 0.9, method="higher")) + 1
    assert chosen.lam == min(chosen.set_sizes, key=chosen.set_sizes.get)
    assert sorted(chosen.set_sizes) == [0.001, 0.01, 0.1, 0.2, 0.5]
    assert select_raps_parameters(p, y, 0.1, k_reg=3, lam=0.2) == (3, 0.2, {})


def test_tuning_holds_out_a_part_and_is_reproducible(pool):
    p, y = pool
    a = fit_prediction_sets(p[:400], y[:400], "raps", 0.1, seed=3)
    b = fit_prediction_sets(p[:400], y[:400], "raps", 0.1, seed=3)
    assert (a.k_reg, a.lam, a.threshold) == (b.k_reg, b.lam, b.threshold)
    assert a.k_reg >= 1 and a.lam in (0.001, 0.01, 0.1, 0.2, 0.5)
    given = fit_prediction_sets(p[:400], y[:400], "raps", 0.1, k_reg=2, lam=0.1, seed=3)
    assert (given.k_reg, given.lam) == (2, 0.1)
    np.testing.assert_array_equal(a.predict(p[400:], seed=1), a.predict(p[400:], seed=1))


def test_errors(pool):
    p, y = pool
    with pytest.raises(ValueError, match="at least 9 calibration examples"):
        fit_prediction_sets(p[:8], y[:8], "lac", 0.1)
    with pytest.raises(ValueError, match="at least 19"):
        fit_prediction_sets(p[:18], y[:18], "aps", 0.05)
    with pytest.raises(ValueError, match=r"Classes with fewer \(count\)"):
        fit_prediction_sets(p[:50], y[:50], "lac", 0.1, mondrian=True)
    with pytest.raises(ValueError, match=r"in \[0, 9\]"):
        fit_prediction_sets(p[:50], y[:50] + 10, "lac", 0.1)
    with pytest.raises(ValueError, match="alpha"):
        fit_prediction_sets(p, y, "lac", alpha=0.0)
    with pytest.raises(ValueError, match="tuning_fraction"):
        fit_prediction_sets(p, y, "raps", 0.1, tuning_fraction=1.0)
    with pytest.raises(ValueError, match="one per example"):
        fit_prediction_sets(p, y[:-1])
    fitted = fit_prediction_sets(p, y, "lac", 0.1)
    with pytest.raises(ValueError, match="sum to 1"):
        fitted.predict(p * 0.5)
