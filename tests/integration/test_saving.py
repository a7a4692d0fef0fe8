"""A `.keras` file that uses our objects loads in a fresh process the documented way.

The README says: `import keras_normkit` before `keras.models.load_model`. These tests run the
load in a new interpreter, so nothing registered by the test process itself can help, and
check both halves of that sentence: without the import Keras cannot find our classes, with it
nothing else (no `custom_objects`) is needed.
"""

import subprocess
import sys
import textwrap
import warnings

import keras
import numpy as np
import pytest

from keras_normkit import constraints, layers, regularizers, schedules
from keras_normkit.calibration import TemperatureScaling


def _run(code, tmp_path):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A calibrated model using our layers, schedule, constraint and regularizer, saved."""
    folder = tmp_path_factory.mktemp("saved")
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 6, 4)).astype("float32")
    y = (x[:, :, 0].sum(axis=1) > 0).astype("int64")
    model = keras.Sequential(
        [
            keras.Input((6, 4)),
            layers.LayerNormGRU(8),
            keras.layers.Dense(
                16,
                kernel_initializer="lecun_normal",
                kernel_constraint=constraints.ParsevalConstraint(beta=0.01),
                kernel_regularizer=regularizers.ParsevalRegularizer(1e-4),
            ),
            layers.SELU(fixed_point=(0.0, 1.0)),
            layers.AlphaDropout(0.05, seed=1),
            keras.layers.Dense(2),
        ]
    )
    model.compile(
        keras.optimizers.Adam(schedules.Warmup(1e-2, warmup_steps=4)),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(x, y, epochs=8, verbose=0)
    calibrated = TemperatureScaling(model).calibrate(x, y, verbose=0)
    calibrated.save(folder / "calibrated.keras")
    model.save(folder / "model.keras")
    np.save(folder / "x.npy", x[:16])
    np.save(folder / "calibrated.npy", calibrated.predict(x[:16], verbose=0))
    np.save(folder / "model.npy", model.predict(x[:16], verbose=0))
    return folder


@pytest.mark.parametrize("name", ["model", "calibrated"])
def test_loads_in_a_fresh_process_after_import(saved, name):
    result = _run(
        f"""
        import numpy as np
        import keras_normkit  # the documented way: before load_model
        import keras

        model = keras.models.load_model("{saved / name}.keras")
        gap = np.max(np.abs(model.predict(np.load("{saved}/x.npy"), verbose=0)
                            - np.load("{saved / name}.npy")))
        print("GAP", gap)
        optimizer = getattr(model, "optimizer", None)
        print("LR", optimizer.get_config()["learning_rate"]["class_name"] if optimizer else None)
        """,
        saved,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    gap = float(result.stdout.split("GAP")[1].split()[0])
    assert gap < 1e-6
    if name == "model":  # the compiled optimizer comes back with our schedule
        assert result.stdout.split("LR")[1].split()[0] == "Warmup"


def test_without_the_import_keras_cannot_find_our_classes(saved):
    """Why the README's sentence is needed: Keras imports only its own packages by itself."""
    result = _run(
        f"""
        import keras
        keras.models.load_model("{saved}/model.keras")
        """,
        saved,
    )
    assert result.returncode != 0
    assert "Could not locate class" in result.stderr
    assert "LayerNormGRU" in result.stderr


def test_saving_a_calibrated_wrapper_does_not_warn_of_an_unbuilt_model(tmp_path):
    """`calibrate` creates every weight, so Keras must not warn that the model is unbuilt."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 5)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=5, verbose=0)
    calibrated = TemperatureScaling(model).calibrate(x, y, verbose=0)
    assert calibrated.built
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calibrated.save(tmp_path / "calibrated.keras")
    assert not [w for w in caught if "not yet been built" in str(w.message)]
