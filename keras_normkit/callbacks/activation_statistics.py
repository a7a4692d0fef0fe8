"""`ActivationStatistics`: mean, variance and percentiles of layer activations over training."""

import math

import keras
import numpy as np

from keras_normkit.callbacks._probe import probe_from_config, probe_to_config
from keras_normkit.callbacks._probe_statistics import ProbeStatistics
from keras_normkit.callbacks._watched import watched_layers


def percentile_key(percentile):
    """The name of a percentile statistic: 15 -> "p15", 2.5 -> "p2.5"."""
    return f"p{percentile:g}"


@keras.saving.register_keras_serializable(package="keras_normkit")
class ActivationStatistics(ProbeStatistics):
    """Track the distribution of each layer's activations on a fixed probe batch.

    Before training and after every `every_n_epochs` epochs, the model is run on
    `probe_data` (inference mode) and, for each watched layer, the mean
    `m = mean(a)`, the variance `mean((a - m)^2)` and the requested percentiles of all its
    output values `a` (pooled over the probe examples and the units) are computed. They are
    appended to `.history[layer_name][stat]` (stats `"mean"`, `"variance"`, `"p15"`, `"p50"`,
    ...) and the number of completed epochs to `.epochs` (0 is before training). With
    `log_values=True` they are also written to the epoch `logs` as `"{layer_name}/{stat}"`
    (so they reach the progress bar, `History`, `CSVLogger` and `TensorBoard`; put this
    callback before those in the list); on the epochs between two records those keys hold
    NaN, never a stale value, so every epoch has the same columns (`CSVLogger` fixes its
    columns at the first epoch). The history is saved and restored by
    `keras_normkit.callbacks.BackupAndRestore`; a `fit` from epoch 0 starts a new one. This is the batch-normalization paper's figure (the
    median and the 15th/85th percentiles of an activation over training) for whole layers;
    for self-normalizing networks the mean and variance should stay near (0, 1).
    `keras_normkit.plotting.plot_activation_statistics` draws the history.

    Args:
        probe_data: The model's input for a fixed batch (an array, or a list/dict of arrays
            for several inputs). Keep it small: it is evaluated in one call.
        layers: Names (or layer objects) of the layers to watch; `None` watches every layer
            of a Sequential or Functional model except its input layers.
        percentiles: Percentiles to compute, numbers in [0, 100].
        every_n_epochs: Integer >= 1, the recording period in epochs.
        log_values: Whether to write the statistics into the epoch `logs` too (five
            values per layer by default); `False` keeps them in `.history` only.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.callbacks import ActivationStatistics
    >>> x = np.random.default_rng(0).normal(size=(64, 8)).astype("float32")
    >>> model = keras.Sequential([keras.Input((8,)),
    ...                           keras.layers.Dense(16, activation="selu", name="hidden"),
    ...                           keras.layers.Dense(1, name="out")])
    >>> model.compile("sgd", loss="mse")
    >>> stats = ActivationStatistics(x[:32], layers=["hidden"])
    >>> _ = model.fit(x, x[:, :1], epochs=2, callbacks=[stats], verbose=0)
    >>> stats.epochs, sorted(stats.history["hidden"])
    ([0, 1, 2], ['mean', 'p15', 'p50', 'p85', 'variance'])

    Reference: S. Ioffe and C. Szegedy, "Batch Normalization: Accelerating Deep Network
    Training by Reducing Internal Covariate Shift", ICML 2015 (Figure 1).
    """

    def __init__(
        self,
        probe_data,
        layers=None,
        percentiles=(15, 50, 85),
        every_n_epochs=1,
        log_values=True,
    ):
        if probe_data is None:
            raise ValueError("`probe_data` must be the model's input for a probe batch.")
        super().__init__(layers, every_n_epochs, log_values)
        try:
            percentiles = tuple(float(p) for p in percentiles)
        except (TypeError, ValueError):
            raise TypeError(
                f"`percentiles` must be a sequence of numbers. Received: {percentiles!r}"
            ) from None
        if not percentiles or not all(math.isfinite(p) and 0 <= p <= 100 for p in percentiles):
            raise ValueError(
                f"`percentiles` must be numbers in [0, 100]. Received: percentiles={percentiles!r}"
            )
        self.probe_data = probe_data
        self.percentiles = percentiles
        self._probe = None

    def _watched_layers(self):
        model = self.model
        if not getattr(model, "inputs", None):
            raise ValueError(
                "ActivationStatistics needs a built Sequential or Functional model (one with "
                f"`model.inputs`). Received: {type(model).__name__}"
            )
        return watched_layers(model, self.layers)

    def _build(self):
        watched = self._watched_layers()
        self._names = [layer.name for layer in watched]
        inputs = self.model.inputs
        inputs = inputs[0] if len(inputs) == 1 else inputs
        self._probe = keras.Model(inputs, [layer.output for layer in watched])

    def statistics(self):
        """The statistics on the probe batch now: `{layer_name: {stat: float}}`."""
        if self._probe is None:
            self._build()
        # predict_on_batch runs the compiled predict step (traced once), in inference mode.
        outputs = self._probe.predict_on_batch(self.probe_data)
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        result = {}
        for name, output in zip(self._names, outputs, strict=True):
            values = np.asarray(output, dtype="float64").ravel()
            stats = {"mean": float(values.mean()), "variance": float(values.var())}
            for p, q in zip(self.percentiles, np.percentile(values, self.percentiles), strict=True):
                stats[percentile_key(p)] = float(q)
            result[name] = stats
        return result

    def _stat_names(self):
        stats = ["mean", "variance", *(percentile_key(p) for p in self.percentiles)]
        return dict.fromkeys(self._names, stats)

    def get_config(self):
        probe = self.probe_data
        if isinstance(probe, np.ndarray):  # several inputs (a list or dict) stay as they are
            probe = probe_to_config(probe)
        return {
            "probe_data": probe,
            "layers": self._layers_config(),
            "percentiles": list(self.percentiles),
            "every_n_epochs": self.every_n_epochs,
            "log_values": self.log_values,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config["probe_data"], list):  # a single-input probe saved by get_config
            config["probe_data"] = probe_from_config(config["probe_data"])
        return cls(**config)
