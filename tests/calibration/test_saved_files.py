"""Calibration wrappers saved by keras_normkit 0.1.0, from the flat module layout, still load.

`fixtures/wrappers_v0_1.keras` holds every wrapper, fitted and saved when they lived in
`keras_normkit.calibration.temperature`, `.affine`, `.binning`, ... (see
`fixtures/write_wrappers_v0_1.py`). Keras finds a class by its registered name
(`keras_normkit>TemperatureScaling`), so the file loads after the modules moved, without
`custom_objects`, and predicts what it predicted.
"""

import json
import pathlib
import zipfile

import keras
import numpy as np
import pytest

import keras_normkit.calibration  # noqa: F401 - registers the wrappers, as a user's import does

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
WRAPPERS = {
    "temperature": "TemperatureScaling",
    "vector": "VectorScaling",
    "matrix": "MatrixScaling",
    "ensemble_temperature": "EnsembleTemperatureScaling",
    "dirichlet": "DirichletCalibration",
    "platt": "PlattScaling",
    "histogram": "HistogramBinning",
    "isotonic": "IsotonicCalibration",
    "bayesian": "BayesianBinning",
    "cross_fitted": "CrossFittedCalibration",
}


def _saved_layers():
    with zipfile.ZipFile(FIXTURES / "wrappers_v0_1.keras") as archive:
        config = json.loads(archive.read("config.json"))
    return {layer["class_name"]: layer for layer in config["config"]["layers"]}


def test_the_fixture_records_the_old_module_paths():
    """The test below is only meaningful if the file names modules that no longer exist."""
    layers = _saved_layers()
    assert set(WRAPPERS.values()) <= set(layers)
    assert layers["TemperatureScaling"]["module"] == "keras_normkit.calibration.temperature"
    assert layers["BayesianBinning"]["module"] == "keras_normkit.calibration.bayesian_binning"
    for class_name in WRAPPERS.values():
        assert layers[class_name]["registered_name"] == f"keras_normkit>{class_name}"


@pytest.mark.skipif(
    tuple(int(p) for p in keras.__version__.split(".")[:2]) < (3, 15),
    reason="the fixture was saved by Keras 3.15; an older Keras need not read a newer file",
)
def test_wrappers_saved_by_0_1_load_and_predict_the_same():
    model = keras.models.load_model(FIXTURES / "wrappers_v0_1.keras")
    saved = np.load(FIXTURES / "wrappers_v0_1.npz")
    predictions = model.predict(saved["x"], verbose=0)
    assert set(predictions) == set(WRAPPERS)
    for name, class_name in WRAPPERS.items():
        assert type(model.get_layer(f"{name}")).__name__ == "Identity"
        wrapper = next(layer for layer in model.layers if type(layer).__name__ == class_name)
        assert wrapper.is_calibrated, class_name
        np.testing.assert_allclose(predictions[name], saved[name], atol=1e-6, err_msg=name)
