"""Checks and small array helpers shared by the whole `uncertainty` package (NumPy).

Every public function of `conformal/`, `ood/` and `ensembles/` checks its arrays here, once,
at the boundary, with the package convention: a wrong type is a `TypeError`, a wrong value
(NaN, labels out of range, a shape that does not fit) a `ValueError` naming the argument,
the value received and what was expected. Nothing here repairs its input.
"""

import keras
import numpy as np

from keras_normkit._validation import check_number


def to_numpy(x, name):
    """`x` as a NumPy array (a Keras/backend tensor is converted)."""
    if x is None:
        raise ValueError(f"`{name}` must be an array. Received: {name}=None")
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(keras.ops.convert_to_numpy(x))
    except Exception:  # noqa: BLE001 - anything array-like NumPy itself accepts
        return np.asarray(x)


def _check_finite(array, name):
    finite = np.isfinite(array)
    if not finite.all():
        bad = tuple(np.argwhere(~finite)[0])
        raise ValueError(
            f"`{name}` must be finite (no NaN or Inf). Received {array[bad]} at index "
            f"{bad} ({int((~finite).sum())} non-finite values)."
        )


def _check_numeric(array, name):
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"`{name}` must be numeric. Received: {name}.dtype={array.dtype}")


def check_logits(logits, name="logits"):
    """Finite float64 logits `(n, k)`; one logit per example (`(n,)` or `(n, 1)`, a binary
    classifier, sigmoid(z) the probability of class 1) becomes the two columns (0, z), whose
    softmax is (1 - sigmoid(z), sigmoid(z))."""
    logits = to_numpy(logits, name)
    _check_numeric(logits, name)
    if logits.ndim == 1:
        logits = logits.reshape(-1, 1)
    if logits.ndim != 2 or logits.shape[0] == 0 or logits.shape[1] == 0:
        raise ValueError(
            f"`{name}` must have shape (num_examples, num_classes) with at least one example "
            f"(or (num_examples,) for a binary classifier). Received: {name}.shape="
            f"{logits.shape}"
        )
    logits = np.asarray(logits, dtype=np.float64)
    _check_finite(logits, name)
    if logits.shape[1] == 1:
        logits = np.concatenate([np.zeros_like(logits), logits], axis=1)
    return logits


def check_probabilities(probabilities, name="probabilities", atol=1e-3):
    """Float64 probabilities `(n, k)`, k >= 2, in [0, 1] with rows summing to 1 (within
    `atol`); `(n,)` or `(n, 1)` is the probability of class 1 of a binary classifier and
    becomes the two columns (1 - p, p)."""
    probabilities = to_numpy(probabilities, name)
    _check_numeric(probabilities, name)
    if probabilities.ndim == 1:
        probabilities = probabilities.reshape(-1, 1)
    if probabilities.ndim != 2 or probabilities.shape[0] == 0 or probabilities.shape[1] == 0:
        raise ValueError(
            f"`{name}` must have shape (num_examples, num_classes) with at least one example "
            f"(or (num_examples,) for a binary classifier). Received: {name}.shape="
            f"{probabilities.shape}"
        )
    probabilities = np.asarray(probabilities, dtype=np.float64)
    _check_finite(probabilities, name)
    if probabilities.shape[1] == 1:
        probabilities = np.concatenate([1.0 - probabilities, probabilities], axis=1)
    if probabilities.min() < 0 or probabilities.max() > 1:
        raise ValueError(
            f"`{name}` must lie in [0, 1]. Received values in [{probabilities.min():.4g}, "
            f"{probabilities.max():.4g}]: pass logits to a function that takes logits, or "
            "apply softmax first."
        )
    sums = probabilities.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1)))
    if abs(sums[worst] - 1) > atol:
        raise ValueError(
            f"Each row of `{name}` must sum to 1 (softmax outputs). Received a row summing to "
            f"{sums[worst]:.6g} (row {worst})."
        )
    return probabilities


def check_labels(labels, num_examples, num_classes, name="labels"):
    """Integer class labels `(n,)` in [0, num_classes) from `(n,)`/`(n, 1)` integers or
    one-hot `(n, k)`."""
    labels = to_numpy(labels, name)
    if labels.ndim == 2 and labels.shape[1] == num_classes and num_classes >= 2:
        if not (np.isin(labels, (0, 1)).all() and (labels.sum(axis=1) == 1).all()):
            raise ValueError(
                f"`{name}` of shape {labels.shape} is read as one-hot, so every row must hold "
                "a single 1 and zeros elsewhere."
            )
        labels = labels.argmax(axis=1)
    elif labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1 or labels.shape[0] != num_examples:
        raise ValueError(
            f"`{name}` must be integer class labels of shape ({num_examples},), one per "
            f"example, or one-hot of shape ({num_examples}, {num_classes}). Received: "
            f"{name}.shape={labels.shape}"
        )
    if np.issubdtype(labels.dtype, np.floating):
        bad = ~np.isfinite(labels) | (labels != np.round(labels))
        if bad.any():
            raise ValueError(
                f"`{name}` must be integers in [0, {num_classes - 1}]. Received non-integer "
                f"values such as {labels[bad][0]}."
            )
    elif not (np.issubdtype(labels.dtype, np.integer) or labels.dtype == bool):
        raise ValueError(f"`{name}` must be integers. Received: {name}.dtype={labels.dtype}")
    labels = labels.astype(np.int64)
    if labels.min() < 0 or labels.max() >= num_classes:
        raise ValueError(
            f"`{name}` must be class indices in [0, {num_classes - 1}] ({num_classes} "
            f"classes). Received values in [{labels.min()}, {labels.max()}]."
        )
    return labels


def check_alpha(alpha, name="alpha"):
    """The miscoverage level alpha, a float in (0, 1)."""
    return check_number(name, alpha, 0.0, 1.0, strict_minimum=True, strict_maximum=True)


def check_scores(scores, name):
    """A finite float64 vector of one score per example."""
    scores = to_numpy(scores, name)
    _check_numeric(scores, name)
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores[:, 0]
    if scores.ndim != 1 or scores.shape[0] == 0:
        raise ValueError(
            f"`{name}` must be a non-empty vector of one score per example, shape "
            f"(num_examples,). Received: {name}.shape={scores.shape}"
        )
    scores = np.asarray(scores, dtype=np.float64)
    _check_finite(scores, name)
    return scores


def softmax(logits):
    """Row-wise softmax of float64 logits `(n, k)` (shifted by the row maximum)."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


def logsumexp(logits):
    """Row-wise log-sum-exp of float64 logits `(n, k)`, `(n,)`."""
    top = logits.max(axis=1)
    return top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
