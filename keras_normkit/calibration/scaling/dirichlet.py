"""Dirichlet calibration with ODIR regularization (Kull et al., NeurIPS 2019):
`fit_dirichlet_calibration` and `DirichletCalibration`.

The classifier's log-probabilities pass through a linear layer and a softmax:

    q = softmax(W log p + b),    log p = log softmax(z),

(in row form, q = softmax(log p @ W + b)), the multinomial logistic regression on the
log-probabilities, which is the maximum-likelihood fit of the Dirichlet model of the
predicted probabilities given the class. Its k^2 + k parameters are fitted by minimum NLL
with Off-Diagonal and Intercept Regularization (ODIR):

    L = -(1/n) sum_i log q_i[y_i]
        + lambda / (k (k - 1)) sum_{i != j} W_ij^2 + mu / k sum_j b_j^2,

which leaves the diagonal free (temperature-like maps cost nothing). For a binary
classifier with one logit z, p = (1 - sigmoid(z), sigmoid(z)) and the map is the k = 2
case (beta calibration), served as the probability of class 1.

The fit is the L-BFGS of `_lbfgs.py` on the objective of matrix scaling (`affine.py`)
applied to log softmax(z) instead of z, started from temperature scaling (W = I / T).
Because log softmax(z) is computed from logits, no probability underflows; for a
classifier known only by its probabilities p, pass log(p) as the logits.

Reference: Kull, Perelló-Nieto, Kängsepp, Silva Filho, Song, Flach, "Beyond temperature
scaling: Obtaining well-calibrated multiclass probabilities with Dirichlet calibration",
NeurIPS 2019, arXiv:1910.12656, Section 4 (ODIR).
"""

import keras
import numpy as np
from keras import ops

from keras_normkit.calibration import _numeric, _validation
from keras_normkit.calibration.base import CalibrationWrapper
from keras_normkit.calibration.scaling._map import ScalingMap
from keras_normkit.calibration.scaling.affine import _fit_affine, check_l2

__all__ = ["DirichletCalibration", "DirichletCalibrationMap", "fit_dirichlet_calibration"]


def _check_weights(off_diagonal_l2, bias_l2):
    return check_l2(off_diagonal_l2, "off_diagonal_l2"), check_l2(bias_l2, "bias_l2")


class DirichletCalibrationMap(ScalingMap):
    """A fitted Dirichlet calibration: q = softmax(log softmax(z) @ kernel + bias).

    Attributes:
        kernel: `(m, m)` weights W (m = k, or 2 for one binary logit).
        bias: `(m,)` intercepts b.

    `predict(logits)` returns the calibrated probabilities `(n, k)`, or the probability of
    class 1 for one binary logit `(n,)`/`(n, 1)`, in the shape of `logits`.
    """

    def __init__(self, kernel, bias):
        self.kernel = np.asarray(kernel, np.float64)
        self.bias = np.asarray(bias, np.float64).reshape(-1)

    def _check_width(self, num_columns, logits):
        if (2 if num_columns == 1 else num_columns) != len(self.bias):
            raise ValueError(
                f"The map was fitted on {len(self.bias)} classes. Received logits of shape "
                f"{np.shape(logits)}."
            )

    def _probabilities(self, z):
        a = _numeric.log_softmax(z) @ self.kernel + self.bias
        return np.exp(_numeric.log_softmax(a))

    def __repr__(self):
        return f"DirichletCalibrationMap(classes={len(self.bias)})"


def fit_dirichlet_calibration(
    logits, labels, off_diagonal_l2=1e-2, bias_l2=1e-2, max_iter=1000, gtol=1e-7
):
    """Dirichlet calibration: W, b minimizing NLL(softmax(log p @ W + b)) + ODIR.

    p = softmax(logits). Minimizes the mean NLL plus
    lambda / (k (k - 1)) sum_{i != j} W_ij^2 + mu / k sum_j b_j^2 (Kull et al. 2019's
    ODIR, lambda = `off_diagonal_l2`, mu = `bias_l2`) by L-BFGS from the temperature
    solution W = I / T. With both weights 0 it is the unregularized multinomial logistic
    regression on log p. For one binary logit z, p = (1 - sigmoid(z), sigmoid(z)).

    Args:
        logits: `(n, k)` logits (or log-probabilities), or `(n,)`/`(n, 1)` logits of a
            binary classifier (memmap OK: read in chunks).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        off_diagonal_l2: lambda >= 0, the weight of the mean squared off-diagonal entry.
        bias_l2: mu >= 0, the weight of the mean squared intercept.
        max_iter: Maximum number of L-BFGS iterations (a warning is issued if reached).
        gtol: Convergence tolerance on the largest gradient entry.

    Returns:
        A `DirichletCalibrationMap` (`kernel` `(m, m)`, `bias` `(m,)`, m = k or 2;
        `predict(logits)`).

    Raises:
        ValueError: for bad input, or when the labels are all one class (no finite
            optimum).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_dirichlet_calibration
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(20000, 3)) * 2
    >>> p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    >>> y = (p.cumsum(1) > rng.random((20000, 1))).argmax(1)  # y ~ softmax(z)
    >>> fitted = fit_dirichlet_calibration(2.5 * z, y)  # over-confident logits
    >>> np.round(np.diag(fitted.kernel), 1).tolist()  # about 1 / 2.5 on the diagonal
    [0.4, 0.4, 0.4]

    Reference: Kull et al., NeurIPS 2019, arXiv:1910.12656, Section 4.
    """
    off_diagonal_l2, bias_l2 = _check_weights(off_diagonal_l2, bias_l2)
    checked, binary = _validation.check_logits(logits)
    num = 2 if binary else checked.shape[1]
    penalty = (off_diagonal_l2 / (num * (num - 1)), bias_l2 / num)
    kernel, bias = _fit_affine(
        checked,
        labels,
        "matrix",
        penalty,
        max_iter,
        gtol,
        features=_numeric.log_softmax,
        method="Dirichlet calibration",
    )
    return DirichletCalibrationMap(kernel, bias)


@keras.saving.register_keras_serializable(package="keras_normkit")
class DirichletCalibration(CalibrationWrapper):
    """Dirichlet calibration of a trained classifier: q = softmax(log p @ W + b).

    A linear layer on the classifier's log-probabilities log p = log softmax(z), then a
    softmax; `calibrate(x, y)` fits W `(k, k)` and b `(k,)` by minimum NLL with ODIR,
    lambda / (k (k - 1)) sum_{i != j} W_ij^2 + mu / k sum_j b_j^2 (see
    `fit_dirichlet_calibration`). For a binary classifier with one logit the map is the
    k = 2 case on (1 - p, p) (beta calibration) and the wrapper outputs the probability of
    class 1. It may change the argmax. W and b are non-trainable weights `kernel` and
    `bias` (k = 2 for one logit), saved with the model and served by `model.export()`.
    Before `calibrate`, calling, predicting with or exporting the wrapper, and reading
    `calibration_map_`, raise `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default: softmax, or sigmoid for `k = 1`) or `"logits"`
            (the calibrated logits log p @ W + b; for `k = 1` their difference, a log-odds)
            for the wrapper's output.
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        off_diagonal_l2: lambda >= 0 of ODIR (default 0.01).
        bias_l2: mu >= 0 of ODIR (default 0.01).
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.

    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import DirichletCalibration
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(512, 8)).astype("float32")
    >>> y = (x[:, 0] + 0.5 * rng.normal(size=512) > 0).astype("int32")
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
    >>> kernel = np.zeros((8, 2), "float32")
    >>> kernel[0] = [-5.0, 5.0]  # logits (-5 x0, 5 x0): too sharp for labels with noise
    >>> model.layers[0].set_weights([kernel, np.zeros(2, "float32")])
    >>> calibrated = DirichletCalibration(model).calibrate(x, y, verbose=0)
    >>> calibrated.calibration_map_.kernel.shape
    (2, 2)
    >>> tuple(calibrated(x[:2]).shape)
    (2, 2)

    Reference: Kull et al., "Beyond temperature scaling: Obtaining well-calibrated
    multiclass probabilities with Dirichlet calibration", NeurIPS 2019, arXiv:1910.12656.
    """

    def __init__(
        self,
        model,
        output="probabilities",
        model_output="auto",
        off_diagonal_l2=1e-2,
        bias_l2=1e-2,
        **kwargs,
    ):
        off_diagonal_l2, bias_l2 = _check_weights(off_diagonal_l2, bias_l2)
        super().__init__(model, output=output, model_output=model_output, **kwargs)
        self.off_diagonal_l2 = off_diagonal_l2
        self.bias_l2 = bias_l2

    def _create_calibration_weights(self, num_classes):
        width = 2 if num_classes == 1 else num_classes
        self.kernel = self.add_weight(
            shape=(width, width), initializer="identity", trainable=False, name="kernel"
        )
        self.bias = self.add_weight(
            shape=(width,), initializer="zeros", trainable=False, name="bias"
        )

    def _calibration_weights_created(self):
        return getattr(self, "bias", None) is not None

    def _apply(self, logits):
        if logits.shape[-1] == 1:
            logits = ops.concatenate([ops.zeros_like(logits), logits], axis=-1)
            a = self._affine(ops.log_softmax(logits, axis=-1))
            return a[..., 1:] - a[..., :1]
        return self._affine(ops.log_softmax(logits, axis=-1))

    def _affine(self, features):
        kernel = ops.cast(self.kernel, features.dtype)
        return ops.matmul(features, kernel) + ops.cast(self.bias, features.dtype)

    def _fit(self, logits, labels):
        fitted = fit_dirichlet_calibration(
            logits, labels, off_diagonal_l2=self.off_diagonal_l2, bias_l2=self.bias_l2
        )
        self.kernel.assign(fitted.kernel.astype("float32"))
        self.bias.assign(fitted.bias.astype("float32"))

    @property
    def calibration_map_(self):
        """The fitted `DirichletCalibrationMap` (from the weights); `NotCalibratedError`
        before `calibrate`."""
        self._check_calibrated("report a fitted map")
        return DirichletCalibrationMap(
            ops.convert_to_numpy(self.kernel), ops.convert_to_numpy(self.bias)
        )

    def get_config(self):
        return {
            **super().get_config(),
            "off_diagonal_l2": self.off_diagonal_l2,
            "bias_l2": self.bias_l2,
        }
