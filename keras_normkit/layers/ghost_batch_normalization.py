"""`GhostBatchNormalization`: batch normalization over virtual batches (Keras 2's
`virtual_batch_size`)."""

import keras
from keras import ops

from keras_normkit._validation import check_bool, check_int
from keras_normkit.ops.ghost_batch_norm import ghost_batch_norm


@keras.saving.register_keras_serializable(package="keras_normkit")
class GhostBatchNormalization(keras.layers.BatchNormalization):
    """Batch normalization whose training statistics come from virtual ("ghost") batches.

    In training, the batch is split into consecutive virtual batches of
    `virtual_batch_size` examples, and each is normalized with its own statistics:
    `y = gamma * (x - mean_v) / sqrt(var_v + epsilon) + beta`, with `mean_v`, `var_v` the
    mean and (biased) variance of virtual batch `v` over its examples and every axis but
    `axis`. The output is exactly `keras.layers.BatchNormalization` applied to each virtual
    batch on its own. The moving statistics are updated once per step, with the average of
    the virtual batches' means and of their variances
    (`moving = momentum * moving + (1 - momentum) * average`), as Keras 2 did. At inference
    (and when the layer is frozen) the moving statistics are used, as by
    `BatchNormalization`, at any batch size.

    When `virtual_batch_size` does not divide the batch size (e.g. the last batch of an
    epoch), the last virtual batch holds the remaining examples and is normalized with
    their own statistics, and the averages for the moving statistics weight each virtual
    batch by its size. A batch smaller than `virtual_batch_size` is one virtual batch:
    plain batch normalization. (Keras 2 raised an error instead.)

    Large-batch training normalizes over small virtual batches to keep the regularizing
    noise of small-batch statistics (Hoffer et al.'s Algorithm 1); TabNet uses it in every
    block.

    Migrating: Keras 2's `BatchNormalization(virtual_batch_size=v)` becomes
    `GhostBatchNormalization(v)` with the same other arguments and the same weights
    (`keras_normkit.migration.load_tfa_model` translates it in tf.keras 2 `.h5` files). At
    inference the two are identical. In training, Keras 2 grouped the examples
    `i, i + n/v, i + 2n/v, ...` (a strided split of the batch, by its reshape), this layer
    consecutive runs `[k v, (k + 1) v)`: on shuffled data both are random partitions.

    Args:
        virtual_batch_size: Positive integer, the number of examples in a virtual batch.
        axis: Integer, the channel axis. Default: `-1`.
        momentum: Momentum of the moving averages. Default: `0.99`.
        epsilon: Added to the variance. Default: `1e-3`.
        center: Whether to add the offset `beta`. Default: `True`.
        scale: Whether to multiply by `gamma`. Default: `True`.
        beta_initializer: Initializer of `beta`. Default: `"zeros"`.
        gamma_initializer: Initializer of `gamma`. Default: `"ones"`.
        moving_mean_initializer: Initializer of the moving mean. Default: `"zeros"`.
        moving_variance_initializer: Initializer of the moving variance. Default: `"ones"`.
        beta_regularizer: Optional regularizer of `beta`.
        gamma_regularizer: Optional regularizer of `gamma`.
        beta_constraint: Optional constraint of `beta`.
        gamma_constraint: Optional constraint of `gamma`.
        **kwargs: The other arguments of `keras.layers.BatchNormalization` and base layer
            keyword arguments (`name`, `dtype`). Batch renormalization (`renorm=True`) and
            `synchronized=True` are not supported with virtual batches.

    Call arguments:
        inputs: Input tensor of any rank.
        training: Python bool; `True` normalizes with the virtual batches' statistics.
        mask: Optional mask of shape `inputs.shape[:-1]`: masked entries do not count in
            the statistics.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.layers import GhostBatchNormalization
    >>> x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
    >>> layer = GhostBatchNormalization(virtual_batch_size=4, epsilon=0.0)
    >>> y = keras.ops.convert_to_numpy(layer(x, training=True))
    >>> halves = [(h - h.mean(0)) / h.std(0) for h in (x[:4], x[4:])]
    >>> bool(np.allclose(y, np.concatenate(halves), atol=1e-5))
    True

    Reference: Hoffer, Hubara, Soudry, "Train longer, generalize better: closing the
    generalization gap in large batch training of neural networks", NIPS 2017,
    arXiv:1705.08741, Algorithm 1.
    """

    def __init__(
        self,
        virtual_batch_size,
        axis=-1,
        momentum=0.99,
        epsilon=1e-3,
        center=True,
        scale=True,
        beta_initializer="zeros",
        gamma_initializer="ones",
        moving_mean_initializer="zeros",
        moving_variance_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        **kwargs,
    ):
        virtual_batch_size = check_int("virtual_batch_size", virtual_batch_size, minimum=1)
        if kwargs.get("renorm"):
            raise ValueError(
                "GhostBatchNormalization does not support batch renormalization. Received: "
                "renorm=True (use keras.layers.BatchNormalization(renorm=True) without "
                "virtual batches)"
            )
        if kwargs.get("synchronized"):
            raise ValueError(
                "GhostBatchNormalization normalizes each virtual batch on its own and cannot "
                "synchronize statistics across replicas. Received: synchronized=True"
            )
        super().__init__(
            axis=axis,
            momentum=momentum,
            epsilon=epsilon,
            center=center,
            scale=scale,
            beta_initializer=beta_initializer,
            gamma_initializer=gamma_initializer,
            moving_mean_initializer=moving_mean_initializer,
            moving_variance_initializer=moving_variance_initializer,
            beta_regularizer=beta_regularizer,
            gamma_regularizer=gamma_regularizer,
            beta_constraint=beta_constraint,
            gamma_constraint=gamma_constraint,
            **kwargs,
        )
        check_bool("center", center)
        check_bool("scale", scale)
        self.virtual_batch_size = virtual_batch_size

    def call(self, inputs, training=None, mask=None):
        if not (training and self.trainable):
            return super().call(inputs, training=training, mask=mask)
        if mask is not None and len(mask.shape) != len(inputs.shape) - 1:
            raise ValueError(
                "The mask must have one dimension less than the inputs. Received: "
                f"mask.shape={mask.shape}, inputs.shape={inputs.shape}"
            )
        # Statistics in float32 at least, as BatchNormalization (float16 overflows).
        dtype = keras.backend.result_type(inputs.dtype, "float32")
        x = ops.cast(inputs, dtype)
        axis = self.axis % len(x.shape)
        if axis == 0:
            raise ValueError(
                "GhostBatchNormalization splits the batch axis into virtual batches: `axis` "
                f"cannot be the batch axis. Received: axis={self.axis}"
            )
        gamma = ops.cast(self.gamma, dtype) if self.scale else None
        beta = ops.cast(self.beta, dtype) if self.center else None
        outputs, mean, variance = ghost_batch_norm(
            x, self.virtual_batch_size, axis, self.epsilon, gamma, beta, mask
        )
        momentum = self.momentum
        moving_mean = ops.cast(self.moving_mean, dtype)
        moving_variance = ops.cast(self.moving_variance, dtype)
        self.moving_mean.assign(moving_mean * momentum + mean * (1.0 - momentum))
        self.moving_variance.assign(moving_variance * momentum + variance * (1.0 - momentum))
        return ops.cast(outputs, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({"virtual_batch_size": self.virtual_batch_size})
        return config
