"""keras_normkit quick start: a deep self-normalizing network on scikit-learn's digits.

Trains an 8-hidden-layer SNN (LeCun-normal Dense + SELU + AlphaDropout) on the 8x8 digits
that ship with scikit-learn, then saves it to `.keras`, reloads it without any
`custom_objects`, exports a TensorFlow SavedModel, reloads that with plain TensorFlow and
checks that all three give the same predictions. This is what `make demo` runs.

    python examples/quickstart.py [--epochs 40] [--out DIR]
"""

import argparse
import os
import pathlib
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import keras_normkit
from keras_normkit.layers import SELU, AlphaDropout

#: Training's, prediction's and serving's batch size (serving in the same batches as
#: `predict` gives bitwise the same logits).
BATCH_SIZE = 32


def load_data(seed=0):
    digits = load_digits()
    x = digits.data.astype("float32")
    y = digits.target.astype("int64")
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=seed, stratify=y
    )
    scaler = StandardScaler().fit(x_train)
    return (
        scaler.transform(x_train).astype("float32"),
        y_train,
        scaler.transform(x_test).astype("float32"),
        y_test,
    )


def build_snn(depth=8, units=256, rate=0.1, num_classes=10, seed=0):
    """The self-normalizing recipe: LeCun-normal Dense -> SELU -> AlphaDropout, `depth` times."""
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((64,))], name="deep_snn")
    for i in range(depth):
        model.add(keras.layers.Dense(units, kernel_initializer="lecun_normal", name=f"dense_{i}"))
        model.add(SELU(name=f"selu_{i}"))
        model.add(AlphaDropout(rate, seed=seed + i, name=f"alpha_dropout_{i}"))
    model.add(keras.layers.Dense(num_classes, name="logits"))
    return model


def main(epochs=40, out_dir=None):
    start = time.time()
    x_train, y_train, x_test, y_test = load_data()
    model = build_snn()
    steps = epochs * int(np.ceil(0.9 * len(x_train) / BATCH_SIZE))
    model.compile(
        optimizer=keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(1e-3, steps)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    history = model.fit(
        x_train, y_train, batch_size=BATCH_SIZE, epochs=epochs, validation_split=0.1, verbose=0
    )
    logits = model.predict(x_test, batch_size=BATCH_SIZE, verbose=0)
    accuracy = float(np.mean(np.argmax(logits, axis=1) == y_test))

    out_dir = pathlib.Path(out_dir or tempfile.mkdtemp(prefix="keras_normkit_quickstart_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    keras_path = out_dir / "deep_snn.keras"
    model.save(keras_path)
    reloaded = keras.models.load_model(keras_path)  # no custom_objects needed
    reloaded_logits = reloaded.predict(x_test, batch_size=BATCH_SIZE, verbose=0)

    export_path = out_dir / "deep_snn_savedmodel"
    model.export(str(export_path), verbose=False)
    import tensorflow as tf  # plain TensorFlow serving path

    served_model = tf.saved_model.load(str(export_path))
    # Served in the batches `predict` used: a matrix product over another number of
    # rows may round differently in the last bits (a few ulps of logits near 100), which is
    # not a difference between the two models.
    served = np.concatenate(
        [
            served_model.serve(tf.constant(x_test[i : i + BATCH_SIZE])).numpy()
            for i in range(0, len(x_test), BATCH_SIZE)
        ]
    )

    keras_gap = float(np.max(np.abs(reloaded_logits - logits)))
    served_gap = float(np.max(np.abs(served - logits)))
    # Calibration: fit T on the validation split (the last 10 % of x_train, which
    # validation_split=0.1 kept out of training), then compare the test ECE (15 bins).
    from keras_normkit.calibration import TemperatureScaling, expected_calibration_error

    split_at = int(np.ceil(0.9 * len(x_train)))
    calibrated = TemperatureScaling(model).calibrate(
        x_train[split_at:], y_train[split_at:], verbose=0
    )
    probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(logits))
    ece_before = expected_calibration_error(probabilities, y_test)
    ece_after = expected_calibration_error(calibrated.predict(x_test, verbose=0), y_test)

    print(f"keras_normkit {keras_normkit.__version__} quick start (Keras {keras.__version__})")
    print(
        f"  model        : {len(model.layers) // 3} x [Dense(256, lecun_normal) -> SELU -> "
        "AlphaDropout(0.1)] -> Dense(10)"
    )
    print(f"  data         : digits, {len(x_train)} train / {len(x_test)} test examples")
    print(f"  training     : {epochs} epochs, final loss {history.history['loss'][-1]:.4f}")
    print(f"  test accuracy: {accuracy:.4f}")
    print(f"  .keras       : {keras_path} (max |diff| after reload {keras_gap:.2e})")
    print(f"  SavedModel   : {export_path} (max |diff| served by TF {served_gap:.2e})")
    print(
        f"  calibration  : T = {calibrated.temperature_:.3f}, test ECE "
        f"{100 * ece_before:.2f} % -> {100 * ece_after:.2f} % (temperature scaling)"
    )
    print(f"  time         : {time.time() - start:.1f} s")
    ok = accuracy >= 0.95 and keras_gap < 1e-5 and served_gap < 1e-5
    print("OK" if ok else "FAILED")
    return {
        "accuracy": accuracy,
        "keras_gap": keras_gap,
        "served_gap": served_gap,
        "ece_before": ece_before,
        "ece_after": ece_after,
        "ok": ok,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--out", default=None, help="where to write the .keras and SavedModel")
    args = parser.parse_args()
    result = main(epochs=args.epochs, out_dir=args.out)
    raise SystemExit(0 if result["ok"] else 1)
