"""Input checks shared by the calibration functions (NumPy in, clear `ValueError` out).

Every public calibration function checks its arrays here, once, at the boundary. A check
never repairs its input: NaN/Inf values, labels out of range or of the wrong shape, held-out
labels that are all one class, and empty arrays are all rejected with a message that says
what was received and what is expected.
"""

import warnings

import keras
import numpy as np

from keras_normkit._validation import check_int
from keras_normkit.calibration._arrays import chunk_slices, read_rows


def to_numpy(x, name):
    """`x` as a NumPy array (NumPy arrays and memmaps are returned as they are)."""
    if x is None:
        raise ValueError(f"`{name}` must be an array. Received: {name}=None")
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(keras.ops.convert_to_numpy(x))
    except Exception:  # noqa: BLE001 - anything array-like NumPy itself accepts
        return np.asarray(x)


def check_logits(logits, name="logits", check_finite=True):
    """Validated logits as a 2-D array `(n, k)` (not copied) and whether they are binary.

    `(n,)` and `(n, 1)` are one logit per example (binary: `sigmoid(z)` is the probability
    of class 1); `(n, k)` with `k >= 2` are softmax logits.
    """
    logits = to_numpy(logits, name)
    if logits.ndim not in (1, 2):
        raise ValueError(
            f"`{name}` must have shape (num_examples, num_classes), or (num_examples,) for a "
            f"binary classifier. Received: {name}.shape={logits.shape}"
        )
    if logits.ndim == 1:
        logits = logits.reshape(-1, 1)
    if logits.shape[0] == 0:
        raise ValueError(
            f"`{name}` is empty: at least one example is needed. Received: "
            f"{name}.shape={logits.shape}"
        )
    if logits.shape[1] == 0:
        raise ValueError(
            f"`{name}` must have at least 1 column (1 logit for a binary classifier, >= 2 "
            f"for softmax). Received: {name}.shape={logits.shape}"
        )
    if not (np.issubdtype(logits.dtype, np.floating) or np.issubdtype(logits.dtype, np.integer)):
        raise ValueError(f"`{name}` must be numeric. Received: {name}.dtype={logits.dtype}")
    if check_finite:
        for rows in chunk_slices(*logits.shape):
            _check_finite_chunk(read_rows(logits, rows), name, rows.start)
    return logits, logits.shape[1] == 1


def _check_finite_chunk(chunk, name, offset):
    finite = np.isfinite(chunk)
    if not finite.all():
        bad = np.argwhere(~finite)[0]
        row = int(bad[0]) + offset
        raise ValueError(
            f"`{name}` must be finite (no NaN or Inf). Received {chunk[tuple(bad)]} in row "
            f"{row} ({int((~finite).sum())} non-finite values in rows {offset}.."
            f"{offset + len(chunk) - 1})."
        )


def check_labels(labels, num_examples, num_classes, name="labels"):
    """Integer class labels `(n,)` from integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.

    `num_classes` is the number of classes (2 for a single binary logit).
    """
    labels = to_numpy(labels, name)
    if labels.ndim == 2 and labels.shape[1] == num_classes and num_classes >= 2:
        values = np.asarray(labels)
        if values.size and not (np.isin(values, (0, 1)).all() and (values.sum(1) == 1).all()):
            raise ValueError(
                f"`{name}` of shape {labels.shape} is read as one-hot, so every row must hold a "
                "single 1 and zeros elsewhere (soft labels are not supported). Received rows "
                "that are not one-hot."
            )
        labels = values.argmax(axis=1)
    elif labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    elif labels.ndim != 1:
        raise ValueError(
            f"`{name}` must be integer class labels of shape ({num_examples},) or "
            f"({num_examples}, 1), or one-hot of shape ({num_examples}, {num_classes}). "
            f"Received: {name}.shape={labels.shape}"
        )
    if labels.shape[0] != num_examples:
        raise ValueError(
            f"`{name}` must have one entry per example ({num_examples}). "
            f"Received: {name}.shape={labels.shape}"
        )
    if np.issubdtype(labels.dtype, np.floating):
        if not np.isfinite(labels).all() or (labels != np.round(labels)).any():
            raise ValueError(
                f"`{name}` must be integers in [0, {num_classes - 1}]. Received non-integer "
                f"values such as {labels[~np.isfinite(labels) | (labels != np.round(labels))][0]}"
            )
    elif not (np.issubdtype(labels.dtype, np.integer) or labels.dtype == bool):
        raise ValueError(f"`{name}` must be integers. Received: {name}.dtype={labels.dtype}")
    labels = labels.astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(
            f"`{name}` must be in [0, {num_classes - 1}] ({num_classes} classes). Received "
            f"values in [{labels.min()}, {labels.max()}]."
        )
    return labels


def check_two_classes(labels, method, consequence):
    """`labels` (validated integer labels), or a `ValueError` if they are all one class.

    Calibration estimates how the probability of each class depends on the classifier's
    output. Held-out labels that are all one class do not depend on it at all, so no
    method can estimate that: `consequence` says what `method` would return instead.
    Read in chunks (a memmap is never loaded whole); stops at the first chunk holding two
    classes.
    """
    first = None
    for rows in chunk_slices(len(labels), 1):
        chunk = np.asarray(read_rows(labels, rows))
        low, high = chunk.min(), chunk.max()
        first = low if first is None else first
        if low != first or high != first:
            return labels
    raise ValueError(
        f"{method} needs held-out examples of at least two classes. Received {len(labels)} "
        f"labels, all of class {int(first)}: with a single class the labels do not depend on "
        f"the classifier's output, so they cannot show how to correct it; {consequence}. "
        "Calibrate on held-out data that contains every class (e.g. a stratified split)."
    )


def check_probabilities(probabilities, name="probabilities", atol=1e-3):
    """Validated probabilities `(n, k)` float64 and whether the input was binary.

    `(n,)`/`(n, 1)` probabilities of class 1 (binary) become the two columns (1 - p, p).
    Rows must lie in [0, 1] and (for `k >= 2`) sum to 1 within `atol`: logits passed where
    probabilities are expected are rejected, not squashed.
    """
    probabilities, binary = check_logits(probabilities, name)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if (probabilities < 0).any() or (probabilities > 1).any():
        raise ValueError(
            f"`{name}` must be probabilities in [0, 1]. Received values in "
            f"[{probabilities.min():.4g}, {probabilities.max():.4g}] (logits? apply softmax or "
            "sigmoid first)."
        )
    if binary:
        return np.concatenate([1.0 - probabilities, probabilities], axis=1), True
    sums = probabilities.sum(axis=1)
    if np.abs(sums - 1.0).max() > atol:
        raise ValueError(
            f"Each row of `{name}` must sum to 1 (a softmax output). Received row sums in "
            f"[{sums.min():.6g}, {sums.max():.6g}]."
        )
    return probabilities, False


def check_probabilities_and_labels(probabilities, labels, name="probabilities"):
    """Validated probabilities `(n, k)` float64, integer labels `(n,)` and whether binary.

    The check of every measure and every probability-based fit: `check_probabilities`
    (binary input becomes two columns, k = 2), then `check_labels` against its k classes.
    """
    probabilities, binary = check_probabilities(probabilities, name)
    labels = check_labels(labels, *probabilities.shape)
    return probabilities, labels, binary


def check_num_bins(num_bins):
    return check_int("num_bins", num_bins, 1)


def check_logits_and_labels(logits, labels, name="logits"):
    """Validated logits `(n, k)`, integer labels `(n,)` and whether the logits are binary."""
    logits, binary = check_logits(logits, name)
    labels = check_labels(labels, logits.shape[0], 2 if binary else logits.shape[1])
    return logits, labels, binary


def warn_if_probabilities(logits, method="Temperature scaling", stacklevel=3):
    """Warn when the 'logits' look like softmax outputs: a classic calibration mistake."""
    head = np.asarray(read_rows(logits, slice(0, min(len(logits), 10_000))), dtype=np.float64)
    if head.shape[1] >= 2 and head.min() >= 0 and head.max() <= 1:
        if np.abs(head.sum(axis=1) - 1).max() < 1e-3:
            warnings.warn(
                "The logits look like probabilities (every row is in [0, 1] and sums to 1). "
                f"{method} expects logits: pass the pre-softmax outputs, or "
                "log(probabilities).",
                stacklevel=stacklevel,
            )
