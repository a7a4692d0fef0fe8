"""Training on several processes (JAX): two processes on localhost against one.

`tests/integration/multiprocess_worker.py` trains a model with every layer family of
keras_normkit (masked layer-normalized LSTM/GRU/SimpleRNN, FastWeightsRNN, QRN,
WeightNormalization with its data init, SELU, AlphaDropout, a Parseval constraint) with a
`CyclicalLearningRate`, `EarlyStopping`, `GradientStatistics` and `BackupAndRestore`, either as
one process fed whole global batches or as one of two processes (`keras.distribution`
over localhost, `DataParallel`), each fed its half of every global batch. The commands are
those of docs/guides/distributed.md.

What "equal" means here. Both runs compute the same sums in a different order, so they
differ by float32 round-off, and this model's training amplifies round-off: with the initial
weights of the one-process run multiplied by `1 + 1e-7 * N(0, 1)`, its weights after 4 epochs
differ by up to 29 % (relative to each weight tensor's largest entry; the layer-norm shifts
move most), its loss by 1e-3. The two-process run measured 0.24 % and 2e-5 from the
one-process run. So the test asserts: the epoch losses equal to 1e-4 (relative); the
weights no further from the one-process run than the perturbed run is; the values computed
before any update (the gradient statistics of the initial weights, WeightNormalization's
data init, which must see the global batch: half a batch would change them by ~10 %)
equal to 1e-5; and a run interrupted by the crash of one process, restarted on both, ending
exactly where the uninterrupted two-process run ends.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.integration.processes import free_port

WORKER = pathlib.Path(__file__).with_name("multiprocess_worker.py")

# `make test-slow` runs with `--dist loadfile`: one pytest-xdist worker runs both tests, so the
# module's fixture trains its five runs once, not once per worker.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed"),
]


def _env(cache):
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
    # The runs share JAX's persistent compilation cache: the two-process runs after the
    # first load its compiled programs (the same executables, so the same results; measured
    # on this 2-core machine under load, the fixture took 212 s with the cache, 269 s without).
    env.update(TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=cache)
    return env


def _launch(out, backup, processes=1, extra=(), per_process=None):
    """Start the processes of one run; returns the `Popen`s."""
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs = []
    for index in range(processes):
        args = [sys.executable, str(WORKER), str(out), str(backup), *extra]
        if processes > 1:
            args += ["--processes", str(processes), "--index", str(index), "--port", str(port)]
        args += list((per_process or {}).get(index, ()))
        log = open(out / f"log_{index}.txt", "w")  # noqa: SIM115 (closed with the process)
        env = _env(str(out.parent / "jax_compilation_cache"))
        procs.append(subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT))
    return procs


def _wait(procs, out, timeout=900):
    for index, proc in enumerate(procs):
        code = proc.wait(timeout=timeout)
        assert code == 0, (out / f"log_{index}.txt").read_text()[-3000:]
    return [json.loads((out / f"result_{i}.json").read_text()) for i in range(len(procs))]


def _relative_gap(a, b):
    """The largest difference of two weight lists, relative to each tensor's largest entry."""
    return max(
        float(np.abs(np.subtract(x, y)).max() / max(np.abs(x).max(), 1e-12))
        for x, y in zip(a, b, strict=True)
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("multiprocess")
    # The one-process run and its perturbed twin side by side, then the two-process runs.
    single = _launch(root / "single", root / "single_backup")
    perturbed = _launch(root / "perturbed", root / "perturbed_backup", extra=["--perturb"])
    results = {"single": _wait(single, root / "single")[0]}
    results["perturbed"] = _wait(perturbed, root / "perturbed")[0]
    results["multi"] = _wait(_launch(root / "multi", root / "multi_backup", 2), root / "multi")

    # A crash: process 1 dies at batch 1 of epoch 2; process 0 then waits in a collective
    # operation until it is stopped. Both restart from the backup of epoch 1.
    crashed = root / "crashed"
    procs = _launch(crashed, root / "crashed_backup", 2, per_process={1: ["--interrupt", "2", "1"]})
    assert procs[1].wait(timeout=900) == 3, (crashed / "log_1.txt").read_text()[-3000:]
    time.sleep(1)
    procs[0].kill()
    procs[0].wait()
    results["crash_backup"] = sorted(os.listdir(root / "crashed_backup"))
    with open(root / "crashed_backup" / "training_metadata.json") as f:
        results["crash_epoch"] = json.load(f)["epoch"]
    resumed = _launch(root / "resumed", root / "crashed_backup", 2)
    results["resumed"] = _wait(resumed, root / "resumed")
    return results


def test_two_processes_train_the_one_process_model(runs):
    single, perturbed, multi = runs["single"], runs["perturbed"], runs["multi"]
    assert [(r["processes"], r["index"]) for r in multi] == [(2, 0), (2, 1)]
    assert single["processes"] == 1
    # The processes agree with each other exactly: they hold the same replicated weights.
    assert multi[0]["weights"] == multi[1]["weights"]
    assert multi[0]["history"] == multi[1]["history"]
    run = multi[0]
    assert run["iterations"] == single["iterations"] == 4 * len(single["epochs"])
    assert run["stop"] == single["stop"]  # EarlyStopping decided the same
    np.testing.assert_allclose(run["history"]["loss"], single["history"]["loss"], rtol=1e-4)
    gap, noise = (_relative_gap(single["weights"], r["weights"]) for r in (run, perturbed))
    assert 0 < noise and gap <= noise, (gap, noise)
    # Values computed before any update: the global batch, not this process's half.
    for a, b in zip(single["data_init"], run["data_init"], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    for layer, norms in single["grad_norm"].items():
        np.testing.assert_allclose(run["grad_norm"][layer][0], norms[0], rtol=1e-5)


def test_a_crashed_run_resumes_where_the_uninterrupted_run_ends(runs):
    multi, resumed = runs["multi"][0], runs["resumed"]
    assert runs["crash_epoch"] == 2  # the backup of epochs 0 and 1, written by process 0
    assert "latest.weights.h5" in runs["crash_backup"]
    assert resumed[0]["weights"] == resumed[1]["weights"]
    assert resumed[0]["epochs"] == [2, 3]
    np.testing.assert_allclose(
        resumed[0]["history"]["loss"], multi["history"]["loss"][2:], rtol=1e-6
    )
    assert resumed[0]["stop"] == multi["stop"]  # EarlyStopping's state came back
    assert resumed[0]["iterations"] == multi["iterations"]
    for a, b in zip(multi["weights"], resumed[0]["weights"], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    # GradientStatistics' history continued from the backup.
    for layer, norms in multi["grad_norm"].items():
        np.testing.assert_allclose(resumed[0]["grad_norm"][layer], norms, rtol=1e-5)
