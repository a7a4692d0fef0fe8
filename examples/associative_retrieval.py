"""Associative retrieval (Ba et al. 2016, §4.1): FastWeightsRNN vs LSTM vs IRNN.

A sequence lists K key-value pairs (a letter then a digit), then `??`, then one of the
keys; the answer is that key's digit: `c9k8j3f1??c -> 9`. With K = 4 and 26 letters,
10 digits and `?` (37 symbols) sequences have length 11. The data are generated here with
a seed (100k train / 10k validation / 20k test, the paper's sizes), so nothing is
downloaded.

The setup is the paper's: each symbol is embedded in 100 dimensions, one recurrent layer of
R units (`--model fw|lstm|irnn`, `--units R`) reads the sequence, then a 100-unit ReLU layer
and a softmax over the 10 digits; Adam, batch 128, the global gradient norm clipped at 5
(`global_clipnorm`: Keras's `clipnorm` would clip each variable on its own), fast weights
with λ = 0.95, η = 0.5, S = 1. The inputs are at unit scale: the embedding is initialized
Glorot-uniform, so an embedded symbol has a norm of about 1, as a one-hot input has
(Keras's default embedding, uniform ±0.05, gives norms of about 0.3, and the fast-weights
model then stalls at 78 % accuracy). The validation accuracy is measured every
`--eval-every` updates; training stops once it reaches 99.9 % or after `--updates`
updates, and the test error is that of the weights of the best validation point. The
Adam rate is constant, or with `--plateau-patience P` halved after every P evaluations
without a lower validation loss.

    python examples/associative_retrieval.py --model fw --units 20 --lr 3e-3
    python examples/associative_retrieval.py --model lstm --units 50 --lr 1e-3 --json out.json

`examples/fast_weights_table.py` runs the paper's Table 1 (R = 20 and 50, several seeds)
with this script's `run`.
"""

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras
import numpy as np

from keras_normkit.callbacks import ReduceLROnPlateau
from keras_normkit.layers import FastWeightsRNN

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from result_commands import environment_prefix  # noqa: E402

LETTERS, DIGITS = 26, 10
#: The paper's training setup (§4.1), used by `run` and the command line.
SETUP = dict(
    embed=100,
    decay=0.95,
    fast_learning_rate=0.5,
    inner_steps=1,
    batch_size=128,
    global_clipnorm=5.0,
    target_accuracy=0.999,
    train_size=100_000,
    val_size=10_000,
    test_size=20_000,
)


def make_task(n, pairs=4, num_keys=LETTERS, num_values=DIGITS, seed=0):
    """`n` sequences of the task: int tokens `(n, 2*pairs + 3)` and digit labels `(n,)`.

    Tokens: keys are `0 … num_keys-1`, values `num_keys … num_keys+num_values-1`, and `?`
    is `num_keys + num_values` (the vocabulary size is `num_keys + num_values + 1`, 37 for
    the paper's task). Keys within a sequence are distinct; values may repeat.
    """
    if pairs > num_keys:
        raise ValueError(f"`pairs` must be <= num_keys={num_keys}. Received: pairs={pairs}")
    rng = np.random.default_rng(seed)
    keys = np.argsort(rng.random((n, num_keys)), axis=1)[:, :pairs]
    values = rng.integers(0, num_values, size=(n, pairs))
    query = rng.integers(0, pairs, size=n)
    question = num_keys + num_values
    tokens = np.empty((n, 2 * pairs + 3), dtype="int32")
    tokens[:, 0 : 2 * pairs : 2] = keys
    tokens[:, 1 : 2 * pairs : 2] = values + num_keys
    tokens[:, 2 * pairs : 2 * pairs + 2] = question
    tokens[:, -1] = keys[np.arange(n), query]
    return tokens, values[np.arange(n), query].astype("int32")


def make_data(seed=0, pairs=4, train_size=100_000, val_size=10_000, test_size=20_000):
    """`(train, validation, test)` pairs of `make_task`, drawn with seeds `seed, +1, +2`."""
    return (
        make_task(train_size, pairs, seed=seed),
        make_task(val_size, pairs, seed=seed + 1),
        make_task(test_size, pairs, seed=seed + 2),
    )


def decode(tokens, num_keys=LETTERS, num_values=DIGITS):
    """Human-readable form of one token sequence, e.g. `c9k8j3f1??c`."""
    out = []
    for t in tokens:
        if t < num_keys:
            out.append(chr(ord("a") + int(t)))
        elif t < num_keys + num_values:
            out.append(str(int(t) - num_keys))
        else:
            out.append("?")
    return "".join(out)


def build_model(
    kind,
    units,
    vocab=LETTERS + DIGITS + 1,
    num_classes=DIGITS,
    embed=SETUP["embed"],
    decay=SETUP["decay"],
    fast_learning_rate=SETUP["fast_learning_rate"],
    inner_steps=SETUP["inner_steps"],
    embeddings_initializer="glorot_uniform",
    seed=0,
):
    """Embedding -> recurrent layer (`fw`, `lstm` or `irnn`) -> Dense(100, relu) -> softmax.

    `embeddings_initializer="glorot_uniform"` puts the inputs at unit scale (see the module
    docstring); `"uniform"` is Keras's default (±0.05). The IRNN is a ReLU `SimpleRNN`
    whose recurrent kernel starts at the identity (Le et al. 2015).
    """
    keras.utils.set_random_seed(seed)
    if kind == "fw":
        rnn = FastWeightsRNN(
            units, decay=decay, fast_learning_rate=fast_learning_rate, inner_steps=inner_steps
        )
    elif kind == "lstm":
        rnn = keras.layers.LSTM(units)
    elif kind == "irnn":
        rnn = keras.layers.SimpleRNN(
            units, activation="relu", recurrent_initializer=keras.initializers.Identity()
        )
    else:
        raise ValueError(f"`kind` must be 'fw', 'lstm' or 'irnn'. Received: kind={kind!r}")
    return keras.Sequential(
        [
            keras.Input((None,), dtype="int32"),
            keras.layers.Embedding(vocab, embed, embeddings_initializer=embeddings_initializer),
            rnn,
            keras.layers.Dense(100, activation="relu"),
            keras.layers.Dense(num_classes, activation="softmax"),
        ]
    )


def train(
    model,
    data,
    updates,
    batch_size=SETUP["batch_size"],
    learning_rate=1e-3,
    global_clipnorm=SETUP["global_clipnorm"],
    eval_every=500,
    target_accuracy=None,
    max_seconds=None,
    restore_best=True,
    jit_compile=True,
    callbacks=(),
    seed=0,
    verbose=True,
):
    """Train with Adam for up to `updates` steps; returns the learning curve (list of dicts).

    The validation accuracy is measured every `eval_every` updates; training stops once it
    reaches `target_accuracy` or after `max_seconds` of wall time. With `restore_best` the
    model ends with the weights of the best validation point (highest accuracy, ties: lower
    loss); `curve[i]["best"]` marks it. `callbacks` (Keras callbacks, e.g. a
    `ReduceLROnPlateau` on `"val_loss"`) see each evaluation as the end of an epoch, with
    the curve point as logs (`loss`, `accuracy`, `val_loss`, `val_accuracy`);
    `curve[i]["learning_rate"]` is the rate the updates before point `i` ran at.
    """
    (x_train, y_train), (x_val, y_val) = data
    model.compile(
        keras.optimizers.Adam(learning_rate, global_clipnorm=global_clipnorm),
        "sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    rng = np.random.default_rng(seed)
    order, cursor, done = rng.permutation(len(x_train)), 0, 0

    def next_indices(count):
        """The next `count` training indices, in epochs of fresh permutations."""
        nonlocal order, cursor
        parts = []
        while count > 0:
            if cursor == len(order):
                order, cursor = rng.permutation(len(x_train)), 0
            take = min(count, len(order) - cursor)
            parts.append(order[cursor : cursor + take])
            cursor, count = cursor + take, count - take
        return np.concatenate(parts)

    # A custom loop's callbacks: one "epoch" per evaluation (as `fit` drives them).
    evaluations = -(-updates // eval_every)
    hooks = keras.callbacks.CallbackList(
        list(callbacks), model=model, epochs=evaluations, steps=eval_every, verbose=0
    )
    hooks.on_train_begin()
    curve, start = [], time.perf_counter()
    best, best_weights = None, None
    while done < updates:
        chunk = min(eval_every, updates - done)
        idx = next_indices(chunk * batch_size)  # exactly `chunk` batches
        rate = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
        hooks.on_epoch_begin(len(curve))
        hist = model.fit(
            x_train[idx], y_train[idx], batch_size=batch_size, epochs=1, shuffle=False, verbose=0
        )
        done += chunk
        val_loss, val_acc = model.evaluate(x_val, y_val, batch_size=1000, verbose=0)
        point = {
            "updates": done,
            "seconds": round(time.perf_counter() - start, 1),
            "train_loss": float(hist.history["loss"][-1]),
            "train_accuracy": float(hist.history["accuracy"][-1]),
            "val_loss": float(val_loss),
            "val_accuracy": float(val_acc),
            "learning_rate": rate,
            "best": False,
        }
        if best is None or (val_acc, -val_loss) > (
            curve[best]["val_accuracy"],
            -curve[best]["val_loss"],
        ):
            best = len(curve)
            if restore_best:
                best_weights = model.get_weights()
        curve.append(point)
        logs = {k.replace("train_", ""): point[k] for k in ("train_loss", "train_accuracy")}
        logs.update(val_loss=point["val_loss"], val_accuracy=point["val_accuracy"])
        hooks.on_epoch_end(len(curve) - 1, logs)
        if verbose:
            print(
                f"{done:6d} updates  {point['seconds']:6.0f} s  loss {point['train_loss']:.3f}"
                f"  val acc {val_acc:.4f}  lr {rate:.3g}",
                flush=True,
            )
        if target_accuracy is not None and val_acc >= target_accuracy:
            break
        if max_seconds is not None and point["seconds"] >= max_seconds:
            break
    hooks.on_train_end()
    if curve:
        curve[best]["best"] = True
        if restore_best:
            model.set_weights(best_weights)
    return curve


def updates_to_reach(curve, accuracy):
    """The first evaluated update count with validation accuracy `>= accuracy`, or None."""
    return next((p["updates"] for p in curve if p["val_accuracy"] >= accuracy), None)


def rate_reductions(curve):
    """The update counts after which the learning rate was lowered (at that evaluation)."""
    return [
        before["updates"]
        for before, after in zip(curve[:-1], curve[1:], strict=True)
        if after["learning_rate"] < before["learning_rate"]
    ]


def run(
    kind,
    units,
    learning_rate,
    updates=50_000,
    seed=0,
    data=None,
    data_seed=0,
    eval_every=500,
    plateau_patience=None,
    verbose=True,
    **model_kwargs,
):
    """One run of the protocol: a model of `kind` with `units`, trained from seed `seed`.

    `data` is `make_data(data_seed)` unless given (a table reuses it across runs). With
    `plateau_patience` the rate is halved once the validation loss has not improved (by
    more than 1e-4) for that many evaluations (`keras_normkit.callbacks.ReduceLROnPlateau`);
    without it the rate is constant. Returns a dict: the test error at the best validation
    point, the updates to reach 95 % validation accuracy (None if never), the updates
    trained, the rate halvings (update counts), the wall time and the curve.
    """
    train_data, val_data, (x_test, y_test) = data or make_data(data_seed)
    start = time.perf_counter()
    model = build_model(kind, units, seed=seed, **model_kwargs)
    callbacks = []
    if plateau_patience:
        callbacks.append(
            ReduceLROnPlateau("val_loss", factor=0.5, patience=plateau_patience, min_delta=1e-4)
        )
    curve = train(
        model,
        (train_data, val_data),
        updates,
        learning_rate=learning_rate,
        eval_every=eval_every,
        target_accuracy=SETUP["target_accuracy"],
        callbacks=callbacks,
        seed=seed,
        verbose=verbose,
    )
    _, test_acc = model.evaluate(x_test, y_test, batch_size=1000, verbose=0)
    best = next(p for p in curve if p["best"])
    return {
        "model": kind,
        "units": units,
        "learning_rate": learning_rate,
        "seed": seed,
        "data_seed": data_seed,
        "test_error": 1.0 - float(test_acc),
        "best_updates": best["updates"],
        "best_val_accuracy": best["val_accuracy"],
        "updates_to_95": updates_to_reach(curve, 0.95),
        "updates_run": curve[-1]["updates"],
        "plateau_patience": plateau_patience,
        "halvings": rate_reductions(curve),
        "seconds": round(time.perf_counter() - start, 1),
        "curve": curve,
    }


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", choices=["fw", "lstm", "irnn"], default="fw")
    parser.add_argument("--units", type=int, default=20)
    parser.add_argument("--updates", type=int, default=50_000, help="[50000]")
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam's rate [3e-3]")
    parser.add_argument("--decay", type=float, default=SETUP["decay"])
    parser.add_argument("--eta", type=float, default=SETUP["fast_learning_rate"])
    parser.add_argument("--inner-steps", type=int, default=SETUP["inner_steps"])
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument(
        "--plateau-patience",
        type=int,
        default=None,
        help="halve the rate after this many evaluations without a lower validation loss "
        "[none: constant rate]",
    )
    parser.add_argument("--seed", type=int, default=0, help="initialization and batch order")
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the result and curve here")
    args = parser.parse_args()

    data = make_data(args.data_seed)
    print("example:", decode(data[0][0][0]), "->", int(data[0][1][0]))
    kwargs = {}
    if args.model == "fw":
        kwargs = dict(decay=args.decay, fast_learning_rate=args.eta, inner_steps=args.inner_steps)
    result = run(
        args.model,
        args.units,
        args.lr,
        args.updates,
        args.seed,
        data=data,
        data_seed=args.data_seed,
        eval_every=args.eval_every,
        plateau_patience=args.plateau_patience,
        **kwargs,
    )
    result["command"] = (
        f"{environment_prefix()} python examples/associative_retrieval.py "
        + " ".join(
            f"--{k.replace('_', '-')} {v}"
            for k, v in vars(args).items()
            if k != "json" and v is not None
        )
    )
    print(
        f"{args.model}-{args.units}: test error {100 * result['test_error']:.2f} % at "
        f"{result['best_updates']} updates (best validation point; "
        f"{result['updates_run']} trained, {result['seconds']:.0f} s)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
