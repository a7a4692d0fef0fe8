"""The recurrent layers' speed targets in the cases a user meets (issue 28, decision 4).

    .venv/bin/python benchmarks/bench_recurrent_cases.py                  # every case
    .venv/bin/python benchmarks/bench_recurrent_cases.py --batches 64 --contexts layer \\
        --layers fast_weights --configs 200x64 --jit 1 --pairing single

`LayerNormLSTM` and `FastWeightsRNN` (`implementation="auto"`) against `keras.layers.LSTM`
of the same units, input 32 features, for every combination of

* batch size B = 32 and B = 64;
* context: `layer`, the layer alone (`Sequential([Input((T, 32)), layer])`, MSE loss on its
  last state, the form of an outside harness that measured worse ratios than the section
  tables of `bench_fast_weights.py`), and `model`, the layer inside a small classifier
  (`Input -> Dense(32, relu) -> layer -> Dense(10)`, sparse cross-entropy);
* `jit_compile` False and True;

and two kinds of call: a training step (`train_on_batch`, Adam) and `predict_on_batch`.

Statistics. Each model is called in interleaved rounds. With `--pairing block` (the default,
the outside harness's protocol) a round calls each model `--repeats` times in a row, and
the reported time is the **best round's median** ("median"); the **minimum single call**
over all rounds ("min", the statistic of `bench_fast_weights.py`'s tables) is printed
beside it. With `--pairing single` the models alternate call by call (`bench_fast_weights.py`'s
protocol), same two statistics. Ratios are ours / LSTM of the same statistic.

Targets: `FastWeightsRNN` train step ≤ 1.25× an LSTM with `jit_compile=True`, ≤ 1.6×
without (issue 28), `predict_on_batch` ≤ 1.5× with `jit_compile=True` (without XLA it is
documented at ~2.2×, SavedModels stay free of XLA, and has no target); `LayerNormLSTM`
train step ≤ 1.3× and `predict_on_batch` ≤ 1.5× in both modes (issue 17).
TensorFlow's default oneDNN setting is kept unless `TF_ENABLE_ONEDNN_OPTS` is set (the
Makefile sets it to 0 for the tests; run the scripts directly, as users do).
"""

import argparse
import itertools
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
from _timing import best_round_median, interleaved, minimum

from keras_normkit.layers import FastWeightsRNN, LayerNormLSTM

LAYERS = {"layer_norm_lstm": LayerNormLSTM, "fast_weights": FastWeightsRNN}
CONFIGS = {"layer_norm_lstm": [(50, 128)], "fast_weights": [(50, 128), (200, 64), (200, 256)]}
# (layer, jit_compile) -> the target ratio to an LSTM; no entry: no target.
TRAIN_TARGET = {
    ("layer_norm_lstm", False): 1.3,
    ("layer_norm_lstm", True): 1.3,
    ("fast_weights", False): 1.6,
    ("fast_weights", True): 1.25,
}
PREDICT_TARGET = {
    ("layer_norm_lstm", False): 1.5,
    ("layer_norm_lstm", True): 1.5,
    ("fast_weights", True): 1.5,
}
FEATURES = 32


def build(layer_cls, context, steps, units, jit):
    keras.utils.set_random_seed(0)
    if context == "layer":
        model = keras.Sequential([keras.Input((steps, FEATURES)), layer_cls(units)])
        loss = "mse"
    else:
        model = keras.Sequential(
            [
                keras.Input((steps, FEATURES)),
                keras.layers.Dense(32, activation="relu"),
                layer_cls(units),
                keras.layers.Dense(10),
            ]
        )
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(keras.optimizers.Adam(1e-3), loss, jit_compile=jit)
    return model


def calls(layer_cls, context, batch, steps, units, jit):
    """`{"train": fn, "predict": fn}` of one model, traced and warmed up."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, steps, FEATURES)).astype("float32")
    if context == "layer":
        y = rng.normal(size=(batch, units)).astype("float32")
    else:
        y = rng.integers(0, 10, size=batch)
    model = build(layer_cls, context, steps, units, jit)
    fns = {
        "train": lambda: model.train_on_batch(x, y),
        "predict": lambda: model.predict_on_batch(x),
    }
    for fn in fns.values():
        fn()
        fn()
    return fns


def measure(fns, pairing, rounds, repeats):
    """`{name: (best round's median, minimum single call)}` in seconds, interleaved."""
    if pairing == "block":
        samples = interleaved(fns, rounds, repeats, warmup=0)  # `calls` warmed them up
    else:  # the models alternate call by call: `repeats` one-call rounds make a round
        samples = interleaved(fns, rounds * repeats, warmup=0)
        samples = {name: t.reshape(rounds, repeats) for name, t in samples.items()}
    return {name: (best_round_median(t), minimum(t)) for name, t in samples.items()}


def verdict(ratio, target):
    if target is None:
        return "—"
    return "yes" if ratio <= target else "**no**"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", default="layer_norm_lstm,fast_weights")
    parser.add_argument("--batches", default="32,64")
    parser.add_argument("--contexts", default="layer,model")
    parser.add_argument("--jit", default="0,1", help="jit_compile values: '0', '1' or '0,1'")
    parser.add_argument("--configs", default=None, help="(T, units) pairs, e.g. '50x128'")
    parser.add_argument("--pairing", choices=["block", "single"], default="block")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(
        f"keras {keras.__version__}, backend {keras.backend.backend()}, {os.cpu_count()} CPUs, "
        f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', '(default)')}, "
        f"pairing {args.pairing}, {args.rounds} rounds of {args.repeats}\n"
    )
    print(
        "| layer | T | units | B | context | jit | call | ours ms | LSTM ms | ratio (median) "
        "| ratio (min) | target | met |"
    )
    print("|---|---|---|---|---|---|---|---:|---:|---:|---:|---|---|")
    for name in args.layers.split(","):
        configs = CONFIGS[name]
        if args.configs:
            configs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
        cases = itertools.product(
            configs,
            [int(b) for b in args.batches.split(",")],
            args.contexts.split(","),
            [bool(int(j)) for j in args.jit.split(",")],
        )
        for (steps, units), batch, context, jit in cases:
            keras.backend.clear_session()
            ours = calls(LAYERS[name], context, batch, steps, units, jit)
            lstm = calls(keras.layers.LSTM, context, batch, steps, units, jit)
            for call in ("train", "predict"):
                fns = {"ours": ours[call], "lstm": lstm[call]}
                t = measure(fns, args.pairing, args.rounds, args.repeats)
                by_median = t["ours"][0] / t["lstm"][0]
                by_min = t["ours"][1] / t["lstm"][1]
                target = (TRAIN_TARGET if call == "train" else PREDICT_TARGET).get((name, jit))
                print(
                    f"| {name} | {steps} | {units} | {batch} | {context} | {int(jit)} | {call} | "
                    f"{t['ours'][0] * 1e3:.1f} | {t['lstm'][0] * 1e3:.1f} | {by_median:.2f} | "
                    f"{by_min:.2f} | {target or '—'} | {verdict(by_median, target)} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
