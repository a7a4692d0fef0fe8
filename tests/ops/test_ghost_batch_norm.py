"""`ghost_batch_norm`, the engine of `GhostBatchNormalization`: each run of consecutive
examples normalized with its own statistics, against NumPy (a smaller last group, a mask)."""

import keras
import numpy as np
import pytest

from keras_normkit.ops.ghost_batch_norm import ghost_batch_norm


def _np(x):
    return keras.ops.convert_to_numpy(x)


@pytest.mark.parametrize("n,v", [(8, 4), (9, 4), (3, 5)])
def test_groups_against_numpy(n, v):
    rng = np.random.default_rng(n)
    x = rng.normal(loc=1.0, scale=2.0, size=(n, 2, 3)).astype("float32")
    gamma = rng.uniform(0.5, 2.0, 3).astype("float32")
    beta = rng.normal(size=3).astype("float32")
    y, mean, var = ghost_batch_norm(x, v, axis=2, epsilon=1e-3, gamma=gamma, beta=beta)
    sizes, means, variances, expected = [], [], [], []
    for start in range(0, n, v):
        chunk = x[start : start + v].astype("float64")
        m, s2 = chunk.mean(axis=(0, 1)), chunk.var(axis=(0, 1))
        expected.append((chunk - m) / np.sqrt(s2 + 1e-3) * gamma + beta)
        sizes.append(len(chunk))
        means.append(m)
        variances.append(s2)
    w = np.array(sizes, "float64")[:, None] / n
    np.testing.assert_allclose(_np(y), np.concatenate(expected), atol=2e-5)
    np.testing.assert_allclose(_np(mean), (w * means).sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(var), (w * variances).sum(0), rtol=1e-5)


def test_mask_leaves_entries_out():
    x = np.random.default_rng(0).normal(size=(4, 3, 2)).astype("float32")
    mask = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 1, 1]], bool)
    y, mean, _ = ghost_batch_norm(x, 2, axis=2, epsilon=0.0, mask=mask)
    first = x[:2][mask[:2]]  # (entries, channels) of the first virtual batch
    np.testing.assert_allclose(
        _np(y)[:2][mask[:2]], (first - first.mean(0)) / first.std(0), atol=1e-5
    )
    second = x[2:][mask[2:]]
    expected_mean = (len(first) * first.mean(0) + len(second) * second.mean(0)) / (
        len(first) + len(second)
    )
    np.testing.assert_allclose(_np(mean), expected_mean, rtol=1e-5, atol=1e-6)
