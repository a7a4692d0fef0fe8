"""The bins of the confidences, shared by the measures, histogram binning and the streaming ECE.

* Equal width (Guo et al. 2017): M intervals B_m = ((m-1)/M, m/M] (a value of exactly m/M
  falls in bin m, not m+1; a value of exactly 0 in the first bin). `equal_width_edges`
  gives the interior edges m/M, rounded down to a dtype when the values are in that dtype,
  so that `metrics.binned` (float64), `HistogramBinning` (float32 tables) and the streaming
  `keras_normkit.metrics.ExpectedCalibrationError` (its own dtype) put every value in the
  same bin.
* Equal mass (Nixon et al. 2019): `equal_mass_bin_indices`.
* `binned_sums`: per-bin sums, one binning or one per bootstrap resample.

References: Guo, Pleiss, Sun, Weinberger, "On Calibration of Modern Neural Networks",
ICML 2017, arXiv:1706.04599, Section 2; Nixon, Dusenberry, Zhang, Jerfel, Tran, "Measuring
Calibration in Deep Learning", CVPR Workshops 2019, arXiv:1904.01685.
"""

import keras
import numpy as np

#: The binnings the binned measures accept.
BINNINGS = ("equal_width", "equal_mass")


def round_down_to_dtype(edges, dtype="float32"):
    """The largest value of `dtype` <= each float64 edge.

    A value of that dtype is above an edge exactly when it is above the rounded edge, so it
    falls in the same bin as in float64 (float32(0.2) = 0.2000000030 is above 0.2).
    """
    edges = np.asarray(edges, np.float64)
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype == "float64":
        return edges
    if dtype == "bfloat16":
        import ml_dtypes  # a dependency of Keras

        numpy_type = ml_dtypes.bfloat16
    else:
        numpy_type = np.dtype(dtype).type
    rounded = edges.astype(numpy_type)
    below = np.nextafter(rounded, numpy_type(-np.inf))
    return np.where(rounded.astype(np.float64) > edges, below, rounded)


def equal_width_edges(num_bins, dtype="float64"):
    """The M - 1 interior edges 1/M, ..., (M-1)/M, rounded down to `dtype`."""
    return round_down_to_dtype(np.arange(1, num_bins, dtype=np.float64) / num_bins, dtype)


def bin_indices(values, num_bins):
    """Index m - 1 of the bin ((m-1)/M, m/M] holding each value (0 also goes to bin 0)."""
    return np.searchsorted(equal_width_edges(num_bins), values, side="left")


def equal_mass_bin_indices(values, num_bins, weights=None):
    """Index of the equal-mass bin of each value: floor(M * r / n), r its rank from below.

    The n values are sorted in increasing order and the value of rank r = 0, ..., n - 1
    goes to bin floor(M r / n): bin m holds the ranks in [m n / M, (m + 1) n / M), so the
    bin sizes differ by at most one, the larger bins spread evenly (n = 10, M = 4 gives
    sizes 3, 2, 3, 2). Tied values are never split: a group of equal values takes the rank
    of its first member (the number of values strictly below it), so with ties some bins
    are larger and some may be empty. The result depends on the multiset of values only,
    not on their order.

    With `weights` `(B, n)` (bootstrap multiplicities, or any non-negative weights) each
    row is binned on its own: r is the total weight of the values strictly below, n the
    row's total weight; the result is `(B, n)`.
    """
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = np.arange(len(values))
    first = tie_group_starts(values[order])
    if weights is not None:
        weights = np.asarray(weights)[:, order]
    return sorted_equal_mass_bins(first, num_bins, weights)[..., inverse]


def tie_group_starts(ordered):
    """For sorted values, the index of the first value equal to each value."""
    new_group = np.empty(len(ordered), dtype=bool)
    new_group[:1] = True
    new_group[1:] = ordered[1:] != ordered[:-1]
    return np.flatnonzero(new_group)[np.cumsum(new_group) - 1]


def sorted_equal_mass_bins(first, num_bins, weights=None):
    """`equal_mass_bin_indices` of sorted values given their `tie_group_starts`."""
    if weights is None:
        return (first * num_bins) // len(first)
    below = np.cumsum(weights, axis=1) - weights
    total = weights.sum(axis=1, keepdims=True)
    tied = (first != np.arange(len(first))).any()
    rank = below[:, first] if tied else below
    if np.issubdtype(weights.dtype, np.integer):
        index = (rank * num_bins) // np.maximum(total, 1)
    else:
        index = np.floor(rank * num_bins / np.where(total > 0, total, 1.0)).astype(np.int64)
    return np.minimum(index, num_bins - 1)


def binned_sums(index, values, num_bins, weights=None):
    """Per-bin sums of `values` `(n,)`: `(num_bins,)`, or `(B, num_bins)` with `weights` `(B, n)`.

    `index` is `(n,)` or, with `weights`, `(n,)` or `(B, n)` (one binning per row).
    """
    if weights is None:
        return np.bincount(index, weights=values, minlength=num_bins)
    weights = np.asarray(weights)
    if np.ndim(index) == 1 and num_bins <= 64:  # one binning for all rows: a matrix product
        spread = np.zeros((len(index), num_bins))
        spread[np.arange(len(index)), index] = values
        return weights @ spread
    rows = weights.shape[0]
    index = np.broadcast_to(index, weights.shape)
    flat = (index + num_bins * np.arange(rows)[:, None]).ravel()
    summed = np.bincount(flat, weights=(weights * values).ravel(), minlength=rows * num_bins)
    return summed.reshape(rows, num_bins)
