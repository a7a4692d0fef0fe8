"""The examples of the README and of the user guides (docs/) run as written.

A Python block that follows `<!-- readme-test:NAME -->` runs in a test of its own, which
checks what it computes; a block after `<!-- readme-test:run -->` only has to run (in a fresh
namespace, in a temporary folder). The other blocks are fragments that continue a page's
story (they use a `model` or `x` defined by the reader); they must still parse.
"""

import os
import pathlib
import re

import numpy as np
import pytest

from tests.conftest import requires_tensorflow

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
_MARKED = re.compile(r"<!-- readme-test:([\w-]+) -->\s*```python\n(.*?)```", re.S)


def marked_blocks():
    """`(page, marker, code)` for every marked block of the README and the docs."""
    return [(page, m[1], m[2]) for page in PAGES for m in _MARKED.finditer(page.read_text())]


def readme_block(name):
    """The Python code block that follows `<!-- readme-test:name -->`."""
    found = [code for _, marker, code in marked_blocks() if marker == name]
    assert len(found) == 1, f"{len(found)} Python blocks follow <!-- readme-test:{name} -->"
    return found[0]


def _run(code, label, folder):
    namespace = {"__name__": f"readme_{label}"}
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(code, label, "exec"), namespace)
    finally:
        os.chdir(cwd)
    return namespace


def run_block(name, folder):
    return _run(readme_block(name), f"readme:{name}", folder)


def test_every_marker_is_tested():
    markers = {marker for _, marker, _ in marked_blocks()} - {"run"}
    tested = {"first-model", "tensorboard"}
    assert markers == tested, f"markers without a test: {sorted(markers ^ tested)}"


RUN_BLOCKS = [(page, code) for page, marker, code in marked_blocks() if marker == "run"]


@pytest.mark.parametrize(
    "page, code",
    RUN_BLOCKS,
    ids=[f"{page.stem}-{i}" for i, (page, _) in enumerate(RUN_BLOCKS)],
)
def test_guide_example_runs(page, code, tmp_path):
    if "tensorflow" in code and __import__("keras").backend.backend() != "tensorflow":
        pytest.skip("the example uses TensorFlow itself")
    _run(code, f"{page.name}", tmp_path)


def test_every_python_block_parses():
    blocks = 0
    for page in PAGES:
        for code in re.findall(r"```python\n(.*?)```", page.read_text(), re.S):
            compile(code, str(page), "exec")
            blocks += 1
    assert blocks >= 15


def test_the_guides_have_runnable_examples():
    pages = {page.parent.name + "/" + page.name for page, _ in RUN_BLOCKS}
    assert len(RUN_BLOCKS) >= 7, pages


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


_NOTEBOOK_TABLE = re.compile(
    r"<!-- notebook-table:(\w+) -->\n(.*?)\n<!-- /notebook-table:\1 -->", re.S
)


def test_notebook_tables_in_the_guides_are_the_notebooks_output():
    """A table marked `<!-- notebook-table:NAME -->` is printed, as is, by the committed
    `notebooks/NAME.ipynb` (rebuilt with notebooks/build.py): the guide cannot drift from it."""
    nbformat = pytest.importorskip("nbformat")
    found = 0
    for page in PAGES:
        for name, table in _NOTEBOOK_TABLE.findall(page.read_text()):
            notebook = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
            printed = "".join(
                output.get("text", "")
                for cell in notebook.cells
                if cell.cell_type == "code"
                for output in cell.get("outputs", [])
                if output.get("output_type") == "stream"
            )
            assert table.strip() in printed, f"{page.name}: the {name} table is not its output"
            found += 1
    assert found >= 1
