"""The linear-recurrence scan `h_t = a_t * h_{t-1} + b_t`, computed in parallel over time.

The engine of `keras_normkit.layers.QRN` (whose state is linear in the previous state), and
usable on its own for any first-order linear recurrence with decays in [0, 1]: gated linear
RNNs, exponential moving averages, discounted sums. Pure `keras.ops` (TensorFlow, JAX and
PyTorch), no loop, so it compiles with XLA and exports with an unknown time axis.

Two algorithms, one per shape of the decay `a`:

* one decay per step (`a` of shape `(batch, T, 1)`): chunks of `_CHUNK` = 8 steps are one
  matrix product `h = D b` with the decay matrix `D[t, s] = a_{s+1} ... a_t`
  (`_decay_factors`), then the states at the chunk ends follow the same recurrence one
  level up (the decay being the product over a chunk), solved recursively
  (`_chunked_scan`). A few large operations instead of doubling passes: that is what
  matters on a CPU, where per-operation overhead dominates
  (`benchmarks/DECISIONS.md#qrn-scan`).
* one decay per unit (`a` of shape `(batch, T, units)`): the affine maps `h -> a_t h + b_t`
  are composed by Hillis-Steele doubling (`_hillis_steele`) inside blocks of `_BLOCK` = 32
  steps, the block ends again scanned one level up (`_blocked_scan`).

With a static `T` the recursion goes on until one chunk (block) is left; with an unknown `T`
it stops after a fixed number of levels and finishes with a fixed number of doubling passes,
so the graph does not depend on `T` and is exact up to `MAX_DYNAMIC_STEPS` = 2**26 steps.
The gradient (`_scan_with_gradient`) is the same scan run backward in time.
"""

import keras
import numpy as np
from keras import ops

from keras_normkit.ops._shapes import padding_to_multiple

__all__ = ["MAX_DYNAMIC_STEPS", "linear_scan"]

# Vector decays: the parallel scan works on blocks of _BLOCK steps (log2(_BLOCK) vectorized
# passes each). With a static time axis it recurses on the block ends until one block
# remains; with an unknown one it does _LEVELS block levels, then a top scan of _TOP_PASSES
# passes, exact up to _BLOCK**_LEVELS * 2**_TOP_PASSES = 2**26 steps.
# Scalar decays (the default scalar gates): matrix products over chunks of _CHUNK steps,
# recursing on the chunk ends (with an unknown T: _CHUNK_LEVELS levels, then the blocked
# scan, so exact up to _CHUNK**_CHUNK_LEVELS * 2**26 steps).
_BLOCK = 32
_CHUNK = 8
_CHUNK_LEVELS = 3
_LEVELS = 2
_TOP_PASSES = 16
MAX_DYNAMIC_STEPS = _BLOCK**_LEVELS * 2**_TOP_PASSES


def _shift(x, shift, fill):
    """`x` moved `shift` steps later along axis 1, the first `shift` steps set to `fill`."""
    steps = ops.shape(x)[1]
    if isinstance(steps, int):
        k = min(shift, steps)
        return ops.concatenate([ops.full_like(x[:, :k], fill), x[:, : steps - k]], axis=1)
    # Unknown length: pad, then cut back to `steps` (no comparison with `steps`, so that JAX
    # can export it with a symbolic length).
    widths = [[0, 0], [shift, 0]] + [[0, 0]] * (len(x.shape) - 2)
    return ops.pad(x, widths, constant_values=fill)[:, :steps]


def _count(steps, pad, size):
    """The number of blocks of `size` in `steps + pad` steps: an int when `steps` is static.

    Never `-1` in a reshape of a static length: with an unknown batch size TensorFlow then
    loses the static length, and the next level (or the gradient's scan) takes the much
    slower path for an unknown length.
    """
    return (steps + pad) // size if isinstance(steps, int) else -1


def _hillis_steele(a, b, passes):
    """Inclusive scan of the maps `h -> a_t h + b_t` along axis 1 in `passes` doubling steps.

    Returns `(A, B)` with `A_t = a_0 ... a_t` and `B_t` the state at `t` from a zero start;
    exact for sequences of at most `2**passes` steps.
    """
    shift = 1
    for _ in range(passes):
        b = b + a * _shift(b, shift, 0.0)
        a = a * _shift(a, shift, 1.0)
        shift *= 2
    return a, b


def _blocked_scan(a, b, level=0):
    steps = ops.shape(b)[1]
    if isinstance(steps, int) and steps <= _BLOCK:
        return _hillis_steele(a, b, max(steps - 1, 0).bit_length())[1]
    if not isinstance(steps, int) and level == _LEVELS:
        return _hillis_steele(a, b, _TOP_PASSES)[1]
    batch, gates, units = ops.shape(b)[0], a.shape[-1], b.shape[-1]
    pad = padding_to_multiple(steps, _BLOCK)
    a = ops.pad(a, [[0, 0], [0, pad], [0, 0]], constant_values=1)
    b = ops.pad(b, [[0, 0], [0, pad], [0, 0]])
    passes = (_BLOCK - 1).bit_length()
    a, b = _hillis_steele(
        ops.reshape(a, (-1, _BLOCK, gates)), ops.reshape(b, (-1, _BLOCK, units)), passes
    )
    blocks = _count(steps, pad, _BLOCK)
    a = ops.reshape(a, (batch, blocks, _BLOCK, gates))
    b = ops.reshape(b, (batch, blocks, _BLOCK, units))
    # The true state at each block end, then carried into the next block.
    h_end = _blocked_scan(a[:, :, -1], b[:, :, -1], level + 1)
    h = b + a * ops.expand_dims(_shift(h_end, 1, 0.0), 2)
    return ops.reshape(h, (batch, _count(steps, pad, 1), units))[:, :steps]


def _decay_factors(log_a):
    """Decay matrix and cumulative decay of chunks, from `log a` of shape `(..., C)`.

    Returns `D` of shape `(..., C, C)` with `D[..., t, s] = a_{s+1} ... a_t` for `s <= t`
    (else 0) and `P` of shape `(..., C)` with `P[..., t] = a_0 ... a_t`. Every exponent is
    a sum of `log a` terms computed directly, with one product by a constant 0/1 matrix
    (never a difference of cumulative sums, so no cancellation), and is <= 0.
    """
    size = log_a.shape[-1]
    index = np.arange(size)
    t, s, k = np.meshgrid(index, index, index, indexing="ij")
    segments = ((s < k) & (k <= t)).reshape(size * size, size).T
    prefixes = (index[:, None] <= index[None, :]).astype(segments.dtype)
    selector = ops.convert_to_tensor(np.concatenate([segments, prefixes], axis=1), log_a.dtype)
    sums = ops.exp(ops.matmul(log_a, selector))
    lower = ops.convert_to_tensor(np.tril(np.ones((size, size))), log_a.dtype)
    decay = ops.reshape(sums[..., : size * size], (*ops.shape(log_a), size)) * lower
    return decay, sums[..., size * size :]


def _chunked_scan(a, b, level=0):
    """`_blocked_scan` for scalar decays `a` of shape `(batch, T, 1)`, with matrix products.

    Inside each chunk of `_CHUNK` steps, `h_t = sum_{s <= t} D[t, s] b_s` with the decay
    matrix `D` of `_decay_factors`: a few large operations instead of doubling passes, which
    is what matters on a CPU, where per-operation overhead dominates at these sizes. The
    states at the chunk ends follow the same recurrence one level up (decay: the product
    over the chunk), solved recursively (with an unknown `T`: `_CHUNK_LEVELS` levels, then
    `_blocked_scan`). A scalar decay makes `D` one `(chunk, chunk)` matrix per example and
    chunk, so the extra memory is `batch * T * _CHUNK` floats, whatever the number of units.
    """
    steps = ops.shape(b)[1]
    static = isinstance(steps, int)
    if not static and level == _CHUNK_LEVELS:
        return _blocked_scan(a, b)
    if static and steps == 0:
        return b
    batch, units = ops.shape(b)[0], b.shape[-1]
    # log(0) clamped to log(tiny): a product that small is 0 to float precision anyway.
    tiny = 1e-37 if keras.backend.standardize_dtype(a.dtype) == "float32" else 1e-300
    log_a = ops.log(ops.maximum(a[..., 0], tiny))
    if static and steps <= _CHUNK:
        return ops.matmul(_decay_factors(log_a)[0], b)
    pad = padding_to_multiple(steps, _CHUNK)
    if not static or pad:
        log_a = ops.pad(log_a, [[0, 0], [0, pad]])  # log 1 = 0: padded steps carry the state
        b = ops.pad(b, [[0, 0], [0, pad], [0, 0]])
    chunks = _count(steps, pad, _CHUNK)
    log_a = ops.reshape(log_a, (batch, chunks, _CHUNK))
    decay, from_start = _decay_factors(log_a)
    h = ops.matmul(decay, ops.reshape(b, (batch, chunks, _CHUNK, units)))
    # The state entering each chunk, carried with the chunk's decay from its start to t.
    h_end = _chunked_scan(from_start[:, :, -1:], h[:, :, -1], level + 1)
    h = h + ops.expand_dims(from_start, -1) * ops.expand_dims(_shift(h_end, 1, 0.0), 2)
    return ops.reshape(h, (batch, _count(steps, pad, 1), units))[:, :steps]


def _scan(a, b):
    return _chunked_scan(a, b) if a.shape[-1] == 1 else _blocked_scan(a, b)


def linear_scan(a, b):
    """`h_t = a_t * h_{t-1} + b_t` with `h_{-1} = 0` for all `t` along axis 1, in parallel.

    Equivalently `h_t = sum_{s <= t} (a_{s+1} ... a_t) b_s`. With one decay per step (`a` of
    shape `(batch, T, 1)`), each chunk of 8 steps is one product `h = D b` with the decay
    matrix `D[t, s] = a_{s+1} ... a_t`, whose entries are `exp` of directly summed `log a`
    terms (all exponents <= 0, no difference of cumulative sums, no long cumulative
    product); with a decay per unit, affine maps `h -> a_t h + b_t` are composed by
    Hillis-Steele doubling inside blocks of 32 steps, with products and sums only. Either
    way the states at the chunk (block) ends are carried across by the same scan one level
    up: no loop, so it compiles with XLA and exports with an unknown `T` (exact up to
    `MAX_DYNAMIC_STEPS` = 2**26 steps then).

    Exactness and stability: the result equals the sequential loop to float rounding, and
    it is finite for any gates in [0, 1] and any length (only numbers in [0, 1] are
    multiplied; a decay of exactly 0 resets the state, exactly 1 carries it unchanged; in
    the one-decay-per-step form decays below 1e-37 in float32 count as 0). Nothing is
    divided and no `T x T` matrix is formed: memory is O(batch * T * units) (plus
    `batch * T * 8` floats for scalar decays).
    The gradient is the same scan run backward in time (`g_t = dL/dh_t + a_{t+1} g_{t+1}`,
    `dL/da_t = g_t h_{t-1}`, `dL/db_t = g_t`), with the same properties.

    Args:
        a: The decays, numbers in [0, 1], shape `(batch, T, 1)` (one per step, shared by
            all units) or `(batch, T, units)` (one per unit).
        b: The inputs, shape `(batch, T, units)`, of the dtype of `a`. Compute in float32
            (or float64): half precision loses the long products.

    Returns:
        The states `h`, shape `(batch, T, units)`.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.ops import linear_scan
    >>> a = np.array([[[0.5], [0.5], [0.0], [1.0]]], "float32")  # (batch 1, T 4, 1 decay)
    >>> b = np.array([[[1.0], [1.0], [2.0], [3.0]]], "float32")  # (batch 1, T 4, 1 unit)
    >>> keras.ops.convert_to_numpy(linear_scan(a, b))[0, :, 0]  # 1, .5 + 1, 0 + 2, 2 + 3
    array([1. , 1.5, 2. , 5. ], dtype=float32)
    """
    a, b = ops.convert_to_tensor(a), ops.convert_to_tensor(b)
    if len(a.shape) != 3 or len(b.shape) != 3:
        raise ValueError(
            "`linear_scan` expects `a` and `b` of rank 3, (batch, T, 1 or units) and "
            f"(batch, T, units). Received: a of shape {a.shape}, b of shape {b.shape}"
        )
    gates, units = a.shape[-1], b.shape[-1]
    if gates is None or units is None or gates not in (1, units):
        raise ValueError(
            "The last axis of `a` must be 1 (one decay per step) or that of `b` (one decay "
            f"per unit), both known. Received: a of shape {a.shape}, b of shape {b.shape}"
        )
    return _scan_with_gradient(a, b)


@ops.custom_gradient
def _scan_with_gradient(a, b):
    h = _scan(a, b)

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        # TensorFlow may hand over the upstream gradient with an unknown static shape; give
        # it `h`'s, so the backward scan takes the static-length path as the forward did.
        upstream = ops.reshape(upstream, ops.shape(h))
        # g_t = dL/dh_t + a_{t+1} g_{t+1}: the same linear scan, backward in time.
        a_next = _shift(ops.flip(a, axis=1), 1, 1.0)
        g = ops.flip(_scan(a_next, ops.flip(upstream, axis=1)), axis=1)
        grad_a = g * _shift(h, 1, 0.0)
        if a.shape[-1] != b.shape[-1]:
            grad_a = ops.sum(grad_a, axis=-1, keepdims=True)
        return grad_a, g

    return h, grad
