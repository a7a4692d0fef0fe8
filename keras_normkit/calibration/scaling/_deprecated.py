"""The return values of 0.1.0's `fit_temperature` (a float) and `fit_vector_scaling` /
`fit_matrix_scaling` (a tuple), kept for one release on the maps that replace them.

After 0.1.0 every `fit_*` function returns a map with `predict`. Code written for 0.1.0
keeps working for one release: `TemperatureScalingMap` still acts as the float T
(`float(m)`, `round(m, 3)`, `f"{m:.3f}"`, arithmetic, comparisons, NumPy conversion), and
`VectorScalingMap` / `MatrixScalingMap` as the pair `(w, b)` / `(A, b)` (unpacking,
indexing, `len`), each use with a `DeprecationWarning` that names the attribute to read
instead. A later release removes this module.
"""

import operator
import warnings

import numpy as np


def warn(old, new, stacklevel=4):
    """A `DeprecationWarning` pointing at the caller of the dunder method that called this."""
    warnings.warn(
        f"{old} is deprecated (keras_normkit 0.1.0's fit functions returned floats and tuples; "
        f"they return maps now) and will stop working in a later release: {new}.",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def _float_operator(function, swapped=False):
    def method(self, other):
        value = self._legacy_float()
        return function(other, value) if swapped else function(value, other)

    return method


class FloatReturn:
    """The map read as the Python float 0.1.0 returned (the temperature), with a warning."""

    def _legacy_float(self):
        warn(
            "Using the result of `fit_temperature` as a number",
            "read its `.temperature` (a float), or call `.predict(logits)`",
        )
        return self.temperature

    def __float__(self):
        return self._legacy_float()

    def __round__(self, ndigits=None):
        return round(self._legacy_float(), ndigits)

    def __format__(self, format_spec):
        if not format_spec:  # f"{m}", str(m): the map's repr, silently
            return str(self)
        return format(self._legacy_float(), format_spec)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._legacy_float(), dtype=dtype)

    def __neg__(self):
        return -self._legacy_float()

    __add__ = _float_operator(operator.add)
    __radd__ = _float_operator(operator.add, swapped=True)
    __sub__ = _float_operator(operator.sub)
    __rsub__ = _float_operator(operator.sub, swapped=True)
    __mul__ = _float_operator(operator.mul)
    __rmul__ = _float_operator(operator.mul, swapped=True)
    __truediv__ = _float_operator(operator.truediv)
    __rtruediv__ = _float_operator(operator.truediv, swapped=True)
    __pow__ = _float_operator(operator.pow)
    __rpow__ = _float_operator(operator.pow, swapped=True)
    __lt__ = _float_operator(operator.lt)
    __le__ = _float_operator(operator.le)
    __gt__ = _float_operator(operator.gt)
    __ge__ = _float_operator(operator.ge)


class PairReturn:
    """The map read as the pair 0.1.0 returned, `(multiplier, bias)`, with a warning.

    A subclass names the pair's attributes in `_legacy_pair` (e.g. `("scale", "bias")`).
    """

    _legacy_pair = ()
    _legacy_function = ""

    def _legacy_tuple(self):
        first, second = self._legacy_pair
        warn(
            f"Unpacking or indexing the result of `{self._legacy_function}`",
            f"read its `.{first}` and `.{second}`, or call `.predict(logits)`",
        )
        return tuple(getattr(self, name) for name in self._legacy_pair)

    def __iter__(self):
        return iter(self._legacy_tuple())

    def __getitem__(self, index):
        return self._legacy_tuple()[index]

    def __len__(self):
        return len(self._legacy_tuple())

    def __bool__(self):  # a map is always truthy (as the non-empty tuple was), silently
        return True
