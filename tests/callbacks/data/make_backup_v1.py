"""Writes `backup_v1/`: a backup directory as keras_normkit 0.x wrote it (issue 28 fixture).

    KERAS_BACKEND=tensorflow python tests/callbacks/data/make_backup_v1.py

Run once, with the code of commit 7097ec6 (before the callback-state refactoring): a fit with
every stateful callback of ours under `BackupAndRestore`, interrupted at the beginning of
epoch 3. `test_backup.py` resumes from a copy of it, so files written by that release keep
restoring. `backup_v1_expected.json` holds the states saved for epoch 3.
"""

import json
import os
import shutil
import sys

import keras
import numpy as np

from keras_normkit import callbacks

HERE = os.path.dirname(os.path.abspath(__file__))
X = np.linspace(-1, 1, 32, dtype="float32").reshape(16, 2)
Y = X[:, :1] * 3.0


def make_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="out")])
    model.compile(keras.optimizers.SGD(0.05), loss="mse")
    return model


def make_callbacks(backup_dir):
    return [
        callbacks.LearningRateMonitor(per_step=True),
        callbacks.ReduceLROnPlateau(monitor="loss", patience=0, min_delta=10.0, factor=0.5),
        callbacks.BackupAndRestore(backup_dir),
        callbacks.EarlyStopping(monitor="loss", patience=3, restore_best_weights=True),
        callbacks.DivergenceGuard(on_divergence="rollback"),
        callbacks.ActivationStatistics(X[:4]),
        callbacks.GradientStatistics((X[:4], Y[:4])),
    ]


class Interrupt(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 3:
            raise RuntimeError("Interrupting!")


def main():
    backup_dir = os.path.join(HERE, "backup_v1")
    shutil.rmtree(backup_dir, ignore_errors=True)
    try:
        make_model().fit(
            X, Y, epochs=6, batch_size=8, shuffle=False, verbose=0,
            callbacks=[*make_callbacks(backup_dir), Interrupt()],
        )  # fmt: skip
    except RuntimeError:
        pass
    with open(os.path.join(backup_dir, "keras_normkit_callbacks.json")) as f:
        saved = json.load(f)
    with open(os.path.join(HERE, "backup_v1_expected.json"), "w") as f:
        json.dump(saved["epochs"]["3"], f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
