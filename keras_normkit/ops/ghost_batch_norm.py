"""The training-time computation of ghost batch normalization (private engine).

`ghost_batch_norm(x, virtual_batch_size, axis, epsilon, gamma, beta, mask)` normalizes each
run of `virtual_batch_size` consecutive examples of the batch with its own mean and
variance, and returns the statistics the moving averages are updated with. The batch is
padded (with weight 0) to a multiple of `virtual_batch_size` and reshaped to
`(groups, virtual_batch_size, ...)`, so every group is reduced at once; a last, smaller group
(the batch size is not a multiple) has its own statistics over its real examples. The batch
size may be unknown when tracing (TensorFlow): the padding is computed in-graph.

Reference: Hoffer, Hubara, Soudry, "Train longer, generalize better", NIPS 2017,
arXiv:1705.08741, Algorithm 1.
"""

from keras import ops

__all__ = ["ghost_batch_norm"]


def _dimension(x, axis):
    static = x.shape[axis]
    return static if static is not None else ops.shape(x)[axis]


def ghost_batch_norm(x, virtual_batch_size, axis, epsilon, gamma=None, beta=None, mask=None):
    """Batch normalization of each virtual batch of `x` with its own statistics.

    Args:
        x: Float tensor `(batch, ...)`.
        virtual_batch_size: Positive int, the examples per virtual batch.
        axis: The channel axis (non-negative, not 0).
        epsilon: Added to the variance.
        gamma: Optional scale, shape `(channels,)`.
        beta: Optional offset, shape `(channels,)`.
        mask: Optional mask of shape `x.shape[:-1]` (Keras's `BatchNormalization`
            convention): masked entries do not count in the statistics.

    Returns:
        `(outputs, mean, variance)`: the normalized `x`, and per channel the mean and the
        variance averaged over the virtual batches, each weighted by its number of entries
        (with equal virtual batches, the plain average of their statistics).
    """
    rank = len(x.shape)
    v = virtual_batch_size
    n = _dimension(x, 0)
    groups = (n + v - 1) // v
    padding = groups * v - n
    static = isinstance(n, int)
    needs_padding = padding != 0 if static else True  # unknown batch size: pad in-graph
    weights = ops.cast(ops.arange(groups * v) < n, x.dtype)
    weights = ops.reshape(weights, (-1,) + (1,) * (rank - 1))
    if mask is not None:
        entries = ops.cast(ops.expand_dims(mask, -1), x.dtype)
        entries = ops.pad(entries, [[0, padding]] + [[0, 0]] * (rank - 1))
        weights = weights * entries
    x_padded = ops.pad(x, [[0, padding]] + [[0, 0]] * (rank - 1)) if needs_padding else x
    rest = [_dimension(x, a) for a in range(1, rank)]
    grouped_shape = [-1, v] + rest
    xg = ops.reshape(x_padded, grouped_shape)
    weight_shape = [-1, v] + [1 if weights.shape[a] == 1 else rest[a - 1] for a in range(1, rank)]
    wg = ops.broadcast_to(ops.reshape(weights, weight_shape), ops.shape(xg))
    # Reduce within each group: the group's examples and every axis but the channel's.
    channel = axis + 1
    reduce = tuple(a for a in range(1, rank + 1) if a != channel)
    count = ops.sum(wg, axis=reduce, keepdims=True)
    safe = ops.maximum(count, 1.0)
    mean = ops.sum(wg * xg, axis=reduce, keepdims=True) / safe
    variance = ops.sum(wg * ops.square(xg - mean), axis=reduce, keepdims=True) / safe
    normalized = (xg - mean) * ops.rsqrt(variance + epsilon)
    broadcast = [1] * (rank + 1)
    broadcast[channel] = -1
    if gamma is not None:
        normalized = normalized * ops.reshape(gamma, broadcast)
    if beta is not None:
        normalized = normalized + ops.reshape(beta, broadcast)
    outputs = ops.reshape(normalized, [-1] + rest)
    if needs_padding:
        outputs = outputs[:n]
    # Per-channel statistics for the moving averages: the groups' weighted average.
    weight_of_group = count / ops.maximum(ops.sum(count, axis=0, keepdims=True), 1.0)
    moving_mean = ops.sum(weight_of_group * mean, axis=(0,) + reduce)
    moving_variance = ops.sum(weight_of_group * variance, axis=(0,) + reduce)
    return outputs, moving_mean, moving_variance
