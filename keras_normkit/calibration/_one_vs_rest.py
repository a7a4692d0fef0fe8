"""One-vs-rest machinery shared by the binning maps (histogram, isotonic, BBQ) and Platt scaling.

A binary classifier (one logit, or one probability of class 1) has one column to calibrate:
the probability of class 1. A classifier with k >= 2 outputs has k columns: column j is the
probability p_j (or, for Platt scaling, its log-odds), calibrated against the indicator
[y == j]. The k calibrated values q_j are then renormalized to sum to 1 (Zadrozny & Elkan
2002; Guo et al. 2017, Section 4.1). A row whose k calibrated values are all 0 has no
direction left to renormalize: it becomes the uniform distribution 1/k (as scikit-learn's
`CalibratedClassifierCV` does), never NaN.

NumPy functions (for the fits, in float64) and their `keras.ops` twins (for the served graph,
in float32) live side by side here so that both follow one definition, with the two shared
bases: `OneVsRestMap` (the fitted maps' `num_columns`, `predict` and `repr`) and
`OneVsRestWrapper` (the Keras wrapper's call: columns, map, renormalization). Shared by two
rooms (`binning/` and `scaling/platt.py`), so it lives beside them; the binning maps' table
lookups are in `binning/_lookup.py`.
"""

import numpy as np
from keras import ops

from keras_normkit.calibration import _arrays, _numeric, _validation
from keras_normkit.calibration.base import CalibrationWrapper

_TINY32 = float(np.finfo(np.float32).tiny)


# --------------------------------------------------------------------------------------
# NumPy (fitting and the maps' `predict`).
# --------------------------------------------------------------------------------------


def probability_columns(probabilities, labels, name="probabilities"):
    """Validated `(n, c)` float64 columns, `(n,)` int labels, and whether the input is binary.

    Binary input (`(n,)` or `(n, 1)` probabilities of class 1) gives one column (c = 1),
    `(n, k)` softmax probabilities give k columns.
    """
    checked, labels, binary = _validation.check_probabilities_and_labels(
        probabilities, labels, name
    )  # (n, 2) when binary
    columns = checked[:, 1:] if binary else checked
    return columns, labels, binary


def checked_columns(probabilities, num_columns):
    """Validated float64 columns of `probabilities` for a map fitted on `num_columns`."""
    checked, binary = _validation.check_probabilities(probabilities)
    columns = checked[:, 1:] if binary else checked
    if columns.shape[1] != num_columns:
        raise ValueError(
            f"The map was fitted on {num_columns} column(s) ("
            + ("a binary classifier" if num_columns == 1 else f"{num_columns} classes")
            + f"). Received probabilities of shape {np.shape(probabilities)}."
        )
    return columns


def targets(labels, column, num_columns):
    """The 0/1 target of one-vs-rest column `column`: [y == 1] when binary, else [y == j]."""
    return (labels == (1 if num_columns == 1 else column)).astype(np.float64)


def renormalize(q):
    """Rows of `q` `(n, c)` divided by their sums (c > 1); zero rows become uniform."""
    if q.shape[1] == 1:
        return q
    total = q.sum(axis=1, keepdims=True)
    uniform = np.full_like(q, 1.0 / q.shape[1])
    return np.divide(q, total, out=uniform, where=total > 0)


def log_odds(logits):
    """Log-odds log(p_j / (1 - p_j)) of softmax(z) `(n, k)`, or z itself for one logit.

    Computed without forming 1 - p_j: with e_j = exp(z_j - max z), the sum over the other
    classes is the sum of the non-maximal e_j for the arg-max class and 1 + that sum - e_j
    (>= 1, no cancellation) for the others.
    """
    z = np.asarray(logits, dtype=np.float64)
    if z.shape[1] == 1:
        return z
    d, e, _ = _numeric.shifted_exponentials(z)
    is_max = np.zeros(z.shape, dtype=bool)
    is_max[np.arange(len(z)), z.argmax(axis=1)] = True
    rest = np.where(is_max, 0.0, e).sum(axis=1, keepdims=True)
    others = np.where(is_max, rest, 1.0 + rest - e)
    return d - np.log(np.maximum(others, np.finfo(np.float64).tiny))


# --------------------------------------------------------------------------------------
# keras.ops (the wrappers' call).
# --------------------------------------------------------------------------------------


def ops_columns(logits):
    """sigmoid(z) for one logit, softmax(z) for k >= 2: the probabilities to calibrate."""
    if logits.shape[-1] == 1:
        return ops.sigmoid(logits)
    return ops.softmax(logits, axis=-1)


def ops_log_odds(logits):
    """`keras.ops` twin of `log_odds` (float32)."""
    if logits.shape[-1] == 1:
        return logits
    num = logits.shape[-1]
    d = logits - ops.max(logits, axis=-1, keepdims=True)
    e = ops.exp(d)
    is_max = ops.one_hot(ops.argmax(logits, axis=-1), num, dtype=logits.dtype)
    rest = ops.sum(e * (1.0 - is_max), axis=-1, keepdims=True)
    others = is_max * rest + (1.0 - is_max) * (1.0 + rest - e)
    return d - ops.log(ops.maximum(others, _TINY32))


def ops_renormalize(q):
    """`keras.ops` twin of `renormalize`."""
    if q.shape[-1] == 1:
        return q
    total = ops.sum(q, axis=-1, keepdims=True)
    positive = ops.greater(total, 0.0)
    safe = ops.where(positive, total, ops.ones_like(total))
    return ops.where(positive, q / safe, ops.ones_like(q) / q.shape[-1])


# --------------------------------------------------------------------------------------
# The fitted maps (NumPy) and the Keras wrapper.
# --------------------------------------------------------------------------------------


class OneVsRestMap:
    """Shared base of the fitted one-vs-rest maps (`HistogramBinningMap`, ...).

    A subclass stores its per-column parameters, names the attribute holding one entry per
    column in `_per_column`, applies column j in `_map_column(j, values)` and, when its
    input is not probabilities, overrides `_columns(x)`. `predict` validates the input,
    maps every column, renormalizes (k >= 2) and returns the input's shape.
    """

    _per_column = None

    @property
    def num_columns(self):
        return len(getattr(self, self._per_column))

    def _columns(self, probabilities):
        """The validated `(n, c)` float64 columns the map reads."""
        return checked_columns(probabilities, self.num_columns)

    def _map_column(self, column, values):
        raise NotImplementedError

    def predict(self, probabilities):
        """Calibrated probabilities, shaped like the input."""
        columns = self._columns(probabilities)
        q = np.empty_like(columns)
        for j in range(self.num_columns):
            q[:, j] = self._map_column(j, columns[:, j])
        return _arrays.as_input_shape(renormalize(q), probabilities)

    def _summary(self):
        return f"columns={self.num_columns}"

    def __repr__(self):
        return f"{type(self).__name__}({self._summary()})"


class OneVsRestWrapper(CalibrationWrapper):
    """Shared machinery of the one-vs-rest maps (histogram binning, isotonic, Platt).

    The map acts on c columns (c = 1 for a binary classifier: the probability of class 1;
    c = k otherwise: each class's probability, or its log-odds for Platt scaling); for
    c > 1 the calibrated columns are renormalized to sum to 1 (a zero row becomes uniform).
    With `output="logits"` the wrapper returns log-probabilities (floored at 1.2e-38), or
    the log-odds of the calibrated probability for c = 1: softmax/sigmoid of them gives the
    calibrated probabilities back. The fits hold the n x c columns in float64 (the logits
    themselves may be a spilled memmap, read in chunks).
    """

    def _columns(self, logits):
        """The c columns the map reads, from the classifier's logits (keras.ops)."""
        return ops_columns(logits)

    def _map_columns(self, columns):
        raise NotImplementedError

    def _numpy_columns(self, logits):
        """The columns to fit on, computed with the same `keras.ops` as the served graph.

        So that a value seen at fitting time is, bit for bit, the value the served graph
        compares with the fitted thresholds. Computed in row chunks (memmap OK).
        """
        parts = []
        for rows in _arrays.chunk_slices(len(logits), logits.shape[1]):
            chunk = ops.convert_to_tensor(np.asarray(_arrays.read_rows(logits, rows)))
            parts.append(np.asarray(ops.convert_to_numpy(self._columns(chunk)), np.float64))
        return np.concatenate(parts)

    def _num_columns(self, num_classes):
        return 1 if num_classes == 1 else num_classes

    def call(self, inputs, training=False):
        self._check_calibrated()
        logits = self._logits(self.classifier(inputs, training=training))
        return self._output_from_probabilities(self._probabilities(logits))

    def _probabilities(self, logits):
        return ops_renormalize(self._map_columns(self._columns(logits)))

    def _check_calibrated_map(self):
        self._check_calibrated("report a fitted map")
