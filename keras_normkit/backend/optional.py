"""Optional dependencies: importing them with an error that names the extra to install, and
using them only where they are already loaded.

The core of keras_normkit needs only Keras and NumPy. TensorFlow is an extra
(`pip install "keras_normkit[tensorflow]"`): SavedModel/TFLite export, `tf.data` streaming
and the XLA-cluster training path use it. A function that needs it calls
`import_tensorflow(feature)` at call time, never at import time, so `import keras_normkit`
works in an environment without TensorFlow. A function that only needs to *recognise* a
TensorFlow object (`is_tf_dataset`) never imports it: such an object can only exist once
TensorFlow is loaded. Likewise the JAX helper (`jax_key_from_bits`) imports JAX only when
it is called, which happens on the JAX backend only.
"""

import importlib
import sys

EXTRAS = {"tensorflow": "tensorflow", "tensorboard": "tensorboard", "sklearn": "examples"}


def import_optional(module, feature):
    """`importlib.import_module(module)`, or an `ImportError` naming `feature` and the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        extra = EXTRAS.get(module.split(".")[0], module)
        raise ImportError(
            f"{feature} needs the `{module.split('.')[0]}` package, which is not installed. "
            f'Install it with: pip install "keras_normkit[{extra}]"'
        ) from error


def import_tensorflow(feature):
    """The `tensorflow` module, or an `ImportError` saying `feature` needs the extra."""
    return import_optional("tensorflow", feature)


def is_tf_dataset(x):
    """Whether `x` is a `tf.data.Dataset` (any of its subclasses), without importing TensorFlow.

    A dataset exists only once TensorFlow has been imported, so when `tensorflow` is not in
    `sys.modules` (not installed, or not imported by anyone) the answer is `False` and
    TensorFlow stays unloaded, whatever the Keras backend.
    """
    tf = sys.modules.get("tensorflow")
    dataset = getattr(getattr(tf, "data", None), "Dataset", None)
    return isinstance(dataset, type) and isinstance(x, dataset)


# Odd multiplier of the bit hash of `jax_key_from_bits` (2^32 / golden ratio, odd).
_HASH_MULTIPLIER = 0x9E3779B1


def jax_key_from_bits(key, x):
    """A JAX PRNG key: `key` (a raw `uint32[2]` key) folded with a hash of the bits of `x`.

    Inside a compiled JAX train step, a `keras.random.SeedGenerator` that neither the model
    nor the optimizer tracks cannot advance: its state is read as a constant and its update
    is dropped. Folding in a hash of a value the step does carry from one step to the next
    (a kernel being trained) gives a new key whenever that value changes. The hash is
    `sum_i bits_i * m_i mod 2^32` over the entries' bit patterns (64-bit ones folded to 32),
    with distinct odd multipliers `m_i`, so a change of any single entry always changes it;
    `jax.random.fold_in` then mixes it into `key`. Pure `jax.numpy`: traceable, jit and XLA
    friendly, one pass over `x`.
    """
    import jax
    import jax.numpy as jnp

    x = jnp.ravel(jnp.asarray(x))
    width = x.dtype.itemsize
    unsigned = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}[width]
    bits = jax.lax.bitcast_convert_type(x, unsigned)
    if width == 8:
        bits = bits ^ (bits >> 32)
    bits = bits.astype(jnp.uint32)
    multipliers = (jnp.arange(x.size, dtype=jnp.uint32) * 2 + 1) * jnp.uint32(_HASH_MULTIPLIER)
    digest = jnp.sum(bits * multipliers, dtype=jnp.uint32)
    return jax.random.fold_in(jnp.asarray(key, jnp.uint32), digest)
