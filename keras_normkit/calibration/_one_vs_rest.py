"""One-vs-rest machinery shared by histogram binning, isotonic calibration and Platt scaling.

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
`_OneVsRestCalibrator` (the Keras wrapper's call: columns, map, renormalization).
"""

import numpy as np
from keras import ops

from keras_normkit.calibration import _arrays, _validation
from keras_normkit.calibration.wrappers import _CalibratedClassifier

_TINY32 = float(np.finfo(np.float32).tiny)


# --------------------------------------------------------------------------------------
# NumPy (fitting and the maps' `predict`).
# --------------------------------------------------------------------------------------


def probability_columns(probabilities, labels, name="probabilities"):
    """Validated `(n, c)` float64 columns, `(n,)` int labels, and whether the input is binary.

    Binary input (`(n,)` or `(n, 1)` probabilities of class 1) gives one column (c = 1),
    `(n, k)` softmax probabilities give k columns.
    """
    _, binary = _validation.check_logits(probabilities, name)
    checked = _validation.check_probabilities(probabilities, name)  # (n, 2) when binary
    labels = _validation.check_labels(labels, *checked.shape)
    columns = checked[:, 1:] if binary else checked
    return columns, labels, binary


def checked_columns(probabilities, num_columns):
    """Validated float64 columns of `probabilities` for a map fitted on `num_columns`."""
    _, binary = _validation.check_logits(probabilities, "probabilities")
    checked = _validation.check_probabilities(probabilities)
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


def padded_rows(rows, shape, fill=None):
    """`rows` (1-D arrays, one per column) left-aligned in a float32 array of `shape`.

    The rest of row `j` holds `fill`, or repeats of `rows[j][-1]` when `fill` is `None`: how
    the fitted tables of varying length fill the calibration wrappers' fixed-size weights.
    """
    padded = np.empty(shape, np.float32)
    for j, row in enumerate(rows):
        padded[j, : len(row)] = row
        padded[j, len(row) :] = row[-1] if fill is None else fill
    return padded


def renormalize(q):
    """Rows of `q` `(n, c)` divided by their sums (c > 1); zero rows become uniform."""
    if q.shape[1] == 1:
        return q
    total = q.sum(axis=1, keepdims=True)
    uniform = np.full_like(q, 1.0 / q.shape[1])
    return np.divide(q, total, out=uniform, where=total > 0)


def as_input_shape(q, probabilities):
    """Calibrated `(n, c)` values in the shape of the input (`(n,)` stays `(n,)`)."""
    return q[:, 0] if np.ndim(probabilities) == 1 else q


def log_odds(logits):
    """Log-odds log(p_j / (1 - p_j)) of softmax(z) `(n, k)`, or z itself for one logit.

    Computed without forming 1 - p_j: with e_j = exp(z_j - max z), the sum over the other
    classes is the sum of the non-maximal e_j for the arg-max class and 1 + that sum - e_j
    (>= 1, no cancellation) for the others.
    """
    z = np.asarray(logits, dtype=np.float64)
    if z.shape[1] == 1:
        return z
    d = z - z.max(axis=1, keepdims=True)
    e = np.exp(d)
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


def ops_count_below(table, values, strict):
    """For every `values[i, j]`: how many entries of the sorted row `table[j]` are below it.

    `table` is `(c, B)`, each row non-decreasing; `values` is `(n, c)`. Counts entries
    `< value` (`strict=True`) or `<= value`. A branch-free binary search in keras.ops:
    ceil(log2(B + 1)) rounds of one gather and one comparison, for every backend and for
    SavedModel export (no `searchsorted` over a batch of tables is needed).
    """
    num_columns, size = table.shape
    flat = ops.reshape(table, (-1,))
    offsets = ops.arange(num_columns, dtype="int32") * size
    position = ops.cast(ops.zeros_like(values), "int32")
    step = 1
    while 2 * step <= size:
        step *= 2
    while step >= 1 and size > 0:
        candidate = position + step
        index = ops.minimum(candidate, size) - 1 + offsets
        entry = ops.take(flat, index)
        below = ops.less(entry, values) if strict else ops.less_equal(entry, values)
        accept = ops.logical_and(ops.less_equal(candidate, size), below)
        position = ops.where(accept, candidate, position)
        step //= 2
    return position


def ops_gather(table, index):
    """`table[j, index[i, j]]` for a `(c, B)` table and `(n, c)` int32 indices."""
    num_columns, size = table.shape
    offsets = ops.arange(num_columns, dtype="int32") * size
    return ops.take(ops.reshape(table, (-1,)), index + offsets)


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
        return as_input_shape(renormalize(q), probabilities)

    def _summary(self):
        return f"columns={self.num_columns}"

    def __repr__(self):
        return f"{type(self).__name__}({self._summary()})"


class _OneVsRestCalibrator(_CalibratedClassifier):
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


def assign_table_pair(first, first_rows, second, second_rows, first_fill=None):
    """Store a fit's two tables of per-column rows (breakpoints, values) into the weights
    `first` and `second`, each row padded to the weight's width (`padded_rows`)."""
    first.assign(padded_rows(first_rows, first.shape, fill=first_fill))
    second.assign(padded_rows(second_rows, second.shape))


class _SizedTablesCalibrator(_OneVsRestCalibrator):
    """A one-vs-rest wrapper whose map is two tables of shape `(c, num_breakpoints)`.

    Keras cannot add weights to a built layer, so the size is fixed when the tables are
    created: by the first `calibrate`, as twice what its fit needs (room to recalibrate on
    similar data), or, for a wrapper built before (called, wired into a model), as
    `DEFAULT_NUM_BREAKPOINTS`. A subclass names its tables and their initializers in
    `_tables`, calls `_init_tables(num_breakpoints)` at the end of `__init__`, and assigns a
    fit with `_assign_tables(first_rows, second_rows, first_fill)`.
    """

    DEFAULT_NUM_BREAKPOINTS = 1024
    _tables = ()  # ((name, initializer), (name, initializer))
    _fit_name = ""

    def _init_tables(self, num_breakpoints):
        self.num_breakpoints = num_breakpoints
        self._sized = True  # from now on `_create_calibration_weights` creates them
        if self.num_classes is not None and num_breakpoints is not None:
            self._create_calibration_weights(self.num_classes)

    def _create_calibration_weights(self, num_classes):
        if not getattr(self, "_sized", False):  # called by the base __init__: see above
            return
        if self.num_breakpoints is None:  # built before `calibrate` (called, wired, loaded)
            self.num_breakpoints = self.DEFAULT_NUM_BREAKPOINTS
        shape = (self._num_columns(num_classes), self.num_breakpoints)
        for name, initializer in self._tables:
            weight = self.add_weight(
                shape=shape, initializer=initializer, trainable=False, name=name
            )
            setattr(self, name, weight)

    def _create_weights_for_calibration(self, num_classes):
        pass  # `_assign_tables` creates them, at the size the fit needs

    def _calibration_weights_created(self):
        return getattr(self, self._tables[-1][0], None) is not None

    def _assign_tables(self, first_rows, second_rows, first_fill=None):
        """Create the tables if needed and store the fitted rows, padded (`padded_rows`)."""
        needed = max(2, max(len(row) for row in second_rows))
        if not self._calibration_weights_created():
            if self.num_breakpoints is None:
                self.num_breakpoints = 2 * needed
            self._create_calibration_weights(self.num_classes)
        if needed > self.num_breakpoints:
            name = type(self).__name__
            raise ValueError(
                f"The {self._fit_name} fit needs {needed} breakpoints, more than this "
                f"{name}'s weights hold (num_breakpoints={self.num_breakpoints}, fixed when "
                "they were created: by the first `calibrate`, as twice what it needed, or "
                f"by `build` before it, as {self.DEFAULT_NUM_BREAKPOINTS}). Create a new "
                f"wrapper, e.g. {name}(model, num_breakpoints={2 * needed})."
            )
        first, second = (getattr(self, name) for name, _ in self._tables)
        assign_table_pair(first, first_rows, second, second_rows, first_fill)
