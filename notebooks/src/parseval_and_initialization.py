# %% [markdown]
# # Parseval networks, LSUV and delta-orthogonal initialisation
#
# Keeping every layer close to an isometry keeps deep networks trainable and robust. This
# notebook shows the three tools of `keras_normkit` for it, on scikit-learn's bundled digits
# (no download):
#
# 1. `ParsevalConstraint` (Cisse et al., 2017): the retraction
#    `W <- (1 + beta) W - beta W W^T W` after each optimizer step keeps every singular value
#    of every kernel at 1, so the network is (nearly) 1-Lipschitz.
# 2. `lsuv_initialize` (Mishkin & Matas, 2016): orthogonal kernels rescaled layer by layer
#    to unit pre-activation variance on a data batch.
# 3. `ConvolutionDeltaOrthogonal` (Xiao et al., 2018): an orthogonal matrix at the centre
#    of each convolution kernel, zeros elsewhere: a deep linear CNN is an exact isometry.

# %%
import os
import pathlib
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from keras_normkit.constraints import ParsevalConstraint
from keras_normkit.initializers import ConvolutionDeltaOrthogonal, lsuv_initialize

sys.path.insert(0, str(pathlib.Path("..").resolve() / "examples"))
from parseval_digits import parseval_mlp  # examples/parseval_digits.py, shared with the tests

plt.rcParams["figure.dpi"] = 72
x, y = load_digits(return_X_y=True)
x_train, x_test, y_train, y_test = train_test_split(
    x, y, test_size=0.25, random_state=0, stratify=y
)
scaler = StandardScaler().fit(x_train)
# Standardized, then x3 for every model: a 1-Lipschitz network needs inputs far enough
# apart to reach confident logits.
xs_train = (3 * scaler.transform(x_train)).astype("float32")
xs_test = (3 * scaler.transform(x_test)).astype("float32")
x_train01, x_test01 = (x_train / 16).astype("float32"), (x_test / 16).astype("float32")
print(xs_train.shape, xs_test.shape)

# %% [markdown]
# ## 1. Parseval training: singular values stay at 1
#
# Two identical 64-128-128-128-10 ReLU MLPs (orthogonal initialisation, Adam), one with
# `ParsevalConstraint(beta=0.05)` on every `Dense` kernel. A callback records the singular
# values of the second hidden kernel during training.


# %%
class SingularValues(keras.callbacks.Callback):
    def __init__(self, layer_index, epochs):
        super().__init__()
        self.layer_index, self.epochs, self.values = layer_index, epochs, {}

    def record(self, epoch):
        kernel = self.model.layers[self.layer_index].kernel.numpy()
        self.values[epoch] = np.linalg.svd(kernel, compute_uv=False)

    def on_train_begin(self, logs=None):
        self.record(0)

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 in self.epochs:
            self.record(epoch + 1)


EPOCHS = 15
models, spectra = {}, {}
for name, constraint in [("plain", None), ("Parseval", ParsevalConstraint(beta=0.05))]:
    model = parseval_mlp(constraint)
    recorder = SingularValues(1, epochs=(5, EPOCHS))
    model.fit(xs_train, y_train, epochs=EPOCHS, batch_size=32, verbose=0, callbacks=[recorder])
    models[name], spectra[name] = model, recorder.values
    print(f"{name:9s} test accuracy {model.evaluate(xs_test, y_test, verbose=0)[1]:.4f}")

fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
for ax, name in zip(axes, spectra, strict=True):
    for epoch, values in spectra[name].items():
        ax.hist(values, bins=40, range=(0, 2.5), alpha=0.6, label=f"epoch {epoch}")
    ax.set_title(f"{name}: singular values of the 128x128 kernel")
    ax.set_xlabel("singular value")
    ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Without the constraint the spectrum spreads (from about 0.4 to 2: the layer shrinks some
# directions and nearly doubles others); with it every singular value stays at 1. The frame deviation
# `||G - I||_F / sqrt(n)` (`G` the smaller Gram matrix) of every kernel, and the empirical
# Lipschitz constant (the largest spectral norm of the logits' Jacobian over test inputs):

# %%
import tensorflow as tf
from parseval_digits import empirical_lipschitz, frame_deviation

for name, model in models.items():
    deviations = [frame_deviation(layer.kernel.numpy()) for layer in model.layers]
    print(
        f"{name:9s} deviations {np.round(deviations, 3)}  "
        f"Lipschitz estimate {empirical_lipschitz(model, xs_test):.3f}"
    )

# %% [markdown]
# ## 2. Robustness to small input perturbations
#
# Test accuracy when every test input is moved by an L2 distance `epsilon`, (a) in a
# random Gaussian direction and (b) in the worst direction to first order, the normalized
# gradient of the loss (a one-step L2 attack, computed for each model on itself). A
# smaller Lipschitz constant means the logits can move less for the same `epsilon`.


# %%
def perturbed_accuracy(model, inputs, labels, epsilon, direction):
    if direction == "random":
        step = np.random.default_rng(0).normal(size=inputs.shape)
    else:
        tensor = tf.constant(inputs)
        with tf.GradientTape() as tape:
            tape.watch(tensor)
            loss = keras.losses.sparse_categorical_crossentropy(
                labels, model(tensor), from_logits=True
            )
        step = tape.gradient(loss, tensor).numpy()
    step /= np.linalg.norm(step, axis=1, keepdims=True) + 1e-12
    perturbed = (inputs + epsilon * step).astype("float32")
    return np.mean(keras.ops.convert_to_numpy(model(perturbed)).argmax(1) == labels)


epsilons = np.linspace(0, 8, 9)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
for ax, direction in zip(axes, ["random", "gradient"], strict=True):
    for name, model in models.items():
        accuracy = [perturbed_accuracy(model, xs_test, y_test, e, direction) for e in epsilons]
        ax.plot(epsilons, accuracy, "o-", label=name)
        print(f"{direction:8s} {name:9s} {np.round(accuracy, 3)}")
    ax.set_title(f"{direction} direction")
    ax.set_xlabel("L2 perturbation epsilon (standardized x3 inputs)")
    ax.grid(alpha=0.3)
    ax.legend()
axes[0].set_ylabel("test accuracy")
plt.show()

# %% [markdown]
# ## 3. LSUV: unit variance at every layer of a 20-layer ReLU MLP
#
# With Keras's default Glorot-uniform kernels the pre-activation variance halves at every
# ReLU layer and the signal vanishes; `lsuv_initialize` brings every layer to variance 1
# (within `tolerance`) on a batch of 512 training images and returns a per-layer report.


# %%
def deep_mlp(depth=20, width=32):
    keras.utils.set_random_seed(0)
    hidden = [keras.layers.Dense(width, activation="relu") for _ in range(depth - 1)]
    return keras.Sequential([keras.Input((64,))] + hidden + [keras.layers.Dense(10)])


def pre_activation_variances(model, inputs):
    variances, h = [], inputs
    for layer in model.layers:
        z = h @ layer.kernel.numpy() + layer.bias.numpy()
        variances.append(np.var(z))
        h = keras.ops.convert_to_numpy(layer.activation(z))
    return variances


deep = {"default (Glorot)": deep_mlp(), "LSUV": deep_mlp()}
report = lsuv_initialize(deep["LSUV"], x_train01[:512], tolerance=0.05, seed=0)
print(report[:3])
plt.figure(figsize=(5, 3.2))
for name, model in deep.items():
    plt.semilogy(range(1, 21), pre_activation_variances(model, x_train01[:512]), "o-", label=name)
plt.xlabel("layer")
plt.ylabel("pre-activation variance")
plt.legend()
plt.grid(alpha=0.3)
plt.show()

# %% [markdown]
# Training both with SGD (momentum 0.9, learning rate 0.01): the default initialisation
# stalls at chance, LSUV learns.

# %%
plt.figure(figsize=(5, 3.2))
for name, model in deep.items():
    model.compile(
        keras.optimizers.SGD(0.01, momentum=0.9),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    history = model.fit(x_train01, y_train, epochs=10, batch_size=64, verbose=0)
    plt.plot(history.history["accuracy"], label=name)
    print(f"{name:17s} test accuracy {model.evaluate(x_test01, y_test, verbose=0)[1]:.3f}")
plt.xlabel("epoch")
plt.ylabel("training accuracy")
plt.legend()
plt.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ## 4. Delta-orthogonal convolutions: dynamical isometry
#
# The input-output Jacobian of a 50-layer linear CNN (4 channels, 3x3 kernels, 'same'
# padding, 8x8x4 inputs). The network is linear, so its Jacobian is its output on the 256
# basis inputs, computed in one batch (float64).


# %%
def linear_cnn(initializer, depth=50):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8, 4), dtype="float64")])
    for _ in range(depth):
        model.add(
            keras.layers.Conv2D(
                4,
                3,
                padding="same",
                use_bias=False,
                kernel_initializer=initializer,
                dtype="float64",
            )
        )
    return model


basis = np.eye(256).reshape(256, 8, 8, 4)
plt.figure(figsize=(5, 3.2))
for name, initializer in [
    ("delta-orthogonal", ConvolutionDeltaOrthogonal()),
    ("Glorot uniform", "glorot_uniform"),
]:
    jacobian = keras.ops.convert_to_numpy(linear_cnn(initializer)(basis)).reshape(256, 256).T
    values = np.linalg.svd(jacobian, compute_uv=False)
    print(
        f"{name:16s} singular values in [{values.min():.3g}, {values.max():.3g}], "
        f"ratio {values.max() / values.min():.3g}"
    )
    plt.semilogy(values, label=name)
plt.xlabel("index")
plt.ylabel("singular value of the Jacobian")
plt.legend()
plt.grid(alpha=0.3)
plt.show()

# %% [markdown]
# Every singular value of the delta-orthogonal network is 1 to float64 precision. With
# Glorot-uniform kernels the spectrum spans many orders of magnitude; its smallest values
# are at float64 round-off, so the printed ratio is a lower bound of the condition number.

# %% [markdown]
# A deep (32 convolutions, 8 channels) tanh CNN trained on the 8x8 digit images with each
# initialisation (Adam with learning rate 2e-3, batches of 128, 3 epochs). With delta-orthogonal kernels the signal and the
# gradient pass through all 32 layers from the first step.


# %%
def deep_tanh_cnn(initializer, depth=32, channels=8):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8, 1))])
    model.add(keras.layers.Conv2D(channels, 3, padding="same", activation="tanh"))
    for _ in range(depth - 1):
        model.add(
            keras.layers.Conv2D(
                channels, 3, padding="same", activation="tanh", kernel_initializer=initializer
            )
        )
    model.add(keras.layers.Flatten())
    model.add(keras.layers.Dense(10))
    model.compile(
        keras.optimizers.Adam(2e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


images_train, images_test = x_train01.reshape(-1, 8, 8, 1), x_test01.reshape(-1, 8, 8, 1)
plt.figure(figsize=(5, 3.2))
for name, initializer in [
    ("delta-orthogonal", ConvolutionDeltaOrthogonal()),
    ("Glorot uniform", "glorot_uniform"),
]:
    model = deep_tanh_cnn(initializer)
    history = model.fit(images_train, y_train, epochs=3, batch_size=128, verbose=0)
    plt.plot(history.history["accuracy"], label=name)
    print(f"{name:16s} test accuracy {model.evaluate(images_test, y_test, verbose=0)[1]:.3f}")
plt.xlabel("epoch")
plt.ylabel("training accuracy")
plt.legend()
plt.grid(alpha=0.3)
plt.show()

# %% [markdown]
# References: Cisse et al., "Parseval Networks", ICML 2017 (arXiv:1704.08847); Mishkin &
# Matas, "All you need is a good init", ICLR 2016 (arXiv:1511.06422); Xiao et al.,
# "Dynamical Isometry and a Mean Field Theory of CNNs", ICML 2018 (arXiv:1806.05393).
