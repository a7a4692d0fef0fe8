"""MahalanobisScore against a direct NumPy computation (class means, tied covariance,
inverse, distances), relative variant included."""

import numpy as np
import pytest

from keras_normkit.uncertainty import MahalanobisScore


def _data(seed=0, n=400, d=5, k=3):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    mixing = rng.normal(size=(d, d))
    features = rng.normal(size=(n, d)) @ mixing + 3.0 * rng.normal(size=(k, d))[labels]
    return features, labels, rng.normal(size=(60, d)) @ mixing


def _direct(features, labels, test, relative):
    classes = np.unique(labels)
    means = np.stack([features[labels == c].mean(axis=0) for c in classes])
    centered = features - means[np.searchsorted(classes, labels)]
    precision = np.linalg.inv(centered.T @ centered / len(features))
    diff = test[:, None, :] - means[None]
    distances = np.einsum("ncd,de,nce->nc", diff, precision, diff)
    if relative:
        mean0 = features.mean(axis=0)
        precision0 = np.linalg.inv(np.cov(features.T, bias=True))
        d0 = np.einsum("nd,de,ne->n", test - mean0, precision0, test - mean0)
        distances = distances - d0[:, None]
    return -distances.min(axis=1)


@pytest.mark.parametrize("relative", [False, True])
def test_matches_the_direct_computation(relative):
    features, labels, test = _data()
    score = MahalanobisScore(relative=relative, regularization=0.0).fit(features, labels)
    np.testing.assert_allclose(
        score.score(test), _direct(features, labels, test, relative), rtol=1e-7, atol=1e-7
    )


def test_labels_may_be_any_values_and_the_ridge_handles_a_singular_covariance():
    features, labels, test = _data(n=200)
    named = np.array(["a", "b", "c"])[labels]
    a = MahalanobisScore(regularization=0.0).fit(features, named).score(test)
    b = MahalanobisScore(regularization=0.0).fit(features, labels).score(test)
    np.testing.assert_allclose(a, b)
    few = MahalanobisScore().fit(features[:3], labels[:3]).score(test)  # rank-deficient
    assert np.isfinite(few).all()


def test_ood_points_score_lower():
    features, labels, _ = _data()
    score = MahalanobisScore().fit(features, labels)
    far = features[:20] + 50.0
    assert score.score(features[:200]).min() > score.score(far).max()


def test_errors():
    features, labels, _ = _data()
    with pytest.raises(ValueError, match="not fitted"):
        MahalanobisScore().score(features)
    with pytest.raises(ValueError, match="one label per example"):
        MahalanobisScore().fit(features, labels[:-1])
    fitted = MahalanobisScore().fit(features, labels)
    with pytest.raises(ValueError, match="5 features"):
        fitted.score(features[:, :3])
    with pytest.raises(TypeError, match="relative"):
        MahalanobisScore(relative=1)
    with pytest.raises(ValueError, match="regularization"):
        MahalanobisScore(regularization=-1.0)
