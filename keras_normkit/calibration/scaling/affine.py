"""Vector and matrix scaling (Guo et al., ICML 2017): affine maps of the logits.

* Vector scaling, softmax(w * z + b): `fit_vector_scaling` (a `VectorScalingMap`) and
  `VectorScaling`.
* Matrix scaling, softmax(z @ A + b): `fit_matrix_scaling` (a `MatrixScalingMap`) and
  `MatrixScaling`.

Both are fitted by minimum NLL with the NumPy L-BFGS of `_lbfgs.py`, started from the
temperature solution. Matrix scaling penalizes the off-diagonal of A and the bias (ODIR,
Kull et al. 2019), vector scaling the spread of w and the bias, so that neither overfits
small validation sets. All passes over the logits run in row chunks of ~8 MB, so `logits`
may be a `numpy.memmap` far larger than memory.

Reference: Guo, Pleiss, Sun, Weinberger, "On Calibration of Modern Neural Networks",
ICML 2017, arXiv:1706.04599, Section 4.2; Kull et al., "Beyond temperature scaling",
NeurIPS 2019, arXiv:1910.12656 (ODIR regularization).
"""

import warnings

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_number
from keras_normkit.calibration import _arrays, _numeric, _validation
from keras_normkit.calibration.base import CalibrationWrapper
from keras_normkit.calibration.scaling._deprecated import PairReturn
from keras_normkit.calibration.scaling._lbfgs import lbfgs
from keras_normkit.calibration.scaling._map import ScalingMap
from keras_normkit.calibration.scaling.temperature import fit_temperature

__all__ = [
    "MatrixScaling",
    "MatrixScalingMap",
    "VectorScaling",
    "VectorScalingMap",
    "fit_matrix_scaling",
    "fit_vector_scaling",
]


class _AffineMap(PairReturn, ScalingMap):
    """Shared `predict` of the vector and matrix maps: softmax of an affine map of z."""

    _legacy_pair = ()

    def _affine(self, z):
        raise NotImplementedError

    def _check_width(self, num_columns, logits):
        if num_columns != len(self.bias):
            raise ValueError(
                f"The map was fitted on {len(self.bias)} logit column(s). Received logits of "
                f"shape {np.shape(logits)}."
            )

    def _probabilities(self, z):
        return _numeric.softmax(self._affine(z))


class VectorScalingMap(_AffineMap):
    """A fitted vector scaling: p = softmax(w * z + b).

    Attributes:
        scale: `(k,)` float64 per-class scales w (`(1,)` for a single binary logit).
        bias: `(k,)` float64 biases b.

    `predict(logits)` returns softmax(w * z + b) for logits `(n, k)`, or sigmoid(w z + b)
    for one binary logit `(n,)`/`(n, 1)`, in the shape of `logits`.

    Deprecated, for one release: keras_normkit 0.1.0's `fit_vector_scaling` returned the
    pair `(w, b)`; `w, b = m` and `m[0]` still work, with a `DeprecationWarning`. Read
    `m.scale` and `m.bias` instead.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import VectorScalingMap
    >>> fitted = VectorScalingMap(scale=[0.5, 1.0], bias=[0.0, 0.0])
    >>> fitted.predict(np.array([[2.0, 0.0]])).round(4).tolist()  # softmax((1, 0))
    [[0.7311, 0.2689]]
    """

    _legacy_pair = ("scale", "bias")
    _legacy_function = "fit_vector_scaling"

    def __init__(self, scale, bias):
        self.scale = np.asarray(scale, np.float64).reshape(-1)
        self.bias = np.asarray(bias, np.float64).reshape(-1)

    def _affine(self, z):
        return z * self.scale + self.bias

    def __repr__(self):
        return f"VectorScalingMap(scale={self.scale.tolist()}, bias={self.bias.tolist()})"


class MatrixScalingMap(_AffineMap):
    """A fitted matrix scaling: p = softmax(z @ A + b).

    Attributes:
        kernel: `(k, k)` float64 matrix A (`(1, 1)` for a single binary logit).
        bias: `(k,)` float64 biases b.

    `predict(logits)` returns softmax(z @ A + b) for logits `(n, k)`, or sigmoid(a z + b)
    for one binary logit `(n,)`/`(n, 1)`, in the shape of `logits`.

    Deprecated, for one release: keras_normkit 0.1.0's `fit_matrix_scaling` returned the
    pair `(A, b)`; `A, b = m` and `m[0]` still work, with a `DeprecationWarning`. Read
    `m.kernel` and `m.bias` instead.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import MatrixScalingMap
    >>> fitted = MatrixScalingMap(kernel=[[0.5, 0.0], [0.0, 0.5]], bias=[0.0, 0.0])
    >>> fitted.predict(np.array([[2.0, 0.0]])).round(4).tolist()  # softmax((1, 0))
    [[0.7311, 0.2689]]
    """

    _legacy_pair = ("kernel", "bias")
    _legacy_function = "fit_matrix_scaling"

    def __init__(self, kernel, bias):
        self.bias = np.asarray(bias, np.float64).reshape(-1)
        self.kernel = np.asarray(kernel, np.float64).reshape(len(self.bias), len(self.bias))

    def _affine(self, z):
        return z @ self.kernel + self.bias

    def __repr__(self):
        return f"MatrixScalingMap(classes={len(self.bias)})"


def _affine_nll(logits, labels, params, kind, l2, features=None):
    """Mean NLL (+ penalty) of softmax(affine(z)) and its gradient w.r.t. params.

    The affine map acts on `features(z)` (default: z itself; Dirichlet calibration passes
    log-softmax). `l2` is one weight for the off-diagonal (or spread) and the bias
    penalties, or a pair `(off_diagonal_weight, bias_weight)`.
    """
    num = feature_width(logits, features)
    if kind == "vector":
        scale, bias = params[:num], params[num:]
    else:
        scale, bias = params[: num * num].reshape(num, num), params[num * num :]
    loss = 0.0
    grad_scale, grad_bias = np.zeros_like(scale), np.zeros(num)
    for rows in _arrays.chunk_slices(len(logits), 2 * num + 1):
        z = np.asarray(_arrays.read_rows(logits, rows), dtype=np.float64)
        if features is not None:
            z = features(z)
        a = z * scale + bias if kind == "vector" else z @ scale + bias
        # a - max_j a_j, its exponentials and their row sums; binary: softmax over (0, a).
        a, e, total = _numeric.shifted_exponentials(_numeric.two_class_logits(a))
        index = np.arange(len(a)), labels[rows]
        loss += float(np.sum(np.log(total) - a[index]))
        g = e / total[:, None]
        g[index] -= 1.0
        if num == 1:
            g = g[:, 1:]
        grad_scale += np.sum(g * z, axis=0) if kind == "vector" else z.T @ g
        grad_bias += g.sum(axis=0)
    n = len(logits)
    loss, grad_scale, grad_bias = loss / n, grad_scale / n, grad_bias / n
    off_weight, bias_weight = (l2, l2) if np.isscalar(l2) else l2
    if (off_weight or bias_weight) and num > 1:
        # Matrix: off-diagonal of A; vector: spread of w around its mean (the common
        # scale 1/T stays free); both: the bias.
        if kind == "matrix":
            deviation = scale - np.diag(np.diag(scale))
        else:
            deviation = scale - scale.mean()
        loss += off_weight * float(np.sum(deviation**2)) + bias_weight * float(bias @ bias)
        grad_scale = grad_scale + 2 * off_weight * deviation
        grad_bias = grad_bias + 2 * bias_weight * bias
    return loss, np.concatenate([np.ravel(grad_scale), grad_bias])


def _gauge_projection(num, kind):
    """Orthogonal projection onto the parameters that fix softmax's shift invariance.

    softmax(a) = softmax(a + c): the NLL does not change when a constant is added to the
    bias, or (matrix scaling) to a whole row of A. Among these equivalent parameters the
    penalty is smallest when the bias, and the off-diagonal of each row of A, sum to 0: a
    linear subspace that contains the penalized optimum and in which the NLL has no flat
    direction left, so L-BFGS is run there (from a start point inside it).
    """
    if num == 1:
        return lambda v: v
    off_diagonal = ~np.eye(num, dtype=bool)

    def project(v):
        v = v.copy()
        if kind == "matrix":
            a = v[: num * num].reshape(num, num)
            a[off_diagonal] -= np.repeat(a.sum(1) - np.diag(a), num - 1) / (num - 1)
        v[-num:] -= v[-num:].mean()
        return v

    return project


def feature_width(logits, features):
    """Number of columns the affine map acts on: of `logits`, or of `features(logits)`."""
    if features is None:
        return logits.shape[1]
    return features(np.asarray(_arrays.read_rows(logits, slice(0, 1)), np.float64)).shape[1]


def _fit_affine(logits, labels, kind, l2, max_iter, gtol, features=None, method=None):
    method = method or f"{kind.capitalize()} scaling"
    logits, labels, _ = _validation.check_logits_and_labels(logits, labels)
    _validation.check_two_classes(
        labels,
        method,
        "the NLL keeps falling as that class's bias grows, so the fit has no finite optimum "
        "(with l2 > 0 the penalty alone would decide where it stops)",
    )
    _validation.warn_if_probabilities(logits, method, stacklevel=4)
    num = feature_width(logits, features)
    try:
        start = 1.0 / fit_temperature(logits, labels).temperature
    except ValueError:
        start = 1.0
    if kind == "vector":
        x0 = np.concatenate([np.full(num, start), np.zeros(num)])
    else:
        x0 = np.concatenate([np.ravel(np.eye(num) * start), np.zeros(num)])
    x, converged, iterations = lbfgs(
        lambda p: _affine_nll(logits, labels, p, kind, l2, features),
        x0,
        max_iter,
        gtol,
        project=_gauge_projection(num, kind),
    )
    if not converged:
        warnings.warn(
            f"{method} did not converge in {iterations} L-BFGS iterations (max_iter="
            f"{max_iter}); the last iterate is returned. With separable held-out data the "
            "optimum is at infinity: use more held-out data or temperature scaling.",
            stacklevel=3,
        )
    scale = x[:num] if kind == "vector" else x[: num * num].reshape(num, num)
    return scale, x[-num:]


def fit_vector_scaling(logits, labels, l2=1e-2, max_iter=1000, gtol=1e-7):
    """Vector scaling: w and b minimizing NLL(softmax(w * z + b)) + l2 * (|w - mean w|^2 + |b|^2).

    A diagonal generalization of temperature scaling (w = 1/T, b = 0 is temperature
    scaling) with 2k parameters, fitted by L-BFGS from the temperature solution. The
    penalty leaves the common scale (the temperature) free and keeps a class that happens
    to be separable in a small validation set from driving its w_k to infinity (set
    `l2=0` for the unregularized map of Guo et al.). For a single binary logit it is Platt
    scaling, sigmoid(w z + b), never penalized. Unlike temperature scaling it can change
    the argmax.

    Args:
        logits: `(n, k)` logits, or `(n,)`/`(n, 1)` for a binary classifier (memmap OK).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        l2: Non-negative weight of the penalty (ignored for a single binary logit).
        max_iter: Maximum number of L-BFGS iterations (a warning is issued if reached).
        gtol: Convergence tolerance on the largest gradient entry.

    Returns:
        A `VectorScalingMap`: `scale` w and `bias` b, float64 arrays of shape `(k,)`
        (`(1,)` for a binary logit); `predict(logits)` applies it. (keras_normkit 0.1.0
        returned the pair `(w, b)`; unpacking the map still gives it for one release, with a
        `DeprecationWarning`.)

    Raises:
        ValueError: for bad input (see `fit_temperature`), or when the labels are all one
            class (the NLL then keeps falling as that class's bias grows: no finite optimum).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_vector_scaling
    >>> z = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 0.0], [0.0, 3.0], [2.0, 1.0]])
    >>> fitted = fit_vector_scaling(z, [0, 1, 1, 1, 0])
    >>> fitted.scale.shape, fitted.bias.shape
    ((2,), (2,))
    >>> fitted.predict(z).shape
    (5, 2)

    Reference: Guo et al., ICML 2017, arXiv:1706.04599, Section 4.2.
    """
    return VectorScalingMap(*_fit_affine(logits, labels, "vector", check_l2(l2), max_iter, gtol))


def fit_matrix_scaling(logits, labels, l2=1e-1, max_iter=1000, gtol=1e-7):
    """Matrix scaling: A and b minimizing NLL(softmax(z @ A + b)) + l2 * (|offdiag A|^2 + |b|^2).

    The most general affine recalibration of the logits (k^2 + k parameters), fitted by
    L-BFGS from the temperature solution A = I / T. The penalty on the off-diagonal of A
    and on b (ODIR, Kull et al. 2019) leaves the diagonal free, so with a large `l2` matrix
    scaling falls back to vector-like scaling instead of overfitting a small validation set.

    Args:
        logits: `(n, k)` logits, or `(n,)`/`(n, 1)` for a binary classifier (memmap OK).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        l2: Non-negative weight of the off-diagonal and bias penalty (the default, 0.1, did
            best on 600 validation digits; tune it on held-out data for your problem).
        max_iter: Maximum number of L-BFGS iterations (a warning is issued if reached).
        gtol: Convergence tolerance on the largest gradient entry.

    Returns:
        A `MatrixScalingMap`: `kernel` A and `bias` b, float64 arrays of shape `(k, k)` and
        `(k,)` (calibrated logits `z @ A + b`); `predict(logits)` applies it.
        (keras_normkit 0.1.0 returned the pair `(A, b)`; unpacking the map still gives it
        for one release, with a `DeprecationWarning`.)

    Raises:
        ValueError: for bad input (see `fit_temperature`), or when the labels are all one
            class (the NLL then keeps falling as that class's bias grows: no finite optimum).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_matrix_scaling
    >>> z = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 0.0], [0.0, 3.0], [2.0, 1.0]])
    >>> fitted = fit_matrix_scaling(z, [0, 1, 1, 1, 0], l2=0.1)
    >>> fitted.kernel.shape, fitted.bias.shape
    ((2, 2), (2,))

    Reference: Guo et al., ICML 2017, arXiv:1706.04599, Section 4.2; Kull et al., "Beyond
    temperature scaling", NeurIPS 2019, arXiv:1910.12656 (ODIR regularization).
    """
    return MatrixScalingMap(*_fit_affine(logits, labels, "matrix", check_l2(l2), max_iter, gtol))


def check_l2(l2, name="l2"):
    return check_number(name, l2, 0.0)


class _AffineScaling(CalibrationWrapper):
    """Shared machinery of vector and matrix scaling: softmax(affine map of z), an l2 penalty.

    A subclass passes its default `l2` to `__init__`, creates the weight that multiplies the
    logits in `_create_multiplier` (before `bias`: the order of the variables in saved
    files), names it in `_multiplier_name` (the attribute of the same name holds it in the
    fitted map), and sets `_fit_function`, `_map_class` and `_apply`.
    """

    _multiplier_name = None

    def __init__(self, model, output, model_output, l2, **kwargs):
        l2 = check_l2(l2)
        super().__init__(model, output=output, model_output=model_output, **kwargs)
        self.l2 = l2

    def _create_multiplier(self, num_classes):
        raise NotImplementedError

    @property
    def _multiplier(self):
        return getattr(self, self._multiplier_name)

    def _create_calibration_weights(self, num_classes):
        self._create_multiplier(num_classes)
        self.bias = self.add_weight(
            shape=(num_classes,), initializer="zeros", trainable=False, name="bias"
        )

    def _calibration_weights_created(self):
        return getattr(self, "bias", None) is not None

    def _fit(self, logits, labels):
        fitted = self._fit_function(logits, labels, l2=self.l2)
        multiplier = getattr(fitted, self._multiplier_name)
        self._multiplier.assign(multiplier.astype("float32"))
        self.bias.assign(fitted.bias.astype("float32"))

    @property
    def calibration_map_(self):
        """The fitted map (from the weights); `NotCalibratedError` before `calibrate`."""
        self._check_calibrated("report a fitted map")
        return self._map_class(
            ops.convert_to_numpy(self._multiplier), ops.convert_to_numpy(self.bias)
        )

    def get_config(self):
        return {**super().get_config(), "l2": self.l2}


@keras.saving.register_keras_serializable(package="keras_normkit")
class VectorScaling(_AffineScaling):
    """Vector scaling of a trained classifier: p = softmax(w * z + b).

    A per-class scale w and bias b (2k parameters, non-trainable weights `scale` and
    `bias`), fitted by `calibrate(x, y)` to minimize NLL + l2 * (|w - mean w|^2 + |b|^2) on
    held-out data (L-BFGS from the temperature solution w = 1/T, see
    `fit_vector_scaling`). It generalizes
    temperature scaling (w = 1/T, b = 0) and may change the argmax. For a single binary
    logit it is Platt scaling, sigmoid(w z + b). Before `calibrate`, calling, predicting
    with or exporting the wrapper, and reading `calibration_map_` (a `VectorScalingMap`),
    raise `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default: softmax, or sigmoid for `k = 1`) or `"logits"`
            (the calibrated logits) for the wrapper's output.
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.
        l2: Non-negative weight of the penalty on the spread of w and on b (default 0.01;
            0 gives the unregularized map of Guo et al.).

    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import VectorScaling
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(512, 8)).astype("float32")
    >>> y = (x[:, 0] + 0.5 * rng.normal(size=512) > 0).astype("int32")
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
    >>> kernel = np.zeros((8, 2), "float32")
    >>> kernel[0] = [-5.0, 5.0]  # logits (-5 x0, 5 x0): too sharp for labels with noise
    >>> model.layers[0].set_weights([kernel, np.zeros(2, "float32")])
    >>> calibrated = VectorScaling(model, l2=1e-2).calibrate(x, y, verbose=0)
    >>> tuple(calibrated(x[:2]).shape)
    (2, 2)

    Reference: Guo et al., "On Calibration of Modern Neural Networks", ICML 2017,
    arXiv:1706.04599, Section 4.2.
    """

    _fit_function = staticmethod(fit_vector_scaling)
    _map_class = VectorScalingMap
    _multiplier_name = "scale"

    def __init__(self, model, output="probabilities", model_output="auto", l2=1e-2, **kwargs):
        super().__init__(model, output, model_output, l2, **kwargs)

    def _create_multiplier(self, num_classes):
        self.scale = self.add_weight(
            shape=(num_classes,), initializer="ones", trainable=False, name="scale"
        )

    def _apply(self, logits):
        return logits * ops.cast(self.scale, logits.dtype) + ops.cast(self.bias, logits.dtype)


@keras.saving.register_keras_serializable(package="keras_normkit")
class MatrixScaling(_AffineScaling):
    """Matrix scaling of a trained classifier: p = softmax(z @ A + b).

    A full k x k matrix A and bias b (non-trainable weights `kernel` and `bias`), fitted
    by `calibrate(x, y)` to minimize NLL + l2 * (|off-diagonal of A|^2 + |b|^2) on held-out
    data (L-BFGS from A = I / T, see `fit_matrix_scaling`). The penalty (ODIR, Kull et al.
    2019) keeps the k^2 parameters from overfitting a small validation set; the diagonal
    is free, so temperature-like solutions cost nothing. It may change the argmax. Before
    `calibrate`, calling, predicting with or exporting the wrapper, and reading
    `calibration_map_` (a `MatrixScalingMap`), raise `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default: softmax, or sigmoid for `k = 1`) or `"logits"`
            (the calibrated logits) for the wrapper's output.
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.
        l2: Non-negative weight of the off-diagonal and bias penalty (default 0.1).

    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import MatrixScaling
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(512, 8)).astype("float32")
    >>> y = (x[:, 0] + 0.5 * rng.normal(size=512) > 0).astype("int32")
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
    >>> kernel = np.zeros((8, 2), "float32")
    >>> kernel[0] = [-5.0, 5.0]  # logits (-5 x0, 5 x0): too sharp for labels with noise
    >>> model.layers[0].set_weights([kernel, np.zeros(2, "float32")])
    >>> calibrated = MatrixScaling(model, l2=1e-2).calibrate(x, y, verbose=0)
    >>> tuple(calibrated(x[:2]).shape)
    (2, 2)

    Reference: Guo et al., "On Calibration of Modern Neural Networks", ICML 2017,
    arXiv:1706.04599, Section 4.2; Kull et al., NeurIPS 2019, arXiv:1910.12656 (ODIR).
    """

    _fit_function = staticmethod(fit_matrix_scaling)
    _map_class = MatrixScalingMap
    _multiplier_name = "kernel"

    def __init__(self, model, output="probabilities", model_output="auto", l2=1e-1, **kwargs):
        super().__init__(model, output, model_output, l2, **kwargs)

    def _create_multiplier(self, num_classes):
        self.kernel = self.add_weight(
            shape=(num_classes, num_classes),
            initializer="identity",
            trainable=False,
            name="kernel",
        )

    def _apply(self, logits):
        return ops.matmul(logits, ops.cast(self.kernel, logits.dtype)) + ops.cast(
            self.bias, logits.dtype
        )
