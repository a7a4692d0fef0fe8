"""Prediction sets: against the paper's code's set rule (`reference.raps_set`), against the
scores' definition (y in C(x) iff s(x, y) <= tau), and equal to MAPIE's
`SplitConformalClassifier` where its options match ours."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit.uncertainty import (
    aps_scores,
    conformal_quantile,
    lac_scores,
    naive_prediction_sets,
    prediction_sets,
    raps_scores,
)
from tests.uncertainty.conformal import reference
from tests.uncertainty.conformal.test_scores import probabilities


def _as_sets(mask):
    return [set(np.flatnonzero(row)) for row in mask]


@given(st.integers(0, 10_000), st.floats(0.3, 1.6), st.integers(0, 6), st.floats(0.0, 0.3))
def test_randomized_sets_are_the_papers(seed, tau, k_reg, lam):
    p, _, u = probabilities(seed)
    mask = prediction_sets(p, tau, "raps", True, k_reg, lam, u=u)
    expected = [reference.raps_set(p[i], tau, u[i], k_reg, lam, True) for i in range(len(p))]
    assert _as_sets(mask) == expected
    aps = prediction_sets(p, tau, "aps", True, u=u)
    assert _as_sets(aps) == [reference.raps_set(p[i], tau, u[i], 0, 0, True) for i in range(len(p))]


@given(st.integers(0, 10_000), st.floats(0.3, 1.6), st.integers(1, 6), st.floats(0.0, 0.3))
def test_deterministic_sets(seed, tau, k_reg, lam):
    p, _, u = probabilities(seed)
    aps = prediction_sets(p, tau, "aps", randomized=False)
    assert _as_sets(aps) == [reference.raps_set(p[i], tau, 0, 0, 0, False) for i in range(len(p))]
    assert aps.any(axis=1).all()  # never empty
    raps = prediction_sets(p, tau, "raps", False, k_reg, lam)
    code = [reference.raps_set(p[i], tau, 0, k_reg, lam, False) for i in range(len(p))]
    for draw in (u, 1 - u, np.full(len(p), 1e-9)):
        randomized = prediction_sets(p, tau, "raps", True, k_reg, lam, u=draw)
        assert (randomized <= raps).all()  # the union of the randomized sets over u
    assert all(ours <= theirs for ours, theirs in zip(_as_sets(raps), code, strict=True))


@given(st.integers(0, 10_000), st.floats(0.05, 1.5), st.integers(0, 5), st.floats(0.0, 0.3))
def test_a_label_is_in_its_set_iff_its_score_is_below_the_threshold(seed, tau, k_reg, lam):
    p, y, u = probabilities(seed)
    rows = np.arange(len(y))
    lac = prediction_sets(p, tau)
    np.testing.assert_array_equal(lac[rows, y], lac_scores(p, y) <= tau)
    raps = prediction_sets(p, tau, "raps", True, k_reg, lam, u=u)
    np.testing.assert_array_equal(
        raps[rows, y], raps_scores(p, y, k_reg=k_reg, lam=lam, u=u) <= tau
    )
    # one threshold per class (Mondrian): label j against tau_j
    taus = np.linspace(0.2, 1.2, p.shape[1])
    aps = prediction_sets(p, taus, "aps", True, u=u)
    np.testing.assert_array_equal(aps, aps_scores(p, u=u) <= taus)


def test_naive_sets_take_the_mass_up_to_one_minus_alpha():
    p = np.array([[0.5, 0.3, 0.15, 0.05], [0.92, 0.05, 0.02, 0.01]])
    np.testing.assert_array_equal(
        naive_prediction_sets(p, 0.1, randomized=False), [[1, 1, 1, 0], [1, 0, 0, 0]]
    )
    # randomized: the crossing label stays with probability (0.9 - 0.8) / 0.15 for row 0
    kept = np.mean([naive_prediction_sets(p, 0.1, seed=s)[0, 2] for s in range(2000)])
    assert kept == pytest.approx(0.1 / 0.15, abs=0.04)


def test_errors():
    p, _, _ = probabilities(0)
    with pytest.raises(ValueError, match="score"):
        prediction_sets(p, 0.5, score="top_k")
    with pytest.raises(ValueError, match=r"one per class, shape \(6,\)"):
        prediction_sets(p, np.ones(3))
    with pytest.raises(TypeError, match="randomized"):
        prediction_sets(p, 0.5, "aps", randomized=1)
    with pytest.raises(ValueError, match="alpha"):
        naive_prediction_sets(p, 1.0)


# ----------------------------------------------------------------------------- MAPIE


def _mapie(p, y, cal, test, score, include_last_label, random_state=7):
    """MAPIE's sets and its fitted conformity score object for fixed probabilities."""
    pytest.importorskip("mapie")
    from mapie.classification import SplitConformalClassifier
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Lookup(ClassifierMixin, BaseEstimator):
        """A prefit classifier whose probabilities are the rows of `p` named by X."""

        def fit(self, x, labels):
            self.classes_ = np.arange(p.shape[1])
            return self

        def predict_proba(self, x):
            return p[np.asarray(x)[:, 0].astype(int)]

        def predict(self, x):
            return self.predict_proba(x).argmax(axis=1)

    x = np.arange(len(p))[:, None]
    mapie = SplitConformalClassifier(
        Lookup().fit(x, y),
        confidence_level=0.9,
        conformity_score=score,
        prefit=True,
        random_state=random_state,
    )
    mapie.conformalize(x[cal], y[cal])
    _, sets = mapie.predict_set(
        x[test], conformity_score_params={"include_last_label": include_last_label}
    )
    return sets[:, :, 0], mapie._mapie_classifier.conformity_score_function_


def _uniforms(n, random_state=7):
    """MAPIE's draws (a fresh RandomState per call); its u weighs pi_y by 1 - u."""
    return 1.0 - np.random.RandomState(random_state).uniform(size=n)


@pytest.fixture(scope="module")
def data():
    p, _, _ = probabilities(1, n=800, k=8)
    rng = np.random.default_rng(2)
    y = (p.cumsum(axis=1) > rng.random((len(p), 1))).argmax(axis=1)  # y ~ p
    return p, y, np.arange(400), np.arange(400, 800)


def test_lac_equals_mapie(data):
    p, y, cal, test = data
    theirs, fitted = _mapie(p, y, cal, test, "lac", True)
    tau = conformal_quantile(lac_scores(p[cal], y[cal]), 0.1)
    assert tau == pytest.approx(fitted.quantiles_[0], abs=1e-12)
    np.testing.assert_array_equal(prediction_sets(p[test], tau), theirs)


@pytest.mark.parametrize("include_last_label", [True, "randomized"])
def test_aps_equals_mapie(data, include_last_label):
    p, y, cal, test = data
    theirs, fitted = _mapie(p, y, cal, test, "aps", include_last_label)
    tau = conformal_quantile(aps_scores(p[cal], y[cal], u=_uniforms(len(cal))), 0.1)
    assert tau == pytest.approx(fitted.quantiles_[0], abs=1e-12)
    randomized = include_last_label == "randomized"
    ours = prediction_sets(p[test], tau, "aps", randomized, u=_uniforms(len(test)))
    np.testing.assert_array_equal(ours, theirs)


def test_raps_threshold_equals_mapie_and_its_sets_where_its_rule_is_the_papers(data):
    p, y, cal, test = data
    theirs, fitted = _mapie(p, y, cal, test, "raps", "randomized")
    k_reg, lam = int(fitted.k_star[0]), float(fitted.lambda_star)
    # MAPIE holds out a stratified part for k_reg and lam, and calibrates on the rest
    from sklearn.model_selection import StratifiedShuffleSplit

    holdout = StratifiedShuffleSplit(1, test_size=fitted.size_raps, random_state=7)
    rest, tune = next(holdout.split(cal, y[cal]))
    np.testing.assert_array_equal(np.sort(tune), np.sort(fitted.X_raps[:, 0]))
    scores = raps_scores(p[cal][rest], y[cal][rest], k_reg=k_reg, lam=lam, u=_uniforms(len(rest)))
    tau = conformal_quantile(scores, 0.1)
    assert tau == pytest.approx(fitted.quantiles_[0], abs=1e-12)
    ours = prediction_sets(p[test], tau, "raps", True, k_reg, lam, u=_uniforms(len(test)))
    # MAPIE's randomization divides by pi - lam (L - k_reg) + lam for a last label of rank
    # L > k_reg (the paper: by pi); where the last label's rank is <= k_reg the rules agree.
    last_rank = np.maximum(ours.sum(axis=1), theirs.sum(axis=1))
    same_rule = last_rank <= k_reg
    assert same_rule.mean() > 0.5
    np.testing.assert_array_equal(ours[same_rule], theirs[same_rule])
