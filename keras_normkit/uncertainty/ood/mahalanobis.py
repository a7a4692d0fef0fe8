"""Mahalanobis and relative Mahalanobis scores on a network's features (Lee et al. 2018;
Ren et al. 2021)."""

import numpy as np

from keras_normkit._validation import check_bool, check_number
from keras_normkit.uncertainty import _arrays

__all__ = ["MahalanobisScore"]


def _check_features(features, name="features", width=None):
    features = _arrays.to_numpy(features, name)
    if features.ndim != 2 or features.shape[0] == 0 or features.shape[1] == 0:
        raise ValueError(
            f"`{name}` must have shape (num_examples, num_features), non-empty. Received: "
            f"{name}.shape={features.shape}"
        )
    if width is not None and features.shape[1] != width:
        raise ValueError(
            f"`{name}` must have {width} features, as the training features the score was "
            f"fitted on. Received: {name}.shape={features.shape}"
        )
    if not (
        np.issubdtype(features.dtype, np.floating) or np.issubdtype(features.dtype, np.integer)
    ):
        raise ValueError(f"`{name}` must be numeric. Received: {name}.dtype={features.dtype}")
    features = np.asarray(features, np.float64)
    if not np.isfinite(features).all():
        raise ValueError(f"`{name}` must be finite (no NaN or Inf).")
    return features


def _whitener(centered, regularization):
    """A matrix W with W W^T = (Sigma + eps I)^-1 for the covariance Sigma of `centered`
    (from its eigendecomposition, so a singular Sigma, e.g. fewer examples than features, is
    handled by `regularization`)."""
    covariance = centered.T @ centered / len(centered)
    eigenvalues, eigenvectors = np.linalg.eigh(covariance)
    floor = regularization * max(float(np.trace(covariance)) / len(covariance), 1e-300)
    return eigenvectors / np.sqrt(np.maximum(eigenvalues, 0.0) + floor)


class MahalanobisScore:
    """Class-conditional Gaussian score on features, and its relative variant.

    Fitted once on the training set's penultimate-layer features f(x) (Lee et al. 2018):
    class means mu_c and one covariance Sigma shared by the classes (the maximum-likelihood,
    "tied" estimate, the mean over examples of (f - mu_y)(f - mu_y)^T). The score of a new
    input is

        M(x) = max_c -(f - mu_c)^T Sigma^-1 (f - mu_c)       (high = in-distribution)

    the negative squared distance to the closest class. The relative Mahalanobis score (Ren
    et al. 2021) subtracts the same distance to one "background" Gaussian fitted on all the
    training features (mean mu_0, covariance Sigma_0): RMD_c = MD_c - MD_0, and
    M(x) = max_c -RMD_c, which discounts the directions in which every input varies (it
    helps most for near-OOD inputs). A small ridge `regularization` times the mean
    eigenvalue is added to each covariance so it can be inverted.

    Lee et al. add input preprocessing and feature ensembles over layers; this is their
    score on one layer without them (as most later comparisons use it).

    Args:
        relative: Relative Mahalanobis (Ren et al. 2021) instead of Mahalanobis.
        regularization: Ridge, as a fraction >= 0 of the mean eigenvalue of each covariance.

    Attributes (after `fit`):
        means_: `(k, d)` class means.
        classes_: `(k,)` the class labels in the order of `means_`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import MahalanobisScore
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 600)
    >>> features = rng.normal(size=(600, 4)) + 5.0 * np.eye(3, 4)[labels]
    >>> score = MahalanobisScore().fit(features, labels)
    >>> near, far = score.score(np.eye(3, 4) * 5.0), score.score(np.full((1, 4), 20.0))
    >>> bool(near.min() > far.max())
    True

    Reference: Lee, Lee, Lee, Shin, "A Simple Unified Framework for Detecting
    Out-of-Distribution Samples and Adversarial Attacks", NeurIPS 2018, arXiv:1807.03888;
    Ren, Fort, Liu, Roy, Padhy, Lakshminarayanan, "A Simple Fix to Mahalanobis Distance for
    Improving Near-OOD Detection", arXiv:2106.09022, 2021.
    """

    def __init__(self, relative=False, regularization=1e-6):
        self.relative = check_bool("relative", relative)
        self.regularization = check_number("regularization", regularization, 0.0)

    def fit(self, features, labels):
        """Fit the class means and the shared covariance (and the background Gaussian).

        Args:
            features: `(n, d)` training features (the layer before the logits, say).
            labels: `(n,)` integer training labels (every class present at least once).

        Returns:
            `self`.
        """
        features = _check_features(features)
        labels = _arrays.to_numpy(labels, "labels").reshape(-1)
        if labels.shape[0] != len(features):
            raise ValueError(
                f"`labels` must have one label per example ({len(features)}). Received: "
                f"labels.shape={labels.shape}"
            )
        self.classes_, index = np.unique(labels, return_inverse=True)
        counts = np.bincount(index)
        self.means_ = np.zeros((len(self.classes_), features.shape[1]))
        np.add.at(self.means_, index, features)
        self.means_ /= counts[:, None]
        self._whiten = _whitener(features - self.means_[index], self.regularization)
        if self.relative:
            self._background_mean = features.mean(axis=0)
            self._background_whiten = _whitener(
                features - self._background_mean, self.regularization
            )
        return self

    def distances(self, features):
        """`(n, k)` squared Mahalanobis distances to each class (relative: minus the
        background's)."""
        if not hasattr(self, "means_"):
            raise ValueError("This MahalanobisScore is not fitted yet: call `fit` first.")
        features = _check_features(features, width=self.means_.shape[1])
        projected = features @ self._whiten
        centers = self.means_ @ self._whiten
        distances = (
            (projected**2).sum(axis=1, keepdims=True)
            - 2.0 * projected @ centers.T
            + (centers**2).sum(axis=1)[None, :]
        )
        distances = np.maximum(distances, 0.0)
        if self.relative:
            background = (features - self._background_mean) @ self._background_whiten
            distances = distances - (background**2).sum(axis=1, keepdims=True)
        return distances

    def score(self, features):
        """`(n,)` scores max_c -distance_c (high = in-distribution)."""
        return -self.distances(features).min(axis=1)
