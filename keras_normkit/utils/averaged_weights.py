"""Evaluate or save a model with averaged weights: the optimizer's EMA, with exact BN statistics."""

import contextlib
import warnings

import keras
import numpy as np

from keras_normkit._validation import check_int
from keras_normkit.utils.batch_norm_statistics import (
    has_batch_normalization,
    recompute_batch_norm_statistics,
)

__all__ = ["ema_weights"]


@contextlib.contextmanager
def ema_weights(model, batch_norm_data=None, batch_size=32):
    """Put the optimizer's moving average of the weights in `model`, for the `with` block.

    A Keras optimizer built with `use_ema=True` keeps an exponential moving average of the
    trainable weights, `w_ema ← m·w_ema + (1 − m)·w` every `ema_overwrite_frequency`
    steps or every step (`ema_momentum = m`), and `fit` writes it into the model only when it
    ends. Inside `with ema_weights(model, batch_norm_data=x):` the model holds `w_ema` at any
    time (between two `fit` calls, in a callback, mid-training) and its
    `BatchNormalization` moving statistics are recomputed for those weights with
    `keras_normkit.utils.recompute_batch_norm_statistics` (the moving statistics of
    training belong to other weights: Keras's `use_ema` and `SwapEMAWeights` leave them);
    evaluate, predict or save there. On leaving the block every weight, BN statistics
    included, is put back as it was. A model with BN layers and no `batch_norm_data` gets a
    warning. After `fit` has ended the model already holds `w_ema` (Keras writes it in), and
    the block only adds the BN statistics.

    Args:
        model: A compiled `keras.Model` whose optimizer has `use_ema=True` and has been
            built (trained at least one step).
        batch_norm_data: Inputs to recompute BN statistics with (anything
            `recompute_batch_norm_statistics` accepts), usually the training inputs.
        batch_size: Integer >= 1, the batch size for NumPy `batch_norm_data`.

    Yields:
        `model`, holding the averaged weights.

    Raises:
        ValueError: if the model has no optimizer with `use_ema=True`, or it has not been
            built yet.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.utils import ema_weights
    >>> keras.utils.set_random_seed(0)
    >>> x = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
    >>> y = x.sum(axis=1, keepdims=True)
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="dense"),
    ...                           keras.layers.BatchNormalization(name="bn"),
    ...                           keras.layers.Dense(1)])
    >>> model.compile(keras.optimizers.SGD(0.05, use_ema=True), loss="mse")
    >>> _ = model.fit(x, y, epochs=2, batch_size=16, verbose=0)
    >>> before = model.get_weights()
    >>> with ema_weights(model, batch_norm_data=x) as averaged:
    ...     hidden = keras.ops.convert_to_numpy(model.get_layer("dense")(x))  # BN inputs
    ...     exact = np.allclose(model.get_layer("bn").moving_mean, np.mean(hidden, axis=0),
    ...                         atol=1e-5)
    ...     loss = averaged.evaluate(x, y, verbose=0)
    >>> exact, all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    (True, True)

    Reference: Polyak & Juditsky, "Acceleration of Stochastic Approximation by Averaging",
    SIAM J. Control Optim. 1992; Izmailov et al., UAI 2018 (BN statistics after averaging).
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or not getattr(optimizer, "use_ema", False):
        raise ValueError(
            "ema_weights needs a model compiled with an optimizer built with use_ema=True. "
            f"Received: optimizer={optimizer!r}"
        )
    if not optimizer.built:
        raise ValueError(
            "ema_weights: the optimizer has no moving average yet; train the model for at "
            "least one step first."
        )
    stashed = stash(model)
    try:
        optimizer.finalize_variable_values(model.trainable_variables)
        refresh_batch_norm(model, batch_norm_data, batch_size, "ema_weights")
        yield model
    finally:
        restore(model, stashed)


def stash(model):
    """Copies of every trainable and non-trainable weight of `model`."""
    return tuple(
        [np.array(keras.ops.convert_to_numpy(v)) for v in variables]
        for variables in (model.trainable_variables, model.non_trainable_variables)
    )


def restore(model, stashed):
    """Put back what `stash` copied."""
    assign_all(model.trainable_variables, stashed[0])
    assign_all(model.non_trainable_variables, stashed[1])


def assign_all(variables, values):
    for variable, value in zip(variables, values, strict=True):
        variable.assign(np.asarray(value).astype(variable.dtype))


def refresh_batch_norm(model, data, batch_size, who):
    """Recompute the BN statistics of `model` over `data`, or warn that they are stale."""
    if not has_batch_normalization(model):
        return
    if data is None:
        warnings.warn(
            f"{who}: the model has BatchNormalization layers and no batch_norm_data was given, "
            "so their moving statistics belong to other weights than the averaged ones; pass "
            "batch_norm_data (e.g. the training inputs) to recompute them.",
            stacklevel=4,
        )
        return
    recompute_batch_norm_statistics(model, data, batch_size=batch_size, verbose=0)
