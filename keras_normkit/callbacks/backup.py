"""`BackupAndRestore`: Keras's fault-tolerance callback, plus the state of our callbacks."""

import json
import os
import warnings

import keras
import numpy as np

from keras_normkit._validation import check_bool
from keras_normkit.callbacks._state import (
    decode_state,
    encode_state,
    fit_members,
    stamp_set_model,
    stamp_train_begin,
)

STATES_FILE = "keras_normkit_callbacks.json"
KERAS_METADATA_FILE = "training_metadata.json"  # written by keras.callbacks.BackupAndRestore


@keras.saving.register_keras_serializable(package="keras_normkit")
class BackupAndRestore(keras.callbacks.BackupAndRestore):
    """Keras's `BackupAndRestore`, which also saves and restores our callbacks' state.

    A drop-in for `keras.callbacks.BackupAndRestore` (same arguments; the model weights,
    optimizer state and epoch are backed up and restored by it). Besides, every callback of
    keras_normkit in the same `fit` call (`EarlyStopping`, `ReduceLROnPlateau`,
    `DivergenceGuard`, `ActivationStatistics`, `GradientStatistics`, `LearningRateMonitor`)
    has its state `s_e = callback.get_state()` after epoch `e` written next to the weights,
    and a resumed `fit` (in the same process or a new one, with new callback instances) calls
    `callback.set_state(s_e)` before the first resumed epoch, where `e + 1` is the epoch
    Keras resumes from. A resumed run with `shuffle=False` then reproduces the uninterrupted
    one: learning rates, stop epoch, restored weights and logged values. Callbacks are
    matched by class and by their order among the callbacks of that class, so pass the same
    callbacks, in the same order, when resuming. The backup of an epoch is written once all
    our callbacks have finished that epoch's `on_epoch_end`, whatever the order of the list;
    the last two epochs' states are kept, so an interruption between our file and Keras's
    still restores a consistent pair. Like Keras's, the directory is deleted when `fit`
    ends if `delete_checkpoint`.

    Args:
        backup_dir: Path of the directory for the backup (used by this run only).
        save_freq: `"epoch"`, or an integer: also save the weights every that many batches
            (our callbacks' states are those of the last completed epoch).
        double_checkpoint: Keep the previous backup too (Keras's option).
        delete_checkpoint: Delete the backup when `fit` ends.

    Example:

    >>> import os, tempfile, keras, numpy as np
    >>> from keras_normkit.callbacks import BackupAndRestore, ReduceLROnPlateau
    >>> class Interrupt(keras.callbacks.Callback):
    ...     def on_epoch_begin(self, epoch, logs=None):
    ...         if epoch == 2:
    ...             raise RuntimeError("interrupted")
    >>> def run(extra=()):
    ...     keras.utils.set_random_seed(0)
    ...     model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    ...     model.compile(keras.optimizers.SGD(0.1), loss="mse")
    ...     plateau = ReduceLROnPlateau(monitor="loss", patience=0, min_delta=10.0)
    ...     model.fit(np.ones((4, 1)), np.zeros((4, 1)), epochs=4, verbose=0,
    ...               callbacks=[BackupAndRestore(backup), plateau, *extra])
    ...     return plateau.reductions
    >>> backup = os.path.join(tempfile.mkdtemp(), "backup")
    >>> try:
    ...     run([Interrupt()])
    ... except RuntimeError:
    ...     pass
    >>> [(epoch, round(lr, 6)) for epoch, lr in run()]  # new model and callbacks, resumed
    [(1, 0.01), (2, 0.001), (3, 0.0001)]

    Reference: `keras.callbacks.BackupAndRestore`.
    """

    def __init__(
        self, backup_dir, save_freq="epoch", double_checkpoint=False, delete_checkpoint=True
    ):
        if not isinstance(backup_dir, (str, os.PathLike)):
            raise TypeError(
                f"`backup_dir` must be a path. Received: backup_dir={backup_dir!r} of type "
                f"{type(backup_dir).__name__}"
            )
        backup_dir = os.fspath(backup_dir)
        if not backup_dir:
            raise ValueError("`backup_dir` must be a non-empty path. Received: backup_dir=''")
        if save_freq != "epoch" and (
            isinstance(save_freq, bool) or not isinstance(save_freq, int) or save_freq < 1
        ):
            raise ValueError(
                f"`save_freq` must be 'epoch' or an integer >= 1. Received: save_freq={save_freq!r}"
            )
        check_bool("double_checkpoint", double_checkpoint)
        check_bool("delete_checkpoint", delete_checkpoint)
        super().__init__(
            backup_dir,
            save_freq=save_freq,
            double_checkpoint=double_checkpoint,
            delete_checkpoint=delete_checkpoint,
        )
        self._states_path = os.path.join(backup_dir, STATES_FILE)
        self._restored = {}
        self._saved = {}
        self._pending = None
        self._members = None

    def set_model(self, model):
        super().set_model(model)
        stamp_set_model(self)

    # ----------------------------------------------------------------- restoring

    def on_train_begin(self, logs=None):
        stamp_train_begin(self)
        self._members = None
        self._pending = None
        super().on_train_begin(logs)  # loads the weights and the epoch to resume from
        self._restored, self._saved = {}, {}
        epoch = self._resumed_epoch()
        if epoch is None:
            return
        document = self._read_states()
        if document is None:
            return
        self._saved = {int(e): states for e, states in document["epochs"].items()}
        states = self._saved.get(epoch)
        if states is None:
            warnings.warn(
                f"BackupAndRestore resumes at epoch {epoch}, but the saved callback states are "
                f"for epochs {sorted(self._saved)}: the callbacks start afresh.",
                stacklevel=2,
            )
            return
        arrays = self._load_arrays(document["arrays"].get(str(epoch)))
        self._restored = decode_state(states, arrays)

    def _resumed_epoch(self):
        path = os.path.join(self.backup_dir, KERAS_METADATA_FILE)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return int(json.load(f)["epoch"])

    def _read_states(self):
        for path in (self._states_path, self._states_path + ".bkp"):
            try:
                with open(path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                continue
        return None

    def _load_arrays(self, name):
        if name is None:
            return {}
        with np.load(os.path.join(self.backup_dir, name), allow_pickle=False) as data:
            return {key: data[key] for key in data.files}

    def members(self):
        """Our stateful callbacks of this `fit`, with their keys `"ClassName/index"`."""
        if self._members is None:
            counts, members = {}, {}
            for callback in fit_members(self):
                name = type(callback).__name__
                members[f"{name}/{counts.get(name, 0)}"] = callback
                counts[name] = counts.get(name, 0) + 1
            self._members = members
        return self._members

    def restored_state(self, callback):
        """The saved state of `callback` for the resumed epoch, or `None` (used once)."""
        for key, member in self.members().items():
            if member is callback:
                return self._restored.pop(key, None)
        return None

    # ----------------------------------------------------------------- saving

    def on_epoch_end(self, epoch, logs=None):
        self._pending = (epoch, logs)
        self.member_finished_epoch(epoch)

    def member_finished_epoch(self, epoch):
        """Write the backup of `epoch` once this and all our callbacks have finished it."""
        if self._pending is None or self._pending[0] != epoch:
            return
        if any(getattr(c, "_nk_epoch_done", None) != epoch for c in self.members().values()):
            return
        _, logs = self._pending
        self._pending = None
        self._write_states(epoch + 1)  # first ours, then Keras's weights and epoch
        super().on_epoch_end(epoch, logs)

    def _write_states(self, epoch):
        os.makedirs(self.backup_dir, exist_ok=True)
        arrays = {}
        states = {key: callback.get_state() for key, callback in self.members().items()}
        encoded = encode_state(states, arrays)
        keep = sorted(self._saved)[-(2 if self.double_checkpoint else 1) :]
        self._saved = {e: self._saved[e] for e in keep if e != epoch}
        self._saved[epoch] = encoded
        names = {}
        previous = self._read_states() or {"arrays": {}}
        for e in self._saved:
            if e == epoch:
                continue
            names[str(e)] = previous.get("arrays", {}).get(str(e))
        name = f"keras_normkit_callbacks_{epoch}.npz"
        path = os.path.join(self.backup_dir, name)
        with open(path + ".tmp", "wb") as f:
            np.savez(f, **arrays)
        os.replace(path + ".tmp", path)
        names[str(epoch)] = name
        document = {
            "format": 1,
            "epochs": {str(e): s for e, s in self._saved.items()},
            "arrays": names,
        }
        if self.double_checkpoint and os.path.exists(self._states_path):
            os.replace(self._states_path, self._states_path + ".bkp")
        with open(self._states_path + ".tmp", "w") as f:
            json.dump(document, f)
        os.replace(self._states_path + ".tmp", self._states_path)
        wanted = {n for n in names.values() if n}
        if self.double_checkpoint:
            wanted |= {n for n in previous.get("arrays", {}).values() if n}
        for entry in os.listdir(self.backup_dir):
            if entry.startswith("keras_normkit_callbacks_") and entry not in wanted:
                os.remove(os.path.join(self.backup_dir, entry))

    def get_config(self):
        return {
            "backup_dir": self.backup_dir,
            "save_freq": self.save_freq,
            "double_checkpoint": self.double_checkpoint,
            "delete_checkpoint": self.delete_checkpoint,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


# --------------------------------------------------------------------------- deprecated files


class SnapshotFiles:
    """The files of the deprecated `EarlyStopping(backup_dir=...)`, in `directory`.

    `EarlyStopping` keeps a snapshot of its state after each of the last two epochs; with the
    deprecated `backup_dir` they are also written here after every epoch, so that a new
    instance (in a new process) resumed by Keras's `BackupAndRestore` finds them. The layout
    is unchanged from the versions that wrote it inside `EarlyStopping`: one JSON document
    (the direction sign and the snapshots' scalars and lists, keyed by epoch) and one `.npz`
    of best weights per snapshot that has them. Every file is written under a temporary name,
    then renamed, so a reader sees the old or the new file, never a partial one.
    """

    PREFIX = "keras_normkit_early_stopping"

    def __init__(self, directory):
        self.directory = os.fspath(directory)

    def _path(self, suffix):
        return os.path.join(self.directory, f"{self.PREFIX}{suffix}")

    def _weights_name(self, epoch):
        return f"{self.PREFIX}_weights_{epoch}.npz"

    def write(self, sign, snapshots):
        """Write `{epoch: state}` (each state a dict with a `"best_weights"` entry)."""
        os.makedirs(self.directory, exist_ok=True)
        document = {"sign": sign, "snapshots": {}}
        for epoch, state in snapshots.items():
            state = dict(state)
            weights = state.pop("best_weights")
            if weights is not None:
                path = os.path.join(self.directory, self._weights_name(epoch))
                with open(path + ".tmp", "wb") as f:
                    np.savez(f, *weights)
                os.replace(path + ".tmp", path)
            state["has_best_weights"] = weights is not None
            document["snapshots"][str(epoch)] = state
        path = self._path(".json")
        with open(path + ".tmp", "w") as f:
            json.dump(document, f, default=float)
        os.replace(path + ".tmp", path)
        keep = {self._weights_name(epoch) for epoch in snapshots}
        for name in os.listdir(self.directory):
            if name.startswith(f"{self.PREFIX}_weights_") and name not in keep:
                os.remove(os.path.join(self.directory, name))

    def read(self):
        """`(sign, {epoch: state})` as written by `write`, or `None` without a document."""
        path = self._path(".json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            document = json.load(f)
        snapshots = {}
        for epoch, state in document["snapshots"].items():
            weights = None
            if state.pop("has_best_weights"):
                weights_path = os.path.join(self.directory, self._weights_name(epoch))
                with np.load(weights_path, allow_pickle=False) as arrays:
                    weights = [arrays[f"arr_{i}"] for i in range(len(arrays.files))]
            snapshots[int(epoch)] = {**state, "best_weights": weights}
        return document["sign"], snapshots

    def delete(self):
        """Remove this store's files (the directory and other files stay)."""
        if not os.path.isdir(self.directory):
            return
        for name in os.listdir(self.directory):
            if name.startswith(self.PREFIX):
                os.remove(os.path.join(self.directory, name))
