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


def seeded(seed):
    """A fresh generator (and TensorFlow seed) per fixture group added after the first ones,
    so that each group writes the same values whether it runs alone or with the others."""
    global RNG
    RNG = np.random.default_rng(seed)
    tf.keras.utils.set_random_seed(seed)


def normalization_models():
    """TF-Addons' normalization layers, with non-default weights and arguments."""
    seeded(1)
    x = normal(3, 6, 6, 4)
    model = keras.Sequential(
        [
            keras.Input((6, 6, 4)),
            tfa.layers.FilterResponseNormalization(learned_epsilon=True),
            tfa.layers.TLU(),
            keras.layers.Conv2D(5, 3, padding="same"),
            tfa.layers.FilterResponseNormalization(epsilon=1e-3),
            tfa.layers.TLU(affine=True),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ]
    )
    perturb(model)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, normal(3, 2), batch_size=3, epochs=1, verbose=0)
    save("filter_response_norm", model, x, next_batch=(normal(3, 6, 6, 4), normal(3, 2)))

    x = normal(3, 4, 6, 6)  # channels on axis 1 for the second group norm
    model = keras.Sequential(
        [
            keras.Input((4, 6, 6)),
            tfa.layers.InstanceNormalization(epsilon=1e-2),
            tfa.layers.GroupNormalization(groups=2, axis=1, epsilon=1e-4),
            keras.layers.Conv2D(6, 3, padding="same"),
            tfa.layers.GroupNormalization(groups=3, center=False),
            tfa.layers.InstanceNormalization(scale=False),
            keras.layers.Flatten(),
            keras.layers.Dense(2),
        ]
    )
    perturb(model)
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    model.fit(x, normal(3, 2), batch_size=3, epochs=1, verbose=0)
    save("group_norm", model, x, next_batch=(normal(3, 4, 6, 6), normal(3, 2)))

    x = normal(4, 6, 6, 2)
    model = keras.Sequential(
        [
            keras.Input((6, 6, 2)),
            tfa.layers.SpectralNormalization(keras.layers.Conv2D(3, 3, activation="relu")),
            keras.layers.Flatten(),
            tfa.layers.SpectralNormalization(keras.layers.Dense(2), power_iterations=3),
        ]
    )
    perturb(model)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, normal(4, 2), batch_size=4, epochs=2, verbose=0)  # u and the kernels move
    save("spectral_norm", model, x, next_batch=(normal(4, 6, 6, 2), normal(4, 2)))


def frn_layers():
    """The two FRN layers alone: input, TF-Addons' weights and outputs (a layer-level
    comparison that needs no loader)."""
    seeded(2)
    x = normal(2, 5, 5, 3, scale=2.0)
    out = {"x": x}
    for name, layer in {
        "frn": tfa.layers.FilterResponseNormalization(epsilon=1e-4),
        "frn_learned": tfa.layers.FilterResponseNormalization(learned_epsilon=True),
        "tlu": tfa.layers.TLU(),
        "tlu_affine": tfa.layers.TLU(affine=True),
    }.items():
        layer.build(x.shape)
        for weight in layer.weights:
            weight.assign(weight.numpy() + normal(*weight.shape, scale=0.5))
        out[f"{name}_y"] = layer(x).numpy()
        for weight in layer.weights:
            short = weight.name.split("/")[-1].split(":")[0]
            out[f"{name}_{short}"] = weight.numpy()
    np.savez(OUT / "frn_layers.npz", **out)
    print("frn_layers:", sorted(out))


def cell_and_activation_layers():
    """PeepholeLSTMCell, TF-Addons' activation layers, and the objects we do not translate."""
    seeded(3)
    x = normal(4, 6, 3)
    model = keras.Sequential(
        [
            keras.Input((6, 3)),
            keras.layers.RNN(tfa.rnn.PeepholeLSTMCell(4), return_sequences=True),
            keras.layers.RNN(tfa.rnn.PeepholeLSTMCell(3, implementation=2), go_backwards=True),
            keras.layers.Dense(2),
        ]
    )
    perturb(model)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, normal(4, 2), batch_size=4, epochs=1, verbose=0)
    save("peephole_lstm", model, x, next_batch=(normal(4, 6, 3), normal(4, 2)))

    x = normal(5, 6, scale=1.5)
    model = keras.Sequential(
        [
            keras.Input((6,)),
            keras.layers.Dense(6),
            tfa.layers.GELU(),
            keras.layers.Dense(6),
            tfa.layers.GELU(approximate=False),
            keras.layers.Dense(4),
            tfa.layers.Sparsemax(),
        ]
    )
    perturb(model)
    save("activation_layers", model, x)

    model = keras.Sequential([keras.Input((6,)), tfa.layers.Maxout(3), tfa.layers.Snake()])
    save("unsupported_layers", model, x)


def adaptive_pooling():
    """TF-Addons' adaptive pooling layers, on inputs whose sizes are multiples of the
    output sizes (TF-Addons splits the input evenly; it fails otherwise)."""
    seeded(5)
    x = normal(2, 8, 6, 3)
    inputs = keras.Input((8, 6, 3))
    pooled = [
        keras.layers.Flatten()(tfa.layers.AdaptiveAveragePooling2D((4, 3))(inputs)),
        keras.layers.Flatten()(tfa.layers.AdaptiveMaxPooling2D(2)(inputs)),
    ]
    sequence = keras.layers.Reshape((8, 18))(inputs)
    pooled.append(keras.layers.Flatten()(tfa.layers.AdaptiveAveragePooling1D(4)(sequence)))
    pooled.append(keras.layers.Flatten()(tfa.layers.AdaptiveMaxPooling1D(2)(sequence)))
    model = keras.Model(inputs, keras.layers.Concatenate()(pooled))
    save("adaptive_pooling", model, x)
    # 3-D apart: Keras 3.15's 3-D adaptive pooling fails inside a TensorFlow graph.
    x = normal(2, 4, 2, 6, 3)
    inputs = keras.Input((4, 2, 6, 3))
    pooled = [
        keras.layers.Flatten()(tfa.layers.AdaptiveAveragePooling3D((2, 1, 3))(inputs)),
        keras.layers.Flatten()(tfa.layers.AdaptiveMaxPooling3D((1, 2, 2))(inputs)),
    ]
    model = keras.Model(inputs, keras.layers.Concatenate()(pooled))
    save("adaptive_pooling_3d", model, x)


def triangular_schedule():
    """Adam with a TriangularCyclicalLearningRate, two steps, then one more."""
    seeded(6)
    x = normal(8, 4)
    steps = np.arange(0, 40, dtype="float32")
    schedule = tfa.optimizers.TriangularCyclicalLearningRate(1e-3, 1e-2, step_size=3)
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(3, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=schedule), loss="mse")
    model.fit(x, normal(8, 1), batch_size=4, epochs=1, verbose=0)
    rates = np.array([float(schedule(s)) for s in steps], "float32")
    next_batch = (normal(4, 4), normal(4, 1))
    save(
        "triangular_cyclical_lr", model, x, next_batch=next_batch, steps=steps, learning_rates=rates
    )


def training_objects():
    """Compiled models whose training config holds TF-Addons losses, metrics and optimizer
    wrappers: what the loader translates (the focal loss) and what it drops (the rest)."""
    seeded(4)
    x = normal(8, 5)
    y = (RNG.random((8, 1)) > 0.5).astype("float32")
    losses = {
        "focal_loss": tfa.losses.SigmoidFocalCrossEntropy(alpha=0.3, gamma=1.5),
        "focal_loss_function": tfa.losses.sigmoid_focal_crossentropy,
    }
    for name, loss in losses.items():
        model = keras.Sequential(
            [keras.Input((5,)), keras.layers.Dense(3, "relu"), keras.layers.Dense(1, "sigmoid")]
        )
        perturb(model)
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
        y_next = (RNG.random((8, 1)) > 0.5).astype("float32")
        save(name, model, x, next_batch=(normal(8, 5), y_next), target=y)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(1)])
    model.compile(
        optimizer="sgd", loss=tfa.losses.SigmoidFocalCrossEntropy(from_logits=True, gamma=0.0)
    )
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    save("focal_loss_logits", model, x, next_batch=(normal(8, 5), y), target=y)

    wrappers = {
        "moving_average": tfa.optimizers.MovingAverage(
            keras.optimizers.legacy.Adam(0.01), average_decay=0.9
        ),
        "swa": tfa.optimizers.SWA(keras.optimizers.legacy.SGD(0.05), start_averaging=1),
        "lookahead": tfa.optimizers.Lookahead(keras.optimizers.legacy.Adam(0.01)),
    }
    for name, optimizer in wrappers.items():
        model = keras.Sequential(
            [keras.Input((5,)), keras.layers.Dense(4, "tanh"), keras.layers.Dense(2)]
        )
        perturb(model)
        model.compile(
            optimizer=optimizer,
            loss="mse",
            metrics=[tfa.metrics.RSquare(), "mae"],
        )
        model.fit(x, normal(8, 2), batch_size=4, epochs=1, verbose=0)
        save(f"optimizer_{name}", model, x)


def registry():
    """Every object TF-Addons registers under `Addons>`, with its module and kind, in
    `tfa_registry.json`: what tf.keras 2's custom objects hold once every module of
    TF-Addons is imported (`import tensorflow_addons` imports all but
    `tensorflow_addons.layers.netvlad`), checked against the names that TF-Addons' sources
    decorate with `register_keras_serializable(package="Addons")`."""
    import importlib
    import inspect
    import pkgutil
    import re

    for module in pkgutil.walk_packages(tfa.__path__, "tensorflow_addons."):
        if ".tests" not in module.name and not module.name.endswith("conftest"):
            importlib.import_module(module.name)
    objects = keras.utils.get_custom_objects()
    entries = []
    for name in sorted(n for n in objects if n.startswith("Addons>")):
        obj = objects[name]
        module = obj.__module__
        if inspect.isclass(obj) and issubclass(obj, keras.losses.Loss):
            kind = "loss"
        elif inspect.isclass(obj) and issubclass(obj, keras.metrics.Metric):
            kind = "metric"
        elif inspect.isclass(obj) and issubclass(
            obj, keras.optimizers.schedules.LearningRateSchedule
        ):
            kind = "schedule"
        elif inspect.isclass(obj) and issubclass(
            obj, (keras.optimizers.Optimizer, keras.optimizers.legacy.Optimizer)
        ):
            kind = "optimizer"
        elif inspect.isclass(obj) and issubclass(obj, keras.callbacks.Callback):
            kind = "callback"
        elif inspect.isclass(obj) and issubclass(obj, keras.Model):
            kind = "model"
        elif inspect.isclass(obj) and issubclass(obj, keras.layers.Layer):
            kind = "cell" if module.startswith("tensorflow_addons.rnn.") else "layer"
        elif ".losses." in module:
            kind = "loss function"
        elif ".activations." in module:
            kind = "activation"
        else:
            raise AssertionError(f"{name}: unknown kind ({obj!r})")
        entries.append({"name": name, "module": module, "kind": kind})
    root = pathlib.Path(tfa.__file__).parent
    pattern = re.compile(
        r"register_keras_serializable\(\s*package=[\"']Addons[\"']"
        r"(?:\s*,\s*name=[\"'](\w+)[\"'])?\s*\)\s*(?:@[^\n]*\n\s*)*(?:class|def)\s+(\w+)"
    )
    decorated = {
        "Addons>" + (match.group(1) or match.group(2))
        for path in root.rglob("*.py")
        if "tests" not in path.parts
        for match in pattern.finditer(path.read_text())
    }
    assert decorated == {e["name"] for e in entries}, decorated ^ {e["name"] for e in entries}
    document = {
        "tensorflow_addons": tfa.__version__,
        "how": "keras.utils.get_custom_objects() once every module of tensorflow_addons is "
        "imported, names "
        "starting with 'Addons>' (tests/migration/write_fixtures.py, registry())",
        "objects": entries,
    }
    (OUT / "tfa_registry.json").write_text(json.dumps(document, indent=1) + "\n")
    print(f"registry: {len(entries)} objects")


GROUPS = {
    "normalization_models": normalization_models,
    "frn_layers": frn_layers,
    "cell_and_activation_layers": cell_and_activation_layers,
    "training_objects": training_objects,
    "adaptive_pooling": adaptive_pooling,
    "triangular_schedule": triangular_schedule,
    "registry": registry,
}


def main(groups):
    """Writes every fixture, or with group names (`python write_fixtures.py registry`)
    only the groups named, which seed their own random numbers."""
    OUT.mkdir(exist_ok=True)
    if groups:
        for group in groups:
            GROUPS[group]()
    else:
        tf.keras.utils.set_random_seed(0)
        rnn_models()
        weight_norm_models()
        schedule_models()
        activation_models()
        saved_model()
        functions()
        weight_norm_functional()
        for group in GROUPS.values():
            group()
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
    main(sys.argv[1:])
