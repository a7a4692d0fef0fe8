"""The README's examples run as written (each block follows a `<!-- readme-test:NAME -->` marker)."""

import os
import pathlib
import re

import numpy as np
import pytest

from tests.conftest import requires_tensorflow

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def readme_block(name):
    """The Python code block that follows `<!-- readme-test:name -->` in the README."""
    text = README.read_text()
    match = re.search(rf"<!-- readme-test:{name} -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"README.md has no Python block after <!-- readme-test:{name} -->"
    return match.group(1)


def run_block(name, folder):
    namespace = {"__name__": f"readme_{name}"}
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(readme_block(name), f"README.md:{name}", "exec"), namespace)
    finally:
        os.chdir(cwd)
    return namespace


def test_every_marker_is_tested():
    markers = set(re.findall(r"<!-- readme-test:([\w-]+) -->", README.read_text()))
    tested = {"first-model", "tensorboard"}
    assert markers == tested, f"README markers without a test: {sorted(markers - tested)}"


def test_first_model(tmp_path):
    ns = run_block("first-model", tmp_path)
    x, model, reloaded = ns["x"], ns["model"], ns["reloaded"]
    assert (tmp_path / "model.keras").exists()
    np.testing.assert_allclose(
        reloaded.predict(x[:32], verbose=0), model.predict(x[:32], verbose=0), atol=1e-6
    )
    assert [type(layer).__name__ for layer in reloaded.layers][:1] == ["LayerNormLSTM"]


def _scalars(log_dir):
    """{tag: [values by step]} of every scalar summary in the event files under `log_dir`."""
    import tensorflow as tf

    values = {}
    for path in sorted(pathlib.Path(log_dir).rglob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if not value.HasField("tensor"):
                    continue
                array = tf.make_ndarray(value.tensor)
                if array.ndim == 0 and array.dtype.kind == "f":  # a scalar (not a graph)
                    values.setdefault(value.tag, []).append((event.step, float(array)))
    return {tag: [v for _, v in sorted(pairs)] for tag, pairs in values.items()}


@requires_tensorflow
def test_tensorboard_example_writes_our_values(tmp_path):
    pytest.importorskip("tensorboard", reason="the `tensorboard` extra is not installed")
    run_block("tensorboard", tmp_path)
    scalars = _scalars(tmp_path / "logs" / "train")
    # LearningRateMonitor: the warm-up's rate after each epoch's 8 steps (256 / 32): 0.1 * min(1, t / 16).
    np.testing.assert_allclose(scalars["epoch_learning_rate"], [0.05, 0.1, 0.1], rtol=1e-6)
    for stat in ("mean", "variance", "p50"):
        assert len(scalars[f"epoch_hidden/{stat}"]) == 3, sorted(scalars)
    # tanh outputs: the logged mean is a mean of values in (-1, 1) and the variance below 1.
    assert all(-1 < m < 1 for m in scalars["epoch_hidden/mean"])
    assert all(0 < v < 1 for v in scalars["epoch_hidden/variance"])
