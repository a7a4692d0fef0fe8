"""Layer-normalized RNNs, ScaleNormalization and batch-norm folding vs what Keras offers.

    python benchmarks/bench_normalization.py [--repeats 10] [--rounds 3] [--section all]
    python benchmarks/bench_normalization.py --section rnn --pairs 60 [--json PATH]
    python benchmarks/bench_normalization.py --report PATH [--write-block]   # its tables

One run, printing times and ratios (ours / Keras; below 1 means ours is faster):

* `--section rnn`: a training step (`model.train_on_batch`, Adam) of `LayerNormLSTM` vs
  `keras.layers.LSTM` and `LayerNormGRU` vs `keras.layers.GRU`, batch 64, 50 steps,
  32 features, 128 units (target <= 1.3);
* `--section predict`: `predict_on_batch` of the same `LayerNormLSTM` model, and of a
  `FastWeightsRNN` one (issue 17 has one inference row for both), vs the `LSTM` one, and
  the same models exported (`model.export`) and served from the reloaded SavedModel
  (target <= 1.5);
* `--section fused`: the same training step with the cells' norms run by TensorFlow's
  fused batch-norm kernel on a reshaped tensor (tf.keras 2's `LayerNormalization` trick),
  against the shipped `keras_normkit.ops.layer_norm` (issue 17 asked whether such a
  TensorFlow-only kernel would reach 1.3x);
* `--section ops`: the profile behind the RNN ratios: how many graph operations one time
  step runs in the TensorFlow training graph (forward loop body and its gradient's), ours
  vs Keras's, which is what a step costs at these sizes without XLA;
* `--section scale`: forward+backward of `ScaleNormalization` vs
  `keras.layers.LayerNormalization` on a (4096, 1024) float32 tensor (target <= 1.0);
* `--section fold`: inference of a Conv/BN/ReLU network folded by
  `fold_batch_normalization` vs the original (target: folded faster), batch 64 of
  32x32x3 images.

Each case runs with XLA off and on. The two sides are timed in interleaved rounds (median
of `repeats` calls per round, best round kept), so the machine's noise hits both alike; with
`--pairs N`, in N alternating pairs of single calls instead, printing the ratio of the two
medians and the quartiles of the N pair ratios (steadier on a shared VM, whose bursts of load
move the rounds' ratios by +-0.1 or more).
TensorFlow's default oneDNN setting is kept (on for x86 CPUs). `--json` records the run,
`--report` prints the tables of recorded runs (`benchmarks/_results.py`).
"""

import argparse
import os
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import tensorflow as tf
from _results import Recorder, add_arguments, reported
from _timing import best_round_median, interleaved, median, paired_ratio_quartiles

from keras_normkit.layers import FastWeightsRNN, LayerNormGRU, LayerNormLSTM, ScaleNormalization
from keras_normkit.layers._layer_norm_rnn_base import _LayerNormRNNBase
from keras_normkit.utils import fold_batch_normalization


def compare(ours, theirs, repeats, rounds, pairs=0):
    """`(ours s, theirs s, (q25, q75) of the paired ratios or None)`.

    `pairs == 0`: the best of `rounds` rounds of the median of `repeats` calls per side
    (each round's block of calls starts with one more, trace / compile / warm up, whose time
    is dropped).
    `pairs > 0`: `pairs` single calls per side, alternating (the order flips every pair), so
    that a burst of load from elsewhere on a shared VM hits both sides of a pair; the medians
    of each side and the quartiles of the per-pair ratios.
    """
    functions = {"ours": ours, "theirs": theirs}
    if pairs <= 0:
        times = interleaved(functions, rounds, repeats + 1, warmup=0)
        # Column 0: each block's warm-up call, not part of the statistic.
        return (
            best_round_median(times["ours"][:, 1:]),
            best_round_median(times["theirs"][:, 1:]),
            None,
        )
    times = interleaved(functions, pairs, warmup=2, order="alternate")
    q25, _, q75 = paired_ratio_quartiles(times["ours"], times["theirs"])
    return median(times["ours"]), median(times["theirs"]), (q25, q75)


def rnn_model(layer_cls, steps=50, features=32, units=128):
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [keras.Input((steps, features)), layer_cls(units), keras.layers.Dense(10)]
    )


def rnn_train_step(layer_cls, jit, batch=64, steps=50, features=32, units=128):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, steps, features)).astype("float32")
    y = rng.integers(0, 10, size=batch)
    model = rnn_model(layer_cls, steps, features, units)
    model.compile(
        "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit
    )
    return lambda: model.train_on_batch(x, y)


def rnn_predict(layer_cls, jit, batch=64, steps=50, features=32):
    x = np.random.default_rng(0).normal(size=(batch, steps, features)).astype("float32")
    model = rnn_model(layer_cls, steps, features)
    model.compile(jit_compile=jit)
    return lambda: model.predict_on_batch(x)


def rnn_served(layer_cls, directory, batch=64, steps=50, features=32):
    """The model exported as a SavedModel (`model.export`), reloaded and served."""
    x = tf.constant(np.random.default_rng(0).normal(size=(batch, steps, features)), tf.float32)
    path = os.path.join(directory, layer_cls.__name__)
    rnn_model(layer_cls, steps, features).export(path, verbose=False)
    loaded = tf.saved_model.load(path)  # kept alive: `serve` reads its variables
    return lambda: loaded.serve(x).numpy()


def fused_batch_norm_layer_norm(x, gamma, beta, epsilon):
    """`layer_norm(x, gamma, beta, epsilon)` through TensorFlow's fused batch-norm kernel.

    The trick tf.keras 2's `LayerNormalization` used: `x` of shape `(N, F)` as an NCHW image
    `(1, N, F, 1)`, so that the per-channel statistics of `FusedBatchNormV3` are each
    example's mean and variance over its features; one kernel forward, one backward.
    """
    features = x.shape[-1]
    images = tf.reshape(x, [1, -1, features, 1])
    channels = tf.shape(images)[1]
    y, *_ = tf.raw_ops.FusedBatchNormV3(
        x=images,
        scale=tf.ones([channels], x.dtype),
        offset=tf.zeros([channels], x.dtype),
        mean=tf.zeros([0], x.dtype),
        variance=tf.zeros([0], x.dtype),
        epsilon=epsilon,
        data_format="NCHW",
        is_training=True,
    )
    return tf.reshape(y, tf.shape(x)) * gamma + beta


def fused_kernel_train_step(layer_cls, jit):
    """`rnn_train_step` with the cell's norms run by `fused_batch_norm_layer_norm`.

    The layers' time loop normalizes through the `layer_norm` that
    `keras_normkit.layers._layer_norm_rnn_base` imports (the gains read before the loop),
    so that name is swapped while the step is traced.
    """
    module = sys.modules[_LayerNormRNNBase.__module__]
    shipped = module.layer_norm
    module.layer_norm = fused_batch_norm_layer_norm
    try:
        step = rnn_train_step(layer_cls, jit)
        step()  # traced with the fused kernel
    finally:
        module.layer_norm = shipped
    return step


def loop_ops_per_step(layer_cls, batch=64, steps=50, features=32, units=128):
    """Operations in the while-loop bodies of a traced training step: (forward, gradient)."""
    model = rnn_model(layer_cls, steps, features, units)
    x = tf.zeros((batch, steps, features))
    y = tf.zeros((batch,), tf.int64)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    library = step.get_concrete_function(x, y).graph.as_graph_def().library.function
    counts = {"forward": 0, "gradient": 0}
    for function in library:
        name = function.signature.name
        if "while_body" in name and not name.endswith("_rewritten"):
            counts["gradient" if "_grad_" in name else "forward"] += len(function.node_def)
    return counts["forward"], counts["gradient"]


def forward_backward(layer, x, jit):
    layer.build(x.shape)

    @tf.function(jit_compile=jit)
    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, [x, *layer.trainable_variables])

    return lambda: [g.numpy() for g in step()]


def conv_bn_net(blocks=4, filters=32):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32, 32, 3))])
    for _ in range(blocks):
        model.add(keras.layers.Conv2D(filters, 3, padding="same", use_bias=False))
        model.add(keras.layers.BatchNormalization())
        model.add(keras.layers.ReLU())
    model.add(keras.layers.GlobalAveragePooling2D())
    model.add(keras.layers.Dense(10))
    rng = np.random.default_rng(0)
    for layer in model.layers:  # non-trivial statistics, as after training
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.moving_mean.assign(rng.normal(size=filters).astype("float32"))
            layer.moving_variance.assign(rng.uniform(0.5, 2, size=filters).astype("float32"))
    return model


def inference(model, x, jit):
    @tf.function(jit_compile=jit)
    def run():
        return model(x, training=False)

    return lambda: run().numpy()


SCRIPT = "benchmarks/bench_normalization.py"


def main(repeats=10, rounds=3, section="all", pairs=0, recorder=None):
    """Times the cases of `section`; the rows go to `recorder` (a `_results.Recorder`)."""
    recorder = Recorder(SCRIPT, []) if recorder is None else recorder
    how = (
        f"medians of {pairs} alternating pairs of calls, and the quartiles of the pair ratios"
        if pairs > 0
        else f"best of {rounds} rounds of the median of {repeats} calls"
    )
    rows = []
    columns = [("case", ""), ("XLA", ""), ("ours ms", ".2f"), ("Keras ms", ".2f")]
    columns += [("ratio", ".2f"), ("pair ratios q25–q75", "")]

    def report(name, jit, t_ours, t_theirs, quartiles=None):
        if not rows:
            recorder.table("cases", f"Ours / Keras's, {how}", columns)
        rows.append((name, jit, t_ours, t_theirs))
        spread = None if quartiles is None else f"{quartiles[0]:.2f}–{quartiles[1]:.2f}"
        on = "on" if jit else "off"
        ratio = t_ours / t_theirs
        recorder.row("cases", name, on, 1e3 * t_ours, 1e3 * t_theirs, ratio, spread)

    def timed(ours, theirs):
        return compare(ours, theirs, repeats, rounds, pairs)

    def wanted(name):
        return section in ("all", name)

    for ours_cls, keras_cls, name in (
        (LayerNormLSTM, keras.layers.LSTM, "train step LayerNormLSTM / LSTM (64x50x32, 128)"),
        (LayerNormGRU, keras.layers.GRU, "train step LayerNormGRU / GRU (64x50x32, 128)"),
    ):
        for jit in (False, True) if wanted("rnn") else ():
            report(name, jit, *timed(rnn_train_step(ours_cls, jit), rnn_train_step(keras_cls, jit)))

    for ours_cls in (LayerNormLSTM, FastWeightsRNN) if wanted("predict") else ():
        name = f"predict_on_batch {ours_cls.__name__} / LSTM (64x50x32, 128)"
        for jit in (False, True):
            report(
                name, jit, *timed(rnn_predict(ours_cls, jit), rnn_predict(keras.layers.LSTM, jit))
            )
        with tempfile.TemporaryDirectory() as directory:
            t = timed(rnn_served(ours_cls, directory), rnn_served(keras.layers.LSTM, directory))
            report(f"served SavedModel {ours_cls.__name__} / LSTM (same)", False, *t)
    for ours_cls, name in (
        (LayerNormLSTM, "train step LayerNormLSTM, fused TF kernel / shipped"),
        (LayerNormGRU, "train step LayerNormGRU, fused TF kernel / shipped"),
    ):
        for jit in (False, True) if wanted("fused") else ():
            t = timed(fused_kernel_train_step(ours_cls, jit), rnn_train_step(ours_cls, jit))
            report(name, jit, *t)
    if wanted("ops"):
        recorder.table(
            "ops",
            "Graph operations per time step of the TensorFlow training graph",
            [("layer", ""), ("forward", ""), ("gradient", ""), ("total", "")],
        )
        for cls in (LayerNormLSTM, keras.layers.LSTM, LayerNormGRU, keras.layers.GRU):
            forward, gradient = loop_ops_per_step(cls)
            recorder.row("ops", cls.__name__, forward, gradient, forward + gradient)
    if wanted("scale"):
        scale_normalization(report, timed)
    if wanted("fold"):
        folding(report, timed)
    return rows


def scale_normalization(report, timed):
    x = tf.constant(np.random.default_rng(0).normal(size=(4096, 1024)).astype("float32"))
    for jit in (False, True):
        t = timed(
            forward_backward(ScaleNormalization(), x, jit),
            forward_backward(keras.layers.LayerNormalization(), x, jit),
        )
        report("fwd+bwd ScaleNormalization / LayerNormalization", jit, *t)


def folding(report, timed):
    model = conv_bn_net()
    folded = fold_batch_normalization(model, verbose=False)
    images = tf.constant(np.random.default_rng(1).normal(size=(64, 32, 32, 3)).astype("float32"))
    np.testing.assert_allclose(
        model(images, training=False), folded(images, training=False), atol=1e-4
    )
    for jit in (False, True):
        t = timed(inference(folded, images, jit), inference(model, images, jit))
        report("inference folded / unfolded Conv-BN-ReLU x4 (64x32x32x3)", jit, *t)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--pairs",
        type=int,
        default=0,
        help="time N alternating pairs of single calls instead of rounds (see `compare`)",
    )
    parser.add_argument(
        "--section",
        choices=["all", "rnn", "predict", "fused", "ops", "scale", "fold"],
        default="all",
    )
    add_arguments(parser)
    args = parser.parse_args()
    if not reported(args, SCRIPT):
        recorder = Recorder(SCRIPT, sys.argv[1:], args.json)
        main(args.repeats, args.rounds, args.section, args.pairs, recorder)
