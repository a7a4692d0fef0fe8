"""The binning maps' tables: fitted breakpoints stored in fixed-size weights, looked up in ops.

Histogram binning, isotonic calibration and BBQ all serve a one-vs-rest map given by two
tables per column (breakpoints and values): `padded_rows` fits the rows of varying length
into the fixed-size weights, `ops_count_below` (a branch-free binary search) and
`ops_gather` look them up in `keras.ops` on every backend and in an exported SavedModel, and
`LookupTableWrapper` is the wrapper whose tables are sized by its first fit.
"""

import numpy as np
from keras import ops

from keras_normkit.calibration._one_vs_rest import OneVsRestWrapper


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


def assign_table_pair(first, first_rows, second, second_rows, first_fill=None):
    """Store a fit's two tables of per-column rows (breakpoints, values) into the weights
    `first` and `second`, each row padded to the weight's width (`padded_rows`)."""
    first.assign(padded_rows(first_rows, first.shape, fill=first_fill))
    second.assign(padded_rows(second_rows, second.shape))


class LookupTableWrapper(OneVsRestWrapper):
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
