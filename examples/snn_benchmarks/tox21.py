"""The SNN paper's Tox21 benchmark, by depth: SNN, BatchNorm and LayerNorm networks of 2 to 32
layers, mean AUC over the 12 assays, 5 repetitions.

Features: ECFP4 (RDKit Morgan fingerprints, radius 2, 2048 bits), the standard circular
fingerprint for toxicity prediction and the one every RDKit install computes the same way;
the paper's DeepTox dense features are not available offline, so the absolute AUCs are not the
paper's (see README.md). The fingerprints are standardized with the training part's
statistics. DeepChem's copy of Tox21 has no challenge test split, so the molecules are split
once, seeded (`--split-seed`), into 80 % training, 10 % validation and 10 % test; the 5
repetitions (`--repetitions`) are 5 training seeds on that split. Each network is multi-task
(12 sigmoid outputs, cross-entropy on the measured labels only) and trains with early stopping
on the validation mean AUC; its test mean AUC is the row's `test`. Every depth is reported (no
choice over depths: the depth is the table's axis); width, rate and dropout are fixed and the
same for every method (`--units`, `--lr`, `--dropout`). Rows (method, depth, repetition) are
merged into `--json` as they are done.

    python examples/snn_benchmarks/tox21.py --data DIR
    python examples/snn_benchmarks/tox21.py --data DIR --quick     # 1 depth, 1 repetition
"""

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import snn_data  # noqa: E402
import snn_train  # noqa: E402

DEFAULT_JSON = str(
    pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "data" / "snn_tox21.json"
)
KEY = ("dataset", "method", "layers", "repetition")
METHODS = ("snn", "batchnorm", "layernorm")


def split(n, seed):
    """Seeded 80 / 10 / 10 % index split of n molecules."""
    order = np.random.default_rng(seed).permutation(n)
    a, b = int(0.8 * n), int(0.9 * n)
    return order[:a], order[a:b], order[b:]


def features(smiles, labels, n_bits, split_seed):
    """(x_fit, y_fit, x_val, y_val, x_test, y_test): standardized ECFP4, invalid SMILES dropped."""
    x, valid = snn_data.morgan_fingerprints(smiles, radius=2, n_bits=n_bits)
    x, y = x[valid], labels[valid]
    fit, val, test = split(len(x), split_seed)
    mean, std = x[fit].mean(0), x[fit].std(0)
    std[std == 0] = 1.0
    x = ((x - mean) / std).astype("float32")
    return x[fit], y[fit], x[val], y[val], x[test], y[test]


def run(arrays, method, layers, repetition, args):
    t0 = time.time()
    x_fit, y_fit, x_val, y_val, x_test, y_test = arrays
    config = snn_train.Config(layers, args.units[0], args.lr[0], args.dropout[0])
    model, val, epoch = snn_train.fit_one(
        method,
        config,
        (x_fit, y_fit, x_val, y_val),
        ("multitask", y_fit.shape[1]),
        seed=repetition,
        epochs=args.epochs,
        patience=args.patience,
        batch_size=args.batch_size,
        optimizer=args.optimizer,
    )
    scores = model.predict(x_test, batch_size=1024, verbose=0)
    per_task = {
        task: round(snn_train.auc(y_test[:, k], scores[:, k]), 6)
        for k, task in enumerate(snn_data.TOX21_TASKS)
    }
    return {
        "dataset": "tox21",
        "method": method,
        "layers": layers,
        "repetition": repetition,
        "n_examples": int(len(x_fit) + len(x_val) + len(x_test)),
        "units": config.units,
        "lr": config.lr,
        "dropout": config.dropout,
        "optimizer": args.optimizer,
        "features": f"ECFP4 (RDKit Morgan radius 2, {args.bits} bits), standardized",
        "epoch": epoch,
        "validation": round(float(val), 6),
        "test": round(float(np.nanmean(list(per_task.values()))), 6),
        "test_by_assay": per_task,
        "wall_s": round(time.time() - t0, 1),
        "seed": repetition,
        "command": snn_train.command(
            "tox21.py",
            "NORMKIT_TOX21_DATA",
            ["--methods", method, "--layers", layers, "--repetitions", repetition]
            + ["--units", config.units, "--lr", f"{config.lr:g}", "--dropout"]
            + [f"{config.dropout:g}", "--optimizer", args.optimizer, "--epochs", args.epochs]
            + ["--patience", args.patience, "--batch-size", args.batch_size]
            + ["--bits", args.bits, "--split-seed", args.split_seed],
        ),
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    snn_train.add_common_args(parser, None, "1 depth, 1 repetition, 2 epochs (CI)")
    parser.set_defaults(methods=list(METHODS), units=[256], epochs=30, patience=5)
    parser.add_argument("--repetitions", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--bits", type=int, default=2048)
    parser.add_argument("--split-seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.units, args.repetitions, args.epochs = [2], [32], [0], 2
        args.bits = 512
    elif args.json is None:
        args.json = DEFAULT_JSON
    return args


def main(argv=None):
    args = parse_args(argv)
    smiles, labels, _ = snn_data.load_tox21(args.data)
    arrays = features(smiles, labels, args.bits, args.split_seed)
    print(
        f"Tox21: {len(arrays[0])} / {len(arrays[2])} / {len(arrays[4])} molecules "
        f"(training / validation / test), {arrays[0].shape[1]} features",
        flush=True,
    )
    done = (
        {tuple(r[k] for k in KEY) for r in snn_train.load_rows(args.json)} if args.json else set()
    )
    rows = []
    for repetition in args.repetitions:
        for layers in args.layers:
            for method in args.methods:
                if ("tox21", method, layers, repetition) in done and not args.redo:
                    continue
                row = run(arrays, method, layers, repetition, args)
                message = (
                    f"{method:10s} {layers:2d} layers, repetition {repetition}: validation "
                    f"{row['validation']:.4f}, test {row['test']:.4f} (epoch {row['epoch']}, "
                    f"{row['wall_s']} s)"
                )
                snn_train.record(row, rows, args.json, KEY, message)
    return rows


if __name__ == "__main__":
    main()
