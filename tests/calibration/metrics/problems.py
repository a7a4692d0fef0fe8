"""Problems shared by the tests of the measures in `keras_normkit/calibration/metrics/`."""

import numpy as np


def random_problem(seed, n=500, k=5, sharpness=3.0, shift=0.0):
    """Softmax outputs and labels drawn from them, made overconfident by `shift`."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * sharpness
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    q = (1 - shift) * p + shift / k  # the labels follow a flatter distribution
    labels = (q.cumsum(1) > rng.random((n, 1))).argmax(1)
    return p, labels


def top_label(p, y):
    return p.max(1), (p.argmax(1) == y).astype(float)


GOOD_P = np.array([[0.7, 0.3], [0.2, 0.8]])
#: (probabilities, labels, message) that every measure must reject with a ValueError.
BAD_INPUTS = [
    (np.array([[np.nan, 1.0], [0.2, 0.8]]), [0, 1], "finite"),
    (np.array([[np.inf, 1.0], [0.2, 0.8]]), [0, 1], "finite"),
    (np.array([[2.0, -1.0], [0.2, 0.8]]), [0, 1], r"\[0, 1\]"),
    (np.array([[0.5, 0.6], [0.2, 0.8]]), [0, 1], "sum to 1"),
    (GOOD_P, [0, 2], r"\[0, 1\]"),
    (GOOD_P, [0, -1], r"\[0, 1\]"),
    (GOOD_P, [0, 1, 1], "one entry per example"),
    (GOOD_P, [0.5, 1], "integers"),
    (GOOD_P, np.array([[1, 1], [0, 1]]), "one-hot"),
    (GOOD_P, np.zeros((2, 3, 1)), "labels"),
    (np.zeros((0, 3)), np.zeros(0), "empty"),
    (np.zeros((2, 0)), [0, 1], "at least 1 column"),
    (np.zeros((2, 2, 2)), [0, 1], "shape"),
]
