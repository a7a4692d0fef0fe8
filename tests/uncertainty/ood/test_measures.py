"""Detection measures against scikit-learn's, and FPR at 95 % TPR against a plain count."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit.uncertainty import detection_measures, fpr_at_tpr

metrics = pytest.importorskip("sklearn.metrics")


def _fpr_by_counting(in_scores, out_scores, tpr):
    """The largest threshold t accepting >= tpr of `in`; the fraction of `out` >= t."""
    for t in np.sort(np.unique(in_scores))[::-1]:
        if (in_scores >= t).mean() >= tpr - 1e-12:
            return (out_scores >= t).mean()
    raise AssertionError("unreachable")


@given(st.integers(0, 10_000), st.sampled_from([0.5, 0.9, 0.95, 1.0]), st.booleans())
def test_against_sklearn_and_counting(seed, tpr, ties):
    rng = np.random.default_rng(seed)
    in_scores = rng.normal(1.0, 1.0, rng.integers(5, 80))
    out_scores = rng.normal(0.0, 1.0, rng.integers(5, 80))
    if ties:
        in_scores, out_scores = np.round(in_scores), np.round(out_scores)
    measures = detection_measures(in_scores, out_scores)
    y = np.r_[np.ones(len(in_scores)), np.zeros(len(out_scores))]
    s = np.r_[in_scores, out_scores]
    assert measures.auroc == pytest.approx(metrics.roc_auc_score(y, s))
    assert measures.aupr_in == pytest.approx(metrics.average_precision_score(y, s))
    assert measures.aupr_out == pytest.approx(metrics.average_precision_score(1 - y, -s))
    assert measures.fpr95 == pytest.approx(_fpr_by_counting(in_scores, out_scores, 0.95))
    assert fpr_at_tpr(in_scores, out_scores, tpr) == pytest.approx(
        _fpr_by_counting(in_scores, out_scores, tpr)
    )


def test_perfect_and_reversed_scores():
    perfect = detection_measures([3.0, 4.0], [1.0, 2.0])
    assert perfect == (1.0, 1.0, 1.0, 0.0)
    reversed_ = detection_measures([1.0, 2.0], [3.0, 4.0])
    assert reversed_.auroc == 0.0 and reversed_.fpr95 == 1.0


def test_errors():
    with pytest.raises(ValueError, match="in_scores"):
        detection_measures([], [1.0])
    with pytest.raises(ValueError, match="finite"):
        detection_measures([np.nan], [1.0])
    with pytest.raises(ValueError, match="tpr"):
        fpr_at_tpr([1.0], [0.0], tpr=0.0)
