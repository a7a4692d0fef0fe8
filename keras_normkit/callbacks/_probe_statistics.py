"""What `ActivationStatistics` and `GradientStatistics` share: a history of statistics."""

import math

from keras_normkit._validation import check_bool, check_int
from keras_normkit.callbacks._watched import check_layers_argument
from keras_normkit.callbacks.stateful import StatefulCallback


class ProbeStatistics(StatefulCallback):
    """Statistics of the watched layers on a probe batch, recorded over training.

    Before training and after every `every_n_epochs` epochs, `statistics()` (`{layer_name:
    {stat: float}}`) is appended to `.history[layer_name][stat]`, and the number of completed
    epochs to `.epochs` (0 is before training). With `log_values=True` the values also go to
    the epoch `logs` as `"{layer_name}/{stat}"`, NaN on the epochs between two records. A
    `fit` from epoch 0 starts a new history; a `fit` resumed at epoch `e` keeps the records
    of the first `e` epochs (restored by `BackupAndRestore`, or still in memory) and drops
    the later ones, which belong to the interrupted run.

    Subclasses implement `_build()` (called at `on_train_begin`: what `statistics()`
    needs), `statistics()` and `_stat_names()` (`{layer_name: [stat, ...]}`, the columns
    logged).

    Args:
        layers: Names (or layer objects) of the layers to watch, or `None`.
        every_n_epochs: Integer >= 1, the recording period in epochs.
        log_values: Whether to write the statistics into the epoch `logs` too.
    """

    def __init__(self, layers, every_n_epochs, log_values):
        super().__init__()
        self.layers = check_layers_argument(layers)
        self.every_n_epochs = check_int("every_n_epochs", every_n_epochs, 1)
        self.log_values = check_bool("log_values", log_values)
        self.epochs = []
        self.history = {}

    def _clear(self):
        """Start a new history."""
        self.epochs = []
        self.history = {}

    def _truncate(self, epochs_done):
        """Drop the records made after `epochs_done` completed epochs."""
        keep = sum(1 for e in self.epochs if e <= epochs_done)
        self.epochs = self.epochs[:keep]
        for stats in self.history.values():
            for values in stats.values():
                del values[keep:]

    def _record(self, epochs_done, logs=None):
        self.epochs.append(epochs_done)
        for name, stats in self.statistics().items():
            per_layer = self.history.setdefault(name, {})
            for stat, value in stats.items():
                per_layer.setdefault(stat, []).append(value)
                if logs is not None and self.log_values:
                    logs[f"{name}/{stat}"] = value

    def on_train_begin(self, logs=None):
        self._build()
        self._first_epoch = True

    def on_epoch_begin(self, epoch, logs=None):
        self.restore_from_backup()  # when BackupAndRestore resumes this fit: the saved state
        if not getattr(self, "_first_epoch", False):
            return
        self._first_epoch = False
        if epoch == 0:
            self._clear()
        else:
            self._truncate(epoch)
        if not self.epochs:  # nothing recorded, or nothing restored: record the start
            self._record(epoch)

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every_n_epochs == 0:
            self._record(epoch + 1, logs)
        elif logs is not None and self.log_values:
            for name, stats in self._stat_names().items():
                for stat in stats:
                    logs[f"{name}/{stat}"] = math.nan
        self.notify_backup(epoch)  # the state after this epoch is final

    def get_state(self):
        """The recorded `epochs` and `history`."""
        return {"epochs": list(self.epochs), "history": self.history}

    def set_state(self, state):
        self.epochs = list(state["epochs"])
        self.history = {
            name: {stat: list(values) for stat, values in stats.items()}
            for name, stats in state["history"].items()
        }

    def _layers_config(self):
        """The `layers` argument for `get_config`: layer names."""
        if self.layers is None:
            return None
        return [x if isinstance(x, str) else x.name for x in self.layers]
