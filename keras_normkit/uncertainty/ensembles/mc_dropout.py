"""Monte-Carlo dropout (Gal & Ghahramani 2016) as a Keras model: `MonteCarloDropout`."""

import warnings

import keras
from keras import ops

from keras_normkit._validation import check_int, check_seed
from keras_normkit.backend import keras_compat
from keras_normkit.layers import AlphaDropout
from keras_normkit.uncertainty import _models

__all__ = ["MonteCarloDropout"]

#: The layers switched to training mode (Keras's `SpatialDropout*` subclass `Dropout`).
DROPOUT_LAYERS = (
    keras.layers.Dropout,
    keras.layers.GaussianDropout,
    keras.layers.AlphaDropout,
    AlphaDropout,
)


class _ActiveDropout(keras.layers.Layer):
    """Calls a dropout layer with `training=True`, whatever the mode of the enclosing call.

    Its `call` takes no `training` argument, so a functional model never passes one down;
    the dropout layer inside is called with `training=True` explicitly, which wins over the
    mode Keras would otherwise propagate. Not serialized: `MonteCarloDropout` rebuilds it
    from the wrapped model's config.
    """

    def __init__(self, layer, **kwargs):
        super().__init__(name=f"{layer.name}_active", dtype=layer.dtype_policy, **kwargs)
        self.layer = layer
        self.supports_masking = layer.supports_masking

    def call(self, inputs):
        return self.layer(inputs, training=True)

    def compute_output_shape(self, input_shape):
        return input_shape


def _sampling_model(model, seed):
    """A copy of `model` sharing all its layers and weights, except that each dropout layer
    is replaced by a fresh copy (seeded from `seed`) that always drops."""
    replaced = []

    def clone_layer(layer):
        if not isinstance(layer, DROPOUT_LAYERS):
            return layer
        config = layer.get_config()
        if seed is not None and "seed" in config:
            config["seed"] = seed + len(replaced)
        replaced.append(layer)
        return _ActiveDropout(type(layer).from_config(config))

    try:
        sampler = keras.models.clone_model(model, clone_function=clone_layer, recursive=True)
    except ValueError as error:
        raise ValueError(
            "MonteCarloDropout needs a functional or Sequential model (it rebuilds the graph "
            f"with its dropout layers always on). {model.name!r} could not be rebuilt: {error}"
        ) from error
    found = [
        layer for layer in keras_compat.nested_layers(model) if isinstance(layer, DROPOUT_LAYERS)
    ]
    if not found:
        raise ValueError(
            f"{model.name!r} has no dropout layer ({', '.join(t.__name__ for t in DROPOUT_LAYERS)}"
            "): Monte-Carlo dropout would return its plain probabilities every time."
        )
    missed = [layer.name for layer in found if all(layer is not r for r in replaced)]
    if missed:
        warnings.warn(
            f"Dropout layers {missed} sit inside a layer or subclassed model that cannot be "
            "rebuilt: they stay in inference mode (no sampling from them).",
            stacklevel=3,
        )
    return sampler


@keras.saving.register_keras_serializable(package="keras_normkit")
class MonteCarloDropout(keras.Model):
    """Monte-Carlo dropout: the mean probabilities over `samples` dropout masks.

    p(y | x) ~ (1 / S) sum_s softmax(f(x; mask_s)): the network's dropout layers stay
    active at prediction time, so each pass samples a thinned network, and the average over
    S passes approximates the predictive distribution of a Bayesian network with a
    variational posterior (Gal & Ghahramani 2016). Only the dropout layers run in training
    mode (Keras's `Dropout`, `SpatialDropout1D/2D/3D`, `GaussianDropout`, `AlphaDropout`
    and `keras_normkit.layers.AlphaDropout`); every other layer runs in inference mode,
    batch normalization included, whose moving statistics are used and never updated.
    `model(x, training=True)` gets that wrong: it also normalizes with the batch's own
    statistics (and updates the moving ones when run under a training step), a known
    pitfall (keras-team/keras#9412). Recurrent layers' `dropout`/`recurrent_dropout`
    arguments are not dropout layers and stay off.

    The model is rebuilt once with its dropout layers replaced by copies that always drop
    (the other layers, and so the weights, are shared, not copied); the S passes run as one
    batch of S copies of the inputs. The wrapped model must be functional or `Sequential`
    (nested ones are rebuilt too) and hold at least one dropout layer.

    Args:
        model: A trained `keras.Model` classifier outputting logits or probabilities
            `(batch, k)` (`k = 1`: one sigmoid unit or logit; the output then has the two
            columns (1 - p, p)).
        samples: Number S >= 1 of dropout masks averaged.
        seed: Optional integer seed of the masks (each dropout layer gets `seed + i`).
        model_output: `"auto"` (detected from the last layer's activation), `"logits"` or
            `"probabilities"`.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.

    Call arguments:
        inputs: Inputs of the wrapped model.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.uncertainty import MonteCarloDropout
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, "relu"),
    ...                           keras.layers.Dropout(0.5), keras.layers.Dense(3)])
    >>> x = np.ones((2, 4), "float32")
    >>> mc = MonteCarloDropout(model, samples=20, seed=0)
    >>> p = keras.ops.convert_to_numpy(mc(x))
    >>> p.shape, bool(np.allclose(p.sum(axis=1), 1.0, atol=1e-5))
    ((2, 3), True)

    Reference: Gal & Ghahramani, "Dropout as a Bayesian Approximation: Representing Model
    Uncertainty in Deep Learning", ICML 2016, arXiv:1506.02142.
    """

    def __init__(self, model, samples=30, seed=None, model_output="auto", **kwargs):
        super().__init__(**kwargs)
        self.classifier = _models.check_model(model)
        self.samples = check_int("samples", samples, 1)
        self.seed = check_seed(seed)
        self.model_output = _models.resolve_model_output(model, model_output)
        _models.static_num_classes(model)
        self.sampler = _sampling_model(model, self.seed)
        _models.build_on_symbolic_inputs(self, model)

    def call(self, inputs):
        tiled = keras.tree.map_structure(
            lambda x: ops.tile(x, [self.samples] + [1] * (len(x.shape) - 1)), inputs
        )
        logits = _models.logits_from_outputs(self.sampler(tiled, training=False), self.model_output)
        probabilities = ops.softmax(logits, axis=-1)
        probabilities = ops.reshape(probabilities, (self.samples, -1, probabilities.shape[-1]))
        return ops.mean(probabilities, axis=0)

    def compute_output_shape(self, input_shape):
        shape = self.classifier.compute_output_shape(input_shape)
        return (*shape[:-1], max(2, shape[-1]))

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "model": keras.saving.serialize_keras_object(self.classifier),
            "samples": self.samples,
            "seed": self.seed,
            "model_output": self.model_output,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["model"] = keras.saving.deserialize_keras_object(config["model"])
        return cls(**config)
