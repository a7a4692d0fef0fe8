"""What the three benchmark scripts share: the grid, one early-stopped fit, the choice of a
configuration on validation only, and the results JSON (merged row by row).

The protocol (the paper's, within the stated budget): every configuration of the grid is
trained on the training part with the validation part held out; after every epoch the
validation figure (accuracy, or AUC for binary tasks) is computed, the weights of the best
epoch are kept (ties: the earlier epoch) and training stops after `patience` epochs without
a better one or at `epochs`. The configuration of best validation figure is chosen (ties: more
layers, then lower learning rate, then higher dropout, as the paper breaks them), and its kept
weights are evaluated once on the test part. The test part is never used for any choice.
"""

import dataclasses
import itertools
import json
import os
import pathlib
import shlex
import sys
import time

import keras
import numpy as np
import snn_models
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from result_commands import environment_prefix  # noqa: E402

#: The budgeted grid, identical for every method (see README.md): depth is the point, so
#: every depth of the paper's range is in it; width, learning rate and dropout are fixed.
BUDGET_GRID = {"layers": (2, 4, 8, 16, 32), "units": (128,), "lr": (1e-3,), "dropout": (0.05,)}
#: The paper's SNN grid (supplement S4 as public reproductions read it), for machines that
#: allow it (the paper used SGD; here `--optimizer sgd`).
PAPER_GRID = {
    "layers": (2, 3, 4, 8, 16, 32),
    "units": (1024, 512, 256),
    "lr": (0.01, 0.1, 1.0),
    "dropout": (0.05, 0.0),
}


@dataclasses.dataclass(frozen=True)
class Config:
    layers: int
    units: int
    lr: float
    dropout: float


def configs(grid):
    """Every configuration of a grid (a dict of tuples), in a fixed order."""
    return [
        Config(int(a), int(b), float(c), float(d))
        for a, b, c, d in itertools.product(
            grid["layers"], grid["units"], grid["lr"], grid["dropout"]
        )
    ]


def tie_key(score, config):
    """Sort key of the choice: best score, then more layers, lower rate, higher dropout."""
    return (score, config.layers, -config.lr, config.dropout)


def accuracy(y_true, scores):
    return float(np.mean(np.argmax(scores, axis=-1) == y_true))


def auc(y_true, scores):
    """ROC AUC; for (n, k) labels with NaN (multi-task), the mean over the tasks' AUCs."""
    y_true = np.asarray(y_true, dtype="float64")
    scores = np.asarray(scores, dtype="float64").reshape(y_true.shape)
    if y_true.ndim == 1:
        seen = ~np.isnan(y_true)
        if len(np.unique(y_true[seen])) < 2:
            return float("nan")  # undefined with one class
        return float(roc_auc_score(y_true[seen], scores[seen]))
    values = []
    for k in range(y_true.shape[1]):
        seen = ~np.isnan(y_true[:, k])
        if len(np.unique(y_true[seen, k])) == 2:
            values.append(roc_auc_score(y_true[seen, k], scores[seen, k]))
    return float(np.mean(values))


class BestEpoch(keras.callbacks.Callback):
    """After each epoch: the validation figure; keeps the best weights; stops on patience."""

    def __init__(self, x_val, y_val, metric, patience):
        super().__init__()
        self.x_val, self.y_val, self.metric, self.patience = x_val, y_val, metric, patience
        self.best, self.best_epoch, self.best_weights, self.curve = -np.inf, 0, None, []

    def on_epoch_end(self, epoch, logs=None):
        scores = self.model.predict(self.x_val, batch_size=1024, verbose=0)
        value = self.metric(self.y_val, scores)
        if not np.isfinite(value):
            value = -np.inf
        self.curve.append(value)
        if value > self.best:
            self.best, self.best_epoch = value, epoch + 1
            self.best_weights = self.model.get_weights()
        elif epoch + 1 - self.best_epoch >= self.patience:
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.best_weights is not None:
            self.model.set_weights(self.best_weights)


def masked_binary_crossentropy(y_true, y_pred):
    """Binary cross-entropy over the measured labels only (NaN = not measured)."""
    ops = keras.ops
    seen = ops.logical_not(ops.isnan(y_true))
    y = ops.where(seen, y_true, ops.zeros_like(y_true))
    p = ops.clip(y_pred, 1e-7, 1 - 1e-7)
    loss = -(y * ops.log(p) + (1 - y) * ops.log(1 - p))
    weight = ops.cast(seen, loss.dtype)
    return ops.sum(loss * weight, axis=-1) / ops.maximum(ops.sum(weight, axis=-1), 1.0)


def fit_one(method, config, data, task, *, seed, epochs, patience, batch_size, optimizer="adam"):
    """Train one configuration; returns (model, best validation figure, best epoch).

    `data` is `(x_fit, y_fit, x_val, y_val)`; `task` is `("classes", n_classes)`,
    `("binary", 1)` or `("multitask", n_tasks)` (labels with NaN where not measured).
    """
    x_fit, y_fit, x_val, y_val = data
    kind, n_out = task
    keras.utils.set_random_seed(seed)
    if kind == "classes":
        output, loss, metric = "softmax", "sparse_categorical_crossentropy", accuracy
    elif kind == "binary":
        output, loss, metric = "sigmoid", "binary_crossentropy", auc
    else:
        output, loss, metric = "sigmoid", masked_binary_crossentropy, auc
    model = snn_models.build(
        method, x_fit.shape[1], n_out, config.layers, config.units, config.dropout, output
    )
    opt = (
        keras.optimizers.SGD(config.lr) if optimizer == "sgd" else keras.optimizers.Adam(config.lr)
    )
    model.compile(optimizer=opt, loss=loss)
    best = BestEpoch(x_val, y_val, metric, patience)
    model.fit(
        x_fit,
        y_fit,
        batch_size=batch_size,
        epochs=epochs,
        shuffle=True,
        verbose=0,
        callbacks=[best],
    )
    return model, best.best, best.best_epoch


def select(method, grid, data, task, *, seed, epochs, patience, batch_size, optimizer, log=print):
    """Fit every configuration; returns (chosen config, its model, val, epoch, {layers: val})."""
    results = []
    for config in configs(grid):
        t0 = time.time()
        model, val, epoch = fit_one(
            method,
            config,
            data,
            task,
            seed=seed,
            epochs=epochs,
            patience=patience,
            batch_size=batch_size,
            optimizer=optimizer,
        )
        log(
            f"    {method:10s} {config.layers:2d} layers: validation {val:.4f} "
            f"(epoch {epoch}, {time.time() - t0:.1f} s)"
        )
        results.append((tie_key(val, config), config, model, val, epoch))
    key, config, model, val, epoch = max(results, key=lambda r: r[0])
    per_config = {
        f"{c.layers}x{c.units}/lr{c.lr:g}/do{c.dropout:g}": round(float(v), 6)
        for _, c, _, v, _ in results
    }
    return config, model, val, epoch, per_config


def grid_args(grid):
    """The command-line arguments that select `grid`."""
    return [
        "--layers", *map(str, grid["layers"]),
        "--units", *map(str, grid["units"]),
        "--lr", *(f"{v:g}" for v in grid["lr"]),
        "--dropout", *(f"{v:g}" for v in grid["dropout"]),
    ]  # fmt: skip


def command(script, data_env, extra):
    """A shell command that re-runs one row: the environment it ran in (the backend, and
    `PYTHONHASHSEED` and the thread counts when set: `examples/result_commands.py`), then the
    script, the data path as its environment variable."""
    return " ".join(
        [environment_prefix(), "python", f"examples/snn_benchmarks/{script}"]
        + ["--data", f'"${data_env}"']
        + [shlex.quote(str(a)) for a in extra]
    )


def load_rows(path):
    path = pathlib.Path(path)
    if not path.exists():
        return []
    return json.loads(path.read_text())


def record(row, rows, path, key_fields, message):
    """A finished row: print `message`, append the row to `rows` and, when `path` is set,
    merge it into that JSON at once (an interrupted run keeps every row it finished)."""
    print(message, flush=True)
    rows.append(row)
    if path:
        merge_rows(path, [row], key_fields)


def merge_rows(path, new_rows, key_fields):
    """Merge rows into the JSON list at `path` (a row replaces one with the same key)."""
    rows = load_rows(path)
    index = {tuple(r[k] for k in key_fields): i for i, r in enumerate(rows)}
    for row in new_rows:
        key = tuple(row[k] for k in key_fields)
        if key in index:
            rows[index[key]] = row
        else:
            index[key] = len(rows)
            rows.append(row)
    rows.sort(
        key=lambda r: tuple(
            str(r[k]) if isinstance(r[k], str) else f"{r[k]:08.3f}" for k in key_fields
        )
    )
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(rows, indent=1) + "\n")
    os.replace(tmp, path)
    return rows


def add_common_args(parser, default_json, quick_help):
    parser.add_argument("--data", required=True, help="the data folder (or file, or archive)")
    parser.add_argument("--json", default=default_json, help="results JSON, merged row by row")
    parser.add_argument(
        "--methods", nargs="+", default=list(snn_models.METHODS), choices=snn_models.METHODS
    )
    parser.add_argument("--layers", nargs="+", type=int, default=list(BUDGET_GRID["layers"]))
    parser.add_argument("--units", nargs="+", type=int, default=list(BUDGET_GRID["units"]))
    parser.add_argument("--lr", nargs="+", type=float, default=list(BUDGET_GRID["lr"]))
    parser.add_argument("--dropout", nargs="+", type=float, default=list(BUDGET_GRID["dropout"]))
    parser.add_argument(
        "--paper-grid",
        action="store_true",
        help="the paper's SNN grid for every method (with --optimizer sgd)",
    )
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    parser.add_argument("--epochs", type=int, default=50, help="at most this many epochs")
    parser.add_argument("--patience", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--redo", action="store_true", help="re-run rows already in --json")
    parser.add_argument("--quick", action="store_true", help=quick_help)


def grid_from(args):
    if args.paper_grid:
        return dict(PAPER_GRID)
    return {
        "layers": tuple(args.layers),
        "units": tuple(args.units),
        "lr": tuple(args.lr),
        "dropout": tuple(args.dropout),
    }


def training_args(args):
    """The arguments (besides data, selection and output) that a row's command repeats."""
    return [
        *grid_args(grid_from(args)),
        "--optimizer", args.optimizer,
        "--epochs", args.epochs,
        "--patience", args.patience,
        "--batch-size", args.batch_size,
        "--seed", args.seed,
    ]  # fmt: skip
