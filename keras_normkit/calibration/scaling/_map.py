"""`ScalingMap`, the base of the fitted maps of logits (temperature, vector, matrix, ETS,
Dirichlet): `predict(logits)` in NumPy, read in row chunks, shaped like the logits."""

import numpy as np

from keras_normkit.calibration import _arrays, _validation


class ScalingMap:
    """A fitted map from logits to calibrated probabilities (NumPy, float64).

    A subclass computes the calibrated probabilities of a chunk of 2-D float64 logits in
    `_probabilities(z)` (two columns (1 - q, q) for a single binary logit) and may check
    the number of logit columns in `_check_width`. `predict` validates the logits, runs
    `_probabilities` chunk by chunk (a `numpy.memmap` is never loaded whole) and returns
    `(n, k)` probabilities, or the probability of class 1 for one binary logit, in the
    shape of `logits` (`(n,)` stays `(n,)`).
    """

    def _probabilities(self, z):
        raise NotImplementedError

    def _check_width(self, num_columns, logits):
        """Raise a `ValueError` if the map cannot read logits of `num_columns` columns."""

    def predict(self, logits):
        """Calibrated probabilities from logits, shaped like `logits`."""
        checked, binary = _validation.check_logits(logits)
        self._check_width(checked.shape[1], logits)
        q = _arrays.map_rows(lambda z: self._probabilities(np.asarray(z, np.float64)), checked)
        return _arrays.as_input_shape(q[:, 1:] if binary else q, logits)
