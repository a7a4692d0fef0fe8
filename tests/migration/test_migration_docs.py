"""The examples of docs/migration.md run as written, on the TF-Addons fixtures.

Each Python block follows a `<!-- migration-test:NAME -->` marker; it runs in a temporary
directory holding the file it names (`model.h5`, `saved_model_dir`), copied from
tests/migration/fixtures, with the inputs it uses (`x`, `x_first`) predefined.
"""

import base64
import json
import marshal
import pathlib
import re
import shutil
import warnings

import h5py
import keras
import numpy as np
import pytest

from keras_normkit.layers import LayerNormLSTMCell, WeightNormalization
from keras_normkit.migration import _coverage
from keras_normkit.schedules import CyclicalLearningRate
from tests.conftest import requires_tensorflow

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "migration.md"
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


def block(name):
    text = PAGE.read_text(encoding="utf-8")
    match = re.search(rf"<!-- migration-test:{name} -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"docs/migration.md has no Python block after <!-- migration-test:{name} -->"
    return match.group(1)


def run(name, folder, **namespace):
    """Runs block `name` in `folder`; returns its namespace and the warnings it raised."""
    namespace = {"__name__": f"migration_{name}", **namespace}
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patch.chdir(folder)
        exec(compile(block(name), f"docs/migration.md:{name}", "exec"), namespace)
    return namespace, [str(w.message) for w in caught if "load_tfa_model" in str(w.message)]


def coverage_block(text):
    match = re.search(r"<!-- tfa-coverage:start -->\n(.*?)<!-- tfa-coverage:end -->", text, re.S)
    assert match, "docs/migration.md has no tfa-coverage markers"
    return match


def write_coverage_table():
    """Writes the coverage table of `keras_normkit.migration.tfa_coverage` into
    docs/migration.md: `python -m tests.migration.test_migration_docs`."""
    text = PAGE.read_text(encoding="utf-8")
    match = coverage_block(text)
    table = _coverage.coverage_markdown()
    PAGE.write_text(text[: match.start(1)] + table + text[match.end(1) :], encoding="utf-8")


def test_coverage_table_is_generated_from_the_code():
    table = coverage_block(PAGE.read_text(encoding="utf-8")).group(1)
    assert table == _coverage.coverage_markdown(), (
        "docs/migration.md's coverage table differs from keras_normkit.migration's: "
        "run `python -m tests.migration.test_migration_docs`"
    )


def test_every_marker_is_tested():
    markers = set(re.findall(r"<!-- migration-test:([\w-]+) -->", PAGE.read_text()))
    assert markers == {"load", "custom-objects", "data-init", "saved-model"}


def test_one_line_load(tmp_path):
    shutil.copy(FIXTURES / "layer_norm_lstm.h5", tmp_path / "model.h5")
    data = np.load(FIXTURES / "layer_norm_lstm.npz")
    namespace, messages = run("load", tmp_path)
    model = namespace["model"]
    assert messages == []
    assert isinstance(model.layers[0].cell, LayerNormLSTMCell)
    np.testing.assert_allclose(model.predict(data["x"], verbose=0), data["y"], atol=1e-6)
    assert isinstance(model.optimizer, keras.optimizers.RMSprop)


def test_custom_objects(tmp_path):
    """A model with `Addons>lisht`, compiled with a CyclicalLearningRate whose `scale_fn` is
    not a constant: both replaced by the objects given."""
    shutil.copy(FIXTURES / "unsupported_activation.h5", tmp_path / "model.h5")
    with h5py.File(FIXTURES / "cyclical_lr.h5", "r") as f:
        training_config = json.loads(f.attrs["training_config"])
    code = base64.b64encode(marshal.dumps((lambda x: 0.9**x).__code__)).decode("ascii")
    schedule = training_config["optimizer_config"]["config"]["learning_rate"]["config"]
    schedule["scale_fn"]["config"]["value"] = [code, None, None]
    with h5py.File(tmp_path / "model.h5", "r+") as f:
        f.attrs["training_config"] = json.dumps(training_config)
    data = np.load(FIXTURES / "unsupported_activation.npz")
    namespace, messages = run("custom-objects", tmp_path)
    model = namespace["model"]
    assert messages == []
    np.testing.assert_allclose(model.predict(data["x"], verbose=0), data["y"], atol=1e-6)
    config = model.optimizer.get_config()["learning_rate"]
    assert isinstance(keras.optimizers.schedules.deserialize(config), CyclicalLearningRate)


def test_data_init_batch(tmp_path):
    shutil.copy(FIXTURES / "weight_norm_dense_uninitialized.h5", tmp_path / "model.h5")
    data = np.load(FIXTURES / "weight_norm_dense_uninitialized.npz")
    namespace, messages = run("data-init", tmp_path, x_first=data["x"])
    assert messages == []
    assert isinstance(namespace["model"].layers[0], WeightNormalization)
    np.testing.assert_allclose(namespace["y"], data["y"], rtol=1e-6, atol=1e-6)


@requires_tensorflow
def test_saved_model(tmp_path):
    shutil.copytree(FIXTURES / "saved_model_layer_norm_simple_rnn", tmp_path / "saved_model_dir")
    data = np.load(FIXTURES / "saved_model_layer_norm_simple_rnn.npz")
    namespace, _ = run("saved-model", tmp_path, x=data["x"])
    y = keras.ops.convert_to_numpy(namespace["y"])
    np.testing.assert_allclose(y, data["y"], rtol=1e-6, atol=1e-6)


if __name__ == "__main__":
    write_coverage_table()
