"""The percentile bootstrap of the calibration measures: resamples as rows of multiplicities.

A resample of n examples drawn with replacement is the row of how often each example was
drawn; a measure written for weighted examples then evaluates B resamples at once (a
`(B, n)` matrix of multiplicities), which is how `calibration_report` and
`smooth_calibration_curve` compute their intervals.

Reference: B. Efron, R. Tibshirani, "An Introduction to the Bootstrap", 1993, Chapter 13
(percentile intervals).
"""

import numpy as np

#: Bootstrap multiplicities are drawn in chunks of about this many entries.
CHUNK_ENTRIES = 2**22


def resample_weights(num_examples, bootstrap, seed):
    """Yield `(b, n)` bootstrap multiplicities (float64), B rows in all, from `default_rng(seed)`.

    Row r counts how often each example is drawn in n draws with replacement.
    """
    rng = np.random.default_rng(seed)
    rows = max(1, CHUNK_ENTRIES // num_examples)
    for start in range(0, bootstrap, rows):
        size = min(rows, bootstrap - start)
        draws = rng.integers(0, num_examples, size=(size, num_examples))
        flat = (draws + num_examples * np.arange(size)[:, None]).ravel()
        counts = np.bincount(flat, minlength=size * num_examples).astype(np.float64)
        yield counts.reshape(size, num_examples)


def percentile_interval(resampled, confidence_level, axis=0):
    """`(low, high)`: the (1 - level)/2 and (1 + level)/2 percentiles of the resampled values."""
    tail = 50.0 * (1.0 - confidence_level)
    low, high = np.percentile(resampled, [tail, 100.0 - tail], axis=axis)
    return low, high
