"""Measures of prediction sets: `coverage`, `average_set_size`, `classwise_coverage`."""

import numpy as np

from keras_normkit.uncertainty import _arrays

__all__ = ["average_set_size", "classwise_coverage", "coverage"]


def check_sets(sets, name="sets"):
    """A boolean array `(n, k)` of prediction sets (0/1 integers are accepted)."""
    sets = _arrays.to_numpy(sets, name)
    if sets.ndim != 2 or sets.shape[0] == 0:
        raise ValueError(
            f"`{name}` must be a boolean mask of shape (num_examples, num_classes) with at "
            f"least one example. Received: {name}.shape={sets.shape}"
        )
    if sets.dtype != bool:
        if not np.isin(sets, (0, 1)).all():
            raise ValueError(f"`{name}` must be a boolean mask (or 0/1 values).")
        sets = sets.astype(bool)
    return sets


def coverage(sets, labels):
    """The fraction of examples whose set holds their label: mean_i [y_i in C(x_i)].

    Args:
        sets: Boolean mask `(n, k)` of prediction sets (as `ConformalClassifier` or
            `prediction_sets` return).
        labels: Integer labels `(n,)` (or one-hot).

    Returns:
        The empirical coverage, a Python float in [0, 1].

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import coverage
    >>> sets = np.array([[True, True, False], [False, False, True], [True, False, False]])
    >>> coverage(sets, [1, 2, 2])
    0.6666666666666666
    """
    sets = check_sets(sets)
    labels = _arrays.check_labels(labels, *sets.shape)
    return float(sets[np.arange(len(labels)), labels].mean())


def average_set_size(sets):
    """The mean number of labels per set, mean_i |C(x_i)| (the price of the coverage).

    Args:
        sets: Boolean mask `(n, k)` of prediction sets.

    Returns:
        A Python float in [0, k].

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import average_set_size
    >>> average_set_size(np.array([[True, True, False], [False, False, True]]))
    1.5
    """
    return float(check_sets(sets).sum(axis=1).mean())


def classwise_coverage(sets, labels):
    """The coverage within each class: for class c, mean over {i : y_i = c} of [c in C(x_i)].

    Marginal coverage 1 - alpha can hide classes covered far less; class-conditional
    ("Mondrian") calibration (`fit_prediction_sets(..., mondrian=True)`) guarantees 1 - alpha
    for every class.

    Args:
        sets: Boolean mask `(n, k)` of prediction sets.
        labels: Integer labels `(n,)` (or one-hot).

    Returns:
        `(k,)` float64 coverages, NaN for a class with no example.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import classwise_coverage
    >>> sets = np.array([[True, False], [False, True], [True, False]])
    >>> classwise_coverage(sets, [0, 0, 1]).tolist()
    [0.5, 0.0]
    """
    sets = check_sets(sets)
    labels = _arrays.check_labels(labels, *sets.shape)
    covered = sets[np.arange(len(labels)), labels]
    counts = np.bincount(labels, minlength=sets.shape[1]).astype(np.float64)
    hits = np.bincount(labels, weights=covered, minlength=sets.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, hits / np.maximum(counts, 1), np.nan)
