"""Writes the TF-Addons fixtures of tests/migration (run with tf.keras 2 and TF-Addons 0.23).

Not a test: a script run once, outside the project's venv, in an environment with the real
TensorFlow Addons (it cannot be imported next to Keras 3):

    python3 -m venv /tmp/tfa-venv
    /tmp/tfa-venv/bin/pip install "tensorflow==2.21.*" h5py
    /tmp/tfa-venv/bin/pip install --no-deps tensorflow-addons==0.23.0 tf-keras==2.21.0 "typeguard<3"
    /tmp/tfa-venv/bin/python tests/migration/write_fixtures.py

(The project's venv already has TensorFlow 2.21 and h5py: instead of the first install, a
`.pth` file in /tmp/tfa-venv's site-packages naming the project venv's site-packages gives
the same versions; that is how the committed fixtures were written.)

It writes, under tests/migration/fixtures/, one `.h5` per model (saved by tf.keras 2's
`model.save(path.h5)`), one `.npz` per model with its input `x` and TF-Addons' prediction `y`
(for the trained models also one more training step: its batch `next_x`, `next_target`, its
loss `next_loss` and the prediction after it, `next_y`; for the schedules their values
`learning_rates` at `steps`), a SavedModel directory, `functions.npz` (TF-Addons'
activations on a grid) and `versions.json` with the exact versions used. TF-Addons imports
`keras.src.engine` at import time, which fails next to Keras 3: `keras` is aliased to
`tf_keras` before it is imported. The script is deterministic: run again, it writes the same
values.
"""

import json
import os
import pathlib
import platform
import shutil
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tf_keras

sys.modules["keras"] = tf_keras  # TF-Addons imports `keras.src.engine`

import h5py
import numpy as np
import tensorflow as tf
import tensorflow_addons as tfa

keras = tf_keras
OUT = pathlib.Path(__file__).resolve().parent / "fixtures"
RNG = np.random.default_rng(20261202)


def normal(*shape, scale=1.0):
    return (scale * RNG.normal(size=shape)).astype("float32")


def perturb(model, scale=0.3):
    """Non-default values in every weight (norm gains and shifts, biases), so that a weight
    mapped to the wrong place changes the output."""
    for weight in model.weights:
        if weight.dtype == tf.bool:
            continue
        value = weight.numpy()
        if value.ndim and "kernel" not in weight.name:
            weight.assign(value + normal(*value.shape, scale=scale))


def save(name, model, x, next_batch=None, **extra):
    """Saves `model` to `name.h5` and its prediction on `x` to `name.npz`.

    With `next_batch=(x_next, y_next)` (a compiled model), one more training step then runs
    in TF-Addons, as a reloaded model would continue: its loss (`next_loss`) and the
    prediction on `x` after it (`next_y`) are stored too.
    """
    path = OUT / f"{name}.h5"
    model.save(path)
    y = model.predict(x, verbose=0)
    if next_batch is not None:
        x_next, y_next = next_batch
        extra["next_x"], extra["next_target"] = x_next, y_next
        extra["next_loss"] = np.float32(model.train_on_batch(x_next, y_next))
        extra["next_y"] = model.predict(x, verbose=0)
    np.savez(OUT / f"{name}.npz", x=x, y=y, **extra)
    print(f"{name}: {path.stat().st_size} bytes, y {y.shape}")
    return y


def rnn_models():
    x = normal(4, 6, 3)
    model = keras.Sequential(
        [
            keras.Input((6, 3)),
            keras.layers.RNN(tfa.rnn.LayerNormLSTMCell(4), return_sequences=True),
            keras.layers.Dense(2),
        ]
    )
    perturb(model)
    model.compile(optimizer=keras.optimizers.RMSprop(0.01, momentum=0.5), loss="mse")
    model.fit(x, normal(4, 6, 2), batch_size=4, epochs=1, verbose=0)
    save("layer_norm_lstm", model, x, next_batch=(normal(4, 6, 3), normal(4, 6, 2)))

    inputs = keras.Input((6, 3))
    hidden = keras.layers.RNN(
        tfa.rnn.LayerNormSimpleRNNCell(5, activation="relu", layernorm_epsilon=1e-4),
        return_sequences=False,
    )(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2)(hidden))
    perturb(model)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, normal(4, 2), batch_size=4, epochs=1, verbose=0)
    save("layer_norm_simple_rnn", model, x, next_batch=(normal(4, 6, 3), normal(4, 2)))

    model = keras.Sequential(
        [
            keras.Input((6, 3)),
            keras.layers.Bidirectional(
                keras.layers.RNN(
                    tfa.rnn.LayerNormLSTMCell(3, norm_epsilon=1e-2), return_sequences=True
                )
            ),
            keras.layers.Bidirectional(
                keras.layers.RNN(tfa.rnn.LayerNormSimpleRNNCell(3)), merge_mode="sum"
            ),
            keras.layers.Dense(1),
        ]
    )
    perturb(model)
    save("bidirectional", model, x)
    return model


def weight_norm_models():
    x_init = normal(32, 5, scale=2.0)
    x = normal(4, 5)

    def dense(data_init):
        return keras.Sequential(
            [
                keras.Input((5,)),
                tfa.layers.WeightNormalization(
                    keras.layers.Dense(3, activation="tanh"), data_init=data_init
                ),
                keras.layers.Dense(2),
            ]
        )

    # Saved before any call: TF-Addons initializes on the first call it sees, even predict.
    model = dense(True)
    perturb(model)
    path = OUT / "weight_norm_dense_uninitialized.h5"
    model.save(path)
    first = model.predict(x_init, verbose=0)  # runs TF-Addons' data-dependent init on x_init
    np.savez(
        OUT / "weight_norm_dense_uninitialized.npz",
        x=x_init,
        y=first,
        y_after=model.predict(x, verbose=0),
        x_after=x,
    )
    print(f"weight_norm_dense_uninitialized: {path.stat().st_size} bytes")
    # The same model, now initialized (by its first call above), then one training step.
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    model.fit(x_init, normal(32, 2), batch_size=32, epochs=1, verbose=0)
    save("weight_norm_dense", model, x, next_batch=(normal(16, 5), normal(16, 2)))

    model = dense(False)
    perturb(model)
    save("weight_norm_dense_no_data_init", model, x)  # g = ||v|| set by its first call

    def conv():
        return keras.Sequential(
            [
                keras.Input((6, 6, 2)),
                tfa.layers.WeightNormalization(
                    keras.layers.Conv2D(3, 3, padding="same", activation="relu")
                ),
                keras.layers.Flatten(),
                keras.layers.Dense(2),
            ]
        )

    xc_init = normal(8, 6, 6, 2)
    xc = normal(3, 6, 6, 2)
    model = conv()
    perturb(model)
    path = OUT / "weight_norm_conv2d_uninitialized.h5"
    model.save(path)
    first = model.predict(xc_init, verbose=0)
    np.savez(OUT / "weight_norm_conv2d_uninitialized.npz", x=xc_init, y=first)
    print(f"weight_norm_conv2d_uninitialized: {path.stat().st_size} bytes")
    save("weight_norm_conv2d", model, xc)


def schedule_models():
    x = normal(8, 4)
    steps = np.arange(0, 40, dtype="float32")
    schedules = {
        "cyclical_lr": tfa.optimizers.CyclicalLearningRate(
            1e-3, 1e-2, step_size=5, scale_fn=lambda x: 1.0, scale_mode="cycle"
        ),
        "triangular2_cyclical_lr": tfa.optimizers.Triangular2CyclicalLearningRate(
            1e-3, 1e-2, step_size=4
        ),
    }
    for name, schedule in schedules.items():
        model = keras.Sequential(
            [keras.Input((4,)), keras.layers.Dense(3, activation="relu"), keras.layers.Dense(1)]
        )
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate=schedule), loss="mse", metrics=["mse"]
        )
        model.fit(x, normal(8, 1), batch_size=4, epochs=1, verbose=0)  # two steps
        rates = np.array([float(schedule(s)) for s in steps], "float32")
        next_batch = (normal(4, 4), normal(4, 1))
        save(name, model, x, next_batch=next_batch, steps=steps, learning_rates=rates)
    # ExponentialCyclicalLearningRate in its default scale_mode="iterations" cannot drive a
    # tf.keras 2 optimizer: `gamma ** step` with the optimizer's int64 step raises
    # "TypeError: Cannot convert 0.9 to EagerTensor of dtype int64" in `compile`. Only its
    # config (as an optimizer would save it) and its values at float steps are stored.
    schedule = tfa.optimizers.ExponentialCyclicalLearningRate(1e-3, 1e-2, step_size=4, gamma=0.9)
    try:
        keras.optimizers.Adam(learning_rate=schedule)
        raise AssertionError("ExponentialCyclicalLearningRate now works in an optimizer")
    except TypeError as error:
        print("exponential_cyclical_lr in Adam:", error)
    rates = np.array([float(schedule(s)) for s in steps], "float32")
    config = json.dumps(keras.optimizers.schedules.serialize(schedule))
    np.savez(OUT / "exponential_cyclical_lr.npz", steps=steps, learning_rates=rates, config=config)
    # A legacy optimizer evaluates the schedule at a float step: there it works.
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(3, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=keras.optimizers.legacy.Adam(learning_rate=schedule), loss="mse")
    model.fit(x, normal(8, 1), batch_size=4, epochs=1, verbose=0)  # two steps
    next_batch = (normal(4, 4), normal(4, 1))
    save(
        "legacy_adam_exponential_cyclical_lr",
        model,
        x,
        next_batch=next_batch,
        steps=steps,
        learning_rates=rates,
    )


def activation_models():
    x = normal(5, 6, scale=1.5)
    acts = ["gelu", "mish", "hardshrink", "softshrink", "tanhshrink"]
    layers = [keras.Input((6,))]
    for act in acts:
        layers.append(keras.layers.Dense(6, activation=getattr(tfa.activations, act)))
    layers.append(keras.layers.Dense(4, activation=tfa.activations.sparsemax))
    model = keras.Sequential(layers)
    perturb(model)
    save("activations", model, x)

    # Objects we have no equivalent for: an activation and a layer.
    model = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(4, activation=tfa.activations.lisht)]
    )
    save("unsupported_activation", model, x)
    model = keras.Sequential([keras.Input((6,)), tfa.layers.Maxout(3)])
    save("unsupported_layer", model, x)
    # A TF-Addons loss (no keras_normkit equivalent) in the training config only.
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile(
        optimizer="adam", loss=tfa.losses.SigmoidFocalCrossEntropy(), metrics=["accuracy"]
    )
    model.fit(x, (RNG.random((5, 1)) > 0.5).astype("float32"), epochs=1, verbose=0)
    save("addons_loss", model, x)

    # A tf.keras 2 model without any TF-Addons object, compiled.
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="rmsprop", loss="categorical_crossentropy", metrics=["accuracy"])
    save("plain_keras2", model, x)


def saved_model():
    x = normal(4, 6, 3)
    model = keras.Sequential(
        [
            keras.Input((6, 3)),
            keras.layers.RNN(tfa.rnn.LayerNormSimpleRNNCell(3)),
            keras.layers.Dense(2),
        ]
    )
    perturb(model)
    path = OUT / "saved_model_layer_norm_simple_rnn"
    shutil.rmtree(path, ignore_errors=True)
    model.save(path, save_format="tf")
    shutil.rmtree(path / "assets", ignore_errors=True)
    y = model.predict(x, verbose=0)
    np.savez(OUT / "saved_model_layer_norm_simple_rnn.npz", x=x, y=y)
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    print(f"saved_model: {size} bytes")


def functions():
    """TF-Addons' activations on a grid (and sparsemax on random rows), for the measured
    differences of docs/migration.md."""
    x = np.linspace(-6, 6, 1201, dtype="float32")
    z = normal(256, 7, scale=2.0)
    outputs = {
        name: getattr(tfa.activations, name)(x).numpy()
        for name in ("gelu", "mish", "hardshrink", "softshrink", "tanhshrink")
    }
    outputs["gelu_exact"] = tfa.activations.gelu(x, approximate=False).numpy()
    np.savez(
        OUT / "functions.npz", x=x, z=z, sparsemax=tfa.activations.sparsemax(z).numpy(), **outputs
    )


def weight_norm_functional():
    """Two WeightNormalization layers in a functional model, saved before their first call:
    TF-Addons initializes the second on the output of the already initialized first (the
    second has no bias)."""
    inputs = keras.Input((5,))
    hidden = tfa.layers.WeightNormalization(keras.layers.Dense(4, activation="tanh"))(inputs)
    hidden = tfa.layers.WeightNormalization(keras.layers.Dense(3, use_bias=False))(hidden)
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    perturb(model)
    x_init, x = normal(16, 5, scale=2.0), normal(4, 5)
    path = OUT / "weight_norm_functional_uninitialized.h5"
    model.save(path)
    first = model.predict(x_init, verbose=0)
    after = model.predict(x, verbose=0)
    np.savez(
        OUT / "weight_norm_functional_uninitialized.npz",
        x=x_init,
        y=first,
        x_after=x,
        y_after=after,
    )
    print(f"weight_norm_functional_uninitialized: {path.stat().st_size} bytes")


def main():
    OUT.mkdir(exist_ok=True)
    tf.keras.utils.set_random_seed(0)
    rnn_models()
    weight_norm_models()
    schedule_models()
    activation_models()
    saved_model()
    functions()
    weight_norm_functional()
    versions = {
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "tf_keras": tf_keras.__version__,
        "tensorflow_addons": tfa.__version__,
        "h5py": h5py.__version__,
        "numpy": np.__version__,
        "environment": "TF_USE_LEGACY_KERAS=1, sys.modules['keras'] = tf_keras",
    }
    (OUT / "versions.json").write_text(json.dumps(versions, indent=2) + "\n")
    print(versions)


if __name__ == "__main__":
    main()
