"""Our recurrent layers on the PyTorch backend against Keras's LSTM/GRU and plain PyTorch.

    python benchmarks/bench_torch_recurrent.py --json benchmarks/results/torch_recurrent_cpu.json
    python benchmarks/bench_torch_recurrent.py --quick --json /tmp/quick.json   # CI: runs all
    python benchmarks/bench_torch_recurrent.py --report results.json            # its table
    python benchmarks/bench_torch_recurrent.py --report results.json --write-block  # README

On the PyTorch backend (the script sets it when it runs), one thread
(`torch.set_num_threads(1)`), for each length `T` (50 and 200) at B 64, 32 features, 128
units: every contender of `MODELS` (our `LayerNormLSTM`, `LayerNormGRU`,
`LayerNormSimpleRNN`, `FastWeightsRNN`; Keras's `LSTM`, `GRU`, `SimpleRNN`; plain
`torch.nn.LSTM`, `GRU`, `RNN` with the same MSE loss on the last output and Adam) is
measured in two ways:

* **launches**: the top-level ATen operations (`torch.profiler`; those no other ATen
  operation called, each a kernel launch on a GPU, views aside) of one train step
  (`train_on_batch`: forward, backward, Adam) and of one `predict_on_batch`, divided by `T`;
* **time**: train steps and predictions, every contender in turn within each round
  (`benchmarks/_timing.py`, `--rounds` rounds of `--repeats` calls after `--warmup`), the
  best round's median per contender.

`FastWeightsRNN` trains through its native loop on the CPU only up to `B·H² = 2^18` values
(`keras_normkit.backend.torch_rnn.FAST_WEIGHTS_CPU_MAX_VALUES`): at 128 units it trains
through the Keras-ops engine there, and the row `FastWeightsRNN (native)` measures the
native loop, the one an accelerator runs, with that limit lifted.

Each row has its ratios to its Keras twin (`LSTM` for the LSTM and fast weights, `GRU`,
`SimpleRNN`) and to its plain-PyTorch twin (`torch.nn.LSTM`, ...); `targets` checks the
issue's bounds on them. The JSON (`--json`): `schema`, `quick`, `settings`, `device`,
versions, `rows` (one per contender and `T`) and `targets`; `--report` prints its Markdown
table (`markdown_table`), which `benchmarks/README.md` holds between
`<!-- torch-recurrent-table -->` markers (`--write-block` writes it there; a test checks it
against the JSON).
"""

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

SCHEMA = 1
FEATURES = 32
FULL = {"batch": 64, "units": 128, "lengths": (50, 200), "rounds": 5, "repeats": 3, "warmup": 2}
QUICK = {"batch": 4, "units": 8, "lengths": (6,), "rounds": 1, "repeats": 1, "warmup": 1}

# name -> (kind, what, Keras twin, PyTorch twin)
MODELS = {
    "LayerNormLSTM": ("ours", "LayerNormLSTM", "LSTM", "torch.nn.LSTM"),
    "LayerNormGRU": ("ours", "LayerNormGRU", "GRU", "torch.nn.GRU"),
    "LayerNormSimpleRNN": ("ours", "LayerNormSimpleRNN", "SimpleRNN", "torch.nn.RNN"),
    "FastWeightsRNN": ("ours", "FastWeightsRNN", "LSTM", "torch.nn.LSTM"),
    "FastWeightsRNN (native)": ("ours", "FastWeightsRNN", "LSTM", "torch.nn.LSTM"),
    "LSTM": ("keras", "LSTM", None, "torch.nn.LSTM"),
    "GRU": ("keras", "GRU", None, "torch.nn.GRU"),
    "SimpleRNN": ("keras", "SimpleRNN", None, "torch.nn.RNN"),
    "torch.nn.LSTM": ("torch", "LSTM", None, None),
    "torch.nn.GRU": ("torch", "GRU", None, None),
    "torch.nn.RNN": ("torch", "RNN", None, None),
}

# The bounds: (row, quantity, at most); quantities are per-step launches of a train
# step, or a time ratio to the row's Keras (`keras`) or PyTorch (`torch`) twin.
TARGETS = [
    ("LayerNormLSTM", "train_ops_per_step", 40.0),
    ("LayerNormGRU", "train_ops_per_step", 40.0),
    ("LayerNormSimpleRNN", "train_ops_per_step", 20.0),
    ("FastWeightsRNN (native)", "train_ops_per_step", 80.0),
    ("LayerNormLSTM", "train_ratio_keras", 0.5),
    ("LayerNormLSTM", "predict_ratio_keras", 1.0),
    ("LayerNormLSTM", "train_ratio_torch", 2.5),
]


class _NativeFastWeights:
    """A context in which `FastWeightsRNN` trains through its native loop at any size."""

    def __enter__(self):
        from keras_normkit.backend import torch_rnn

        self.saved = torch_rnn.FAST_WEIGHTS_CPU_MAX_VALUES
        torch_rnn.FAST_WEIGHTS_CPU_MAX_VALUES = float("inf")

    def __exit__(self, *exc):
        from keras_normkit.backend import torch_rnn

        torch_rnn.FAST_WEIGHTS_CPU_MAX_VALUES = self.saved


class _Nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None


def _context(name):
    return _NativeFastWeights() if name == "FastWeightsRNN (native)" else _Nothing()


def _data(batch, steps, units):
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, steps, FEATURES)).astype("float32")
    return x, rng.normal(size=(batch, units)).astype("float32")


def build(name, batch, steps, units):
    """`(train, predict)`: functions of no argument, one train step and one prediction
    (each returning NumPy values, as Keras's `train_on_batch` and `predict_on_batch` do)."""
    import keras
    import torch

    kind, what = MODELS[name][:2]
    x, y = _data(batch, steps, units)
    if kind == "torch":
        torch.manual_seed(0)
        module = getattr(torch.nn, what)(FEATURES, units, batch_first=True)
        optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
        xt, yt = torch.tensor(x), torch.tensor(y)

        def train():
            optimizer.zero_grad()
            outputs, _ = module(xt)
            loss = torch.nn.functional.mse_loss(outputs[:, -1], yt)
            loss.backward()
            optimizer.step()
            return loss.detach().numpy()

        def predict():
            with torch.no_grad():
                return module(xt)[0][:, -1].numpy()

        return train, predict
    import keras_normkit.layers

    layer = getattr(keras_normkit.layers if kind == "ours" else keras.layers, what)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((steps, FEATURES)), layer(units)])
    model.compile(keras.optimizers.Adam(1e-3), "mse")

    def train():
        with _context(name):
            return model.train_on_batch(x, y)

    def predict():
        with _context(name):
            return model.predict_on_batch(x)

    return train, predict


def cpu_model():
    """The CPU's model name (`/proc/cpuinfo` on Linux), or `None`: the timings' ratios
    differ between machines (an Intel Xeon and an AMD EPYC gave different ones)."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def top_level_aten_ops(function):
    """ATen operations `function()` calls that no other ATen operation called."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        function()
    count = 0
    for event in prof.events():
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        count += parent is None
    return count


def measure(settings, names):
    """The rows of every contender in `names` at each length of `settings`."""
    import numpy as np
    from _timing import best_round_median, interleaved

    batch, units = settings["batch"], settings["units"]
    rows = []
    for steps in settings["lengths"]:
        functions = {name: build(name, batch, steps, units) for name in names}
        for train, predict in functions.values():  # compile, trace, first Adam step
            train()
            predict()
        ops = {
            name: (top_level_aten_ops(train) / steps, top_level_aten_ops(predict) / steps)
            for name, (train, predict) in functions.items()
        }
        times = {}
        for call, index in (("train", 0), ("predict", 1)):
            timed = interleaved(
                {name: fns[index] for name, fns in functions.items()},
                settings["rounds"],
                settings["repeats"],
                warmup=settings["warmup"],
                order="rotate",
                after=np.asarray,
            )
            times[call] = {name: best_round_median(t) for name, t in timed.items()}
        for name in names:
            rows.append(
                {
                    "model": name,
                    "batch": batch,
                    "steps": steps,
                    "units": units,
                    "train_ops_per_step": ops[name][0],
                    "predict_ops_per_step": ops[name][1],
                    "train_s": times["train"][name],
                    "predict_s": times["predict"][name],
                }
            )
        print(f"T={steps} done", flush=True)
    by_key = {(r["model"], r["steps"]): r for r in rows}
    for row in rows:
        _, _, keras_twin, torch_twin = MODELS[row["model"]]
        for label, twin in (("keras", keras_twin), ("torch", torch_twin)):
            other = by_key.get((twin, row["steps"]))
            for call in ("train", "predict"):
                ratio = None if other is None else row[f"{call}_s"] / other[f"{call}_s"]
                row[f"{call}_ratio_{label}"] = ratio
    return rows


def check_targets(rows):
    """Each target of `TARGETS` at each length: the measured value and whether it holds."""
    out = []
    for name, quantity, bound in TARGETS:
        for row in rows:
            if row["model"] == name and row.get(quantity) is not None:
                value = row[quantity]
                out.append(
                    {
                        "model": name,
                        "steps": row["steps"],
                        "quantity": quantity,
                        "at_most": bound,
                        "value": value,
                        "met": value <= bound,
                    }
                )
    return out


def _ms(seconds):
    return f"{1e3 * seconds:.1f}"


def _ratio(value):
    return "—" if value is None else f"{value:.2f}"


def markdown_table(report):
    """The Markdown table of a run's JSON: one row per contender and length, under a line
    naming the CPU where the JSON does."""
    model = report.get("device", {}).get("cpu_model")
    lines = [f"On {model}, one thread:", ""] if model else []
    lines += [
        "| T | model | ATen ops / step, train | ATen ops / step, predict | train (ms) | "
        "predict (ms) | train / Keras | predict / Keras | train / PyTorch |",
        "|" + " --- |" * 9,
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['steps']} | {r['model']} | {r['train_ops_per_step']:.1f} | "
            f"{r['predict_ops_per_step']:.1f} | {_ms(r['train_s'])} | {_ms(r['predict_s'])} | "
            f"{_ratio(r['train_ratio_keras'])} | {_ratio(r['predict_ratio_keras'])} | "
            f"{_ratio(r['train_ratio_torch'])} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default=None, help="where to write the results")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one call (CI)")
    parser.add_argument("--models", default=",".join(MODELS), help="of " + ", ".join(MODELS))
    parser.add_argument("--report", default=None, help="print the Markdown table of a JSON")
    parser.add_argument(
        "--write-block", action="store_true", help="with --report: into benchmarks/README.md"
    )
    args = parser.parse_args(argv)
    if args.report:
        table = markdown_table(json.loads(Path(args.report).read_text()))
        if args.write_block:
            sys.path.insert(0, str(ROOT / "examples"))
            from markdown_blocks import write_block

            write_block(ROOT / "benchmarks" / "README.md", "torch-recurrent-table", table)
        print(table)
        return
    # The backend is set here, not at import: a test process that loads this module keeps its
    # own backend (and its subprocesses theirs).
    os.environ["KERAS_BACKEND"] = "torch"
    import keras
    import torch

    import keras_normkit

    if keras.backend.backend() != "torch":
        parser.error(f"Keras was imported with the {keras.backend.backend()} backend; run it alone")

    sys.path.insert(0, str(ROOT / "examples"))
    from result_commands import environment_prefix

    torch.set_num_threads(1)
    settings = QUICK if args.quick else FULL
    names = [n.strip() for n in args.models.split(",")]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; choose from {list(MODELS)}")
    start = time.time()
    rows = measure(settings, names)
    report = {
        "schema": SCHEMA,
        "script": "benchmarks/bench_torch_recurrent.py",
        "command": environment_prefix()
        + " python benchmarks/bench_torch_recurrent.py"
        + (" --quick" if args.quick else "")
        + (f" --models '{args.models}'" if args.models != ",".join(MODELS) else ""),
        "quick": args.quick,
        "started_utc": datetime.datetime.fromtimestamp(start, datetime.UTC).isoformat(),
        "wall_s": time.time() - start,
        "settings": {**settings, "features": FEATURES, "threads": torch.get_num_threads()},
        "versions": {
            "keras": keras.__version__,
            "keras_normkit": keras_normkit.__version__,
            "torch": torch.__version__,
            "python": sys.version.split()[0],
        },
        "device": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpu_model": cpu_model(),
            "cpu": True,
        },
        "rows": rows,
        "targets": check_targets(rows),
    }
    print(markdown_table(report))
    for target in report["targets"]:
        status = "met" if target["met"] else "NOT met"
        print(
            f"{target['model']} T={target['steps']} {target['quantity']} "
            f"{target['value']:.2f} <= {target['at_most']}: {status}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
