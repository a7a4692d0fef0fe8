"""Smoke test of an installed keras_normkit wheel, run from outside the source tree.

Checks that the package imported is the installed one, that its metadata agrees with
`keras_normkit.__version__`, and that a small model built from the library's layers
(layer-normalized LSTM and GRU, QRN, ScaleNorm, SELU, AlphaDropout, a warm-up schedule)
trains, calibrates, saves to `.keras` and reloads in a new process the documented way (`import
keras_normkit` before `keras.models.load_model`). With `--without-tensorflow` (the `.[jax]`
install) it also checks that TensorFlow is absent and that the TensorFlow-only helpers say
which extra to install. Prints `smoke: N passed, M failed`.
"""

import importlib.metadata
import importlib.util
import os
import pathlib
import subprocess
import sys
import sysconfig
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np

import keras_normkit
from keras_normkit import layers, schedules
from keras_normkit.calibration import TemperatureScaling

checks = []


def check(name, condition, detail=""):
    checks.append(bool(condition))
    print(f"  {'ok  ' if condition else 'FAIL'} {name}{': ' + detail if detail else ''}")


without_tensorflow = "--without-tensorflow" in sys.argv
print(f"keras {keras.__version__}, backend {keras.backend.backend()}")
if without_tensorflow:
    check("TensorFlow is not installed", importlib.util.find_spec("tensorflow") is None)
    try:
        from keras_normkit.export import export_saved_model

        export_saved_model(None, "unused")
    except ImportError as error:
        check("export says which extra to install", "keras_normkit[tensorflow]" in str(error))
    else:
        check("export says which extra to install", False, "no ImportError")

site_packages = pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()
location = pathlib.Path(keras_normkit.__file__).resolve()
check("imported from the installed wheel", site_packages in location.parents, str(location))
version = importlib.metadata.version("keras_normkit")
check("metadata version", version == keras_normkit.__version__, version)
dist_files = [str(f) for f in importlib.metadata.files("keras_normkit") or []]
check("LICENSE shipped", any(f.endswith("LICENSE") for f in dist_files))

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 12, 3)).astype("float32")
y = (x[:, :, 0].sum(axis=1) > 0).astype("int64") + (x[:, -1, 1] > 0.5).astype("int64")

inputs = keras.Input((12, 3))
sequence = layers.LayerNormLSTM(16, return_sequences=True)(inputs)
sequence = layers.LayerNormGRU(16, return_sequences=True)(sequence)
query = keras.layers.GlobalAveragePooling1D()(sequence)
reduced = layers.QRN(16, return_sequences=False)([sequence, query])
hidden = keras.layers.Dense(32, kernel_initializer="lecun_normal")(
    layers.ScaleNormalization()(reduced)
)
hidden = layers.AlphaDropout(0.05, seed=0)(layers.SELU()(hidden))
model = keras.Model(inputs, keras.layers.Dense(3)(hidden))
model.compile(
    keras.optimizers.Adam(schedules.Warmup(3e-3, warmup_steps=8)),
    keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
history = model.fit(x, y, batch_size=32, epochs=3, verbose=0)
losses = history.history["loss"]
check("training lowers the loss", losses[-1] < losses[0], f"{losses[0]:.3f} -> {losses[-1]:.3f}")

calibrated = TemperatureScaling(model).calibrate(x[:128], y[:128], verbose=0)
temperature = float(calibrated.temperature_)
check("temperature fitted", np.isfinite(temperature) and temperature > 0, f"T = {temperature:.3f}")

with tempfile.TemporaryDirectory() as tmp:
    path = pathlib.Path(tmp) / "calibrated.keras"
    calibrated.save(path)
    np.save(pathlib.Path(tmp) / "x.npy", x[:16])
    expected = calibrated.predict(x[:16], verbose=0)
    np.save(pathlib.Path(tmp) / "expected.npy", expected)
    reload = (
        "import numpy as np, keras_normkit, keras; "
        f"m = keras.models.load_model({str(path)!r}); "
        f"p = m.predict(np.load({str(pathlib.Path(tmp) / 'x.npy')!r}), verbose=0); "
        f"print(float(np.max(np.abs(p - np.load({str(pathlib.Path(tmp) / 'expected.npy')!r})))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", reload], capture_output=True, text=True, cwd=tmp, check=False
    )
    gap = float(result.stdout.strip().splitlines()[-1]) if result.returncode == 0 else None
    check(
        ".keras reload in a new process",
        gap is not None and gap < 1e-6,
        f"max |diff| {gap:.1e}" if gap is not None else result.stderr[-2000:],
    )

passed = sum(checks)
print(f"smoke: {passed} passed, {len(checks) - passed} failed")
sys.exit(0 if all(checks) else 1)
