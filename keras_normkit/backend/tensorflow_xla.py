"""TensorFlow XLA helpers: is XLA compiling, and XLA clusters inside a plain graph (private).

`xla_compiling()` tells a layer, while it is traced, whether its computation will be
compiled by XLA (layers whose two equal algorithms cross over at different points with and
without XLA, e.g. `FastWeightsRNN(implementation="auto")`, ask it). `xla_compiled(fn)` runs
`fn` and its gradient as XLA clusters inside a plain TensorFlow graph. Both use TensorFlow
APIs (the first a private one: TensorFlow's XLA control-flow context; if it moves, it
answers `False`), so they live here and nowhere else. Why a loop runs as XLA clusters:
`benchmarks/DECISIONS.md#tensorflow-xla-clusters`.
"""

import keras

__all__ = ["can_compile_cluster", "xla_compiled", "xla_compiling"]


def xla_compiling():
    """Whether the computation being built now will be compiled by XLA.

    TensorFlow: `True` while tracing a `tf.function(jit_compile=True)` (which is what
    `model.compile(jit_compile=True)` makes of `fit`, `evaluate` and `predict`), `False`
    when executing eagerly or in a plain `tf.function`. JAX: `True` (Keras compiles its JAX
    train, test and predict steps with XLA). Other backends: `False`.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        return True
    if backend != "tensorflow":
        return False
    try:
        import tensorflow as tf
        from tensorflow.python.framework import ops as tf_ops
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover - TensorFlow moved its private modules
        return False
    if tf.executing_eagerly():
        return False
    try:
        return bool(control_flow_util.GraphOrParentsInXlaContext(tf_ops.get_default_graph()))
    except AttributeError:  # pragma: no cover - as above
        return False


def can_compile_cluster():
    """Whether `xla_compiled` would compile a function here.

    `True` while a TensorFlow graph that is not itself XLA-compiled is traced (e.g. Keras's
    `fit` with `jit_compile` off, the default on CPU), outside `tf.distribute` strategies.
    """
    if keras.backend.backend() != "tensorflow" or xla_compiling():
        return False
    import tensorflow as tf

    return not tf.executing_eagerly() and not tf.distribute.has_strategy()


def xla_compiled(fn):
    """`fn(*tensors) -> tuple of tensors`, run as XLA clusters inside a plain TF graph.

    Where `can_compile_cluster()`, returns a function that computes `fn` in one
    `tf.function(jit_compile=True)` and its gradient in a second one, which recomputes `fn`
    under a tape (TensorFlow cannot carry a compiled loop's intermediates out of an XLA
    cluster). Otherwise (eager execution, inside an XLA function already, other backends)
    returns `fn` unchanged. `fn` must read no variables: pass their values as arguments, so
    that their gradients flow through them.
    """
    if not can_compile_cluster():
        return fn
    import tensorflow as tf

    forward = tf.function(fn, jit_compile=True, autograph=False)

    @tf.custom_gradient
    def compiled(*args):
        outputs = forward(*args)

        def grad(*upstream):
            upstream = [
                tf.zeros_like(o) if u is None else u for u, o in zip(upstream, outputs, strict=True)
            ]
            wrt = [i for i, arg in enumerate(args) if arg.dtype.is_floating]

            @tf.function(jit_compile=True, autograph=False)
            def backward(args, upstream):
                with tf.GradientTape() as tape:
                    tape.watch([args[i] for i in wrt])
                    recomputed = fn(*args)
                return tape.gradient(
                    list(recomputed), [args[i] for i in wrt], output_gradients=upstream
                )

            grads = [None] * len(args)
            for i, g in zip(wrt, backward(list(args), upstream), strict=True):
                grads[i] = g
            return grads

        return outputs, grad

    return compiled
