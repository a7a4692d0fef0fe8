"""Softmax and log-softmax of NumPy logits: the one copy every calibration module uses.

Rows are logits `(n, k)`. A single binary logit `(n, 1)` is the two-class softmax of
(0, z): sigmoid(z) = softmax((0, z))[1], so it is widened to two columns first
(`two_class_logits`). The row maximum is subtracted before `exp` (softmax is
shift-invariant), so nothing overflows and the largest term of every row is exp(0) = 1.
"""

import numpy as np


def two_class_logits(z):
    """`(n, 1)` logits as the two columns (0, z) (dtype kept); `(n, k >= 2)` unchanged."""
    if z.shape[1] == 1:
        return np.concatenate([np.zeros_like(z), z], axis=1)
    return z


def shifted_exponentials(z):
    """`(d, e, total)` of 2-D logits: d = z - max_j z_j, e = exp(d), total = sum_j e_j.

    The parts of softmax (e / total) and log-softmax (d - log total) for callers that need
    both, e.g. a loss and its gradient. `total` is `(n,)` and at least 1.
    """
    d = z - z.max(axis=1, keepdims=True)
    e = np.exp(d)
    return d, e, e.sum(axis=1)


def log_softmax(logits):
    """Row-wise log softmax(z) in float64 `(n, k)`; one binary logit gives two columns."""
    d, _, total = shifted_exponentials(two_class_logits(np.asarray(logits, np.float64)))
    return d - np.log(total)[:, None]


def softmax(logits):
    """Row-wise softmax(z) in float64 `(n, k)`; one binary logit gives two columns."""
    _, e, total = shifted_exponentials(two_class_logits(np.asarray(logits, np.float64)))
    return e / total[:, None]
