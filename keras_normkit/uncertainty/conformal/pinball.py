"""The pinball (quantile) loss, to train the quantile outputs that CQR conformalizes."""

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_number

__all__ = ["PinballLoss"]


def _check_quantiles(quantiles):
    if isinstance(quantiles, (int, float)) and not isinstance(quantiles, bool):
        quantiles = (quantiles,)
    if isinstance(quantiles, (str, bytes)) or not hasattr(quantiles, "__iter__"):
        raise TypeError(
            f"`quantiles` must be a list of levels in (0, 1), e.g. (0.05, 0.95). Received: "
            f"quantiles={quantiles!r}"
        )
    quantiles = tuple(
        check_number("quantiles", q, 0.0, 1.0, strict_minimum=True, strict_maximum=True)
        for q in quantiles
    )
    if not quantiles:
        raise ValueError("`quantiles` must hold at least one level. Received: quantiles=()")
    return quantiles


@keras.saving.register_keras_serializable(package="keras_normkit")
class PinballLoss(keras.losses.Loss):
    """Pinball (quantile) loss, the mean over outputs j of rho_{q_j}(y - f_j(x)).

    rho_q(r) = max(q r, (q - 1) r): its minimizer over f is the q-quantile of y given x
    (Koenker & Bassett 1978). A model with one output per level in `quantiles` trained on
    it estimates those conditional quantiles; `ConformalRegressor(method="cqr")` then
    widens (or narrows) the interval they span until it covers 1 - alpha (Romano et al.
    2019, who train the levels alpha / 2 and 1 - alpha / 2).

    Args:
        quantiles: The levels q_j in (0, 1), one per output column (default (0.05, 0.95)).
        reduction: Keras loss reduction (default `"sum_over_batch_size"`).
        name: Optional name of the loss.
        dtype: Optional dtype of the loss computations.

    Call arguments:
        y_true: Targets `(batch,)` or `(batch, 1)`, broadcast against every output.
        y_pred: Predictions `(batch, len(quantiles))`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import PinballLoss
    >>> loss = PinballLoss(quantiles=(0.1, 0.9))
    >>> y_true = np.array([[1.0]])
    >>> y_pred = np.array([[0.0, 0.0]])  # residual 1 at both: 0.1 * 1 and 0.9 * 1
    >>> round(float(loss(y_true, y_pred)), 4)
    0.5

    Reference: Koenker & Bassett, "Regression Quantiles", Econometrica 1978; Romano,
    Patterson, Candes, "Conformalized Quantile Regression", NeurIPS 2019, arXiv:1905.03222.
    """

    def __init__(
        self, quantiles=(0.05, 0.95), reduction="sum_over_batch_size", name="pinball", dtype=None
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.quantiles = _check_quantiles(quantiles)

    def call(self, y_true, y_pred):
        y_pred = ops.convert_to_tensor(y_pred)
        y_true = ops.cast(y_true, y_pred.dtype)
        if len(y_true.shape) == len(y_pred.shape) - 1:
            y_true = ops.expand_dims(y_true, -1)
        levels = ops.convert_to_tensor(np.asarray(self.quantiles), dtype=y_pred.dtype)
        residual = y_true - y_pred
        return ops.mean(ops.maximum(levels * residual, (levels - 1.0) * residual), axis=-1)

    def get_config(self):
        return {
            "quantiles": list(self.quantiles),
            "reduction": self.reduction,
            "name": self.name,
            "dtype": self.dtype,
        }
