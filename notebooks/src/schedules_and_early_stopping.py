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
#    percentiles over training) for a deep self-normalizing network and a deep ReLU network.
#
# Everything runs on the CPU in well under two minutes.

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
from keras_normkit.plotting import plot_activation_statistics, plot_schedules

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
    stop = callbacks.EarlyStopping(**kwargs)
    evaluator.set_weights(replay(stop, recorder.logs))
    accuracy = evaluator.evaluate(*test, verbose=0)[1]
    rows.append((name, stop.stopped_epoch, stop.best_epoch, val_loss[stop.best_epoch], accuracy))
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
stop = callbacks.EarlyStopping(criterion="generalization_loss", alpha=5.0)
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
