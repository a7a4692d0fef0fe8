r"""The SNN paper's UCI benchmark: seven fully connected methods on the Fernández-Delgado et al.
UCI data sets, accuracy on the test half of `conxuntos.dat`.

Per data set and method: 15 % of the training half (stratified, seeded) is held out for
validation, every configuration of the grid (`snn_train.BUDGET_GRID` unless `--layers`,
`--units`, `--lr`, `--dropout` or `--paper-grid` say otherwise; the same for every method)
is trained on the other 85 % with early stopping on the validation accuracy, the best on
validation is chosen (ties: more layers) and its test accuracy is the row's `test`. One row
per data set and method is merged into `--json` as soon as it is done (rows already there
are skipped unless `--redo`), so an interrupted run resumes; a row's `command` names `--json`
when it is not the default file.

    python examples/snn_benchmarks/uci.py --data DIR                 # sets >= 1000 examples
    python examples/snn_benchmarks/uci.py --data DIR --sets small    # then the others
    python examples/snn_benchmarks/uci.py --data DIR --datasets abalone --methods snn
    python examples/snn_benchmarks/uci.py --data DIR --quick         # 2 sets, 1 depth: CI
    python examples/snn_benchmarks/uci.py --data DIR --methods snn --optimizer sgd \
        --lr 0.01 0.1 1 --dropout 0.05 0 --units 256 --epochs 100 \
        --json notebooks/data/snn_uci_sgd.json --datasets plant-shape  # a wider SNN grid

`DIR` is the folder of the data (or its tar archive). `--quick` trains 2 data sets, one
depth (4 layers of 32 units) for 3 epochs, writes no JSON unless `--json` is given.
"""

import argparse
import pathlib
import sys
import time

import numpy as np
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import snn_data  # noqa: E402
import snn_train  # noqa: E402

DEFAULT_JSON = str(
    pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "data" / "snn_uci.json"
)
#: The data sets of `--quick` (two of the >= 1000 sets, among the fastest to train).
QUICK_SETS = ("titanic", "contrac")
KEY = ("dataset", "method")


def validation_split(x, y, fraction, seed):
    """(x_fit, y_fit, x_val, y_val): a seeded hold-out, stratified when every class allows."""
    counts = np.bincount(y)
    stratify = (
        y if counts[counts > 0].min() >= 2 and len(np.unique(y)) <= fraction * len(y) else None
    )
    x_fit, x_val, y_fit, y_val = train_test_split(
        x, y, test_size=fraction, random_state=seed, stratify=stratify
    )
    return x_fit, y_fit, x_val, y_val


def run(dataset, method, grid, args, log=print):
    """One row: the chosen configuration's test accuracy on `dataset` (a `UCIDataset`)."""
    t0 = time.time()
    data = validation_split(dataset.x_train, dataset.y_train, 0.15, args.seed)
    config, model, val, epoch, per_config = snn_train.select(
        method,
        grid,
        data,
        ("classes", dataset.n_classes),
        seed=args.seed,
        epochs=args.epochs,
        patience=args.patience,
        batch_size=args.batch_size,
        optimizer=args.optimizer,
        log=log,
    )
    scores = model.predict(dataset.x_test, batch_size=1024, verbose=0)
    return {
        "dataset": dataset.name,
        "method": method,
        "n_examples": dataset.n_examples,
        "n_classes": dataset.n_classes,
        "layers": config.layers,
        "units": config.units,
        "lr": config.lr,
        "dropout": config.dropout,
        "optimizer": args.optimizer,
        "epoch": epoch,
        "validation": round(float(val), 6),
        "test": round(snn_train.accuracy(dataset.y_test, scores), 6),
        "validation_by_config": per_config,
        "wall_s": round(time.time() - t0, 1),
        "seed": args.seed,
        "command": snn_train.command(
            "uci.py",
            "NORMKIT_UCI121_DATA",
            ["--datasets", dataset.name, "--methods", method, *snn_train.training_args(args)]
            + json_args(args.json),
        ),
    }


def json_args(path):
    """`--json PATH` for a row's command when its rows go to another file than the default
    (relative to the repository when inside it), so that re-running it replaces that row."""
    if not path:
        return []
    path, default = pathlib.Path(path).resolve(), pathlib.Path(DEFAULT_JSON)
    if path == default:
        return []
    root = default.parents[2]
    return ["--json", str(path.relative_to(root)) if path.is_relative_to(root) else str(path)]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    snn_train.add_common_args(parser, None, "2 data sets, 1 depth, 3 epochs (CI)")
    parser.add_argument("--datasets", nargs="+", help="these data sets (default: --sets)")
    parser.add_argument(
        "--sets",
        choices=("large", "small", "all"),
        default="large",
        help="large: the complete sets with >= 1000 examples; small: the others",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.units, args.epochs, args.patience = [4], [32], 3, 3
    elif args.json is None:
        args.json = DEFAULT_JSON
    return args


def chosen_sets(uci, args):
    if args.datasets:
        return args.datasets
    if args.quick:
        names = [n for n in QUICK_SETS if n in uci.complete()]
        return names or uci.complete()[:2]
    large = set(uci.complete(1000))
    names = {
        "large": [n for n in uci.complete() if n in large],
        "small": [n for n in uci.complete() if n not in large],
        "all": uci.complete(),
    }[args.sets]
    return sorted(names, key=lambda n: uci.info(n)["n_examples"])  # cheap ones first


def main(argv=None):
    args = parse_args(argv)
    uci = snn_data.UCI121(args.data)
    grid = snn_train.grid_from(args)
    done = (
        {tuple(r[k] for k in KEY) for r in snn_train.load_rows(args.json)} if args.json else set()
    )
    rows = []
    names = chosen_sets(uci, args)
    print(f"{len(names)} data sets x {len(args.methods)} methods, grid {grid}", flush=True)
    for i, name in enumerate(names):
        dataset = uci.load(name)
        for method in args.methods:
            if (name, method) in done and not args.redo:
                continue
            print(
                f"[{i + 1}/{len(names)}] {name} ({dataset.n_examples} examples) {method}",
                flush=True,
            )
            row = run(dataset, method, grid, args, log=lambda s: print(s, flush=True))
            message = (
                f"    -> {row['layers']} layers, validation {row['validation']:.4f}, "
                f"test {row['test']:.4f} ({row['wall_s']} s)"
            )
            snn_train.record(row, rows, args.json, KEY, message)
    return rows


if __name__ == "__main__":
    main()
