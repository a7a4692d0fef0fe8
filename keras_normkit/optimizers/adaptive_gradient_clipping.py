"""`AdaptiveGradientClipping`: unit-wise gradient clipping relative to the weights (NFNets)."""

import re

import keras
from keras import ops

from keras_normkit._validation import check_number

_DIVISION_EPSILON = 1e-6  # as optax: max(||G_i||, 1e-6) in the rescaling, never engaged in practice


def unitwise_norm(x):
    """The L2 norm of each unit of `x`, broadcast to `x`'s shape.

    A unit is a slice along the last axis (one output unit of a Keras kernel
    `(..., in, out)`: the norm runs over every other axis); a scalar or a vector (a bias,
    a norm's scale) is one unit.
    """
    rank = len(x.shape)
    axes = None if rank <= 1 else tuple(range(rank - 1))
    squared = ops.sum(ops.square(x), axis=axes, keepdims=True)
    return ops.broadcast_to(ops.sqrt(squared), ops.shape(x))


def clip_unitwise(gradient, parameter, clipping, eps):
    """`G_i * clipping * max(||W_i||, eps) / ||G_i||` where that is smaller than `G_i`."""
    parameter = ops.cast(parameter, gradient.dtype)
    gradient_norm = unitwise_norm(gradient)
    max_norm = clipping * ops.maximum(unitwise_norm(parameter), eps)
    clipped = gradient * (max_norm / ops.maximum(gradient_norm, _DIVISION_EPSILON))
    return ops.where(gradient_norm < max_norm, gradient, clipped)


def _check_exclude(exclude):
    if exclude is None:
        return ()
    if isinstance(exclude, str):
        exclude = [exclude]
    if not isinstance(exclude, (list, tuple)) or not all(isinstance(e, str) for e in exclude):
        raise TypeError(
            "`exclude` must be None, a string or a list of strings (regular expressions "
            f"searched in the variables' paths). Received: exclude={exclude!r}"
        )
    for pattern in exclude:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(
                f"`exclude` must hold regular expressions; {pattern!r} is not one ({error}). "
                f"Received: exclude={exclude!r}"
            ) from None
    return tuple(exclude)


@keras.saving.register_keras_serializable(package="keras_normkit")
class AdaptiveGradientClipping(keras.optimizers.Optimizer):
    """Adaptive gradient clipping (AGC): an optimizer wrapper that clips unit-wise.

    Before the wrapped optimizer's step, the gradient `G` of each parameter `W` is
    clipped unit by unit relative to the parameter's own size:

    `G_i <- clipping * max(||W_i||, eps) / ||G_i|| * G_i` if
    `||G_i|| / max(||W_i||, eps) > clipping`, else `G_i` unchanged,

    where a unit `i` is one output unit: the norms run over every axis of the kernel but
    the last (Keras's layouts `(in, out)` for `Dense`, `(*kernel_size, in, out)` for
    `ConvND`, including `Conv1D`'s 3-D kernels), and a scalar or a vector (a bias, a
    normalization's scale) is one unit. `eps` keeps zero-initialized parameters from
    being frozen. The rescaling divides by `max(||G_i||, 1e-6)`, as optax does. This is
    `optax.adaptive_grad_clip(clipping, eps)` exactly (to rounding) for every parameter
    except 3-D ones, where optax (for multi-head attention weights) reduces over axis 0
    only and this class over axes 0 and 1 (the fan-in of a `Conv1D` kernel
    `(width, in, out)`), and except a 2-D parameter with a single row or column, which
    optax treats as one vector (here a `(1, out)` kernel has `out` units).

    NFNets clip every parameter but the final classifier's: name it in `exclude`. The
    paper's clipping grows as the batch shrinks (0.01 at batch 4096 up to about 0.16 at
    small batches).

    Any Keras optimizer can be wrapped; `learning_rate` and `iterations` are the wrapped
    optimizer's (so learning-rate callbacks and schedules act on it), and its state is
    saved with the model. Wrap in this order under mixed precision: Keras wraps the
    optimizer of a `mixed_float16` model in a `LossScaleOptimizer`, which unscales the
    gradients before they reach this clipping. The wrapped optimizer must not scale the
    loss itself (`loss_scale_factor`), nor be a `LossScaleOptimizer`: the gradients
    would be clipped while still scaled. With `gradient_accumulation_steps` on the
    wrapped optimizer, each batch's gradient is clipped before it is accumulated.

    Args:
        optimizer: The `keras.optimizers.Optimizer` instance to wrap.
        clipping: Float > 0, the largest allowed ratio `||G_i|| / max(||W_i||, eps)`.
            Default: `0.01`.
        eps: Float >= 0, the floor of the parameter norms. Default: `1e-3`.
        exclude: `None`, a string or a list of strings: regular expressions searched
            (`re.search`) in each variable's `path` (e.g. `"classifier"` for the
            variables of the layer named `classifier`); matching variables are left
            unclipped.
        name: Optional name of the optimizer.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.optimizers import AdaptiveGradientClipping
    >>> model = keras.Sequential([
    ...     keras.Input((4,)),
    ...     keras.layers.Dense(8, activation="relu"),
    ...     keras.layers.Dense(1, name="classifier"),
    ... ])
    >>> optimizer = AdaptiveGradientClipping(
    ...     keras.optimizers.SGD(0.1, momentum=0.9), clipping=0.01, exclude=["classifier"])
    >>> model.compile(optimizer, loss="mse")
    >>> x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    >>> kernel = keras.ops.convert_to_numpy(model.layers[0].kernel)
    >>> _ = model.fit(x, 100 * x[:, :1], epochs=1, batch_size=32, verbose=0)
    >>> step = keras.ops.convert_to_numpy(model.layers[0].kernel) - kernel
    >>> ratio = np.linalg.norm(step, axis=0) / np.linalg.norm(kernel, axis=0)
    >>> bool(np.all(ratio <= 0.1 * 0.01 + 1e-6))  # lr * clipping: the step is bounded
    True

    Reference: Brock, De, Smith, Simonyan, "High-Performance Large-Scale Image
    Recognition Without Normalization", ICML 2021, arXiv:2102.06171, Section 4.1.
    """

    def __init__(self, optimizer, clipping=0.01, eps=1e-3, exclude=None, name=None, **kwargs):
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise TypeError(
                "`optimizer` must be a keras.optimizers.Optimizer instance. "
                f"Received: optimizer={optimizer!r} of type {type(optimizer).__name__}"
            )
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            raise ValueError(
                "`optimizer` must not be a LossScaleOptimizer: its gradients are still "
                "scaled when they would be clipped. Wrap the other way around, "
                "LossScaleOptimizer(AdaptiveGradientClipping(...)) (what Keras does itself "
                f"for a mixed_float16 model). Received: optimizer={optimizer!r}"
            )
        if getattr(optimizer, "loss_scale_factor", None) is not None:
            raise ValueError(
                "`optimizer` must not scale the loss (its gradients would be clipped while "
                "scaled). Received: an optimizer with "
                f"loss_scale_factor={optimizer.loss_scale_factor}"
            )
        if kwargs:
            raise TypeError(
                "AdaptiveGradientClipping takes no other optimizer arguments (set them on "
                f"the wrapped optimizer). Received: {sorted(kwargs)}"
            )
        super().__init__(learning_rate=0.0, name=name)
        self.inner_optimizer = optimizer
        self.clipping = check_number("clipping", clipping, minimum=0.0, strict_minimum=True)
        self.eps = check_number("eps", eps, minimum=0.0)
        self.exclude = _check_exclude(exclude)

    # -- clipping -------------------------------------------------------------------------

    def _is_excluded(self, variable):
        path = getattr(variable, "path", None) or getattr(variable, "name", "")
        return any(re.search(pattern, path) for pattern in self.exclude)

    def clip_gradients(self, grads, trainable_variables):
        """The clipped gradients (a list like `grads`) for the parameters' current values.

        `trainable_variables` are the `keras.Variable`s the optimizer was built with, or
        their values (what JAX's functional train step passes); the variables to exclude
        are recognised by the paths of the variables the optimizer was built with.
        """
        built_with = self._trainable_variables
        clipped = []
        for index, (gradient, parameter) in enumerate(zip(grads, trainable_variables, strict=True)):
            variable = built_with[index] if index < len(built_with) else parameter
            if gradient is None or self._is_excluded(variable):
                clipped.append(gradient)
            else:
                clipped.append(clip_unitwise(gradient, parameter, self.clipping, self.eps))
        return clipped

    # -- Optimizer API (as keras.optimizers.LossScaleOptimizer wraps one) -----------------

    def build(self, var_list):
        self.inner_optimizer.build(var_list)
        super().build(var_list)

    @property
    def variables(self):
        return self._variables + self.inner_optimizer.variables

    def apply(self, grads, trainable_variables=None):
        if not self.built:
            self.build(trainable_variables)
            self.built = True
        variables = trainable_variables or self._trainable_variables
        clipped = self.clip_gradients(list(grads), list(variables))
        self.inner_optimizer.apply(clipped, trainable_variables=trainable_variables)

    def stateless_apply(self, optimizer_variables, grads, trainable_variables):
        if not self.built:
            raise ValueError(
                f"To call `stateless_apply`, {self.__class__.__name__} must be built (its "
                "variables created). Build it with `optimizer.build(trainable_variables)`."
            )
        # Values, not variables: a LossScaleOptimizer around this one passes its variables
        # (inside its own stateless scope), and a traced branch must return arrays.
        own = [ops.convert_to_tensor(v) for v in optimizer_variables[: len(self._variables)]]
        inner = list(optimizer_variables[len(self._variables) :])
        clipped = self.clip_gradients(list(grads), list(trainable_variables))
        new_trainable, new_inner = self.inner_optimizer.stateless_apply(
            inner, clipped, trainable_variables
        )
        return new_trainable, own + list(new_inner)

    @property
    def learning_rate(self):
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        self.inner_optimizer.learning_rate = learning_rate

    @property
    def iterations(self):
        return self.inner_optimizer.iterations

    def scale_loss(self, loss):
        return loss

    def finalize_variable_values(self, var_list):
        self.inner_optimizer.finalize_variable_values(var_list)

    def get_config(self):
        return {
            "name": self.name,
            "optimizer": keras.saving.serialize_keras_object(self.inner_optimizer),
            "clipping": self.clipping,
            "eps": self.eps,
            "exclude": list(self.exclude) or None,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        optimizer = keras.saving.deserialize_keras_object(
            config.pop("optimizer"), custom_objects=custom_objects
        )
        return cls(optimizer, **config)
