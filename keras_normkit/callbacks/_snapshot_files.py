"""The files of the deprecated `EarlyStopping(backup_dir=...)`."""

import json
import os

import numpy as np

from keras_normkit.backend.distribution import is_chief


class SnapshotFiles:
    """The files of the deprecated `EarlyStopping(backup_dir=...)`, in `directory`.

    `EarlyStopping` keeps a snapshot of its state after each of the last two epochs; with the
    deprecated `backup_dir` they are also written here after every epoch, so that a new
    instance (in a new process) resumed by Keras's `BackupAndRestore` finds them. The layout
    is unchanged from the versions that wrote it inside `EarlyStopping`: one JSON document
    (the direction sign and the snapshots' scalars and lists, keyed by epoch) and one `.npz`
    of best weights per snapshot that has them. Every file is written under a temporary name,
    then renamed, so a reader sees the old or the new file, never a partial one. In a
    multi-process run only process 0 writes and deletes.

    Args:
        directory: The directory of the files (created on the first write).
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
        if not is_chief():
            return
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
        if not is_chief() or not os.path.isdir(self.directory):
            return
        for name in os.listdir(self.directory):
            if name.startswith(self.PREFIX):
                os.remove(os.path.join(self.directory, name))
