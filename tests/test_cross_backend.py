"""Same weights, same input: outputs and gradients agree across TensorFlow, JAX and PyTorch.

NumPy generates every weight, input, mask and output cotangent here; each backend runs
tests/cross_backend_worker.py in its own subprocess (`KERAS_BACKEND=...`), which sets the
weights with `set_weights`, runs the forward pass in float32 and differentiates
`sum(output * r)` with respect to the inputs and every weight with that backend's own
autodiff. The three result sets must agree to 1e-5 (the cases and their configurations are
`CASES` in the worker).
"""

import importlib.util
import os
import pathlib
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from tests import cross_backend_worker as worker

ROOT = pathlib.Path(__file__).resolve().parents[1]
BACKENDS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}  # backend -> module
TOLERANCE = 1e-5

# The test runs all three backends itself, in subprocesses, whatever this process's backend:
# one run (from the TensorFlow suite, `make test` and `make test-keras-min`) covers them all,
# so `make test-jax` and `make test-torch` do not repeat it.
pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="runs every backend in subprocesses; run once, from the TensorFlow suite",
)


def _shapes(x):
    return [tuple(o.shape) for o in (x if isinstance(x, (list, tuple)) else [x])]


def make_data(seed=0):
    """Weights, inputs, masks and cotangents of every case, from NumPy only."""
    rng = np.random.default_rng(seed)
    data = {}
    for name, (_, shapes, list_input, mask_fn) in worker.CASES.items():
        layer = worker.build(name)  # in this process's backend, only for the shapes
        for i, w in enumerate(layer.weights):
            # Scale 0.5: the recurrent states stay away from tanh/sigmoid saturation, so the
            # gradients are O(1) and a 1e-5 tolerance is a sharp test.
            data[f"{name}/w{i}"] = (0.5 * rng.standard_normal(tuple(w.shape))).astype("float32")
        xs = [rng.standard_normal(s).astype("float32") for s in shapes]
        for i, x in enumerate(xs):
            data[f"{name}/x{i}"] = x
        mask = None if mask_fn is None else mask_fn()
        if mask is not None:
            data[f"{name}/mask"] = mask
        kwargs = {} if mask is None else {"mask": mask}
        outputs = layer(xs if list_input else xs[0], training=False, **kwargs)
        for i, shape in enumerate(_shapes(outputs)):
            data[f"{name}/r{i}"] = rng.standard_normal(shape).astype("float32")
    return data


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cross_backend")
    data = make_data()
    np.savez(folder / "in.npz", **data)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    available = [b for b, module in BACKENDS.items() if importlib.util.find_spec(module)]
    # The three backends run at the same time (each is mostly import and eager dispatch).
    start, processes = time.monotonic(), {}
    for backend in available:
        processes[backend] = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "cross_backend_worker.py")]
            + [str(folder / "in.npz"), str(folder / f"{backend}.npz")],
            env={**env, "KERAS_BACKEND": backend},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    outputs = {}
    for backend, process in processes.items():
        log, _ = process.communicate(timeout=300)
        assert process.returncode == 0, f"{backend} worker failed:\n{log[-4000:]}"
        with np.load(folder / f"{backend}.npz") as npz:
            assert str(npz["backend"]) == backend
            outputs[backend] = {key: npz[key] for key in npz.files if key != "backend"}
    print(f"cross-backend workers: {time.monotonic() - start:.1f} s")
    return data, outputs


def _keys(data, name):
    """The result keys of case `name`: outputs, input gradients, weight gradients."""
    n_w = sum(1 for k in data if k.startswith(f"{name}/w"))
    n_x = sum(1 for k in data if k.startswith(f"{name}/x"))
    n_r = sum(1 for k in data if k.startswith(f"{name}/r"))
    return (
        [f"{name}/out{i}" for i in range(n_r)]
        + [f"{name}/dx{i}" for i in range(n_x)]
        + [f"{name}/dw{i}" for i in range(n_w)]
    )


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "tensorflow"])
@pytest.mark.parametrize("name", list(worker.CASES))
def test_agrees_with_tensorflow(results, name, backend):
    data, outputs = results
    for required in ("tensorflow", backend):
        if required not in outputs:
            pytest.skip(f"backend {required!r} is not installed")
    reference, other = outputs["tensorflow"], outputs[backend]
    keys = _keys(data, name)
    assert sorted(k for k in reference if k.startswith(f"{name}/")) == sorted(keys)
    for key in keys:
        assert other[key].shape == reference[key].shape, key
        np.testing.assert_allclose(
            other[key], reference[key], rtol=TOLERANCE, atol=TOLERANCE, err_msg=key
        )


@pytest.mark.parametrize("name", list(worker.CASES))
def test_results_are_informative(results, name):
    """Guards against a vacuous agreement: every output and gradient is finite and non-zero."""
    data, outputs = results
    for backend, values in outputs.items():
        for key in _keys(data, name):
            assert np.all(np.isfinite(values[key])), (backend, key)
            assert np.abs(values[key]).max() > 1e-3, (backend, key)


def test_masking_is_exercised(results):
    """The masked LSTM's outputs differ from the unmasked one's where the mask is False, and a
    masked-out step contributes no gradient to its input (on every backend)."""
    data, outputs = results
    mask = data["ln_lstm_masked/mask"]
    for values in outputs.values():
        assert np.allclose(values["ln_lstm_masked/dx0"][~mask], 0.0)
        assert np.abs(values["ln_lstm_masked/dx0"][mask]).min() > 0.0
