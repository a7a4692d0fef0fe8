"""Train the QRN ("2rb") and an LSTM baseline on generated bAbI-style tasks 1 and 2.

Protocol (the test set is never used for any choice): the last 10 % of the 1,000 training
questions are a validation split; each model trains on the other 90 % for `--epochs`
epochs, keeping the weights of the epoch with the lowest validation loss, and `--restarts`
runs (seeds `seed, seed + 1, ...`) are trained, the one with the lowest validation loss
being selected. The reported accuracy is that selected model's test accuracy. Test accuracy
per epoch is also recorded, only to draw learning curves. Both models get the same input
module (with Keras's default initialization for the LSTM), hidden size, batch size, epochs,
validation split and restarts; the QRN uses the paper's Adagrad (lr 0.5), the LSTM Adam
(lr 0.003), better for it than Adagrad 0.5 (`--lstm-optimizer`, see README.md).

    python examples/babi/train.py --task 1 2 --save notebooks/data/qrn_babi_curves.json
"""

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import generate  # noqa: E402
import model as babi_model  # noqa: E402


class Curves(keras.callbacks.Callback):
    """Per epoch: training, validation and test accuracy, validation loss; keeps the weights
    of the epoch with the lowest validation loss (restored at the end of training)."""

    def __init__(self, validation, test):
        super().__init__()
        self.validation, self.test = validation, test
        self.curves = {"train": [], "val": [], "test": [], "val_loss": []}
        self.best_loss, self.best_epoch, self.best_weights = float("inf"), None, None

    def _evaluate(self, data):
        inputs, answers = data
        return self.model.evaluate(inputs, answers, batch_size=256, verbose=0)[:2]

    def on_epoch_end(self, epoch, logs=None):
        val_loss, val_accuracy = self._evaluate(self.validation)
        self.curves["train"].append(float(logs["accuracy"]))
        self.curves["val"].append(float(val_accuracy))
        self.curves["val_loss"].append(float(val_loss))
        self.curves["test"].append(float(self._evaluate(self.test)[1]))  # curve only
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch = val_loss, epoch
            self.best_weights = self.model.get_weights()

    def on_train_end(self, logs=None):
        self.model.set_weights(self.best_weights)


def split(data, val_fraction):
    """`(train, validation)`: the last `val_fraction` of the examples are the validation."""
    (stories, questions), answers = data
    k = len(answers) - max(1, round(val_fraction * len(answers)))
    return ((stories[:k], questions[:k]), answers[:k]), ((stories[k:], questions[k:]), answers[k:])


def train_once(
    kind,
    task,
    epochs=60,
    dim=50,
    n_train=1000,
    n_test=1000,
    seed=0,
    data_seed=0,
    val_fraction=0.1,
    optimizer=None,
    verbose=0,
    **model_kwargs,
):
    """One run; returns `(test_accuracy, info, model, data)` with the weights of the epoch of
    lowest validation loss; `info` holds the curves, best epoch and validation loss."""
    keras.utils.set_random_seed(seed)
    train_data, test_data, vocab = generate.load(task, n_train, n_test, seed=data_seed)
    fit_data, val_data = split(train_data, val_fraction)
    (stories, questions), answers = fit_data
    shape = stories.shape[1:] + (len(vocab),)
    if kind == "qrn":
        net = babi_model.build_qrn(*shape, dim=dim, **model_kwargs)
    else:
        net = babi_model.build_lstm(*shape, dim=dim, **model_kwargs)
    optimizer = optimizer or ("adagrad" if kind == "qrn" else "adam")
    babi_model.compile_model(net, optimizer)
    curves = Curves(val_data, test_data)
    net.fit(
        [stories, questions],
        answers,
        batch_size=32,
        epochs=epochs,
        callbacks=[curves],
        verbose=verbose,
    )
    (test_inputs, test_answers) = test_data
    accuracy = net.evaluate(test_inputs, test_answers, batch_size=256, verbose=0)[1]
    info = dict(
        curves.curves,
        seed=seed,
        best_epoch=curves.best_epoch + 1,
        val_loss=curves.best_loss,
        val_accuracy=curves.curves["val"][curves.best_epoch],
        optimizer=optimizer,
    )
    return float(accuracy), info, net, (train_data, test_data, vocab)


def run(kind, task, epochs=60, restarts=1, seed=0, verbose=0, **kwargs):
    """`restarts` runs with seeds `seed, seed + 1, ...`; the one with the lowest validation
    loss is selected. Returns `(test_accuracy, info, model, data)` of that run, `info["runs"]`
    summarizing every run."""
    best, runs = None, []
    for k in range(restarts):
        result = train_once(kind, task, epochs=epochs, seed=seed + k, **kwargs)
        info = result[1]
        runs.append(
            {key: info[key] for key in ("seed", "best_epoch", "val_loss", "val_accuracy")}
            | {"test_accuracy": result[0]}
        )
        if verbose:
            print(f"  run {k}: {runs[-1]}", flush=True)
        if best is None or info["val_loss"] < best[1]["val_loss"]:
            best = result
    best[1]["runs"] = runs
    return best


def train(kind, task, epochs=60, restarts=1, seed=0, verbose=0, **kwargs):
    """As `run`, but returns `(test_accuracy, test_curve, model, data)`, the test curve being
    the selected run's test accuracy per epoch."""
    accuracy, info, net, data = run(kind, task, epochs, restarts, seed, verbose, **kwargs)
    return accuracy, info["test"], net, data


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--model", nargs="+", default=["qrn", "lstm"])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--qrn-optimizer", default="adagrad", choices=["adagrad", "adam"])
    parser.add_argument("--lstm-optimizer", default="adam", choices=["adagrad", "adam"])
    parser.add_argument("--update-gate-bias", type=float, default=-2.5)
    parser.add_argument("--weight-decay", type=float, default=0.001)
    parser.add_argument("--last-bidirectional", action="store_true")
    parser.add_argument(
        "--keras-init",
        action="store_true",
        help="Keras's default initialization instead of the reference's",
    )
    parser.add_argument("--save", default=None, help="JSON file for the learning curves")
    parser.add_argument("--tag", default="", help="suffix of the result names in --save")
    args = parser.parse_args()
    results = {}
    for task in args.task:
        for kind in args.model:
            start = time.time()
            kwargs = {}
            if kind == "qrn":
                kwargs = {
                    "update_gate_bias": args.update_gate_bias,
                    "weight_decay": args.weight_decay,
                    "last_bidirectional": args.last_bidirectional,
                    "init_scale": None if args.keras_init else babi_model.INIT_SCALE,
                }
            optimizer = args.qrn_optimizer if kind == "qrn" else args.lstm_optimizer
            accuracy, info, _, _ = run(
                kind,
                task,
                args.epochs,
                args.restarts,
                args.seed,
                verbose=1,
                dim=args.dim,
                n_train=args.n_train,
                optimizer=optimizer,
                **kwargs,
            )
            seconds = time.time() - start
            suffix = ("" if args.n_train == 1000 else f"_{args.n_train}") + args.tag
            results[f"task{task}_{kind}{suffix}"] = {
                "test_accuracy": accuracy,
                "curve": info["test"],
                "train_curve": info["train"],
                "val_curve": info["val"],
                "best_epoch": info["best_epoch"],
                "seed": info["seed"],
                "runs": info["runs"],
                "optimizer": optimizer,
                "epochs": args.epochs,
                "restarts": args.restarts,
                "seconds": seconds,
                "n_train": args.n_train,
            }
            print(
                f"task {task} {kind:4s}: test accuracy {100 * accuracy:.1f} % (run of seed "
                f"{info['seed']}, epoch {info['best_epoch']}, selected on validation; "
                f"{args.n_train} training questions, {args.epochs} epochs, {args.restarts} "
                f"restarts, {seconds:.0f} s)",
                flush=True,
            )
    if args.save:  # merged into an existing file, so tasks can be trained separately
        path = pathlib.Path(args.save)
        saved = json.loads(path.read_text()) if path.exists() else {}
        saved.update(results)
        path.write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
