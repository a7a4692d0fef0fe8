# %% [markdown]
# # Self-normalizing networks
#
# Klambauer et al. (2017) choose the SELU constants so that the map from a layer's input
# moments (mean, variance) to its output moments has an attracting fixed point. This notebook
# shows, with `keras_normkit`:
#
# 1. activation statistics per layer in deep networks: SNN vs ReLU vs ReLU + BatchNorm;
# 2. the moment map g and its vector field around the fixed point (0, 1);
# 3. training curves of deep SNN, ReLU and BatchNorm networks on scikit-learn's digits.

# %%
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from keras_normkit import activations
from keras_normkit.layers import SELU, AlphaDropout

plt.rcParams["figure.dpi"] = 72

# %% [markdown]
# ## 1. Activation statistics with depth
# 32 fully connected layers of 256 units on standardized Gaussian inputs, at initialisation.
# SNN: LeCun-normal `Dense` + `SELU`. ReLU: He-normal `Dense` + `ReLU`. BatchNorm: He-normal
# `Dense` + `BatchNormalization` + `ReLU` (in training mode, so it uses batch statistics).


# %%
def hidden_stack(kind, depth, units=256):
    layers = []
    for _ in range(depth):
        if kind == "SNN":
            layers += [keras.layers.Dense(units, kernel_initializer="lecun_normal"), SELU()]
        elif kind == "ReLU":
            layers += [
                keras.layers.Dense(units, kernel_initializer="he_normal"),
                keras.layers.ReLU(),
            ]
        else:
            layers += [
                keras.layers.Dense(units, kernel_initializer="he_normal"),
                keras.layers.BatchNormalization(momentum=0.9),
                keras.layers.ReLU(),
            ]
    return layers


def per_layer_statistics(kind, depth=32, units=256, seed=0):
    keras.utils.set_random_seed(seed)
    x = np.random.default_rng(seed).standard_normal((1000, units)).astype("float32")
    means, variances = [], []
    for layer in hidden_stack(kind, depth, units):
        x = keras.ops.convert_to_numpy(layer(x, training=True))
        if isinstance(layer, (SELU, keras.layers.ReLU)):
            means.append(x.mean())
            variances.append(x.var())
    return np.array(means), np.array(variances)


stats = {kind: per_layer_statistics(kind) for kind in ["SNN", "ReLU", "ReLU + BatchNorm"]}
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for kind, (means, variances) in stats.items():
    axes[0].plot(np.arange(1, 33), means, marker=".", label=kind)
    axes[1].plot(np.arange(1, 33), variances, marker=".", label=kind)
axes[0].axhspan(-0.1, 0.1, color="grey", alpha=0.15)
axes[1].axhspan(0.8, 1.2, color="grey", alpha=0.15)
axes[0].set(xlabel="layer", ylabel="activation mean", title="mean per layer")
axes[1].set(xlabel="layer", ylabel="activation variance", title="variance per layer", yscale="log")
axes[0].legend()
plt.tight_layout()
plt.show()
for kind, (means, variances) in stats.items():
    print(
        f"{kind:18s} mean in [{means.min():+.3f}, {means.max():+.3f}], "
        f"variance in [{variances.min():.3f}, {variances.max():.3f}]"
    )

# %% [markdown]
# The SNN's activations stay inside the grey bands (mean within ±0.1, variance within
# [0.8, 1.2]) at every depth, without any normalization layer. ReLU activations have a positive
# mean and a drifting variance; BatchNorm fixes the pre-activation statistics per batch but
# pays for it with batch dependence.
#
# ## 2. The moment map g and its fixed point
# `selu_moments(mu, nu)` maps the input moments to the output moments (normalized weights:
# ω = 0, τ = 1). Arrows show g(μ, ν) − (μ, ν); every arrow points towards (0, 1).
# The Jacobian there has spectral norm 0.7877 < 1, which is why (0, 1) attracts.

# %%
mu_grid, nu_grid = np.meshgrid(np.linspace(-0.6, 0.6, 13), np.linspace(0.4, 2.0, 13))
g_mu, g_nu = activations.selu_moments(mu_grid, nu_grid)
fig, ax = plt.subplots(figsize=(5, 4.2))
ax.quiver(mu_grid, nu_grid, g_mu - mu_grid, g_nu - nu_grid, angles="xy")
ax.plot([0], [1], "r*", markersize=14, label="fixed point (0, 1)")
# A trajectory: iterate the map from a far-away start.
point = np.array([0.5, 1.9])
path = [point]
for _ in range(12):
    point = np.array(activations.selu_moments(*point))
    path.append(point)
path = np.array(path)
ax.plot(path[:, 0], path[:, 1], "o-", color="tab:orange", label="iterates of g")
ax.set(xlabel="mean μ", ylabel="variance ν", title="SELU moment map")
ax.legend(loc="upper left")
plt.show()
jacobian = activations.selu_jacobian(0.0, 1.0)
print("Jacobian at (0, 1):\n", jacobian.round(6))
print("spectral norm:", round(float(np.linalg.norm(jacobian, 2)), 4))

# %% [markdown]
# Other fixed points: `selu_parameters(mean, variance)` returns the (α, λ) whose map has that
# fixed point; `SELU(fixed_point=...)` and `AlphaDropout(..., fixed_point=...)` use it.

# %%
for fixed_point in [(0.0, 1.0), (0.0, 2.0), (0.2, 1.5), (-0.1, 0.8)]:
    alpha, scale = activations.selu_parameters(*fixed_point)
    moments = activations.selu_moments(*fixed_point, alpha, scale)
    norm = np.linalg.norm(activations.selu_jacobian(*fixed_point, alpha, scale), 2)
    print(
        f"fixed point {fixed_point}: alpha={alpha:.6f} scale={scale:.6f} "
        f"g(fixed point)=({moments[0]:+.2e}, {moments[1]:.6f}) |J|={norm:.4f}"
    )

# %% [markdown]
# ## 3. Training deep networks on digits
# 16 hidden layers of 128 units, Adam, 25 epochs, the same budget for each network
# (BatchNorm with momentum 0.9, as suits ~500 training steps).

# %%
digits = load_digits()
x_train, x_test, y_train, y_test = train_test_split(
    digits.data.astype("float32"),
    digits.target,
    test_size=0.25,
    random_state=0,
    stratify=digits.target,
)
scaler = StandardScaler().fit(x_train)
x_train, x_test = scaler.transform(x_train), scaler.transform(x_test)


def classifier(kind, depth=16, units=128, seed=0):
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((64,))] + hidden_stack(kind, depth, units)
    if kind == "SNN":
        layers.append(AlphaDropout(0.05, seed=seed))
    model = keras.Sequential(layers + [keras.layers.Dense(10)])
    model.compile(
        keras.optimizers.Adam(5e-4),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


histories, models = {}, {}
for kind in ["SNN", "ReLU", "ReLU + BatchNorm"]:
    model = models[kind] = classifier(kind)
    histories[kind] = model.fit(
        x_train, y_train, validation_data=(x_test, y_test), epochs=25, batch_size=64, verbose=0
    ).history

fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for kind, history in histories.items():
    axes[0].plot(history["loss"], label=kind)
    axes[1].plot(history["val_accuracy"], label=kind)
axes[0].set(xlabel="epoch", ylabel="training loss", yscale="log", title="training loss")
axes[1].set(xlabel="epoch", ylabel="test accuracy", title="test accuracy", ylim=(0.5, 1.0))
axes[1].legend()
plt.tight_layout()
plt.show()
for kind, history in histories.items():
    print(
        f"{kind:18s} final training loss {history['loss'][-1]:.4f}, "
        f"test accuracy {history['val_accuracy'][-1]:.4f}"
    )

# %% [markdown]
# The 16-layer BatchNorm network trains slowly at this budget: deep batch-normalized ReLU
# networks have exploding gradients at initialisation (Yang et al., ICLR 2019), and at test
# time its moving statistics lag the weights ("training mode" uses batch statistics for BN and
# keeps dropout on for the SNN). The SNN needs no statistics at all.

# %%
for kind, model in models.items():
    row = []
    for data, labels in [(x_train, y_train), (x_test, y_test)]:
        for training in (False, True):
            logits = keras.ops.convert_to_numpy(model(data, training=training))
            row.append(float(np.mean(logits.argmax(1) == labels)))
    print(
        f"{kind:18s} train acc {row[0]:.3f} (training mode {row[1]:.3f}), "
        f"test acc {row[2]:.3f} (training mode {row[3]:.3f})"
    )

# %% [markdown]
# ## 4. The paper's benchmarks, on the real data
# `examples/snn_benchmarks/` re-runs the paper's comparisons on the real UCI, HTRU2 and Tox21
# data (the guide page "Do self-normalizing networks win on tabular data?" has the tables).
# Here, from their results files: a 16-layer SNN trained on the UCI abalone data (every hidden
# layer's mean and variance on a probe batch, with `ActivationStatistics`), and the HTRU2
# cross-validated AUCs done so far.

# %%
import json
import pathlib

results = pathlib.Path("data")
runs = json.loads((results / "snn_activations.json").read_text())
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for run in runs:
    label = f"{run['optimizer']} {run['lr']:g}"
    layers = np.arange(1, run["layers"] + 1)
    for ax, stat in zip(axes, ("mean", "variance"), strict=True):
        ax.plot(layers, run[stat][0], "k.-", alpha=0.5)
        ax.plot(layers, run[stat][-1], ".-", label=f"after {run['epochs'][-1]} epochs, {label}")
axes[0].plot([], [], "k.-", alpha=0.5, label="before training")
axes[0].set(xlabel="hidden layer", ylabel="mean", title=f"{runs[0]['dataset']}: activation mean")
axes[1].set(xlabel="hidden layer", ylabel="variance", title="activation variance", yscale="log")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Before training every layer sits near the fixed point (0, 1). Training moves the weights away
# from Σw = 0, Σw² = 1, and the variance of the middle layers grows (bounded, as the paper's
# Theorems 2 and 3 say, but not 1), faster with Adam than with SGD.

# %%
htru2 = json.loads((results / "snn_htru2.json").read_text())
for method in ("snn", "msra", "batchnorm", "layernorm", "weightnorm", "highway", "resnet"):
    aucs = [r["test"] for r in htru2 if r["method"] == method]
    if aucs:
        print(
            f"{method:10s} HTRU2 AUC {np.mean(aucs):.4f} ± {np.std(aucs):.4f} ({len(aucs)} folds)"
        )
