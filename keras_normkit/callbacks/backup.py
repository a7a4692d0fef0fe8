"""`BackupAndRestore`: Keras's fault-tolerance callback, plus the state of our callbacks."""

import json
import os
import tempfile
import warnings

import keras
import numpy as np

from keras_normkit._validation import check_bool, check_choice, check_int
from keras_normkit.backend.distribution import (
    check_supported_processes,
    is_chief,
    process_count,
)
from keras_normkit.callbacks._codec import decode_state, encode_state
from keras_normkit.callbacks._registry import BACKUP, MEMBER, fit_callbacks, register

STATES_FILE = "keras_normkit_callbacks.json"
RANDOM_STATE = "model/random_state"  # the key of the model's random-generator states
KERAS_METADATA_FILE = "training_metadata.json"  # written by keras.callbacks.BackupAndRestore


@keras.saving.register_keras_serializable(package="keras_normkit")
class BackupAndRestore(keras.callbacks.BackupAndRestore):
    """Keras's `BackupAndRestore`, which also saves and restores our callbacks' state.

    A drop-in for `keras.callbacks.BackupAndRestore` (same arguments; the model weights,
    optimizer state and epoch are backed up and restored by it). Besides, every callback of
    keras_normkit in the same `fit` call (`EarlyStopping`, `ReduceLROnPlateau`,
    `DivergenceGuard`, `ActivationStatistics`, `GradientStatistics`, `LearningRateMonitor`,
    `TimeStopping`) has its state `s_e = callback.get_state()` after epoch `e` written next
    to the weights,
    and a resumed `fit` (in the same process or a new one, with new callback instances) calls
    `callback.set_state(s_e)` before the first resumed epoch, where `e + 1` is the epoch
    Keras resumes from. A resumed run with `shuffle=False` then reproduces the uninterrupted
    one: learning rates, stop epoch, restored weights and logged values, and the dropout
    masks (the model's random-generator states, which `model.save_weights` leaves out, are
    backed up too; Keras's own `BackupAndRestore` restarts them from their seeds). Callbacks are
    matched by class and by their order among the callbacks of that class, so pass the same
    callbacks, in the same order, when resuming. The backup of an epoch is written once all
    our callbacks have finished that epoch's `on_epoch_end`, whatever the order of the list;
    the last two epochs' states are kept, so an interruption between our file and Keras's
    still restores a consistent pair. Like Keras's, the directory is deleted when `fit`
    ends if `delete_checkpoint`. In a multi-process (JAX) run every process restores from
    `backup_dir`, which must be a folder they all read, and process 0 alone writes it (the
    weights are replicated, so its copy is everyone's). The callbacks of the `fit` are found on the model, where
    each registers itself when Keras gives it the model (`StatefulCallback` says how a
    callback of your own takes part); a callback of an earlier `fit` of the same model is
    never one of them.

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
        if isinstance(save_freq, str):
            check_choice("save_freq", save_freq, ("epoch",))
        else:
            check_int("save_freq", save_freq, 1)
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
        register(self, BACKUP)  # our stateful callbacks of this fit find it on the model

    # ----------------------------------------------------------------- restoring

    def on_train_begin(self, logs=None):
        check_supported_processes("BackupAndRestore")
        if process_count() > 1 and self.save_freq != "epoch":
            raise ValueError(
                "In a multi-process run `BackupAndRestore` backs up at the end of each epoch "
                f"only (save_freq='epoch'). Received: save_freq={self.save_freq!r}"
            )
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
        random_state = self._restored.pop(RANDOM_STATE, None)
        if random_state is not None:  # none: no random generators, or a backup before 0.2
            _set_random_state(self.model, random_state)

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
            for callback in fit_callbacks(self, MEMBER):
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

    def on_epoch_begin(self, epoch, logs=None):
        self._write_late()

    def on_epoch_end(self, epoch, logs=None):
        unclaimed = [c for key, c in self.members().items() if key in self._restored]
        self._restored = {}
        if unclaimed:
            _warn_skipped(
                unclaimed,
                "on_epoch_begin",
                "restore_from_backup()",
                "its saved state was not restored",
            )
        # Our callbacks after this one in the list have not finished the epoch yet.
        self._pending = (epoch, logs, self._members_after())
        self._write_when_finished()

    def member_finished_epoch(self, epoch, member):
        """Take note that `member`'s state after `epoch` is final (`notify_backup` calls it).

        The backup of `epoch` is written when the last of our callbacks placed after this one
        in the list has finished it.
        """
        if self._pending is None or self._pending[0] != epoch:
            return  # placed before this backup: done before it ran
        _, logs, waiting = self._pending
        self._pending = (epoch, logs, [c for c in waiting if c is not member])
        self._write_when_finished()

    def _members_after(self):
        after, seen_self = [], False
        for role, callback in fit_callbacks(self):
            if callback is self:
                seen_self = True
            elif seen_self and role == MEMBER:
                after.append(callback)
        return after

    def _write_when_finished(self):
        epoch, logs, waiting = self._pending
        if waiting:
            return
        self._pending = None
        if not is_chief():  # in a multi-process run, process 0 writes the backup for all
            self._take_part_in_saving()
            return
        self._write_states(epoch + 1)  # first ours, then Keras's weights and epoch
        super().on_epoch_end(epoch, logs)

    def _take_part_in_saving(self):
        """Save a throwaway copy of the weights, as process 0 saves the real one.

        In a multi-process JAX run `model.save_weights` creates variables, which are placed
        on the devices of every process at once: each process must make the call, or the
        processes' collective operations no longer match and the run fails.
        """
        with tempfile.TemporaryDirectory() as folder:
            self.model.save_weights(os.path.join(folder, "unused.weights.h5"))

    def _write_late(self):
        """Write a backup still waiting for callbacks that did not notify the end of its epoch."""
        if self._pending is None:
            return
        epoch, logs, waiting = self._pending
        _warn_skipped(
            waiting,
            "on_epoch_end",
            "notify_backup(epoch)",
            "BackupAndRestore wrote the backup of the epoch late, at its next hook",
        )
        self._pending = (epoch, logs, [])
        self._write_when_finished()

    def on_train_end(self, logs=None):
        self._write_late()
        if is_chief():
            super().on_train_end(logs)  # deletes the backup if `delete_checkpoint`

    def _write_states(self, epoch):
        os.makedirs(self.backup_dir, exist_ok=True)
        arrays = {}
        states = {key: callback.get_state() for key, callback in self.members().items()}
        random_state = _random_state(self.model)
        if random_state:  # only models with random generators (dropout, noise) have one
            states[RANDOM_STATE] = random_state
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


def _random_state_variables(model):
    """The model's variables that `save_weights` leaves out: the states of its random
    generators (`keras.random.SeedGenerator`s of dropout layers and the like)."""
    saved = {id(v) for v in model.weights}
    return [v for v in model.non_trainable_variables if id(v) not in saved]


def _random_state(model):
    return [keras.ops.convert_to_numpy(v) for v in _random_state_variables(model)]


def _set_random_state(model, values):
    variables = _random_state_variables(model)
    shapes = [tuple(v.shape) for v in variables]
    if [tuple(np.shape(x)) for x in values] != shapes:
        warnings.warn(
            "BackupAndRestore: the saved random-generator states do not fit this model's "
            f"({len(values)} saved, {len(variables)} here): dropout masks start afresh.",
            stacklevel=3,
        )
        return
    for variable, value in zip(variables, values, strict=True):
        variable.assign(value)


def _warn_skipped(callbacks, hook, call, consequence):
    """Warn that `callbacks` override `hook` without making `call` (see `StatefulCallback`)."""
    names = ", ".join(sorted({type(c).__name__ for c in callbacks}))
    warnings.warn(
        f"{names} overrides `{hook}` without calling `self.{call}` (or "
        f"`super().{hook}(epoch, logs)`): {consequence}. See "
        "`keras_normkit.callbacks.StatefulCallback`.",
        stacklevel=3,
    )
