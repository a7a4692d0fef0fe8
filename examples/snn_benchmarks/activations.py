"""Activation statistics of a deep SNN on a real UCI data set, with
`keras_normkit.callbacks.ActivationStatistics`: every hidden layer's mean and variance on a
fixed probe batch of training inputs, before training and after every epoch.

The network is the benchmark's SNN (`snn_models.build("snn", ...)`: LeCun-normal `Dense`,
`SELU`, `AlphaDropout` 0.05) with `--layers` hidden layers of `--units` units, trained with
SGD (`--lr` 0.1, batch 128; `--optimizer adam` for Adam) on the training half of the `conxuntos.dat` split. The statistics go to
`--json` (by default `notebooks/data/snn_activations.json`, a list of runs merged by data
set, depth, optimizer and rate).

    python examples/snn_benchmarks/activations.py --data DIR --dataset abalone --layers 16
"""

import argparse
import pathlib
import sys
import time

import keras

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import snn_data  # noqa: E402
import snn_models  # noqa: E402
import snn_train  # noqa: E402

from keras_normkit.callbacks import ActivationStatistics  # noqa: E402

DEFAULT_JSON = str(
    pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "data" / "snn_activations.json"
)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--dataset", default="abalone")
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--probe", type=int, default=512, help="probe batch size")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="sgd")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    t0 = time.time()
    data = snn_data.UCI121(args.data).load(args.dataset)
    keras.utils.set_random_seed(args.seed)
    model = snn_models.build(
        "snn", data.x_train.shape[1], data.n_classes, args.layers, args.units, dropout=0.05
    )
    optimizer = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD}[args.optimizer]
    model.compile(optimizer(args.lr), "sparse_categorical_crossentropy")
    hidden = snn_models.hidden_layer_names(model)
    stats = ActivationStatistics(data.x_train[: args.probe], layers=hidden, log_values=False)
    model.fit(
        data.x_train, data.y_train, batch_size=128, epochs=args.epochs, verbose=0, callbacks=[stats]
    )
    scores = model.predict(data.x_test, verbose=0)
    result = {
        "dataset": args.dataset,
        "n_examples": data.n_examples,
        "layers": args.layers,
        "units": args.units,
        "optimizer": args.optimizer,
        "lr": args.lr,
        "epochs": stats.epochs,
        "probe": min(args.probe, len(data.x_train)),
        "mean": [[stats.history[name]["mean"][e] for name in hidden]
                 for e in range(len(stats.epochs))],
        "variance": [[stats.history[name]["variance"][e] for name in hidden]
                     for e in range(len(stats.epochs))],
        "test": round(snn_train.accuracy(data.y_test, scores), 6),
        "wall_s": round(time.time() - t0, 1),
        "command": snn_train.command(
            "activations.py", "NORMKIT_UCI121_DATA",
            ["--dataset", args.dataset, "--layers", args.layers, "--units", args.units,
             "--epochs", args.epochs, "--probe", args.probe, "--optimizer", args.optimizer,
             "--lr", f"{args.lr:g}", "--seed", args.seed],
        ),
    }  # fmt: skip
    for e, epoch in enumerate(result["epochs"]):
        means, variances = result["mean"][e], result["variance"][e]
        print(
            f"epoch {epoch:2d}: mean in [{min(means):+.3f}, {max(means):+.3f}], "
            f"variance in [{min(variances):.3f}, {max(variances):.3f}]"
        )
    snn_train.merge_rows(args.json, [result], ("dataset", "layers", "optimizer", "lr"))
    return result


if __name__ == "__main__":
    main()
