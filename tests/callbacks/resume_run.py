"""One training run with all our callbacks, optionally interrupted; used by test_backup.py.

    python tests/callbacks/resume_run.py BACKUP_DIR OUT_PREFIX [--interrupt-at EPOCH]

The run (digits, an MLP, `Join(Warmup, CosineDecay)` with Adam, `shuffle=False`) passes
`keras_normkit.callbacks.BackupAndRestore(BACKUP_DIR)` and every stateful callback of ours,
the backup in the middle of the list so that order matters. With `--interrupt-at`, an
exception is raised at the beginning of that epoch (exit code 3). Otherwise the results are
written to OUT_PREFIX.json (per-epoch logs, learning rates, stop epoch, statistics) and
OUT_PREFIX.npz (the final weights).
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import json  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_normkit import callbacks, schedules  # noqa: E402
from tests.callbacks.interrupt import Interrupt  # noqa: E402

EPOCHS = 16
PEAK = 0.1
ALPHA = 25.0  # stops at epoch 9; reductions at 7, 8, 9 (measured)


def data():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:80], y[:80]), (x[80:240], y[80:240])


def make_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(64, activation="tanh", name="hidden"),
            keras.layers.Dense(10, name="logits"),
        ]
    )
    steps = 3  # 80 examples, batch 32
    schedule = schedules.Join(
        [
            schedules.Warmup(PEAK, warmup_steps=2 * steps),
            keras.optimizers.schedules.CosineDecay(PEAK, decay_steps=(EPOCHS - 2) * steps),
        ],
        boundaries=[2 * steps],
    )
    model.compile(
        keras.optimizers.Adam(schedule),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def make_callbacks(backup_dir, probe):
    extra = {}
    if hasattr(callbacks, "GradientStatistics"):
        extra["gradients"] = callbacks.GradientStatistics(probe, log_values=True)
    return {
        "monitor": callbacks.LearningRateMonitor(),
        "plateau": callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=1),
        "backup": callbacks.BackupAndRestore(backup_dir),
        "stop": callbacks.EarlyStopping(criterion="generalization_loss", alpha=ALPHA),
        "guard": callbacks.DivergenceGuard(on_divergence="rollback", factor=50.0),
        "activations": callbacks.ActivationStatistics(probe[0], every_n_epochs=2),
        **extra,
    }


def run(backup_dir, interrupt_at=None):
    (x, y), val = data()
    model = make_model()
    named = make_callbacks(backup_dir, (x[:64], y[:64]))
    extra = [] if interrupt_at is None else [Interrupt(interrupt_at)]
    history = model.fit(
        x,
        y,
        validation_data=val,
        epochs=EPOCHS,
        batch_size=32,
        shuffle=False,
        verbose=0,
        callbacks=[*named.values(), *extra],
    )
    stop = named["stop"]
    result = {
        "epochs": history.epoch,
        "logs": history.history,
        "stopped_epoch": stop.stopped_epoch,
        "best_epoch": stop.best_epoch,
        "trace": stop.trace,
        "reductions": named["plateau"].reductions,
        "events": named["guard"].events,
        "activations": {
            "epochs": named["activations"].epochs,
            "history": named["activations"].history,
        },
    }
    if "gradients" in named:
        gradients = named["gradients"]
        result["gradients"] = {"epochs": gradients.epochs, "history": gradients.history}
    return result, model.get_weights()


def main(argv):
    backup_dir, out = argv[1], argv[2]
    interrupt_at = int(argv[4]) if len(argv) > 4 and argv[3] == "--interrupt-at" else None
    try:
        result, weights = run(backup_dir, interrupt_at)
    except RuntimeError as error:
        if "Interrupting" in str(error):
            return 3
        raise
    with open(out + ".json", "w") as f:
        json.dump(result, f)
    np.savez(out + ".npz", *weights)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
