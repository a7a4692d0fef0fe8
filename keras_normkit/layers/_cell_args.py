"""How a layer that wraps a cell forwards its arguments to the cell, and back in its config.

`FastWeightsRNN`, `QRN` and the layer-normalized RNN layers take their cell's constructor
arguments as their own: `cell_arguments(cell_class, values)` picks them out of the layer's
arguments (to build the cell) and out of the cell's config (for the layer's `get_config`).
`activation_name(function)` names a cell's activation for the native PyTorch loops
(`keras_normkit.backend.torch_rnn`), which take activations by name.
"""

import functools
import inspect

import keras

__all__ = ["activation_name", "cell_arguments"]


@functools.cache
def _argument_names(cell_class):
    """The constructor arguments of `cell_class` and of its bases up to `keras.layers.Layer`.

    In the order of their signatures, the class's own first. `units` (positional, also the
    layer's) and `*args` / `**kwargs` are left out, and so are the arguments of
    `keras.layers.Layer` (`name`, `dtype`, `trainable`, ...), which are not the cell's.
    """
    names = {}
    for klass in cell_class.__mro__:
        if klass is keras.layers.Layer:
            break
        if "__init__" not in vars(klass):
            continue
        for name, parameter in inspect.signature(klass.__init__).parameters.items():
            variadic = parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
            if not variadic and name not in ("self", "units"):
                names[name] = None
    return tuple(names)


def cell_arguments(cell_class, values):
    """The entries of the mapping `values` that `cell_class`'s constructor takes.

    Args:
        cell_class: The cell's class (a `keras.layers.Layer` subclass).
        values: The layer's constructor arguments (its `locals()` or `**kwargs`), or the
            cell's `get_config()`.

    Returns:
        A new dict `{name: value}` in the order of the cell's signature, without `units`
        and without the base layer arguments (`name`, `dtype`, `trainable`).
    """
    return {name: values[name] for name in _argument_names(cell_class) if name in values}


# The Keras activations the native loops know (`keras_normkit.backend.torch_rnn.ACTIVATIONS`).
_NATIVE_ACTIVATIONS = ("tanh", "sigmoid", "relu", "linear")


def activation_name(function):
    """The name of `function` if it is one of Keras's `tanh`, `sigmoid`, `relu`, `linear`
    (the activations the native loops run), else `None`.

    An identity test against `keras.activations`, nothing that `torch.compile` cannot trace
    (`keras.activations.serialize` is one).
    """
    for name in _NATIVE_ACTIVATIONS:
        if function is getattr(keras.activations, name):
            return name
    return None
