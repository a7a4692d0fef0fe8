"""The SNN paper's HTRU2 benchmark: seven fully connected methods, 10-fold cross-validated AUC.

The folds are stratified and seeded (`--seed`). In each fold, the features are standardized
with the training part's mean and standard deviation, 15 % of the training part (stratified)
is held out for validation, every configuration of the grid (the same for every method) is
trained with early stopping on the validation AUC, the best on validation is chosen (ties:
more layers) and its AUC on the fold's test part is the row's `test`. The default grid is
smaller than the UCI one (HTRU2 has 8 features and 10 folds to train): depths 2, 8 and 32 of
64 units, batch 256, at most 30 epochs with patience 5. Rows (one per fold and method) are
merged into `--json` as they are done; rows already there are skipped unless `--redo`.

    python examples/snn_benchmarks/htru2.py --data DIR
    python examples/snn_benchmarks/htru2.py --data DIR --folds 0 --methods snn
    python examples/snn_benchmarks/htru2.py --data DIR --quick        # 1 fold, 1 depth: CI

`DIR` holds `HTRU_2.arff` (or `HTRU_2.csv`); `--quick` writes no JSON unless `--json` is given.
"""

import argparse
import pathlib
import sys
import time

import numpy as np
from sklearn.model_selection import StratifiedKFold, train_test_split

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import snn_data  # noqa: E402
import snn_train  # noqa: E402

DEFAULT_JSON = str(
    pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "data" / "snn_htru2.json"
)
KEY = ("dataset", "fold", "method")
N_FOLDS = 10


def folds(y, seed):
    """The 10 stratified, seeded folds: a list of (train indices, test indices)."""
    splitter = StratifiedKFold(n_splits=N_FOLDS, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(y)), y))


def fold_data(x, y, train, test, seed):
    """((x_fit, y_fit, x_val, y_val), x_test, y_test), standardized on the training part."""
    mean, std = x[train].mean(0), x[train].std(0)
    std[std == 0] = 1.0
    z = ((x - mean) / std).astype("float32")
    x_fit, x_val, y_fit, y_val = train_test_split(
        z[train], y[train], test_size=0.15, random_state=seed, stratify=y[train]
    )
    return (x_fit, y_fit.astype("float32"), x_val, y_val), z[test], y[test]


def run(x, y, fold, split, method, grid, args, log=print):
    t0 = time.time()
    data, x_test, y_test = fold_data(x, y, *split, args.seed)
    config, model, val, epoch, per_config = snn_train.select(
        method,
        grid,
        data,
        ("binary", 1),
        seed=args.seed,
        epochs=args.epochs,
        patience=args.patience,
        batch_size=args.batch_size,
        optimizer=args.optimizer,
        log=log,
    )
    scores = model.predict(x_test, batch_size=1024, verbose=0)
    return {
        "dataset": "htru2",
        "fold": fold,
        "method": method,
        "n_examples": int(len(y)),
        "layers": config.layers,
        "units": config.units,
        "lr": config.lr,
        "dropout": config.dropout,
        "optimizer": args.optimizer,
        "epoch": epoch,
        "validation": round(float(val), 6),
        "test": round(snn_train.auc(y_test, scores), 6),
        "validation_by_config": per_config,
        "wall_s": round(time.time() - t0, 1),
        "seed": args.seed,
        "command": snn_train.command(
            "htru2.py",
            "NORMKIT_HTRU2_DATA",
            ["--folds", fold, "--methods", method, *snn_train.training_args(args)],
        ),
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    snn_train.add_common_args(parser, None, "1 fold, 1 depth, 2 epochs (CI)")
    parser.set_defaults(layers=[2, 8, 32], units=[64], batch_size=256, epochs=30, patience=5)
    parser.add_argument("--folds", nargs="+", type=int, default=list(range(N_FOLDS)))
    args = parser.parse_args(argv)
    if args.quick:
        args.folds, args.layers, args.units, args.epochs, args.patience = [0], [4], [16], 2, 2
    elif args.json is None:
        args.json = DEFAULT_JSON
    return args


def main(argv=None):
    args = parse_args(argv)
    x, y = snn_data.load_htru2(args.data)
    grid = snn_train.grid_from(args)
    done = (
        {tuple(r[k] for k in KEY) for r in snn_train.load_rows(args.json)} if args.json else set()
    )
    splits = folds(y, args.seed)
    rows = []
    print(
        f"HTRU2 {x.shape}: folds {args.folds} x {len(args.methods)} methods, grid {grid}",
        flush=True,
    )
    for fold in args.folds:
        for method in args.methods:
            if ("htru2", fold, method) in done and not args.redo:
                continue
            print(f"fold {fold} {method}", flush=True)
            row = run(
                x, y, fold, splits[fold], method, grid, args, log=lambda s: print(s, flush=True)
            )
            message = (
                f"    -> {row['layers']} layers, validation AUC {row['validation']:.4f}, "
                f"test AUC {row['test']:.4f} ({row['wall_s']} s)"
            )
            snn_train.record(row, rows, args.json, KEY, message)
    return rows


if __name__ == "__main__":
    main()
