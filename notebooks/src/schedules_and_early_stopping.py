# %% [markdown]
# # Learning-rate schedules, early stopping and activation statistics
#
# This notebook shows the pieces of `keras_normkit.schedules` and `keras_normkit.callbacks`:
#
# 1. every schedule plotted over its steps (and how `Join` composes them);
# 2. Prechelt's early-stopping criteria (GL, PQ, UP) and Keras's patience rule compared on an
#    overfitting run on a small digits training set: where each stops, and the test accuracy
#    of the weights it restores;
# 3. the activation-statistics figure of the batch-normalization paper (median and 15th/85th
#    percentiles over training) for a deep self-normalizing network and a deep ReLU network;
# 4. a deep tanh network that does not train with a bad initialization, diagnosed with
#    `GradientStatistics`, `ActivationStatistics` and `DivergenceGuard` (Glorot & Bengio 2010)
#    and fixed with Glorot's initialization; the same measurements for sigmoid;
# 5. `DivergenceGuard` rolling back a run whose learning rate is too large;
# 6. `BackupAndRestore` resuming an interrupted run together with our callbacks' state.
#
# Everything runs on the CPU in about two minutes.

# %%
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

from keras_normkit import callbacks, schedules
from keras_normkit.layers.selu import SELU
from keras_normkit.plotting import (
    plot_activation_statistics,
    plot_gradient_statistics,
    plot_schedules,
)

matplotlib.rcParams["figure.dpi"] = 72
keras.utils.set_random_seed(0)

# %% [markdown]
# ## 1. Schedules
#
# All schedules are `keras.optimizers.schedules.LearningRateSchedule`s written with
# `keras.ops`, so they are evaluated inside the compiled train step from the optimizer's
# step counter, and they accept a whole vector of steps, which is how they are plotted here.
# `Join(schedules, boundaries)` runs each piece from its boundary on, each seeing the steps
# since its boundary; Keras's own schedules compose too.

# %%
steps = 3000
cosine = keras.optimizers.schedules.CosineDecay(0.1, decay_steps=2500)
panels = {
    "Decay": {
        "NaturalExpDecay": schedules.NaturalExpDecay(0.1, 0.001),
        "NaturalExpDecay (staircase)": schedules.NaturalExpDecay(0.1, 0.5, 500, staircase=True),
    },
    "Cyclical (Smith 2017)": {
        mode: schedules.CyclicalLearningRate(0.01, 0.1, 250, mode=mode, gamma=0.999)
        for mode in ("triangular", "triangular2", "exp_range")
    },
    "One-cycle": {
        f"OneCycle ({a})": schedules.OneCycle(0.1, steps, annealing=a) for a in ("cosine", "linear")
    },
    "Warm-up and Join": {
        "Warmup(cosine, 500)": schedules.Warmup(cosine, 500),
        "Warmup(0.1, exponential)": schedules.Warmup(0.1, 500, 0.001, shape="exponential"),
        "Join(cosine restarts)": schedules.Join(
            [keras.optimizers.schedules.CosineDecay(0.1, 1000)] * 3, [1000, 2000]
        ),
    },
}
figure, axes = plt.subplots(2, 2, figsize=(11, 6.5))
for ax, (title, group) in zip(axes.ravel(), panels.items(), strict=True):
    plot_schedules(group, steps, ax=ax)
    ax.set_title(title)
figure.tight_layout()

# %% [markdown]
# `Join(Warmup(peak, n), CosineDecay(peak, ...))` is continuous at the boundary: the warm-up
# ends exactly at the value the decay starts from.

# %%
warm_then_cosine = schedules.Join([schedules.Warmup(0.1, 500), cosine], boundaries=[500])
print([round(float(warm_then_cosine(s)), 5) for s in (498, 499, 500, 501)])

# %% [markdown]
# ## 2. Early stopping on an overfitting run
#
# A 1-hidden-layer MLP trained with Adam on only 100 digits (validation: 300, test: the
# remaining 1397) overfits within a few epochs. We train it once for 60 epochs, recording the
# logs and the weights after every epoch; then each stopping rule is replayed on those logs.
# The callbacks only read the logs and the weights, so the replay stops exactly where a `fit`
# with that callback would (checked below for one criterion with a real `fit`).

# %%
x, y = load_digits(return_X_y=True)
x = (x / 16.0).astype("float32")
order = np.random.default_rng(0).permutation(len(x))
x, y = x[order], y[order]
train, val, test = (x[:100], y[:100]), (x[100:400], y[100:400]), (x[400:], y[400:])


def mlp():
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((64,)), keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)]
    )
    model.compile(
        keras.optimizers.Adam(0.03),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


class Recorder(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.logs, self.weights = [], []

    def on_epoch_end(self, epoch, logs=None):
        self.logs.append(dict(logs))
        self.weights.append(self.model.get_weights())


model = mlp()
recorder = Recorder()
fit_args = dict(validation_data=val, batch_size=50, shuffle=False, verbose=0)
model.fit(*train, epochs=60, callbacks=[recorder], **fit_args)
val_loss = np.array([logs["val_loss"] for logs in recorder.logs])
train_loss = np.array([logs["loss"] for logs in recorder.logs])
print(f"lowest validation loss {val_loss.min():.3f} at epoch {val_loss.argmin()}")


# %%
class Replay:
    """A stand-in model for replaying recorded epochs through a callback."""

    def __init__(self, weights):
        self.recorded, self.stop_training, self.metrics = weights, False, []
        self.epoch = None

    def get_weights(self):
        return self.recorded[self.epoch]

    def set_weights(self, weights):
        self.restored = weights


def replay(callback, logs):
    stand_in = Replay(recorder.weights)
    callback.set_model(stand_in)
    callback.on_train_begin()
    for epoch, epoch_logs in enumerate(logs):
        stand_in.epoch = epoch
        callback.on_epoch_begin(epoch)
        callback.on_epoch_end(epoch, dict(epoch_logs))
        if stand_in.stop_training:
            break
    callback.on_train_end()
    return stand_in.restored


criteria = {
    "patience 5 (Keras)": dict(criterion="patience", patience=5),
    "GL_2": dict(criterion="generalization_loss", alpha=2.0),
    "GL_5": dict(criterion="generalization_loss", alpha=5.0),
    "PQ_0.5 (k=5)": dict(criterion="progress_quotient", alpha=0.5),
    "PQ_2 (k=5)": dict(criterion="progress_quotient", alpha=2.0),
    "UP_2 (k=5)": dict(criterion="up", alpha=2),
    "UP_3 (k=5)": dict(criterion="up", alpha=3),
}
evaluator = mlp()
rows = []
for name, kwargs in criteria.items():
    stop = callbacks.EarlyStopping(**kwargs, restore_best_weights=True)
    evaluator.set_weights(replay(stop, recorder.logs))
    accuracy = evaluator.evaluate(*test, verbose=0)[1]
    stopped = stop.stopped_epoch if stop.stop_reason is not None else None  # 0 if not stopped
    rows.append((name, stopped, stop.best_epoch, val_loss[stop.best_epoch], accuracy))
evaluator.set_weights(recorder.weights[-1])
rows.append(("no early stopping", None, 59, val_loss[-1], evaluator.evaluate(*test, verbose=0)[1]))
print(f"{'criterion':<20}{'stopped':>8}{'restored':>9}{'val loss':>10}{'test acc':>10}")
for name, stopped, best, loss, accuracy in rows:
    stopped = "-" if stopped is None else stopped
    print(f"{name:<20}{stopped:>8}{best:>9}{loss:>10.3f}{accuracy:>10.3f}")

# %%
figure, ax = plt.subplots(figsize=(9, 4))
ax.plot(val_loss, label="validation loss", color="C0")
ax.plot(train_loss, label="training loss", color="C1")
for i, (name, stopped, *_rest) in enumerate(rows[:-1]):
    if stopped is not None:
        ax.axvline(stopped, color=f"C{i + 2}", linestyle="--", linewidth=1, label=f"{name} stops")
ax.set_xlabel("epoch")
ax.set_ylabel("cross-entropy")
ax.set_yscale("log")
ax.legend(fontsize="small", ncol=2)
figure.tight_layout()

# %% [markdown]
# What the table shows on this run: GL stops first, right after the validation loss starts
# to climb; the patience rule and UP need several more epochs of evidence; PQ does not stop
# at all here, because the training loss is still falling fast (the progress `P_k` stays
# large, so `GL / P_k` stays small). The test accuracies of the restored weights are within
# about one percentage point of each other and of training to the end: with cross-entropy,
# the validation loss mostly rises through over-confidence while the accuracy barely moves.
# Early stopping here buys a much shorter run and a better-calibrated model, not accuracy.
#
# The same GL_5 rule inside a real `fit` stops at the same epoch and restores the same weights:

# %%
model = mlp()
stop = callbacks.EarlyStopping(
    criterion="generalization_loss", alpha=5.0, restore_best_weights=True
)
model.fit(*train, epochs=60, callbacks=[stop], **fit_args)
same = all(
    np.allclose(a, b)
    for a, b in zip(model.get_weights(), recorder.weights[stop.best_epoch], strict=True)
)
print(stop.stopped_epoch, stop.best_epoch, stop.stop_reason, "same weights:", same)

# %% [markdown]
# `ReduceLROnPlateau` works with a schedule (Keras's raises a `TypeError`): it wraps the
# schedule in `schedules.Scaled` and lowers its multiplier. `LearningRateMonitor` puts the rate
# into the logs.

# %%
model = mlp()
model.compile(
    keras.optimizers.Adam(schedules.CyclicalLearningRate(1e-3, 3e-2, step_size=4)),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
history = model.fit(
    *train,
    epochs=20,
    callbacks=[
        callbacks.ReduceLROnPlateau(factor=0.5, patience=2),
        callbacks.LearningRateMonitor(),
    ],
    **fit_args,
)
figure, ax = plt.subplots(figsize=(6, 3))
ax.plot(history.history["learning_rate"], marker="o")
ax.set_xlabel("epoch")
ax.set_ylabel("learning rate (end of epoch)")
figure.tight_layout()

# %% [markdown]
# ## 3. Activation statistics: SNN vs ReLU
#
# `ActivationStatistics` evaluates a fixed probe batch after every epoch and records, per
# layer, the mean, the variance and percentiles of the activations (Ioffe & Szegedy 2015,
# Figure 1). In an 8-layer self-normalizing network (LeCun-normal `Dense` + `SELU`) the
# statistics stay near mean 0 and variance 1 in every layer (training slowly widens the deepest
# layers' spread); in the same network with ReLU (Glorot init) the activations are
# non-negative and their spread collapses with depth.

# %%
z = (x - x[:1000].mean(axis=0)) / (x[:1000].std(axis=0) + 1e-8)


def deep(kind):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,))])
    for i in range(8):
        if kind == "snn":
            model.add(keras.layers.Dense(64, kernel_initializer="lecun_normal"))
            model.add(SELU(name=f"layer{i + 1}"))
        else:
            model.add(keras.layers.Dense(64))
            model.add(keras.layers.ReLU(name=f"layer{i + 1}"))
    model.add(keras.layers.Dense(10))
    model.compile(
        keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


statistics = {}
for kind in ("snn", "relu"):
    stats = callbacks.ActivationStatistics(z[:256], layers=["layer1", "layer4", "layer8"])
    deep(kind).fit(z[:1000], y[:1000], epochs=6, batch_size=50, callbacks=[stats], verbose=0)
    statistics[kind] = stats
    figure = plot_activation_statistics(stats, figsize=(10, 2.6))
    figure.suptitle(f"{kind.upper()}: activations on the probe batch", y=1.02)
    last = {name: (h["mean"][-1], h["variance"][-1]) for name, h in stats.history.items()}
    print(kind, {name: (round(m, 3), round(v, 3)) for name, (m, v) in last.items()})

# %% [markdown]
# ## 4. Diagnosing a deep net that does not train (Glorot & Bengio 2010)
#
# Ten `Dense` layers of 64 tanh units and a 10-way softmax output, trained with plain SGD
# (rate 0.1, batches of 32) for 10 epochs on 1000 digits (pixels scaled to [0, 1]; validation:
# the other 797), with three initializations of every kernel (biases start at 0):
#
# - `N(0, 1)`: unit-variance normal weights, far too large for 64 inputs;
# - `standard`: U[−1/√n, 1/√n] with n = 64 inputs, the "standard" initialization of the paper;
# - `glorot`: U[−√6/√(n_in + n_out), √6/√(n_in + n_out)] (Keras's default `glorot_uniform`).
#
# Three callbacks watch each run on a fixed probe batch (256 training digits) after every
# epoch: `GradientStatistics` (per layer, the standard deviation of the back-propagated
# gradient `dL/da` of the layer's output, `output_grad_std`, the norm of its weight gradient
# and the fraction of saturated units, `|a| > 0.99`), `ActivationStatistics` (percentiles of
# the activations) and `DivergenceGuard(probe_data=...)`, which would stop a run with a NaN or
# exploding loss, NaN weights or a gradient norm above 10 times its running median.

# %%
# A fresh initializer per layer: an unseeded Keras 3 initializer instance draws its seed once,
# so reusing one instance would give every layer the same kernel.
n_in = 64
initializers = {
    "N(0, 1)": lambda: keras.initializers.RandomNormal(0.0, 1.0),
    "standard": lambda: keras.initializers.RandomUniform(-1 / np.sqrt(n_in), 1 / np.sqrt(n_in)),
    "glorot": keras.initializers.GlorotUniform,
}
hidden = [f"h{i}" for i in range(10)]
probe = (x[:256], y[:256])


def deep_net(activation, initializer, rate=0.1):
    """`initializer`: a function returning a new initializer."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,))])
    for name in hidden:
        model.add(
            keras.layers.Dense(
                64, activation=activation, kernel_initializer=initializer(), name=name
            )
        )
    model.add(keras.layers.Dense(10, kernel_initializer=initializer(), name="out"))
    model.compile(
        keras.optimizers.SGD(rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def diagnose(activation, initializer, epochs=10):
    gradients = callbacks.GradientStatistics(probe, layers=hidden)
    activations = callbacks.ActivationStatistics(
        probe[0], layers=["h0", "h4", "h9"], log_values=False
    )
    guard = callbacks.DivergenceGuard(probe_data=probe, grad_norm_factor=10.0)
    history = deep_net(activation, initializer).fit(
        x[:1000],
        y[:1000],
        validation_data=(x[1000:], y[1000:]),
        epochs=epochs,
        batch_size=32,
        verbose=0,
        callbacks=[gradients, activations, guard],
    )
    return history, gradients, activations, guard


def summary(label, history, gradients, guard):
    """Saturation and first/last `output_grad_std` before training and after epoch 1."""
    cells = []
    for record in (0, 1):
        h = gradients.history
        saturated = np.mean([h[name]["saturation"][record] for name in hidden])
        ratio = h["h0"]["output_grad_std"][record] / h["h9"]["output_grad_std"][record]
        cells.append(f"{saturated:>8.1%}{ratio:>10.2g}")
    accuracy = history.history["val_accuracy"][-1]
    print(f"{label:<18}{''.join(cells)}{accuracy:>9.3f}{len(guard.events):>8}")


header = f"{'':<18}{'satur.':>8}{'h0/h9':>10}{'satur.':>8}{'h0/h9':>10}{'val acc':>9}{'events':>8}"
print(f"{'':<18}{'before training':>18}{'after epoch 1':>18}")
print(header)
runs = {}
for label, initializer in initializers.items():
    runs[label] = diagnose("tanh", initializer)
    summary(f"tanh, {label}", runs[label][0], runs[label][1], runs[label][3])

# %% [markdown]
# Columns, before training and after the first epoch: the mean over the ten layers of the
# fraction of saturated units (`satur.`) and the ratio of the first hidden layer's
# `output_grad_std` to the last one's (`h0/h9`); then the validation accuracy after 10 epochs
# (chance is about 0.1) and the number of `DivergenceGuard` events. On this run:
#
# - **N(0, 1)**: 71 % of the units are saturated at initialization. The others have large
#   gradients that *grow* toward the input (`h0/h9` about 700: an explosion, not a
#   vanishing); after the first epoch 97 % are saturated, the ratio has fallen below 1e-12
#   and the net stays at chance.
# - **standard**: no unit is saturated, but the back-propagated gradient shrinks at every
#   layer toward the input: the first layer's is about 0.006 of the last one's (the paper's
#   Figure 7, top). The net stays at chance within these 10 epochs.
# - **glorot**: no saturation, and the gradient does not shrink with depth (ratio about
#   0.5 before training, the paper's Figure 7, bottom); 96 % validation accuracy.
#
# `DivergenceGuard` stays silent on all three: a stalled run is not a divergent one (the loss
# is finite and flat, and the guard measures the gradient norm at the end of each epoch, after
# the N(0, 1) net's initial explosion has turned into saturation), so the guard is no
# diagnostic for it; the per-layer statistics are. The figures show `output_grad_std` and the
# saturation per layer (left: vs depth, one line per epoch, lighter is earlier; right: vs
# epoch, one line per layer).

# %%
for label in ("standard", "glorot"):
    figure = plot_gradient_statistics(
        runs[label][1], stats=["output_grad_std", "saturation"], figsize=(10, 5)
    )
    figure.suptitle(f"tanh, {label} initialization", y=1.01)

# %% [markdown]
# The activations of the first, middle and last hidden layers show the two failure modes
# directly: with N(0, 1) weights the 15th and 85th percentiles sit at ±1 (saturated tanh);
# with the standard initialization the activations shrink toward 0 with depth; with Glorot's
# their spread is kept.

# %%
for label in initializers:
    figure = plot_activation_statistics(runs[label][2], figsize=(10, 2.4))
    figure.suptitle(f"tanh, {label}: activations on the probe batch", y=1.04)

# %% [markdown]
# **Sigmoid.** The same measurements with sigmoid units (3 epochs) tell a different story, and
# Glorot's initialization is not a fix there. With N(0, 1) weights about 40 % of the units are
# saturated (outside [0.01, 0.99]; 24 % to 50 % per layer), yet the gradients do not vanish
# (first/last ratio about 0.3) and the net trains, slowly (0.36 validation accuracy after 3
# epochs, 0.81 after 10, measured separately; tanh with Glorot's initialization reaches 0.89
# after 3). With Glorot's initialization no
# unit saturates, but since sigmoid' ≤ 1/4 the gradient shrinks by several orders of
# magnitude over ten layers (ratio about 2e-6) and the net stays at chance. (Glorot &
# Bengio's remedy for sigmoid nets is to avoid them: tanh or softsign with the normalized
# initialization.)

# %%
print(f"{'':<18}{'before training':>18}{'after epoch 1':>18}")
print(header)
for label in ("N(0, 1)", "glorot"):
    history, gradients, _, guard = diagnose("sigmoid", initializers[label], epochs=3)
    summary(f"sigmoid, {label}", history, gradients, guard)

# %% [markdown]
# ## 5. `DivergenceGuard` on a diverging run
#
# The good network (tanh, Glorot) with a learning rate of 1.0 instead of 0.1 diverges within
# the first epoch: without a guard its loss is above 10 after 3 epochs and the net is at
# chance. The loss rule of `DivergenceGuard` (10 times the best end-of-epoch loss) cannot see
# that, since the first epoch is already bad; an absolute bound on the probe-batch gradient
# norm can. The healthy run of section 4 had gradient norms below 2.5 (`guard.grad_norms`);
# `max_grad_norm=5.0` with `on_divergence="rollback"` restores the last good weights and
# halves the rate after each epoch whose norm exceeds it.

# %%
fit_deep = dict(validation_data=(x[1000:], y[1000:]), batch_size=32, verbose=0)
print("healthy run, largest norm:", round(max(runs["glorot"][3].grad_norms), 2))
unguarded = deep_net("tanh", initializers["glorot"], rate=1.0).fit(
    x[:1000], y[:1000], epochs=3, **fit_deep
)
print(
    "without the guard, 3 epochs: loss",
    np.round(unguarded.history["loss"], 2).tolist(),
    "val acc",
    round(unguarded.history["val_accuracy"][-1], 3),
)
guard = callbacks.DivergenceGuard(probe_data=probe, max_grad_norm=5.0, on_divergence="rollback")
guarded = deep_net("tanh", initializers["glorot"], rate=1.0).fit(
    x[:1000], y[:1000], epochs=10, callbacks=[guard, callbacks.LearningRateMonitor()], **fit_deep
)
print("with the guard, 10 epochs: val acc", round(guarded.history["val_accuracy"][-1], 3))
for event in guard.events:
    print(
        f"  epoch {event['epoch']}: {event['trigger']} {event['value']:.2f} -> "
        f"{event['action']}, learning rate {event['learning_rate']}"
    )
print("gradient norms", np.round(guard.grad_norms, 2).tolist())

# %% [markdown]
# ## 6. Resuming an interrupted run with `BackupAndRestore`
#
# `keras_normkit.callbacks.BackupAndRestore` is a drop-in for Keras's: it backs up the weights,
# optimizer and epoch the same way, and also the state of every keras_normkit callback of the
# same `fit` (here the gradient history, the guard's good weights and events, the plateau
# counter). The guarded run of section 5, with four of our callbacks, is trained for 6 epochs
# without interruption, then again with a callback that raises at the start of epoch 3, then
# resumed by a new `fit` with new model and callback instances (the same callbacks, in the
# same order). With `shuffle=False`, the resumed run should reproduce the uninterrupted one.

# %%
import tempfile  # noqa: E402


class Interrupt(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 3:
            raise RuntimeError("interrupted at epoch 3")


def resumable_run(backup_dir, extra=()):
    ours = {
        "gradients": callbacks.GradientStatistics(probe, layers=hidden, log_values=True),
        "guard": callbacks.DivergenceGuard(
            probe_data=probe, max_grad_norm=5.0, on_divergence="rollback"
        ),
        "plateau": callbacks.ReduceLROnPlateau(monitor="val_loss", patience=2),
        "rate": callbacks.LearningRateMonitor(),
    }
    backup = callbacks.BackupAndRestore(backup_dir)
    history = deep_net("tanh", initializers["glorot"], rate=1.0).fit(
        x[:1000],
        y[:1000],
        validation_data=(x[1000:], y[1000:]),
        epochs=6,
        batch_size=32,
        shuffle=False,
        verbose=0,
        callbacks=[backup, *ours.values(), *extra],
    )
    return history, ours


work = tempfile.mkdtemp()
full, full_callbacks = resumable_run(os.path.join(work, "uninterrupted"))
try:
    resumable_run(os.path.join(work, "interrupted"), extra=[Interrupt()])
except RuntimeError as error:
    print("first attempt:", error)
resumed, resumed_callbacks = resumable_run(os.path.join(work, "interrupted"))
print("epochs run by the resumed fit:", resumed.epoch)
same_logs = all(
    np.allclose(resumed.history[key], full.history[key][3:], equal_nan=True) for key in full.history
)
a, b = full_callbacks["gradients"], resumed_callbacks["gradients"]
same_gradients = a.epochs == b.epochs and all(
    np.allclose(a.history[n][s], b.history[n][s], equal_nan=True)
    for n in hidden
    for s in a.history[n]
)
print("same logs for epochs 3-5:", same_logs)
print("same gradient history, records", b.epochs, ":", same_gradients)
events = resumed_callbacks["guard"].events
print("guard events (epoch, rate):", [(e["epoch"], e["learning_rate"]) for e in events])
print("same events:", full_callbacks["guard"].events == events)
same_weights = all(
    np.array_equal(u, v)
    for u, v in zip(full.model.get_weights(), resumed.model.get_weights(), strict=True)
)
print("same final weights:", same_weights)

# %% [markdown]
# The resumed `GradientStatistics` holds all seven records (before training and after each of
# the 6 epochs), the three made before the interruption included, and the guard's two
# roll-backs and halved rate carry over. With `keras.callbacks.BackupAndRestore` instead, the
# weights, optimizer and epoch would be restored the same way, but the new callback instances
# would start empty.
