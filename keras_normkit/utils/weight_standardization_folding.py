"""Fold `WeightStandardization` wrappers into plain layers for deployment.

A `WeightStandardization(layer)` computes `layer` with the kernel
`W_hat = gamma * g * (W - mean) / sqrt(max(N var, epsilon))`, a function of its weights
only: once training is over, the plain `layer` holding `W_hat` computes the same function
with no standardization at run time (and exports to runtimes that know only `Dense` and
`Conv`).

Reference: Qiao et al., arXiv:1903.10520, 2019; Brock, De, Smith, ICLR 2021,
arXiv:2101.08692.
"""

import keras

from keras_normkit.layers.nf_residual import NFResidual
from keras_normkit.layers.weight_standardization import WeightStandardization
from keras_normkit.utils.batch_norm_folding import _is_graph_model

__all__ = ["fold_weight_standardization"]


def _plain_clone(wrapper):
    inner = wrapper.layer
    return inner.__class__.from_config(inner.get_config())


def _assign(old, new, kind):
    if kind == "copy":
        new.set_weights(old.get_weights())
        return
    kernel = keras.ops.convert_to_numpy(old.standardized_kernel())
    new.kernel.assign(kernel.astype(new.kernel.dtype))
    if getattr(old.layer, "bias", None) is not None:
        new.bias.assign(keras.ops.convert_to_numpy(old.layer.bias))


def _fold_part(layer, pending):
    """A folded copy of a layer held by another layer (a branch or a shortcut)."""
    if layer is None:
        return None
    if isinstance(layer, WeightStandardization):
        new = _plain_clone(layer)
        pending.append((layer, new, "ws"))
        return new
    if _is_graph_model(layer):
        return _fold_graph(layer, pending)
    if isinstance(layer, NFResidual):
        return _fold_residual(layer, pending)
    new = layer.__class__.from_config(layer.get_config())
    pending.append((layer, new, "copy"))
    return new


def _fold_residual(block, pending):
    return NFResidual(
        _fold_part(block.branch, pending),
        _fold_part(block.shortcut, pending),
        alpha=block.alpha,
        beta=block.beta,
        name=block.name,
        dtype=block.dtype_policy,
    )


def _fold_graph(model, pending):
    def clone_function(layer):
        return _fold_part(layer, pending)

    return keras.models.clone_model(model, clone_function=clone_function)


def fold_weight_standardization(model):
    """A copy of `model` with each `WeightStandardization` replaced by its plain layer.

    Every `WeightStandardization(layer)` becomes a copy of `layer` (same class and
    config) whose kernel is the wrapper's standardized kernel
    `W_hat = gamma * g * (W - mean) / sqrt(max(N var, epsilon))` and whose bias is the
    layer's bias; every other layer is copied with its weights. Wrappers are found in
    the model, in nested Sequential/Functional models and in the branch and shortcut of
    `NFResidual` blocks. The copy computes the same function (within float32 rounding),
    saves to `.keras` and exports with plain `Dense`/`Conv` layers; the original model is
    untouched. Train the original, deploy the copy: the copy's kernels are no longer
    standardized during training.

    Args:
        model: A built `keras.Sequential` or Functional `keras.Model`.

    Returns:
        The folded copy.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import WeightStandardization
    >>> from keras_normkit.utils import fold_weight_standardization
    >>> model = keras.Sequential([
    ...     keras.Input((8, 8, 3)),
    ...     WeightStandardization(keras.layers.Conv2D(4, 3, activation="relu")),
    ...     keras.layers.Flatten(),
    ...     WeightStandardization(keras.layers.Dense(2), activation="relu"),
    ... ])
    >>> folded = fold_weight_standardization(model)
    >>> [type(layer).__name__ for layer in folded.layers]
    ['Conv2D', 'Flatten', 'Dense']
    >>> x = np.random.default_rng(0).normal(size=(2, 8, 8, 3)).astype("float32")
    >>> bool(np.allclose(model.predict(x, verbose=0), folded.predict(x, verbose=0), atol=1e-5))
    True

    Reference: Brock, De, Smith, "Characterizing signal propagation to close the
    performance gap in unnormalized ResNets", ICLR 2021, arXiv:2101.08692.
    """
    if not isinstance(model, keras.Model) or not _is_graph_model(model):
        raise TypeError(
            "`model` must be a built keras.Sequential or Functional keras.Model (its layer "
            f"graph is copied). Received: model of type {type(model).__name__}"
        )
    pending = []
    folded = _fold_graph(model, pending)
    for old, new, kind in pending:
        _assign(old, new, kind)
    return folded
