"""Training without batch norm on mnist-10k: signal propagation at initialization, and training.

    python examples/normalizer_free/run.py signal [--data DIR]
    python examples/normalizer_free/run.py train --model nf_resnet --batch-size 32 --seed 0 \\
        [--learning-rate 0.1] [--epochs 10] [--agc 0.01] [--data DIR]

Each command appends its rows to `notebooks/data/normalizer_free.json` (`--output` to
change it), replacing the rows of the same experiment, with the exact command that re-runs
it (run with `KERAS_BACKEND=jax PYTHONHASHSEED=0`, as recorded; one thread, `--threads`).

* `signal`: at initialization, for a batch of 512 training images, the average over
  channels of the squared channel mean and of the channel variance at the end of every
  residual block (Brock et al. 2021a, Figs. 1-2) of the batch-norm ResNet (its BNs use the
  batch's statistics, as in training), the NF-ResNet with scaled weight standardization and
  the same net with neither (`nf_models.py`); the NF rows carry the analytic variance
  `1 + k alpha^2`. Rows: `{"experiment": "signal", "model", "block", "stage",
  "squared_mean", "variance", "expected_variance", "command"}`.
* `train`: SGD with Nesterov momentum 0.9, a cosine decay of the rate after one epoch of
  linear warm-up, on the fixed 8,000 training images (`mnist10k.py`), then the accuracy on the
  2,000 test images. `--agc CLIPPING` wraps the optimizer in
  `keras_normkit.optimizers.AdaptiveGradientClipping` (the classifier excluded). A run whose
  loss becomes non-finite is recorded as diverged, with the epoch. Rows:
  `{"experiment": "train", "model", "batch_size", "seed", "learning_rate", "agc",
  "epochs", "test_accuracy" (%), "diverged", "train_loss" (by epoch), "seconds",
  "command"}`.
"""

import argparse
import json
import math
import os
import pathlib
import shlex
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUTPUT = ROOT / "notebooks" / "data" / "normalizer_free.json"

#: The nets of the signal-propagation plots: 3 stages of 8 blocks, 64 to 256 channels; the
#: statistics are averaged over `SIGNAL_SEEDS` initializations (one net's average over its
#: channels still varies by about 10 % from one initialization to the next).
SIGNAL_WIDTHS = (64, 128, 256)
SIGNAL_DEPTHS = (8, 8, 8)
SIGNAL_BATCH = 256
SIGNAL_SEEDS = 5
#: The trained nets: 21 blocks (3 stages of 7), narrow so that an epoch takes ~30 s on one
#: CPU thread.
TRAIN_WIDTHS = (8, 16, 32)
TRAIN_DEPTHS = (7, 7, 7)
ALPHA = 0.2


def _limit_threads(threads):
    """One (or `threads`) CPU thread for every backend; before Keras is imported."""
    n = str(threads)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        os.environ[name] = n
    os.environ["TF_NUM_INTEROP_THREADS"] = "1"
    if threads == 1:
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "")
            + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        ).strip()


def _command(argv):
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    args = " ".join(shlex.quote(a) for a in argv)
    return f"KERAS_BACKEND={backend} PYTHONHASHSEED=0 python examples/normalizer_free/run.py {args}"


def _strip_paths(argv):
    """`argv` without `--data PATH` and `--output PATH` (a machine's paths are not part of
    a row's command)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--data", "--output"):
            skip = True
            continue
        if a.startswith(("--data=", "--output=")):
            continue
        out.append(a)
    return out


def load_rows(path):
    path = pathlib.Path(path)
    return json.loads(path.read_text()) if path.exists() else []


def save_rows(path, rows, replaces):
    """Write `rows` into the JSON at `path`, dropping the old rows for which `replaces` is true."""
    path = pathlib.Path(path)
    kept = [row for row in load_rows(path) if not replaces(row)]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(kept + rows, indent=1) + "\n")
    tmp.replace(path)


# --------------------------------------------------------------------------- signal


def channel_statistics(h):
    """`(mean over channels of the squared channel mean, mean over channels of the channel
    variance)` of activations `h` `(batch, height, width, channels)` (NumPy)."""
    import numpy as np

    h = np.asarray(h, dtype="float64").reshape(-1, h.shape[-1])
    return float(np.mean(h.mean(axis=0) ** 2)), float(np.mean(h.var(axis=0)))


def signal(args, command):
    import keras
    import mnist10k
    import nf_models
    import numpy as np

    x_train = mnist10k.load(args.data)[0][:SIGNAL_BATCH]
    expected = nf_models.expected_variances(SIGNAL_WIDTHS, SIGNAL_DEPTHS, ALPHA)
    stages = [s for s, d in enumerate(SIGNAL_DEPTHS) for _ in range(d)]
    rows = []
    for name in ("bn_resnet", "nf_resnet", "plain_resnet"):
        statistics = []  # (seed, block, 2)
        for seed in range(args.seed, args.seed + SIGNAL_SEEDS):
            keras.utils.set_random_seed(seed)
            kwargs = {"widths": SIGNAL_WIDTHS, "depths": SIGNAL_DEPTHS}
            if name != "bn_resnet":
                kwargs["alpha"] = ALPHA
            model = nf_models.BUILDERS[name](**kwargs)
            probe = keras.Model(model.input, nf_models.block_outputs(model))
            # The batch-norm net normalizes with the batch's statistics, as in training.
            outputs = probe(x_train, training=name == "bn_resnet")
            statistics.append([channel_statistics(keras.ops.convert_to_numpy(h)) for h in outputs])
        statistics = np.array(statistics)
        for block in range(statistics.shape[1]):
            squared_means, variances = statistics[:, block, 0], statistics[:, block, 1]
            rows.append(
                {
                    "experiment": "signal",
                    "model": name,
                    "block": block,
                    "stage": stages[block],
                    "squared_mean": float(squared_means.mean()),
                    "variance": float(variances.mean()),
                    "expected_variance": expected[block] if name == "nf_resnet" else None,
                    "variance_range": [float(variances.min()), float(variances.max())],
                    "squared_mean_range": [float(squared_means.min()), float(squared_means.max())],
                    "initializations": SIGNAL_SEEDS,
                    "command": command,
                }
            )
        print(name, "variance", np.round(statistics[:, :, 1].mean(0), 3).tolist(), flush=True)
        print(name, "squared mean", np.round(statistics[:, :, 0].mean(0), 4).tolist(), flush=True)
    save_rows(args.output, rows, lambda row: row.get("experiment") == "signal")


# --------------------------------------------------------------------------- training


def train(args, command):
    import keras
    import numpy as np

    if keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(args.threads)
    import mnist10k
    import nf_models

    from keras_normkit.optimizers import AdaptiveGradientClipping

    x_train, y_train, x_test, y_test = mnist10k.load(args.data)
    keras.utils.set_random_seed(args.seed)
    kwargs = {"widths": TRAIN_WIDTHS, "depths": TRAIN_DEPTHS}
    if args.model != "bn_resnet":
        kwargs["alpha"] = ALPHA
    model = nf_models.BUILDERS[args.model](**kwargs)
    steps_per_epoch = math.ceil(len(x_train) / args.batch_size)
    total = steps_per_epoch * args.epochs
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0,
        decay_steps=total - steps_per_epoch,
        warmup_target=args.learning_rate,
        warmup_steps=steps_per_epoch,
    )
    optimizer = keras.optimizers.SGD(schedule, momentum=0.9, nesterov=True)
    if args.agc is not None:
        optimizer = AdaptiveGradientClipping(optimizer, clipping=args.agc, exclude=["classifier"])
    model.compile(
        optimizer,
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=keras.backend.backend() != "torch",
    )
    losses, diverged_at = [], None
    start = time.time()
    for epoch in range(args.epochs):
        history = model.fit(
            x_train,
            y_train,
            batch_size=args.batch_size,
            epochs=epoch + 1,
            initial_epoch=epoch,
            shuffle=True,
            verbose=0,
            callbacks=[keras.callbacks.TerminateOnNaN()],
        )
        loss = history.history["loss"][-1]
        losses.append(loss if math.isfinite(loss) else None)
        print(f"epoch {epoch + 1}: loss {loss:.4f} ({time.time() - start:.0f} s)", flush=True)
        if not math.isfinite(loss):
            diverged_at = epoch + 1
            break
    if diverged_at is None:
        _, accuracy = model.evaluate(x_test, y_test, batch_size=500, verbose=0)
        accuracy = 100.0 * float(accuracy)
        weights_finite = all(
            np.all(np.isfinite(keras.ops.convert_to_numpy(w))) for w in model.weights
        )
        if not weights_finite:
            diverged_at = args.epochs
    else:
        accuracy = None
    row = {
        "experiment": "train",
        "model": args.model,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "learning_rate": args.learning_rate,
        "agc": args.agc,
        "epochs": args.epochs,
        "test_accuracy": None if diverged_at else accuracy,
        "diverged": diverged_at is not None,
        "diverged_epoch": diverged_at,
        "train_loss": losses,
        "seconds": round(time.time() - start, 1),
        "backend": keras.backend.backend(),
        "keras": keras.__version__,
        "command": command,
    }
    print(json.dumps({k: v for k, v in row.items() if k != "command"}))
    key = ("model", "batch_size", "seed", "learning_rate", "agc", "epochs")

    def same(old):
        return old.get("experiment") == "train" and all(old.get(k) == row[k] for k in key)

    save_rows(args.output, [row], same)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("signal", "train"))
    parser.add_argument("--data", help="mnist-10k folder (else $NORMKIT_MNIST10K_DATA)")
    parser.add_argument("--output", default=str(OUTPUT))
    parser.add_argument("--model", choices=("nf_resnet", "bn_resnet", "plain_resnet"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--agc", type=float, default=None, help="AGC clipping (default: none)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.what == "train" and args.model is None:
        parser.error("train needs --model")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    _limit_threads(args.threads)
    sys.path.insert(0, str(HERE))
    command = _command(_strip_paths(argv))
    if args.what == "signal":
        signal(args, command)
    else:
        train(args, command)


if __name__ == "__main__":
    main()
