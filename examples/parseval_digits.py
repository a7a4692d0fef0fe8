"""Parseval training on scikit-learn's digits (Cisse et al., 2017): an MLP with and without.

Two identical 64-128-128-128-10 ReLU MLPs (orthogonal initialization, Adam 1e-3), one with
`ParsevalConstraint(beta=0.05)` on every `Dense` kernel, trained on the bundled digits (no
download), standardized then scaled by 3 (a 1-Lipschitz network needs inputs far enough
apart to reach confident logits). The script prints each model's test accuracy and the
frame deviation `||G - I||_F / sqrt(n)` (`G` the smaller Gram matrix) of every kernel:
about 0 with the constraint, growing without it; and the empirical Lipschitz constant
(the largest spectral norm of the logits' Jacobian over the test inputs; TensorFlow).

    python examples/parseval_digits.py [--epochs 30]

`notebooks/parseval_and_initialization.ipynb` and `tests/examples/test_parseval_training.py`
build their models with `parseval_mlp`.
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from keras_normkit.constraints import ParsevalConstraint


def digits(standardize_scale=None):
    """`x_train, x_test, y_train, y_test`: a stratified 75/25 split of the digits, float32.

    Pixels divided by 16 (to [0, 1]), or, with `standardize_scale`, standardized on the
    training set and multiplied by it.
    """
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=0, stratify=y
    )
    if standardize_scale is None:
        x_train, x_test = x_train / 16.0, x_test / 16.0
    else:
        scaler = StandardScaler().fit(x_train)
        x_train = standardize_scale * scaler.transform(x_train)
        x_test = standardize_scale * scaler.transform(x_test)
    return x_train.astype("float32"), x_test.astype("float32"), y_train, y_test


def parseval_mlp(constraint, seed=0):
    """The compiled 64-128-128-128-10 ReLU MLP, orthogonal kernels under `constraint`."""
    keras.utils.set_random_seed(seed)
    kwargs = {"kernel_initializer": "orthogonal", "kernel_constraint": constraint}
    model = keras.Sequential(
        [keras.Input((64,))]
        + [keras.layers.Dense(128, activation="relu", **kwargs) for _ in range(3)]
        + [keras.layers.Dense(10, **kwargs)]
    )
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def frame_deviation(kernel):
    """`||G - I||_F / sqrt(n)` with `G` the smaller Gram matrix of the kernel."""
    w = np.asarray(kernel)
    gram = w.T @ w if w.shape[1] <= w.shape[0] else w @ w.T
    return float(np.linalg.norm(gram - np.eye(len(gram))) / np.sqrt(len(gram)))


def empirical_lipschitz(model, x):
    """max over the inputs `x` of the spectral norm of the logits' Jacobian (TensorFlow)."""
    import tensorflow as tf

    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        logits = model(x)
    jacobians = tape.batch_jacobian(logits, x).numpy()
    return float(np.linalg.norm(jacobians, 2, axis=(1, 2)).max())


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    x_train, x_test, y_train, y_test = digits(standardize_scale=3.0)
    for name, constraint in [("plain", None), ("Parseval", ParsevalConstraint(beta=0.05))]:
        model = parseval_mlp(constraint)
        model.fit(x_train, y_train, epochs=args.epochs, batch_size=32, verbose=0)
        accuracy = model.evaluate(x_test, y_test, verbose=0)[1]
        deviations = [frame_deviation(layer.kernel.numpy()) for layer in model.layers]
        print(
            f"{name:8s} test accuracy {accuracy:.4f}, frame deviation per kernel "
            + ", ".join(f"{d:.3f}" for d in deviations)
            + f", Lipschitz estimate {empirical_lipschitz(model, x_test):.3f}"
        )


if __name__ == "__main__":
    main()
