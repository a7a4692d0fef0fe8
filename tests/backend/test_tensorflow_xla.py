"""`keras_normkit.backend.tensorflow_xla`: eager, plain and XLA-compiled functions."""

import keras
import numpy as np
import pytest

from keras_normkit.backend.tensorflow_xla import xla_compiling
from tests.conftest import requires_tensorflow


@requires_tensorflow
def test_tensorflow_modes():
    import tensorflow as tf

    seen = []

    def probe(x):
        seen.append(xla_compiling())
        return x + 1

    probe(tf.ones(2))
    tf.function(probe)(tf.ones(2))
    tf.function(probe, jit_compile=True)(tf.ones(2))
    # A plain function called inside an XLA-compiled one is compiled with it.
    tf.function(lambda x: tf.function(probe)(x), jit_compile=True)(tf.ones(2))
    assert seen == [False, False, True, True]


@requires_tensorflow
@pytest.mark.parametrize("jit_compile", [False, True])
def test_tensorflow_keras_predict(jit_compile):
    seen = []

    class Probe(keras.layers.Layer):
        def call(self, x):
            seen.append(xla_compiling())
            return x

    model = keras.Sequential([keras.Input((2,)), Probe()])
    model.compile(jit_compile=jit_compile)
    seen.clear()  # drop the symbolic call made while building the model
    model.predict(np.ones((3, 2), "float32"), verbose=0)
    assert seen == [jit_compile]


@pytest.mark.skipif(keras.backend.backend() == "tensorflow", reason="non-TensorFlow backends")
def test_other_backends():
    assert xla_compiling() is (keras.backend.backend() == "jax")


@requires_tensorflow
@pytest.mark.parametrize("use_both_outputs", [True, False])
def test_xla_compiled_matches_the_plain_graph(use_both_outputs):
    import tensorflow as tf

    from keras_normkit.backend.tensorflow_xla import xla_compiled

    def fn(x, w, flags):
        # A loop (its intermediates cannot leave an XLA cluster; XLA differentiates loops
        # with a bounded trip count) and a boolean argument.
        def body(i, h):
            return i + 1, tf.tanh(h @ w) * tf.cast(flags, h.dtype)

        _, h = tf.while_loop(lambda i, h: i < 5, body, (0, x), maximum_iterations=5)
        return tf.reduce_sum(h, axis=1), h

    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(3, 4)), rng.normal(size=(4, 4))
    flags = rng.random(4) > 0.3
    assert xla_compiled(fn) is fn  # eager: unchanged
    wrapped = []

    def step(x, w, compiled):
        f = xla_compiled(fn) if compiled else fn
        wrapped.append(f is not fn)
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            total, h = f(x, w, flags)
            loss = tf.reduce_sum(total * tf.range(3, dtype=total.dtype))
            if use_both_outputs:
                loss += tf.reduce_sum(h**2)
        return [loss, *tape.gradient(loss, [x, w])]

    got = tf.function(step)(x, w, True)
    expected = tf.function(step)(x, w, False)
    assert wrapped == [True, False]
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
