"""Training on several workers (TensorFlow): two workers on localhost against one process.

`tests/integration/tf_multiworker_worker.py` trains FastWeightsRNN -> QRN -> LayerNormLSTM ->
Dense (`ParsevalConstraint` kernel) -> Dense with SGD and a `CyclicalLearningRate`, in a
custom training loop (`strategy.run`), either as one process fed whole global batches or as
one of two workers of a `tf.distribute.MultiWorkerMirroredStrategy` over localhost, each fed
its half of every global batch. A custom loop, because Keras 3's `model.fit` does not run
under `MultiWorkerMirroredStrategy` (keras-team/keras#20585, an upstream bug this test does
not exercise); docs/guides/distributed.md shows the loop.

What "equal" means here. The two workers hold mirrored copies of one model: every update is
the same all-reduced gradient applied to the same values, so they agree to the last bit. Against
the one-process run they compute the same sums in another order (each worker's half of the
batch, then the sum over the workers, instead of one sum over the whole batch) in float32, so
they differ by round-off, grown a little by 12 steps of training: measured 6e-7 in the epoch
losses and 3.2e-6 in the weights (largest absolute difference; with TensorFlow's oneDNN
kernels, which the test turns off as the test suite does, 1.3e-7 and 3.9e-7). The test allows
1e-5. A worker that trained on its half of the batch alone, or gradients summed without the
`1 / global batch` scale, would be off by far more: training moves the weights by 6e-2. Both
runs take one optimizer step per global batch.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tests.integration.processes import free_port

WORKER = pathlib.Path(__file__).with_name("tf_multiworker_worker.py")
ROOT = WORKER.parents[2]  # the repository root, for `import keras_normkit` in the workers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed"
    ),
]


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "TF_CONFIG")}
    path = [str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    env.update(
        PYTHONPATH=os.pathsep.join(path),
        TF_CPP_MIN_LOG_LEVEL="3",
        TF_ENABLE_ONEDNN_OPTS="0",  # the kernels of the measurements above
        CUDA_VISIBLE_DEVICES="-1",
    )
    return env


def _launch(out, workers=1):
    """Start the processes of one run; returns the `Popen`s."""
    out.mkdir(parents=True, exist_ok=True)
    ports = [str(free_port()) for _ in range(workers)] if workers > 1 else []
    procs = []
    for index in range(workers):
        args = [sys.executable, str(WORKER), str(out)]
        if workers > 1:
            args += ["--index", str(index), "--ports", *ports]
        log = open(out / f"log_{index}.txt", "w")  # noqa: SIM115 (closed with the process)
        procs.append(
            subprocess.Popen(args, env=_env(), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        )
    return procs


def _wait(procs, out, timeout=600):
    try:
        for index, proc in enumerate(procs):
            code = proc.wait(timeout=timeout)
            assert code == 0, (out / f"log_{index}.txt").read_text()[-3000:]
    finally:  # a worker that failed leaves the other waiting for it
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return [json.loads((out / f"result_{i}.json").read_text()) for i in range(len(procs))]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tf_multiworker")
    single = _wait(_launch(root / "single"), root / "single")[0]
    multi = _wait(_launch(root / "multi", workers=2), root / "multi")
    return single, multi


def test_two_workers_train_the_one_process_model(runs):
    single, multi = runs
    assert [(r["workers"], r["index"], r["replicas"]) for r in multi] == [(2, 0, 2), (2, 1, 2)]
    assert (single["workers"], single["replicas"]) == (1, 1)
    # The workers agree with each other exactly: they hold mirrored copies of the weights.
    assert multi[0]["weights"] == multi[1]["weights"]
    assert multi[0]["losses"] == multi[1]["losses"]
    run = multi[0]
    # One optimizer step per global batch: 4 batches of 16 in each of 3 epochs.
    assert run["iterations"] == multi[1]["iterations"] == single["iterations"] == 12
    # The same start, and training moved the weights far more than the tolerance below.
    for a, b in zip(single["initial"], run["initial"], strict=True):
        np.testing.assert_array_equal(b, a)
    moved = max(
        float(np.abs(np.subtract(w, w0)).max())
        for w, w0 in zip(single["weights"], single["initial"], strict=True)
    )
    assert moved > 1e-2, moved
    # Against the one-process run: float32 round-off of sums taken in another order.
    np.testing.assert_allclose(run["losses"], single["losses"], rtol=0, atol=1e-5)
    for a, b in zip(single["weights"], run["weights"], strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5)
