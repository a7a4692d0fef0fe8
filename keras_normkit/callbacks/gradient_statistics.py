"""`GradientStatistics`: back-propagated gradients, update ratios and saturation per layer."""

import math

import keras
import numpy as np

from keras_normkit.backend.gradients import gradient_function
from keras_normkit.callbacks._probe import probe_from_config, probe_to_config
from keras_normkit.callbacks._probe_statistics import ProbeStatistics
from keras_normkit.callbacks._watched import watched_layers

SATURATING = ("sigmoid", "tanh", "softsign")
GRADIENT_STATS = ("grad_norm", "grad_mean", "grad_std", "output_grad_std", "update_ratio")


def saturating_activation(layer):
    """`"sigmoid"`, `"tanh"` or `"softsign"` if that is the layer's activation, else `None`."""
    activation = getattr(layer, "activation", None)
    name = getattr(activation, "__name__", None)
    return name if name in SATURATING else None


def saturation(values, kind):
    """The fraction of saturated units: `|a| > 0.99` (tanh, softsign), sigmoid outside
    `[0.01, 0.99]`."""
    values = np.asarray(values)
    if kind == "sigmoid":
        return float(np.mean((values < 0.01) | (values > 0.99)))
    return float(np.mean(np.abs(values) > 0.99))


def _flat(arrays):
    if not arrays:
        return np.zeros(0)
    return np.concatenate([np.asarray(a, dtype="float64").ravel() for a in arrays])


@keras.saving.register_keras_serializable(package="keras_normkit")
class GradientStatistics(ProbeStatistics):
    """Track each layer's back-propagated gradients and saturation on a fixed probe batch.

    Before training and after every `every_n_epochs` epochs, the loss
    `L = model.compute_loss(x, y, model(x, training=False), sample_weight)` (the compiled
    loss, a mean over the probe batch, plus regularization losses) is differentiated. For
    each watched layer with trainable weights `W` (all of them flattened together into `g =
    dL/dW`) it records `"grad_norm"` `||g||_2`, `"grad_mean"` `mean(g)`, `"grad_std"`
    `std(g)`, `"update_ratio"` `||W_t - W_s|| / ||W_t||` (`s` the previous record; NaN at
    the first), and for every watched layer `"output_grad_std"`, the standard deviation of
    the back-propagated gradient `dL/da` with respect to its output `a` (Glorot & Bengio's
    Figure 7); layers without trainable weights get NaN for the weight statistics. For a
    layer whose activation is sigmoid, tanh or softsign, `"saturation"` is the fraction of
    outputs with `|a| > 0.99` (tanh, softsign) or `a` outside `[0.01, 0.99]` (sigmoid).
    Values go to `.history[layer_name][stat]` and `.epochs` (completed epochs, 0 before
    training), like `ActivationStatistics`; with `log_values=True` also to the epoch `logs`
    as `"{layer_name}/{stat}"` (NaN between records). Vanishing gradients show as
    `output_grad_std` shrinking toward the input layers; exploding ones as a growing
    `grad_norm`. The history is saved by `keras_normkit.callbacks.BackupAndRestore`.
    `keras_normkit.plotting.plot_gradient_statistics` draws it. TensorFlow, JAX and PyTorch
    backends, Sequential and Functional models (on JAX and PyTorch, a watched layer of a
    Functional model must be called once in its graph and have one output).

    Args:
        probe_data: `(x, y)` or `(x, y, sample_weight)`, one batch evaluated in one call.
        layers: Names (or layer objects) of the layers to watch; `None` watches every layer
            except input layers.
        every_n_epochs: Integer >= 1, the recording period in epochs.
        log_values: Whether to write the statistics into the epoch `logs` too.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.callbacks import GradientStatistics
    >>> x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    >>> model = keras.Sequential([keras.Input((4,)),
    ...                           keras.layers.Dense(8, activation="tanh", name="hidden"),
    ...                           keras.layers.Dense(1, name="out")])
    >>> model.compile("sgd", loss="mse")
    >>> stats = GradientStatistics((x, x[:, :1]))
    >>> _ = model.fit(x, x[:, :1], epochs=2, callbacks=[stats], verbose=0)
    >>> stats.epochs, sorted(stats.history["hidden"])
    ([0, 1, 2], ['grad_mean', 'grad_norm', 'grad_std', 'output_grad_std', 'saturation', \
'update_ratio'])
    >>> out = stats.history["out"]  # dL/da for the mse loss is 2 (a - y) / 32
    >>> a = model.predict(x, verbose=0)
    >>> bool(np.isclose(out["output_grad_std"][-1], np.std(2 * (a - x[:, :1]) / 32), rtol=1e-4))
    True

    Reference: X. Glorot and Y. Bengio, "Understanding the difficulty of training deep
    feedforward neural networks", AISTATS 2010 (Sections 3 and 4.2).
    """

    def __init__(self, probe_data, layers=None, every_n_epochs=1, log_values=False):
        if not isinstance(probe_data, (tuple, list)):
            raise TypeError(
                "`probe_data` must be a tuple (x, y) or (x, y, sample_weight). "
                f"Received: probe_data of type {type(probe_data).__name__}"
            )
        if len(probe_data) not in (2, 3):
            raise ValueError(
                "`probe_data` must be (x, y) or (x, y, sample_weight). "
                f"Received: a sequence of length {len(probe_data)}"
            )
        super().__init__(layers, every_n_epochs, log_values)
        self.probe_data = tuple(probe_data)
        self._previous = {}
        self._gradients = None

    def _watched_layers(self):
        return watched_layers(self.model, self.layers)

    def _build(self):
        if not getattr(self.model, "inputs", None):
            raise ValueError(
                "GradientStatistics needs a built Sequential or Functional model (one with "
                f"`model.inputs`). Received: {type(self.model).__name__}"
            )
        self._layers = self._watched_layers()
        self._gradients = gradient_function(self.model, self._layers)

    def _stat_names(self):
        names = {}
        for layer in self._layers:
            names[layer.name] = list(GRADIENT_STATS)
            if saturating_activation(layer) is not None:
                names[layer.name].append("saturation")
        return names

    def statistics(self):
        """The statistics on the probe batch now: `{layer_name: {stat: float}}`.

        `update_ratio` is measured against the weights of the previous record (NaN if none)
        and does not update them.
        """
        if self._gradients is None:
            self._build()
        x, y, *rest = self.probe_data
        computed = self._gradients(x, y, rest[0] if rest else None)
        result = {}
        for layer in self._layers:
            values = computed[layer.name]
            grads = _flat(values["weight_grads"])
            stats = dict.fromkeys(GRADIENT_STATS, math.nan)
            if grads.size:
                stats["grad_norm"] = float(np.sqrt(np.sum(grads**2)))
                stats["grad_mean"] = float(grads.mean())
                stats["grad_std"] = float(grads.std())
                weights = _flat([keras.ops.convert_to_numpy(w) for w in layer.trainable_weights])
                previous = self._previous.get(layer.name)
                if previous is not None and previous.size == weights.size:
                    norm = np.sqrt(np.sum(weights**2))
                    change = np.sqrt(np.sum((weights - previous) ** 2))
                    stats["update_ratio"] = float(change / norm) if norm > 0 else math.inf
            output_grad = np.asarray(values["output_grad"], dtype="float64")
            stats["output_grad_std"] = float(output_grad.std())
            kind = saturating_activation(layer)
            if kind is not None:
                stats["saturation"] = saturation(values["output"], kind)
            result[layer.name] = stats
        return result

    def _clear(self):
        super()._clear()
        self._previous = {}  # no update ratio against the weights of an earlier history

    def _record(self, epochs_done, logs=None):
        super()._record(epochs_done, logs)
        for layer in self._layers:
            if layer.trainable_weights:
                self._previous[layer.name] = _flat(
                    [keras.ops.convert_to_numpy(w) for w in layer.trainable_weights]
                )

    def get_state(self):
        """The recorded `epochs` and `history`, and the weights of the last record."""
        return {
            **super().get_state(),
            "previous": {name: np.array(w) for name, w in self._previous.items()},
        }

    def set_state(self, state):
        super().set_state(state)
        self._previous = {name: np.asarray(w) for name, w in state["previous"].items()}

    def get_config(self):
        return {
            "probe_data": [probe_to_config(part) for part in self.probe_data],
            "layers": self._layers_config(),
            "every_n_epochs": self.every_n_epochs,
            "log_values": self.log_values,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["probe_data"] = tuple(probe_from_config(part) for part in config["probe_data"])
        return cls(**config)
