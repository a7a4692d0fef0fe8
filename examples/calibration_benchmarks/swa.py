"""Stochastic weight averaging on a real, over-confident text classifier: 20 News, DAN-3.

The network of Table 1's 20 News row (`run.py`'s `CONFIGS["20news"]`, a 3-layer DAN with
batch norm, Adam, the last epoch's weights kept) ends training over-confident: its test ECE
is about 15 %. Here the same training (same seed, same batches, same budget of epochs) runs
with `keras_normkit.callbacks.StochasticWeightAveraging` watching, one per start epoch
(`--start`, default every epoch): the weights at the end of the epochs start ... last are
averaged, the batch-norm statistics of the average are recomputed over the training inputs,
and both networks are measured on the same test split:

* `last`: the last iterate (what Table 1's "uncalibrated" column measures: the same
  network on TensorFlow, which the committed rows use, and JAX; on PyTorch `run.py`'s
  per-epoch validation calls Keras's `predict`, which draws from torch's global generator
  that the next epoch's shuffling draws from too, so the batches there differ);
* `swa_stale`: the average with the last iterate's moving BN statistics (what averaging
  the trainable weights alone gives, e.g. an EMA swapped in without recomputing BN);
* `swa`: the average with recomputed BN statistics (the paper's SWA).

For each: test error, ECE (15 equal-width bins, %), NLL, Brier score, and the ECE after
temperature scaling fitted on the validation split; the validation error and NLL as well
(the start epoch is chosen on those, never on the test split). One row per seed and
variant goes into `--json` (merged: a row of the same seed, start and variant is replaced),
with the command that re-runs it.

    python examples/calibration_benchmarks/swa.py --data DIR --seeds 0 1 2 3 4 \\
        --json notebooks/data/swa_20news.json

On a shared machine run it with one thread: `OMP_NUM_THREADS=1 TF_NUM_INTRAOP_THREADS=1
TF_NUM_INTEROP_THREADS=1 nice -n 10`. `--report` prints the summary of a JSON file, and with
`--write-block FILE MARKER` writes it into a page between `<!-- MARKER -->` markers (the
training guide's table is generated so; a test compares them):

    python examples/calibration_benchmarks/swa.py --report \\
        --write-block docs/guides/training.md SWA_20NEWS
"""

import argparse
import collections
import json
import os
import pathlib
import sys
import time

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402

import keras_normkit  # noqa: E402
from keras_normkit import calibration  # noqa: E402
from keras_normkit.callbacks import StochasticWeightAveraging  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import run as table1  # noqa: E402
import text_data  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from markdown_blocks import write_block  # noqa: E402
from result_commands import environment_prefix  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_JSON = ROOT / "notebooks" / "data" / "swa_20news.json"
VARIANTS = ("last", "swa_stale", "swa")
MEASURES = ("error", "ece", "nll", "brier", "ece_temperature")


def measure(logits, labels, val_logits, val_labels):
    """Test error, ECE (%), NLL, Brier; and the ECE (%) after temperature scaling fitted on
    the validation logits."""
    probabilities = table1.softmax(logits)
    temperature = calibration.fit_temperature(val_logits, val_labels).temperature
    return {
        "error": float(100 * np.mean(probabilities.argmax(1) != labels)),
        "ece": float(100 * calibration.expected_calibration_error(probabilities, labels)),
        "nll": float(calibration.negative_log_likelihood(probabilities, labels)),
        "brier": float(calibration.brier_score(probabilities, labels)),
        "ece_temperature": float(
            100
            * calibration.expected_calibration_error(table1.softmax(logits / temperature), labels)
        ),
        "temperature": float(temperature),
    }


def batch_norm_layers(model):
    return [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]


def run_seed(splits, seed, starts, config, log=print):
    """Trains one DAN with one SWA callback per start epoch watching (one training serves
    every start); returns one row per start and variant."""
    keras.utils.set_random_seed(seed)
    vocab = text_data.vocabulary(splits.train[0], config["vocab"])
    encode = lambda split: text_data.encode(split[0], vocab, config["max_length"])  # noqa: E731
    x_train, x_val, x_test = encode(splits.train), encode(splits.validation), encode(splits.test)
    network = table1.build(config, len(vocab) + 2, len(splits.classes), seed)
    network.compile(
        optimizer=table1.make_optimizer(config),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    averages = {
        start: StochasticWeightAveraging(
            start, batch_norm_data=x_train, batch_size=256, swap_at_end=False, verbose=0
        )
        for start in starts
    }
    began = time.time()
    network.fit(
        x_train,
        splits.train[1],
        batch_size=config["batch_size"],
        epochs=config["epochs"],
        callbacks=list(averages.values()),
        verbose=0,
    )
    seconds = time.time() - began

    def logits():
        predict = lambda x: network.predict(x, batch_size=256, verbose=0).astype(np.float64)  # noqa: E731
        return predict(x_val), predict(x_test)

    last = logits()
    val_labels, test_labels = splits.validation[1], splits.test[1]
    rows = []
    for start, swa in averages.items():
        outputs = {"last": last}
        stale = [layer.get_weights()[2:] for layer in batch_norm_layers(network)]
        swa.swap()  # the average in, its BN statistics recomputed
        outputs["swa"] = logits()
        for layer, statistics in zip(batch_norm_layers(network), stale, strict=True):
            layer.moving_mean.assign(statistics[0])
            layer.moving_variance.assign(statistics[1])
        outputs["swa_stale"] = logits()
        swa.swap()  # the last iterate back, with its own BN statistics
        for variant in VARIANTS:
            val_logits, test_logits = outputs[variant]
            val_probabilities = table1.softmax(val_logits)
            rows.append(
                {
                    "dataset": "20news",
                    "seed": seed,
                    "start_epoch": start,
                    "epochs": config["epochs"],
                    "averaged": swa.count,
                    "variant": variant,
                    **measure(test_logits, test_labels, val_logits, val_labels),
                    "val_error": float(100 * np.mean(val_probabilities.argmax(1) != val_labels)),
                    "val_nll": float(
                        calibration.negative_log_likelihood(val_probabilities, val_labels)
                    ),
                    "train_seconds": round(seconds, 1),
                    "backend": keras.backend.backend(),
                    "keras_normkit": keras_normkit.__version__,
                    "command": (
                        f"{environment_prefix()} python examples/calibration_benchmarks/swa.py "
                        "--data DIR "
                        f"--seeds {seed} --start {' '.join(map(str, starts))}"
                    ),
                }
            )
        log(
            f"seed {seed}, start {start}: "
            + "; ".join(
                f"{r['variant']} error {r['error']:.2f} ECE {r['ece']:.2f} NLL {r['nll']:.4f}"
                for r in rows[-len(VARIANTS) :]
            )
            + f" ({seconds:.0f} s)"
        )
    return rows


def merge_rows(path, rows):
    """Merges `rows` into the JSON list at `path` (same seed, start and variant: replaced)."""
    path = pathlib.Path(path)
    old = json.loads(path.read_text()) if path.exists() else []
    ident = lambda r: (r["dataset"], r["seed"], r["start_epoch"], r["variant"])  # noqa: E731
    new = {ident(r) for r in rows}
    merged = [r for r in old if ident(r) not in new] + list(rows)
    merged.sort(key=lambda r: (r["start_epoch"], r["seed"], VARIANTS.index(r["variant"])))
    path.write_text(json.dumps(merged, indent=1) + "\n")


def mean_sd(values, digits):
    sd = np.std(values, ddof=1) if len(values) > 1 else 0.0
    return f"{np.mean(values):.{digits}f} ± {sd:.{digits}f}"


def chosen_start(rows):
    """The start epoch whose SWA weights (BN recomputed) have the lowest validation NLL,
    averaged over the seeds that have every start (the test split plays no part)."""
    starts = sorted({r["start_epoch"] for r in rows})
    seeds = complete_seeds(rows)
    nll = {
        start: np.mean(
            [
                r["val_nll"]
                for r in rows
                if r["variant"] == "swa" and r["start_epoch"] == start and r["seed"] in seeds
            ]
        )
        for start in starts
    }
    return min(starts, key=lambda start: nll[start])


def complete_seeds(rows):
    """The seeds with a row for every start and variant of the file."""
    starts = {r["start_epoch"] for r in rows}
    have = collections.defaultdict(set)
    for r in rows:
        have[r["seed"]].add((r["start_epoch"], r["variant"]))
    wanted = {(start, variant) for start in starts for variant in VARIANTS}
    return sorted(seed for seed, done in have.items() if done >= wanted)


def summary(rows):
    """Markdown: the last iterate, SWA (BN recomputed) for each start epoch and, for the
    start chosen on validation, SWA with stale BN statistics: mean ± sd over the seeds, and
    on how many seeds each is below the last iterate in test error, ECE and NLL."""
    seeds = complete_seeds(rows)
    if not seeds:
        return "No seed has every start and variant yet.\n"
    rows = [r for r in rows if r["seed"] in seeds]
    epochs = rows[0]["epochs"]
    best = chosen_start(rows)
    by = {(r["start_epoch"], r["variant"], r["seed"]): r for r in rows}
    any_start = min(r["start_epoch"] for r in rows)
    last = [by[any_start, "last", s] for s in seeds]
    lines = [
        f"20 News, DAN-3 with batch norm (Table 1's network and training: Adam, {epochs} epochs);"
        f" {len(seeds)} seeds ({', '.join(map(str, seeds))}); mean ± sd over the seeds.",
        "",
        "| weights | epochs averaged | validation NLL | validation error % | test error % "
        "| ECE % | NLL | Brier | ECE % after temperature scaling | lower than the last "
        "iterate (error / ECE / NLL) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def line(name, averaged, chosen):
        cells = [
            mean_sd([r[m] for r in chosen], d)
            for m, d in (
                ("val_nll", 4),
                ("val_error", 2),
                ("error", 2),
                ("ece", 2),
                ("nll", 4),
                ("brier", 4),
                ("ece_temperature", 2),
            )
        ]
        if chosen is last:
            lower = "—"
        else:
            lower = " / ".join(
                f"{sum(r[m] < o[m] for r, o in zip(chosen, last, strict=True))}/{len(seeds)}"
                for m in ("error", "ece", "nll")
            )
        lines.append(f"| {name} | {averaged} | " + " | ".join(cells) + f" | {lower} |")

    line("last iterate", "—", last)
    for start in sorted({r["start_epoch"] for r in rows}):
        mark = " **(chosen)**" if start == best else ""
        line(
            f"SWA, BN recomputed{mark}",
            f"{start + 1}–{epochs}" if start + 1 < epochs else f"{epochs} (BN recomputed only)",
            [by[start, "swa", s] for s in seeds],
        )
    line(
        "SWA, stale BN statistics",
        f"{best + 1}–{epochs}",
        [by[best, "swa_stale", s] for s in seeds],
    )
    lines += [
        "",
        f"The start is chosen on the validation NLL of the averaged network (epochs {best + 1}"
        f"–{epochs}); the test split plays no part in it. Each row re-runs with its `command`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=None, help="the 20 News folder (or $NORMKIT_20NEWS_DATA)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--start",
        type=int,
        nargs="+",
        default=None,
        help="0-based epoch(s) from which the weights are averaged, one average each, all "
        "from one training [every epoch: 0 1 ... 7]",
    )
    parser.add_argument("--json", default=str(DEFAULT_JSON))
    parser.add_argument("--report", action="store_true", help="only print the summary")
    parser.add_argument(
        "--write-block",
        nargs=2,
        metavar=("FILE", "MARKER"),
        help="with --report: write the summary between <!-- MARKER --> and <!-- /MARKER -->",
    )
    args = parser.parse_args(argv)
    if args.report:
        text = summary(json.loads(pathlib.Path(args.json).read_text()))
        print(text)
        if args.write_block:
            write_block(*args.write_block, text)
        return
    config = dict(table1.CONFIGS["20news"])
    args.start = list(range(config["epochs"])) if args.start is None else args.start
    for start in args.start:
        if not 0 <= start < config["epochs"]:
            parser.error(f"--start must be in [0, {config['epochs']}). Received: {start}")
    table1.limit_threads()
    splits = text_data.load("20news", args.data)
    for seed in args.seeds:
        merge_rows(args.json, run_seed(splits, seed, args.start, config))


if __name__ == "__main__":
    main()
