"""Train the QRN ("2rb") and an LSTM baseline on generated bAbI-style tasks 1 and 2.

Both models get the same input module, hidden size, optimizer, batch size and number of
epochs; the reported accuracy is the test accuracy after the last epoch (no selection on
the test set). Learning curves (test accuracy per epoch) can be saved for the notebook.

    python examples/babi/train.py --task 1 --epochs 40 --save notebooks/data/qrn_babi_curves.json
    python examples/babi/train.py --task 2 --epochs 120 --save notebooks/data/qrn_babi_curves.json
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


class TestAccuracy(keras.callbacks.Callback):
    """Records the accuracy on held-out data after every epoch (a learning curve)."""

    def __init__(self, data):
        super().__init__()
        self.data, self.curve = data, []

    def on_epoch_end(self, epoch, logs=None):
        (inputs, answers), batch = self.data, 256
        accuracy = self.model.evaluate(inputs, answers, batch_size=batch, verbose=0)[1]
        self.curve.append(float(accuracy))


def train(
    kind, task, epochs=40, dim=50, n_train=1000, n_test=1000, seed=0, verbose=0, **model_kwargs
):
    """Trains one model; returns `(test_accuracy, curve, model, data)`."""
    keras.utils.set_random_seed(seed)
    train_data, test_data, vocab = generate.load(task, n_train, n_test, seed=seed)
    (stories, questions), answers = train_data
    shape = stories.shape[1:] + (len(vocab),)
    build = babi_model.build_qrn if kind == "qrn" else babi_model.build_lstm
    net = babi_model.compile_model(build(*shape, dim=dim, **model_kwargs))
    curve = TestAccuracy(test_data)
    net.fit(
        [stories, questions],
        answers,
        batch_size=32,
        epochs=epochs,
        callbacks=[curve],
        verbose=verbose,
    )
    return curve.curve[-1], curve.curve, net, (train_data, test_data, vocab)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--model", nargs="+", default=["qrn", "lstm"])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--update-gate-bias", type=float, default=-2.5)
    parser.add_argument("--save", default=None, help="JSON file for the learning curves")
    args = parser.parse_args()
    results = {}
    for task in args.task:
        for kind in args.model:
            start = time.time()
            kwargs = {"update_gate_bias": args.update_gate_bias} if kind == "qrn" else {}
            accuracy, curve, _, _ = train(
                kind, task, args.epochs, args.dim, args.n_train, seed=args.seed, **kwargs
            )
            seconds = time.time() - start
            suffix = "" if args.n_train == 1000 else f"_{args.n_train}"
            results[f"task{task}_{kind}{suffix}"] = {
                "test_accuracy": accuracy,
                "curve": curve,
                "epochs": args.epochs,
                "seconds": seconds,
                "n_train": args.n_train,
            }
            print(
                f"task {task} {kind:4s}: test accuracy {100 * accuracy:.1f} % "
                f"({args.n_train} training questions, {args.epochs} epochs, {seconds:.0f} s)",
                flush=True,
            )
    if args.save:  # merged into an existing file, so tasks can be trained separately
        path = pathlib.Path(args.save)
        saved = json.loads(path.read_text()) if path.exists() else {}
        saved.update(results)
        path.write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
