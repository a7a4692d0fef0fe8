"""Our recurrent layers against Keras's on whatever accelerator the installed backends see.

    python benchmarks/accelerator.py --json accelerator.json            # the full run
    python benchmarks/accelerator.py --quick --json /tmp/quick.json     # CI, on a CPU
    python benchmarks/accelerator.py --backends jax --pairs qrn_gru --json qrn.json
    python benchmarks/accelerator.py --report results.json              # its Markdown table

Each backend runs in its own subprocess (`KERAS_BACKEND` is fixed per process): JAX and
PyTorch, and TensorFlow where it is installed (`--backends` picks some). A backend's process
describes its device (`jax.devices()`, `torch.cuda.get_device_name`, TensorFlow's physical
devices) and times four pairs, each of our layers beside the Keras layer a user would
otherwise pick, of the same units (Keras's `LSTM` and `GRU` as they are: cuDNN kernels
where Keras picks them):

* `LayerNormLSTM` vs `LSTM`, `LayerNormGRU` vs `GRU`, `FastWeightsRNN` vs `LSTM`:
  `Sequential([Input((T, 32)), layer(128)])`, MSE on the last state, T = 50 and 200;
* `QRN(64)` on `[x, q]` vs `GRU(64)` on `x` (`x` of shape `(B, T, 64)`), T = 200 and 1000;

at B = 64 and 256, for two calls: a training step (`train_on_batch`, Adam) and
`predict_on_batch` (both return NumPy values, so every timed call waits for the device).
The two models of a pair are timed side by side in interleaved rounds
(`benchmarks/_timing.py`): `--rounds` rounds of `--repeats` calls of each, after `--warmup`
untimed calls (tracing, compiling); the figure is the best round's median (`ratio`, ours /
theirs), the minimum single call beside it (`ratio_min`). `jit_compile` is Keras's default
(`"auto"`), and the JSON records what it resolved to.

Time: the whole run starts no case after `--max-minutes` (default 6.5; the time left is
shared by the backends still to run), and a backend's process still busy 30 s past its
share is killed (what it measured so far is kept: it writes its JSON after every case), so
that the run ends within about 8 minutes; the cases not reached are in the JSON with
`"skipped"` set. `--quick` runs tiny sizes (B 4, T 6, QRN T 10,
8 units), one size per pair and few repeats: it checks that everything runs and that the
JSON is whole, it measures nothing (`tests/benchmarks/test_accelerator.py` runs it).

The JSON (`--json PATH`): `schema` (1), `command` (the command line without `--json`, after
the variables of `examples/result_commands.py` that were set; without `KERAS_BACKEND`, which
the script sets in each backend's process), `quick`, `started_utc`, `wall_s`, `settings` (the
timing protocol and every case planned), and per backend `ok`, `error` (the end of the
subprocess's stderr if it failed), `keras` and `keras_normkit` (versions), `device` (a dict)
and `cases`: one entry per (pair, call, B, T) with `ours_s` and `theirs_s` (seconds, best
round's median), `ratio`, `ratio_min`, `jit_compile` (what Keras resolved) and `skipped`
(`null`, or why the case did not run). `--jit-compile true|false` sets `jit_compile` of both
models of every pair instead of Keras's default (`settings.jit_compile` records it).

`--report PATH` prints the Markdown table of a JSON (`markdown_table`): one row per case,
each backend's times (ours / Keras's, milliseconds) and ratio; `benchmarks/README.md`
holds that table of the recorded run between `<!-- accelerator-table -->` markers, and a
test checks it against the JSON.
"""

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("jax", "torch", "tensorflow")
SCHEMA = 1
CALLS = ("train", "predict")
FEATURES = 32

# pair name -> (ours, theirs, units, the sequence lengths T); the layers are looked up by
# name in the backend's process (`_layers`).
PAIRS = {
    "layer_norm_lstm_lstm": ("LayerNormLSTM", "LSTM", 128, (50, 200)),
    "layer_norm_gru_gru": ("LayerNormGRU", "GRU", 128, (50, 200)),
    "fast_weights_lstm": ("FastWeightsRNN", "LSTM", 128, (50, 200)),
    "qrn_gru": ("QRN", "GRU", 64, (200, 1000)),
}
BATCHES = (64, 256)
FULL = {"rounds": 3, "repeats": 5, "warmup": 2}
QUICK = {"rounds": 1, "repeats": 2, "warmup": 1}
# The run starts no case after MAX_MINUTES (by default); a case running KILL_AFTER_S past
# its backend's share is killed: with two backends the run ends within about 8 minutes.
MAX_MINUTES = 6.5
KILL_AFTER_S = 30
# --quick: one tiny size per pair: (B, T of the RNN pairs, T of QRN, units).
QUICK_SIZES = (4, 6, 10, 8)


def installed_backends():
    """The backends of `BACKENDS` whose package is importable here."""
    return [b for b in BACKENDS if importlib.util.find_spec(b) is not None]


def cases(quick, pairs):
    """Every (pair, B, T, units) to run, in the order they run: the smaller cases first."""
    if quick:
        batch, steps, qrn_steps, units = QUICK_SIZES
        return [(pair, batch, qrn_steps if pair == "qrn_gru" else steps, units) for pair in pairs]
    out = []
    for index in range(2):  # the shorter T of every pair first
        for batch in BATCHES:
            for pair in pairs:
                _, _, units, lengths = PAIRS[pair]
                out.append((pair, batch, lengths[index], units))
    return out


# --- in a backend's process -----------------------------------------------------------------


def describe_device(backend):
    """What the backend computes on, as a JSON-able dict."""
    info = {"backend": backend, "platform": platform.platform(), "python": sys.version.split()[0]}
    if backend == "jax":
        import jax

        devices = jax.devices()
        info.update(
            jax=jax.__version__,
            default_backend=jax.default_backend(),
            devices=[str(d) for d in devices],
            device_kind=devices[0].device_kind if devices else None,
        )
    elif backend == "torch":
        import torch

        cuda = torch.cuda.is_available()
        info.update(
            torch=torch.__version__,
            cuda_available=cuda,
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version() if cuda else None,
            devices=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if cuda
            else ["cpu"],
        )
    else:
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        info.update(
            tensorflow=tf.__version__,
            devices=[d.name for d in tf.config.list_physical_devices()],
            gpu_details=[tf.config.experimental.get_device_details(g) for g in gpus],
        )
    return info


def _layers():
    import keras

    from keras_normkit.layers import QRN, FastWeightsRNN, LayerNormGRU, LayerNormLSTM

    return {
        "LayerNormLSTM": LayerNormLSTM,
        "LayerNormGRU": LayerNormGRU,
        "FastWeightsRNN": FastWeightsRNN,
        "QRN": QRN,
        "LSTM": keras.layers.LSTM,
        "GRU": keras.layers.GRU,
    }


def build(name, batch, steps, units, jit_compile="auto"):
    """`(model, inputs, targets)` of one side of a pair, compiled (Adam, MSE)."""
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    if name == "QRN":  # [x, q] -> the reduced query at the last step
        x_in, q_in = keras.Input((steps, units)), keras.Input((units,))
        layer = _layers()[name](units, return_sequences=False)
        model = keras.Model([x_in, q_in], layer([x_in, q_in]))
        inputs = [
            rng.normal(size=(batch, steps, units)).astype("float32"),
            rng.normal(size=(batch, units)).astype("float32"),
        ]
    else:
        model = keras.Sequential([keras.Input((steps, FEATURES)), _layers()[name](units)])
        inputs = rng.normal(size=(batch, steps, FEATURES)).astype("float32")
    targets = rng.normal(size=(batch, units)).astype("float32")
    model.compile(keras.optimizers.Adam(1e-3), "mse", jit_compile=jit_compile)
    return model, inputs, targets


def run_case(pair, batch, steps, units, settings, jit_compile="auto"):
    """The timings of one case: a list of two entries (train, predict)."""
    import numpy as np
    from _timing import best_round_median, interleaved, minimum

    ours_name, theirs_name, _, _ = PAIRS[pair]
    ours = build(ours_name, batch, steps, units, jit_compile)
    if pair == "qrn_gru":  # the GRU reads QRN's x alone, (B, T, units)
        import keras

        keras.utils.set_random_seed(0)
        gru = keras.Sequential([keras.Input((steps, units)), keras.layers.GRU(units)])
        gru.compile(keras.optimizers.Adam(1e-3), "mse", jit_compile=jit_compile)
        theirs = (gru, ours[1][0], ours[2])
    else:
        theirs = build(theirs_name, batch, steps, units, jit_compile)
    entries = []
    for call in CALLS:
        fns = {}
        for side, (model, x, y) in (("ours", ours), ("theirs", theirs)):
            if call == "train":
                fns[side] = lambda m=model, x=x, y=y: m.train_on_batch(x, y)
            else:
                fns[side] = lambda m=model, x=x: m.predict_on_batch(x)
        times = interleaved(
            fns,
            settings["rounds"],
            settings["repeats"],
            warmup=settings["warmup"],
            order="alternate",
            after=np.asarray,
        )
        ours_s, theirs_s = (best_round_median(times[s]) for s in ("ours", "theirs"))
        entries.append(
            {
                "call": call,
                "ours_s": ours_s,
                "theirs_s": theirs_s,
                "ratio": ours_s / theirs_s,
                "ratio_min": minimum(times["ours"]) / minimum(times["theirs"]),
                "jit_compile": _jit(ours[0]),
            }
        )
    return entries


def _jit(model):
    value = getattr(model, "jit_compile", None)
    return value if isinstance(value, bool) else str(value)


def child(backend, quick, pairs, deadline, out_path, jit_compile="auto"):
    """Runs in the backend's process: writes its part of the JSON to `out_path`."""
    import keras

    import keras_normkit

    assert keras.backend.backend() == backend, keras.backend.backend()
    settings = QUICK if quick else FULL
    result = {
        "keras": keras.__version__,
        "keras_normkit": keras_normkit.__version__,
        "device": describe_device(backend),
        "cases": [],
    }
    for pair, batch, steps, units in cases(quick, pairs):
        ours, theirs, _, _ = PAIRS[pair]
        base = {"pair": pair, "ours": ours, "theirs": theirs, "batch": batch, "steps": steps}
        base["units"] = units
        if time.time() > deadline:
            for call in CALLS:
                result["cases"].append({**base, "call": call, "skipped": "time budget"})
            continue
        keras.backend.clear_session()
        try:
            for entry in run_case(pair, batch, steps, units, settings, jit_compile):
                result["cases"].append({**base, **entry, "skipped": None})
        except Exception as error:  # noqa: BLE001 - recorded, the other cases still run
            for call in CALLS:
                reason = f"error: {type(error).__name__}: {error}"[:500]
                result["cases"].append({**base, "call": call, "skipped": reason})
        Path(out_path).write_text(json.dumps(result, indent=1))  # incrementally
        print(f"{backend} {pair} B={batch} T={steps} done", flush=True)
    Path(out_path).write_text(json.dumps(result, indent=1))


# --- the parent -----------------------------------------------------------------------------


def run_backend(backend, args, pairs, seconds):
    """Runs `child` for `backend` in a subprocess, for at most about `seconds`.

    The child starts no case after `seconds`; a case still running `KILL_AFTER_S` later is
    killed with its process. Its part of the JSON: what the child wrote (after every case),
    the planned cases it did not reach marked as skipped.
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{backend}.json"
        env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
        command = [
            sys.executable, __file__, "--child", backend, "--child-out", str(out),
            "--deadline", str(time.time() + seconds), "--pairs", ",".join(pairs),
            "--jit-compile", args.jit_compile,
        ] + (["--quick"] if args.quick else [])  # fmt: skip
        start = time.time()
        error = None
        try:
            proc = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=seconds + KILL_AFTER_S
            )
            if proc.returncode != 0:
                error = f"exit {proc.returncode}: {proc.stderr[-2000:]}"
        except subprocess.TimeoutExpired as expired:
            error = f"killed after {expired.timeout:.0f} s (a case ran past the time budget)"
        part = json.loads(out.read_text()) if out.exists() else {"cases": []}
    done = {(c["pair"], c["batch"], c["steps"], c["call"]) for c in part["cases"]}
    for pair, batch, steps, units in cases(args.quick, pairs):
        for call in CALLS:
            if (pair, batch, steps, call) not in done:
                ours, theirs, _, _ = PAIRS[pair]
                part["cases"].append(
                    {"pair": pair, "ours": ours, "theirs": theirs, "batch": batch,
                     "steps": steps, "units": units, "call": call,
                     "skipped": "not reached: " + (error or "no result")[:200]}
                )  # fmt: skip
    part.update(ok=error is None, error=error, wall_s=time.time() - start)
    for key in ("keras", "keras_normkit", "device"):
        part.setdefault(key, None)
    return part


BACKEND_NAMES = {"jax": "JAX", "torch": "PyTorch", "tensorflow": "TensorFlow"}


def markdown_table(report):
    """The Markdown table of a run's JSON: one row per case, per backend ours / Keras's time
    (ms) and their ratio (a case a backend did not reach reads "not run")."""
    backends = list(report["backends"])
    header = "| pair | call | B | T |" + "".join(
        f" {BACKEND_NAMES.get(b, b)}: ours / Keras (ms) | ratio |" for b in backends
    )
    lines = [header, "|" + " --- |" * (4 + 2 * len(backends))]
    by_backend = {
        b: {(c["pair"], c["call"], c["batch"], c["steps"]): c for c in part["cases"]}
        for b, part in report["backends"].items()
    }
    for case in report["settings"]["cases"]:
        for call in CALLS:
            key = (case["pair"], call, case["batch"], case["steps"])
            ours, theirs = PAIRS[case["pair"]][:2]
            row = f"| {ours} / {theirs} | {call} | {case['batch']} | {case['steps']} |"
            for b in backends:
                c = by_backend[b].get(key)
                if c is None or c["skipped"] is not None:
                    row += " not run | |"
                else:
                    row += (
                        f" {1e3 * c['ours_s']:.1f} / {1e3 * c['theirs_s']:.1f} | {c['ratio']:.2f} |"
                    )
            lines.append(row)
    return "\n".join(lines)


def _without_json(argv):
    """`argv` less `--json PATH` (the recorded command names no output file)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == "--json":
            skip = True
        elif not word.startswith("--json="):
            out.append(word)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=False, help="where to write the results")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repeats (CI)")
    parser.add_argument("--backends", default=None, help="e.g. 'jax,torch' (default: installed)")
    parser.add_argument("--pairs", default=",".join(PAIRS), help="of " + ", ".join(PAIRS))
    parser.add_argument("--max-minutes", type=float, default=MAX_MINUTES)
    parser.add_argument(
        "--jit-compile",
        choices=("auto", "true", "false"),
        default="auto",
        help="`jit_compile` of both models of a pair (default: Keras's own, 'auto')",
    )
    parser.add_argument("--report", default=None, help="print the Markdown table of a JSON")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.report:
        print(markdown_table(json.loads(Path(args.report).read_text())))
        return
    pairs = args.pairs.split(",")
    unknown = [p for p in pairs if p not in PAIRS]
    if unknown:
        parser.error(f"--pairs: unknown {unknown}; known: {list(PAIRS)}")
    if args.child:
        sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this tree's keras_normkit
        jit = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
        child(args.child, args.quick, pairs, args.deadline, args.child_out, jit)
        return
    backends = args.backends.split(",") if args.backends else installed_backends()
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        parser.error(f"--backends: unknown {unknown}; known: {list(BACKENDS)}")
    started = time.time()
    sys.path.insert(0, str(ROOT / "examples"))
    from result_commands import variables_prefix

    words = [variables_prefix(), "python", "benchmarks/accelerator.py"]
    words += [shlex.quote(w) for w in _without_json(sys.argv[1:] if argv is None else argv)]
    report = {
        "schema": SCHEMA,
        "script": "benchmarks/accelerator.py",
        # Without KERAS_BACKEND: each backend of `--backends` runs in a process of its own.
        "command": " ".join(w for w in words if w),
        "quick": args.quick,
        "started_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "settings": {
            **(QUICK if args.quick else FULL),
            "max_minutes": args.max_minutes,
            "jit_compile": args.jit_compile,
            "cases": [
                dict(zip(("pair", "batch", "steps", "units"), case, strict=True))
                for case in cases(args.quick, pairs)
            ],
        },
        "backends": {},
    }
    end = started + args.max_minutes * 60
    for index, backend in enumerate(backends):
        # What is left, shared by the backends still to run (time one leaves goes on).
        share = max(0.0, end - time.time()) / (len(backends) - index)
        part = run_backend(backend, args, pairs, share)
        report["backends"][backend] = part
        done = sum(c["skipped"] is None for c in part["cases"])
        print(f"{backend}: ok={part['ok']}, {done}/{len(part['cases'])} cases", flush=True)
        for c in part["cases"]:
            if c["skipped"] is None:
                print(
                    f"  {c['ours']:>14} / {c['theirs']:<5} {c['call']:<7} B={c['batch']:<4} "
                    f"T={c['steps']:<5} {c['ratio']:.2f} (min {c['ratio_min']:.2f})"
                )
        if part["error"]:
            print(f"  error: {part['error'][-500:]}")
    report["wall_s"] = time.time() - started
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
