"""Pixel-by-pixel sequential digits: LSTM vs LayerNormLSTM (and GRU vs LayerNormGRU).

Each 8x8 image of scikit-learn's bundled digits is read as a sequence of 64 steps of one
pixel (pixel values scaled to [0, 1]); a recurrent layer reads the whole sequence and a
Dense layer classifies its last output. Every model sees the same data, initial seed,
optimizer and number of epochs; the script prints the validation accuracy per epoch and can
save the learning curves (JSON) for the notebook.

    python examples/sequential_digits.py [--epochs 24] [--units 48] \
        [--models lstm ln_lstm gru ln_gru] [--out notebooks/data/layer_normalization_curves.json]
"""

import argparse
import json
import os
import pathlib
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from keras_normkit.layers import LayerNormGRU, LayerNormLSTM

RECURRENT_LAYERS = {
    "lstm": keras.layers.LSTM,
    "ln_lstm": LayerNormLSTM,
    "gru": keras.layers.GRU,
    "ln_gru": LayerNormGRU,
}


def load_sequential_digits(seed=0, test_size=0.25):
    """`(x_train, y_train, x_val, y_val)`, x of shape (n, 64, 1) in [0, 1]."""
    digits = load_digits()
    x = (digits.data / 16.0).astype("float32").reshape(-1, 64, 1)
    y = digits.target.astype("int64")
    x_train, x_val, y_train, y_val = train_test_split(
        x, y, test_size=test_size, random_state=seed, stratify=y
    )
    return x_train, y_train, x_val, y_val


def build_model(kind, units=48, seed=0):
    """Input (64, 1) -> recurrent layer `kind` -> Dense(10) logits."""
    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [
            keras.Input((64, 1)),
            RECURRENT_LAYERS[kind](units, name=kind),
            keras.layers.Dense(10, name="logits"),
        ],
        name=f"sequential_digits_{kind}",
    )


def train(kind, epochs=24, units=48, batch_size=32, learning_rate=1e-2, seed=0, verbose=0):
    """Train one model (Adam, cosine-decayed learning rate, gradient norm clipped at 1).

    Returns `(model, history_dict)` with per-epoch `accuracy`, `val_accuracy`, losses.
    """
    x_train, y_train, x_val, y_val = load_sequential_digits(seed)
    model = build_model(kind, units, seed)
    steps = epochs * -(-len(x_train) // batch_size)
    schedule = keras.optimizers.schedules.CosineDecay(learning_rate, steps)
    model.compile(
        keras.optimizers.Adam(schedule, clipnorm=1.0),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=True,
    )
    history = model.fit(
        x_train,
        y_train,
        validation_data=(x_val, y_val),
        epochs=epochs,
        batch_size=batch_size,
        shuffle=True,
        verbose=verbose,
    )
    return model, {k: [float(v) for v in vals] for k, vals in history.history.items()}


def main(models, epochs, units, out=None, seed=0):
    curves = {"epochs": epochs, "units": units, "seed": seed, "models": {}}
    for kind in models:
        start = time.time()
        _, history = train(kind, epochs=epochs, units=units, seed=seed)
        seconds = time.time() - start
        curves["models"][kind] = {**history, "seconds": seconds}
        accuracies = " ".join(f"{a:.3f}" for a in history["val_accuracy"])
        print(f"{kind:8s} {seconds:6.1f} s  val_accuracy per epoch: {accuracies}")
    if out:
        path = pathlib.Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(curves, indent=1))
        print(f"curves saved to {path}")
    return curves


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=24)
    parser.add_argument("--units", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="+", default=list(RECURRENT_LAYERS))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    main(args.models, args.epochs, args.units, args.out, args.seed)
