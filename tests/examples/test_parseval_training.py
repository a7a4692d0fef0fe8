"""End-to-end (slow): Parseval training (examples/parseval_digits.py) and LSUV on digits."""

import pathlib
import sys

import keras
import numpy as np
import pytest

from keras_normkit.constraints import ParsevalConstraint
from keras_normkit.initializers import lsuv_initialize

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))

from parseval_digits import (  # noqa: E402
    digits,
    empirical_lipschitz,
    frame_deviation,
    parseval_mlp,
)

pytestmark = pytest.mark.slow


def test_parseval_mlp_on_digits():
    # Inputs standardized then scaled by 3 (for both models): a 1-Lipschitz network needs
    # inputs far enough apart to reach confident logits.
    x_train, x_test, y_train, y_test = digits(standardize_scale=3.0)
    results = {}
    for name, constraint in [("plain", None), ("parseval", ParsevalConstraint(beta=0.05))]:
        model = parseval_mlp(constraint)
        model.fit(x_train, y_train, epochs=30, batch_size=32, verbose=0)
        results[name] = {
            "accuracy": model.evaluate(x_test, y_test, verbose=0)[1],
            "lipschitz": empirical_lipschitz(model, x_test),
            "deviation": [frame_deviation(layer.kernel.numpy()) for layer in model.layers],
        }
    print(results)
    parseval, plain = results["parseval"], results["plain"]
    assert max(parseval["deviation"]) <= 0.05
    assert min(plain["deviation"]) > 0.2  # without the constraint the kernels drift away
    assert parseval["accuracy"] >= plain["accuracy"] - 0.01
    assert parseval["lipschitz"] < plain["lipschitz"]
    assert parseval["lipschitz"] <= 1.05  # the product bound of nearly-Parseval layers


def deep_relu_mlp(depth=20, width=32):
    keras.utils.set_random_seed(0)
    layers = [keras.layers.Dense(width, activation="relu") for _ in range(depth - 1)]
    return keras.Sequential([keras.Input((64,))] + layers + [keras.layers.Dense(10)])


def pre_activation_variances(model, x):
    variances, h = [], x
    for layer in model.layers:
        z = h @ layer.kernel.numpy() + layer.bias.numpy()
        variances.append(float(np.var(z)))
        h = keras.ops.convert_to_numpy(layer.activation(z))
    return variances


def test_lsuv_lets_a_20_layer_relu_mlp_train_on_digits():
    x_train, x_test, y_train, y_test = digits()
    histories, variances = {}, {}
    for name in ("default", "lsuv"):
        model = deep_relu_mlp()
        if name == "lsuv":
            report = lsuv_initialize(model, x_train[:512], tolerance=0.05, seed=0)
            assert len(report) == 20 and all(r["converged"] for r in report)
        variances[name] = pre_activation_variances(model, x_train[:512])
        model.compile(
            keras.optimizers.SGD(0.01, momentum=0.9),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        history = model.fit(x_train, y_train, epochs=15, batch_size=64, verbose=0)
        histories[name] = history.history["accuracy"]
        histories[name + "_test"] = model.evaluate(x_test, y_test, verbose=0)[1]
    print(variances, histories)
    # The variance part (asserted): LSUV gives every layer unit pre-activation variance,
    # while Glorot's variance collapses through 20 ReLU layers.
    assert all(abs(v - 1.0) <= 0.05 for v in variances["lsuv"])
    assert variances["default"][-1] < 1e-3
    # The training part (shown): default stays near chance, LSUV learns.
    assert histories["default"][-1] < 0.3
    assert histories["lsuv"][-1] > histories["default"][-1] + 0.3


def test_lsuv_on_small_cnn_with_digits():
    x_train, _, _, _ = digits()
    images = x_train[:256].reshape(-1, 8, 8, 1)
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(16, 3, padding="same", activation="tanh"),
            keras.layers.Conv2D(16, 3, padding="same", activation="tanh"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="tanh"),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ]
    )
    report = lsuv_initialize(model, images, tolerance=0.05, seed=0)
    assert len(report) == 4
    h, variances = images, []
    for layer in model.layers:
        if hasattr(layer, "kernel"):
            if layer.kernel.ndim == 4:
                z = keras.ops.conv(h, layer.kernel, padding=layer.padding) + layer.bias
            else:
                z = keras.ops.matmul(h, layer.kernel) + layer.bias
            variances.append(float(np.var(keras.ops.convert_to_numpy(z))))
            h = layer.activation(z)
        else:
            h = layer(h)
    assert all(abs(v - 1.0) <= 0.05 for v in variances), variances
