"""One process of a multi-process JAX training run (tests/integration/test_multiprocess.py).

    python tests/integration/multiprocess_worker.py OUT_DIR BACKUP_DIR --processes 2 \
        --index 0 --port 12345 [--interrupt EPOCH BATCH]

With `--processes 1` it is the one-process run the others are compared with: the same global
batches, fed whole. With `--processes 2` it joins a run over `localhost:PORT`
(`keras.distribution.initialize`), replicates the model on every process's device
(`DataParallel`, `auto_shard_dataset=False`) and feeds its own half of every global batch.
The model has every layer family of keras_normkit; it trains with our schedule,
`EarlyStopping`, `GradientStatistics` and `BackupAndRestore`. `--interrupt E B` ends this
process abruptly (`os._exit`) at batch B of epoch E, as a crashed host would. `--perturb`
multiplies the initial weights by `1 + 1e-7 N(0, 1)`; `--keras-lstm` puts Keras's `LSTM`
in place of `LayerNormLSTM` (to compare how much each amplifies round-off). The result
(history, statistics, final weights, files this process saw) goes to OUT_DIR/result_INDEX.json.
"""

import argparse
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")

import keras  # noqa: E402
import numpy as np  # noqa: E402

T, D, K, N, GLOBAL_BATCH, EPOCHS = 6, 8, 3, 128, 32, 4


def data():
    """The global training set: stories with masked (all-zero) trailing steps, questions."""
    rng = np.random.default_rng(0)
    story = rng.normal(size=(N, T, D)).astype("float32")
    lengths = rng.integers(3, T + 1, size=N)
    story[np.arange(T)[None, :] >= lengths[:, None]] = 0.0
    question = rng.normal(size=(N, D)).astype("float32")
    labels = np.argmax(story.sum(1)[:, :K] + question[:, :K], -1).astype("int32")
    return story, question, labels


def build(keras_lstm=False):
    from keras_normkit.constraints import ParsevalConstraint
    from keras_normkit.layers import (
        QRN,
        SELU,
        AlphaDropout,
        FastWeightsRNN,
        LayerNormGRU,
        LayerNormLSTM,
        LayerNormSimpleRNN,
        WeightNormalization,
    )

    keras.utils.set_random_seed(1)
    xs = keras.Input((T, D), name="story")
    qs = keras.Input((D,), name="question")
    h = keras.layers.Masking()(xs)
    lstm = keras.layers.LSTM if keras_lstm else LayerNormLSTM  # --keras-lstm: a comparison
    h = lstm(D, return_sequences=True, name="ln_lstm")(h)
    h = LayerNormGRU(D, return_sequences=True, name="ln_gru")(h)
    h = LayerNormSimpleRNN(D, return_sequences=True, name="ln_simple_rnn")(h)
    h = FastWeightsRNN(D, return_sequences=True, name="fast_weights")(h)
    h = QRN(D, return_sequences=False, name="qrn")([h, qs])
    h = WeightNormalization(keras.layers.Dense(16), data_init=True, name="weight_norm")(h)
    h = SELU(name="selu")(h)
    h = AlphaDropout(0.05, seed=3, name="alpha_dropout")(h)
    probs = keras.layers.Dense(
        K,
        activation="softmax",
        kernel_initializer="orthogonal",
        kernel_constraint=ParsevalConstraint(beta=0.05),
        name="probs",
    )(h)
    return keras.Model([xs, qs], probs)


class Interrupt(keras.callbacks.Callback):
    """Ends the process at batch `batch` of epoch `epoch`, as a crash would."""

    def __init__(self, epoch, batch):
        super().__init__()
        self.epoch, self.batch, self.current = epoch, batch, None

    def on_epoch_begin(self, epoch, logs=None):
        self.current = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if (self.current, batch) == (self.epoch, self.batch):
            sys.stdout.flush()
            os._exit(3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("backup")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--interrupt", type=int, nargs=2, default=None)
    parser.add_argument(
        "--perturb", action="store_true", help="initial weights times 1 + 1e-7 N(0, 1)"
    )
    parser.add_argument(
        "--keras-lstm",
        action="store_true",
        help="keras.layers.LSTM in place of LayerNormLSTM (how much it amplifies round-off)",
    )
    args = parser.parse_args()
    if args.processes > 1:
        keras.distribution.initialize(
            job_addresses=f"localhost:{args.port}",
            num_processes=args.processes,
            process_id=args.index,
        )
        distribution = keras.distribution.DataParallel(
            devices=keras.distribution.list_devices(), auto_shard_dataset=False
        )
        keras.distribution.set_distribution(distribution)

    from keras_normkit import callbacks, schedules
    from keras_normkit.backend.distribution import process_count, process_index

    story, question, labels = data()
    local = GLOBAL_BATCH // args.processes
    rows = np.concatenate(  # this process's share of every global batch, in order
        [
            np.arange(start + args.index * local, start + (args.index + 1) * local)
            for start in range(0, N, GLOBAL_BATCH)
        ]
    )
    model = build(args.keras_lstm)
    if args.perturb:
        rng = np.random.default_rng(5)
        model.set_weights(
            [
                (w * (1 + 1e-7 * rng.standard_normal(w.shape))).astype(w.dtype)
                if w.dtype.kind == "f"
                else w
                for w in model.get_weights()
            ]
        )
    model.compile(
        keras.optimizers.SGD(
            schedules.CyclicalLearningRate(0.005, 0.05, step_size=4), momentum=0.5
        ),
        loss="sparse_categorical_crossentropy",
    )
    probe = ((story[:16], question[:16]), labels[:16])  # the same probe on every process
    statistics = callbacks.GradientStatistics(probe, layers=["ln_lstm", "qrn", "probs"])
    stop = callbacks.EarlyStopping(monitor="loss", patience=1)
    backup = callbacks.BackupAndRestore(args.backup, delete_checkpoint=False)
    extra = [Interrupt(*args.interrupt)] if args.interrupt else []
    history = model.fit(
        [story[rows], question[rows]],
        labels[rows],
        batch_size=local,
        epochs=EPOCHS,
        shuffle=False,
        callbacks=[backup, statistics, stop, *extra],
        verbose=0,
    )
    weight_norm = model.get_layer("weight_norm")
    result = {
        "processes": process_count(),
        "index": process_index(),
        "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
        "epochs": history.epoch,
        "iterations": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "grad_norm": {
            name: [float(v) for v in values["grad_norm"]]
            for name, values in statistics.history.items()
        },
        "stop": [stop.best_epoch, stop.stopped_epoch],
        "weights": [np.asarray(w).tolist() for w in model.get_weights()],
        "weight_names": [w.path for w in model.weights],
        "data_init": [np.asarray(w).tolist() for w in weight_norm.non_trainable_weights],
        "backup_files": sorted(os.listdir(args.backup)) if os.path.isdir(args.backup) else [],
    }
    with open(os.path.join(args.out, f"result_{args.index}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
