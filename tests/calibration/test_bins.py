"""The shared bins (`calibration/_bins.py`): the equal-mass bins by hand, and the two ECE
binnings agree: NumPy (`calibration_bins`, `expected_calibration_error`) and `keras.ops` (the
streaming `keras_normkit.metrics.ExpectedCalibrationError`, which takes its edges from
`_bins.equal_width_edges`).

Both put a confidence c in bin ((m-1)/M, m/M]; they must count the same examples in every
bin, including confidences that lie exactly on an edge.
"""

import keras
import numpy as np
import pytest

from keras_normkit.calibration import calibration_bins, expected_calibration_error
from keras_normkit.calibration._bins import equal_mass_bin_indices
from keras_normkit.metrics import ExpectedCalibrationError


def _metric_counts(probabilities, labels, num_bins, dtype):
    metric = ExpectedCalibrationError(num_bins=num_bins, dtype=dtype)
    metric.update_state(labels, probabilities)
    counts = keras.ops.convert_to_numpy(metric.bin_counts)
    return counts, float(keras.ops.convert_to_numpy(metric.result()))


def _float64_variables():
    """Whether the backend keeps float64 variables (JAX without x64 makes them float32)."""
    metric = ExpectedCalibrationError(dtype="float64")
    return keras.ops.convert_to_numpy(metric.bin_counts).dtype == np.float64


def _on_and_next_to_edges(num_bins, dtype):
    """Two-class probabilities whose confidence is each edge m/M (in `dtype`) and its
    neighbours one ulp below and above."""
    edges = np.arange(1, num_bins, dtype=dtype) / dtype(num_bins)
    confidence = np.concatenate(
        [edges, np.nextafter(edges, dtype(1)), np.nextafter(edges, dtype(0)), [dtype(1)]]
    )
    confidence = confidence[confidence >= 0.5]
    return np.stack([confidence, 1 - confidence], axis=1).astype(dtype)


@pytest.mark.parametrize("num_bins", [1, 3, 5, 10, 15, 20])
def test_random_probabilities_fall_in_the_same_bins(num_bins):
    rng = np.random.default_rng(num_bins)
    z = rng.normal(size=(3000, 4)) * 3
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = rng.integers(0, 4, size=3000)
    for dtype in ("float32", "float64"):
        probabilities = p.astype(dtype)
        counts, ece = _metric_counts(probabilities, y, num_bins, dtype)
        np.testing.assert_array_equal(counts, calibration_bins(probabilities, y, num_bins).counts)
        expected = expected_calibration_error(probabilities, y, num_bins)
        # The bins are the same; the sums run in float32 on some backends (torch, JAX).
        assert ece == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("num_bins", [3, 5, 10, 15])
def test_float64_confidences_on_the_edges_fall_in_the_same_bins(num_bins):
    if not _float64_variables():
        pytest.skip("float64 variables are float32 on this backend (JAX without x64)")
    p = _on_and_next_to_edges(num_bins, np.float64)
    y = np.zeros(len(p), int)
    counts, _ = _metric_counts(p, y, num_bins, "float64")
    np.testing.assert_array_equal(counts, calibration_bins(p, y, num_bins).counts)


@pytest.mark.parametrize("num_bins", [5, 10, 15])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_low_precision_confidences_on_the_edges_fall_in_the_same_bins(num_bins, dtype):
    """float32(m / M) is above m / M for M = 5, 10, 15 (float32(0.2) = 0.2000000030): a
    confidence equal to it is above the edge, in the metric as in NumPy's float64 binning."""
    p = _on_and_next_to_edges(num_bins, np.dtype(dtype).type)
    y = np.zeros(len(p), int)
    counts, _ = _metric_counts(p, y, num_bins, dtype)
    np.testing.assert_array_equal(counts, calibration_bins(p, y, num_bins).counts)


def test_equal_mass_bins_by_hand():
    # n = 10, M = 4: ranks 0-2 | 3-4 | 5-7 | 8-9 (floor(4 r / 10)): sizes 3, 2, 3, 2.
    values = np.linspace(0.1, 1.0, 10)[::-1]
    np.testing.assert_array_equal(equal_mass_bin_indices(values, 4), [3, 3, 2, 2, 2, 1, 1, 0, 0, 0])
    # A tie group straddling a boundary goes whole to the bin of its first rank.
    np.testing.assert_array_equal(equal_mass_bin_indices([0.5, 0.2, 0.5, 0.9], 2), [0, 0, 0, 1])
    np.testing.assert_array_equal(equal_mass_bin_indices([0.5, 0.1, 0.2, 0.5], 2), [1, 0, 0, 1])
    # Bootstrap weights: integer multiplicities bin like repeated values.
    rng = np.random.default_rng(0)
    values = rng.random(50)
    weights = rng.integers(0, 3, size=(4, 50))
    got = equal_mass_bin_indices(values, 7, weights)
    for row in range(4):
        repeated = np.repeat(values, weights[row])
        expected = dict(zip(repeated, equal_mass_bin_indices(repeated, 7), strict=True))
        kept = weights[row] > 0
        np.testing.assert_array_equal(got[row][kept], [expected[v] for v in values[kept]])
