"""The whole library where users run it: SavedModel served without keras_normkit, TFLite,
and `tf.distribute.MirroredStrategy` training (TensorFlow backend only).

* `test_every_layer_*`: one functional model holding every public layer and cell, wrapped
  in a calibrated `TemperatureScaling`, goes `.keras` -> reload -> SavedModel -> a fresh
  interpreter in which importing keras_normkit is impossible.
* `test_one_vs_rest_calibrators_*`: the same path for `HistogramBinning`,
  `IsotonicCalibration` and `PlattScaling` around a self-normalizing classifier.
* `test_tflite_*`: the feed-forward pieces convert and run in the TFLite interpreter; for
  the recurrent layers the current state (which convert, which do not and why) is asserted,
  so a change in Keras/TFLite or in the layers is noticed.
* `test_mirrored_strategy_*` (slow, subprocess): training over 2 logical CPUs gives the
  single-device losses; `test_jax_data_parallel_*` (slow, subprocess with
  KERAS_BACKEND=jax): the same with `keras.distribution.DataParallel` over 2 CPU devices.
"""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_normkit.layers
from keras_normkit import layers as L
from keras_normkit.calibration import (
    HistogramBinning,
    IsotonicCalibration,
    PlattScaling,
    TemperatureScaling,
)
from tests.conftest import requires_tensorflow
from tests.test_export import run_in_fresh_process, snn_model

pytestmark = requires_tensorflow

T, D, UNITS, CLASSES = 6, 8, 8, 3


def noisy_labels(logits, seed, noise=3.0):
    """Labels drawn from softmax(logits / noise): a classifier outputting `logits` is
    over-confident on them, so the fitted temperature is far from 1."""
    gumbel = np.random.default_rng(seed).gumbel(size=logits.shape)
    return np.argmax(logits / noise + gumbel, axis=-1).astype("int32")


def every_layer_model():
    """Story `(B, T, D)` + question `(B, D)` -> 3 logits, through every public layer/cell."""
    keras.utils.set_random_seed(0)
    story = keras.Input((T, D), name="story")
    question = keras.Input((D,), name="question")
    # The layers.
    h = L.FastWeightsRNN(UNITS, return_sequences=True)(story)
    h = L.QRN(UNITS, bidirectional=True)([h, question])
    h = L.LayerNormLSTM(UNITS, return_sequences=True)(h)
    h = L.LayerNormGRU(UNITS, return_sequences=True)(h)
    from_layers = L.LayerNormSimpleRNN(UNITS)(h)
    # The cells, in keras.layers.RNN (QRNCell reads [x_t; q_t]).
    repeated = keras.layers.RepeatVector(T)(question)
    c = keras.layers.RNN(L.QRNCell(UNITS), return_sequences=True)(
        keras.layers.Concatenate()([story, repeated])
    )
    c = keras.layers.RNN(L.FastWeightsRNNCell(UNITS), return_sequences=True)(c)
    c = keras.layers.RNN(L.LayerNormLSTMCell(UNITS), return_sequences=True)(c)
    c = keras.layers.RNN(L.LayerNormGRUCell(UNITS), return_sequences=True)(c)
    c = keras.layers.RNN(L.PeepholeLSTMCell(UNITS), return_sequences=True)(c)
    from_cells = keras.layers.RNN(L.LayerNormSimpleRNNCell(UNITS))(c)
    # The feed-forward layers.
    # Sentences of words: each story vector read as 2 words of D / 2 features.
    words = keras.layers.Reshape((T, 2, D // 2))(story)
    words = L.TLU()(L.FilterResponseNormalization()(words))  # (B, T, 2, D / 2): 2-D "images"
    from_words = keras.layers.GlobalAveragePooling1D()(L.PositionEncoding()(words))
    f = keras.layers.Concatenate()([from_layers, from_cells, from_words])
    f = L.WeightNormalization(keras.layers.Dense(16, kernel_initializer="lecun_normal"))(f)
    f = L.SELU(fixed_point=(0.1, 1.2))(f)
    f = L.AlphaDropout(0.1, fixed_point=(0.1, 1.2))(f)
    f = L.ScaleNormalization()(f)
    f = L.ConvexCombination()([f, keras.layers.Dense(16)(f)])
    # The normalizer-free pieces (and ghost batch norm, at inference its moving statistics).
    g = L.WeightStandardization(keras.layers.Dense(16), activation="selu")(f)
    g = L.GhostBatchNormalization(4)(g)
    branch = keras.Sequential(
        [keras.layers.ReLU(), L.WeightStandardization(keras.layers.Dense(16), activation="relu")]
    )
    g = L.NFResidual(branch, alpha=0.2, beta=1.1)(g)
    f = keras.layers.Add()([f, L.SkipInit(0.5)(g)])
    logits = keras.layers.Dense(CLASSES, name="logits")(f)
    return keras.Model([story, question], logits, name="every_layer")


def library_classes_in(model):
    """The keras_normkit classes `model` uses itself: its layers and the cells of its plain
    `keras.layers.RNN` layers (not the cells that the library's own layers create)."""
    found = set()
    for layer in model.layers:
        used = layer.cell if type(layer) is keras.layers.RNN else layer
        if type(used).__module__.startswith("keras_normkit."):
            found.add(type(used).__name__)
    return found


SERVE_EVERY_LAYER = """
import json, sys
sys.modules["keras_normkit"] = None  # any attempt to import the library now fails
import numpy as np
import tensorflow as tf
path, data = sys.argv[1], sys.argv[2]
served = tf.saved_model.load(path)
signature = served.signatures["predict"]
names = sorted(signature.structured_input_signature[1])
inputs = {name: tf.constant(np.load(f"{data}/{name}.npy")) for name in names}
(value,) = signature(**inputs).values()
np.save(f"{data}/signature.npy", value.numpy())
serve = served.serve([inputs["story"], inputs["question"]])
np.save(f"{data}/serve.npy", serve.numpy())
loaded = [m for m, mod in sys.modules.items() if m.startswith("keras_normkit") and mod]
print(json.dumps({"keras_normkit_imported": bool(loaded), "inputs": names}))
"""


def test_every_layer_calibrated_saved_reloaded_and_served_without_library(tmp_path):
    import tensorflow as tf

    from keras_normkit.export import export_saved_model

    model = every_layer_model()
    expected_classes = set(keras_normkit.layers.__all__)
    assert library_classes_in(model) == expected_classes

    rng = np.random.default_rng(0)
    story = rng.normal(size=(96, T, D)).astype("float32")
    question = rng.normal(size=(96, D)).astype("float32")
    logits = keras.ops.convert_to_numpy(model([story[:64], question[:64]]))
    calibrated = TemperatureScaling(model).calibrate(
        [story[:64], question[:64]], noisy_labels(logits, seed=1), verbose=0
    )
    assert calibrated.temperature_ > 1.5  # labels much noisier than the logits say

    x_test = [story[64:], question[64:]]
    expected = keras.ops.convert_to_numpy(calibrated(x_test))
    uncalibrated = keras.ops.convert_to_numpy(keras.ops.softmax(model(x_test)))
    assert np.abs(expected - uncalibrated).max() > 1e-2  # T is visible in the outputs

    calibrated.save(tmp_path / "every_layer.keras")
    reloaded = keras.models.load_model(tmp_path / "every_layer.keras")  # no custom_objects
    assert isinstance(reloaded, TemperatureScaling)
    assert reloaded.temperature_ == pytest.approx(calibrated.temperature_)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded(x_test)), expected, atol=1e-6)

    signature = [
        [
            tf.TensorSpec((None, T, D), tf.float32, name="story"),
            tf.TensorSpec((None, D), tf.float32, name="question"),
        ]
    ]
    export_saved_model(reloaded, tmp_path / "saved_model", signature, signature_name="predict")
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "story.npy", x_test[0])
    np.save(data / "question.npy", x_test[1])
    info = run_in_fresh_process(
        SERVE_EVERY_LAYER, str(tmp_path / "saved_model"), str(data), cwd=tmp_path
    )
    assert info == {"keras_normkit_imported": False, "inputs": ["question", "story"]}
    np.testing.assert_allclose(np.load(data / "signature.npy"), expected, atol=1e-5)
    np.testing.assert_allclose(np.load(data / "serve.npy"), expected, atol=1e-5)


SERVE_CALIBRATORS = """
import json, sys
sys.modules["keras_normkit"] = None  # any attempt to import the library now fails
import numpy as np
import tensorflow as tf
root, names = sys.argv[1], sys.argv[2].split(",")
x = tf.constant(np.load(f"{root}/x.npy"))
for name in names:
    served = tf.saved_model.load(f"{root}/{name}")
    np.save(f"{root}/{name}.npy", served.serve(x).numpy())
loaded = [m for m, mod in sys.modules.items() if m.startswith("keras_normkit") and mod]
print(json.dumps({"keras_normkit_imported": bool(loaded)}))
"""


def test_one_vs_rest_calibrators_saved_reloaded_and_served_without_library(tmp_path):
    model = snn_model()
    x = np.random.default_rng(0).normal(size=(800, 8)).astype("float32")
    logits = keras.ops.convert_to_numpy(model(x))
    labels = noisy_labels(logits, seed=3, noise=0.5)
    x_test = x[600:]
    uncalibrated = keras.ops.convert_to_numpy(keras.ops.softmax(model(x_test)))
    wrappers = {
        "histogram_binning": HistogramBinning(model, num_bins=5, strategy="quantile"),
        "isotonic": IsotonicCalibration(model),
        "platt": PlattScaling(model),
    }
    expected = {}
    for name, wrapper in wrappers.items():
        wrapper.calibrate(x[:600], labels[:600], verbose=0)
        expected[name] = keras.ops.convert_to_numpy(wrapper(x_test))
        assert np.abs(expected[name] - uncalibrated).max() > 1e-2, name  # the map is visible
        wrapper.save(tmp_path / f"{name}.keras")
        reloaded = keras.models.load_model(tmp_path / f"{name}.keras")  # no custom_objects
        assert type(reloaded) is type(wrapper)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(reloaded(x_test)), expected[name], atol=1e-6
        )
        reloaded.export(str(tmp_path / name), verbose=False)
    np.save(tmp_path / "x.npy", x_test)
    info = run_in_fresh_process(SERVE_CALIBRATORS, str(tmp_path), ",".join(wrappers), cwd=tmp_path)
    assert info == {"keras_normkit_imported": False}
    for name, value in expected.items():
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), value, atol=1e-5)
        np.testing.assert_allclose(value.sum(-1), 1.0, atol=1e-5)  # renormalized


# -- TFLite --------------------------------------------------------------------------------


def tflite_run(flatbuffer, inputs):
    """Run a converted model's default signature on `inputs`: a dict keyed by input name,
    or one array for a model with a single input (whatever its name)."""
    import tensorflow as tf

    runner = tf.lite.Interpreter(model_content=flatbuffer).get_signature_runner()
    names = sorted(runner.get_input_details())
    if not isinstance(inputs, dict):
        (name,) = names
        inputs = {name: inputs}
    assert names == sorted(inputs)
    (value,) = runner(**inputs).values()
    return value


def test_tflite_calibrated_self_normalizing_network(tmp_path):
    from keras_normkit.export import convert_to_tflite

    keras.utils.set_random_seed(0)
    fixed_point = (0.1, 1.2)
    model = keras.Sequential(
        [
            keras.Input((8,), name="features"),
            keras.layers.Dense(32, kernel_initializer="lecun_normal"),
            L.SELU(fixed_point=fixed_point),
            L.AlphaDropout(0.2, fixed_point=fixed_point),
            keras.layers.Dense(16, kernel_initializer="lecun_normal"),
            L.ScaleNormalization(),
            keras.layers.Dense(CLASSES),
        ]
    )
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype("float32")
    labels = noisy_labels(keras.ops.convert_to_numpy(model(x)), seed=2, noise=4.0)
    calibrated = TemperatureScaling(model).calibrate(x[:192], labels[:192], verbose=0)
    assert calibrated.temperature_ > 1.5
    x_test = x[192:]
    expected = keras.ops.convert_to_numpy(calibrated(x_test))

    flatbuffer = convert_to_tflite(calibrated, tmp_path / "snn.tflite")
    value = tflite_run(flatbuffer, x_test)
    np.testing.assert_allclose(value, expected, atol=1e-5)
    np.testing.assert_allclose(value.sum(-1), 1.0, atol=1e-5)  # calibrated probabilities


def test_tflite_folded_batch_normalization(tmp_path):
    from keras_normkit.export import convert_to_tflite
    from keras_normkit.utils import fold_batch_normalization

    keras.utils.set_random_seed(0)
    x_in = keras.Input((10, 4), name="signal")
    h = keras.layers.Conv1D(8, 3, padding="same")(x_in)
    h = keras.layers.BatchNormalization()(h)
    h = L.SELU()(h)
    h = keras.layers.GlobalAveragePooling1D()(h)
    h = keras.layers.Dense(16)(h)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.Activation("relu")(h)
    model = keras.Model(x_in, keras.layers.Dense(CLASSES)(h))
    rng = np.random.default_rng(0)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            n = layer.gamma.shape[0]
            layer.set_weights(
                [
                    rng.uniform(0.5, 2.0, n),
                    rng.normal(size=n),
                    rng.normal(size=n),
                    rng.uniform(0.2, 3.0, n),
                ]
            )
    folded = fold_batch_normalization(model, verbose=False)
    assert not any(isinstance(la, keras.layers.BatchNormalization) for la in folded.layers)

    x = rng.normal(size=(5, 10, 4)).astype("float32")
    expected = keras.ops.convert_to_numpy(model(x, training=False))
    flatbuffer = convert_to_tflite(folded, tmp_path / "folded.tflite")
    np.testing.assert_allclose(tflite_run(flatbuffer, {"signal": x}), expected, atol=1e-5)


def test_tflite_folded_weight_standardization(tmp_path):
    """An NF-ResNet block, folded into plain convolutions, converts and runs in TFLite."""
    from keras_normkit.export import convert_to_tflite
    from keras_normkit.utils import fold_weight_standardization

    keras.utils.set_random_seed(0)

    def conv(filters, kernel_size, strides=1):
        return L.WeightStandardization(
            keras.layers.Conv2D(filters, kernel_size, strides, padding="same"), activation="relu"
        )

    x_in = keras.Input((8, 8, 1), name="image")
    h = keras.layers.Conv2D(4, 3, padding="same")(x_in)
    branch = keras.Sequential([keras.layers.ReLU(), conv(8, 3, 2), keras.layers.ReLU(), conv(8, 3)])
    shortcut = keras.Sequential([keras.layers.ReLU(), conv(8, 1, 2)])
    h = L.NFResidual(branch, shortcut, alpha=0.2, beta=1.0)(h)
    h = keras.layers.GlobalAveragePooling2D()(keras.layers.ReLU()(h))
    model = keras.Model(x_in, keras.layers.Dense(CLASSES)(h))
    folded = fold_weight_standardization(model)
    x = np.random.default_rng(0).normal(size=(5, 8, 8, 1)).astype("float32")
    expected = keras.ops.convert_to_numpy(model(x))
    flatbuffer = convert_to_tflite(folded, tmp_path / "folded_ws.tflite")
    np.testing.assert_allclose(tflite_run(flatbuffer, {"image": x}), expected, atol=1e-5)


def _recurrent_case(kind):
    keras.utils.set_random_seed(0)
    story = keras.Input((T, D), name="story")
    question = keras.Input((D,), name="question")
    if kind.startswith("QRN"):
        implementation = "sequential" if "sequential" in kind else "parallel"
        layer = L.QRN(UNITS, implementation=implementation, bidirectional=True, name="recurrent")
        return keras.Model([story, question], layer([story, question]))
    layer = {
        "FastWeightsRNN": lambda: L.FastWeightsRNN(UNITS, name="recurrent"),
        "LayerNormLSTM": lambda: L.LayerNormLSTM(UNITS, name="recurrent"),
        "LayerNormGRU": lambda: L.LayerNormGRU(UNITS, name="recurrent"),
        "LayerNormSimpleRNN": lambda: L.LayerNormSimpleRNN(UNITS, name="recurrent"),
        "keras.layers.LSTM": lambda: keras.layers.LSTM(UNITS, name="recurrent"),
    }[kind]()
    return keras.Model(story, layer(story))


# What converts with TFLite built-in ops today (TF 2.21, Keras 3.15). The parallel QRN is a
# blocked scan without a loop: it converts. The layers stepping a `keras.layers.RNN` loop
# (the sequential QRN too, and Keras's own LSTM, the reference) do not: the exported loop keeps its per-step
# outputs in a TensorList whose element shape has the dynamic batch dimension, which
# TFLite's built-in ops cannot lower (it suggests SELECT_TF_OPS). If an entry changes,
# update this table and the README's backend table.
TFLITE_CONVERTS = {
    "QRN": True,  # implementation="parallel" (the default), here bidirectional
    "QRN(implementation='sequential')": False,
    "FastWeightsRNN": False,
    "LayerNormLSTM": False,
    "LayerNormGRU": False,
    "LayerNormSimpleRNN": False,
    "keras.layers.LSTM": False,
}


@pytest.mark.parametrize("kind", sorted(TFLITE_CONVERTS))
def test_tflite_recurrent_layers_current_state(kind, tmp_path):
    from keras_normkit.export import convert_to_tflite

    model = _recurrent_case(kind)
    rng = np.random.default_rng(0)
    inputs = {"story": rng.normal(size=(3, T, D)).astype("float32")}
    if kind.startswith("QRN"):
        inputs["question"] = rng.normal(size=(3, D)).astype("float32")
    if not TFLITE_CONVERTS[kind]:
        with pytest.raises(ValueError, match=r"(?s)from layer recurrent\b.*TensorListReserve"):
            convert_to_tflite(model, tmp_path / "m.tflite")
        return
    flatbuffer = convert_to_tflite(model, tmp_path / "m.tflite")
    model_inputs = [inputs[t.name] for t in model.inputs]
    expected = keras.ops.convert_to_numpy(model(model_inputs))
    np.testing.assert_allclose(tflite_run(flatbuffer, inputs), expected, atol=1e-5)


# -- tf.distribute -------------------------------------------------------------------------


def run_script(script, *args, without=(), **variables):
    """Run `script` (with `args`) in a new interpreter; the JSON of its last printed line.

    The environment is this one without the variables named in `without`, plus
    `variables` and a quiet TensorFlow log.
    """
    env = {k: v for k, v in os.environ.items() if k not in without}
    env.update(TF_CPP_MIN_LOG_LEVEL="3", **variables)
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


DISTRIBUTED_SCRIPT = """
import json, sys
import tensorflow as tf

# Two logical CPUs: possible only before TensorFlow initializes its devices.
(cpu,) = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras
import numpy as np

from keras_normkit.calibration import TemperatureScaling
from keras_normkit.callbacks import ActivationStatistics, EarlyStopping
from keras_normkit.constraints import ParsevalConstraint
from keras_normkit.layers import QRN, FastWeightsRNN, LayerNormLSTM
from keras_normkit.metrics import ExpectedCalibrationError
from keras_normkit.schedules import CyclicalLearningRate

T, D, K, N, GLOBAL_BATCH = 5, 8, 3, 64, 16
out_dir = sys.argv[1]
rng = np.random.default_rng(0)
story = rng.normal(size=(N + 32, T, D)).astype("float32")
question = rng.normal(size=(N + 32, D)).astype("float32")
labels = np.argmax(story.sum(1)[:, :K] + question[:, :K], -1).astype("int32")
train = ([story[:N], question[:N]], labels[:N])
val = ([story[N:], question[N:]], labels[N:])


def build():
    keras.utils.set_random_seed(1)
    xs = keras.Input((T, D), name="story")
    qs = keras.Input((D,), name="question")
    h = FastWeightsRNN(D, return_sequences=True, name="fast_weights")(xs)
    h = QRN(D, name="qrn")([h, qs])
    h = LayerNormLSTM(D, name="ln_lstm")(h)
    parseval = dict(
        kernel_initializer="orthogonal", kernel_constraint=ParsevalConstraint(beta=0.05)
    )
    h = keras.layers.Dense(D, activation="tanh", name="hidden", **parseval)(h)
    probs = keras.layers.Dense(K, activation="softmax", name="probs", **parseval)(h)
    return keras.Model([xs, qs], probs)


initial_weights = build().get_weights()


def run(strategy):
    with strategy.scope():
        model = build()
        model.set_weights(initial_weights)
        model.compile(
            keras.optimizers.SGD(CyclicalLearningRate(0.02, 0.2, step_size=4), momentum=0.5),
            loss="sparse_categorical_crossentropy",
            metrics=[ExpectedCalibrationError(num_bins=10)],
            jit_compile=False,
        )
    stats = ActivationStatistics(val[0], layers=["ln_lstm", "hidden"])
    stop = EarlyStopping(monitor="val_loss", patience=1)
    history = model.fit(
        *train, batch_size=GLOBAL_BATCH, epochs=4, shuffle=False, validation_data=val,
        callbacks=[stats, stop], verbose=0,
    )
    # Calibrating the model trained under the strategy itself:
    try:
        direct = TemperatureScaling(model, model_output="probabilities").calibrate(
            *val, verbose=0
        ).temperature_
    except ValueError as error:
        direct = str(error)
    # The deployment path: save, reload on one device, calibrate.
    path = f"{out_dir}/replicas_{strategy.num_replicas_in_sync}.keras"
    model.save(path)
    calibrated = TemperatureScaling(
        keras.models.load_model(path), model_output="probabilities"
    ).calibrate(*val, verbose=0)
    kernel = model.get_layer("hidden").kernel.numpy()
    return {
        "replicas": strategy.num_replicas_in_sync,
        "history": {k: [float(v) for v in values] for k, values in history.history.items()},
        "iterations": int(model.optimizer.iterations.numpy()),
        "best_epoch": stop.best_epoch,
        "stats_epochs": stats.epochs,
        "hidden_variance": [float(v) for v in stats.history["hidden"]["variance"]],
        "direct_calibration": direct,
        "temperature": calibrated.temperature_,
        "calibrated": np.asarray(calibrated.predict(val[0], verbose=0)).tolist(),
        "parseval_defect": float(np.linalg.norm(kernel.T @ kernel - np.eye(D))),
    }


mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
results = {"single": run(tf.distribute.get_strategy()), "mirrored": run(mirrored)}
print(json.dumps(results))
"""


@pytest.mark.slow
def test_mirrored_strategy_matches_single_device(tmp_path):
    runs = run_script(DISTRIBUTED_SCRIPT, str(tmp_path), KERAS_BACKEND="tensorflow")
    single, mirrored = runs["single"], runs["mirrored"]
    assert (single["replicas"], mirrored["replicas"]) == (1, 2)

    # Same global batch, same data order, same initial weights: the same optimization.
    # Each replica sums its half batch's gradients (loss scaled by the global batch) and the
    # halves are all-reduced, so only the float32 summation order differs: ~1e-7 relative
    # per reduction, grown to ~1e-6 after 16 SGD steps through the recurrent layers (what
    # we measured). rtol=1e-4 leaves 100x margin, while a wrong reduction is far outside it:
    # a doubled step (gradients summed instead of averaged over replicas) changes the
    # epoch-1 loss by 2e-3 and the epoch-2 loss by 1.5e-2 relative (measured).
    # EarlyStopping may end both runs before the 4th epoch, at the same epoch: 64/16 steps each.
    epochs_run = len(single["history"]["loss"])
    assert len(mirrored["history"]["loss"]) == epochs_run
    assert single["iterations"] == mirrored["iterations"] == 4 * epochs_run
    assert sorted(single["history"]) == sorted(mirrored["history"])
    for key in ("loss", "val_loss", "expected_calibration_error"):
        np.testing.assert_allclose(
            mirrored["history"][key], single["history"][key], rtol=1e-4, err_msg=key
        )
    assert epochs_run >= 2
    assert single["history"]["loss"][-1] < single["history"]["loss"][0]  # it trained
    # The callbacks and the constraint ran identically under the strategy.
    assert mirrored["best_epoch"] == single["best_epoch"]
    assert mirrored["stats_epochs"] == single["stats_epochs"]
    assert mirrored["stats_epochs"] == list(range(len(single["history"]["loss"]) + 1))
    np.testing.assert_allclose(mirrored["hidden_variance"], single["hidden_variance"], rtol=1e-4)
    np.testing.assert_allclose(mirrored["parseval_defect"], single["parseval_defect"], rtol=1e-3)

    # Calibration afterwards: on the model reloaded from `.keras` on one device it works and
    # agrees (T to 1e-4 relative, like the losses; probabilities to 1e-4 absolute).
    assert single["temperature"] == pytest.approx(mirrored["temperature"], rel=1e-4)
    np.testing.assert_allclose(mirrored["calibrated"], single["calibrated"], atol=1e-4)
    # Calibrating the model still under the strategy works too: `predict_on_batch` of a
    # model built under a 2-replica MirroredStrategy returns 2x the rows (Keras 3.15), so
    # `calibrate` predicts with `predict` there; it must find the same temperature.
    assert isinstance(mirrored["direct_calibration"], float), mirrored["direct_calibration"]
    assert mirrored["direct_calibration"] == pytest.approx(single["direct_calibration"], rel=1e-4)
    assert single["direct_calibration"] == pytest.approx(single["temperature"], rel=1e-6)


JAX_DATA_PARALLEL_SCRIPT = """
import json, os
os.environ["KERAS_BACKEND"] = "jax"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"  # 2 CPU devices
import jax
import keras
import numpy as np

from keras_normkit.constraints import ParsevalConstraint
from keras_normkit.layers import QRN, FastWeightsRNN, LayerNormLSTM
from keras_normkit.metrics import ExpectedCalibrationError
from keras_normkit.schedules import CyclicalLearningRate

T, D, K, N, GLOBAL_BATCH = 5, 8, 3, 64, 16
rng = np.random.default_rng(0)
story = rng.normal(size=(N, T, D)).astype("float32")
question = rng.normal(size=(N, D)).astype("float32")
labels = np.argmax(story.sum(1)[:, :K] + question[:, :K], -1).astype("int32")


def build():
    keras.utils.set_random_seed(1)
    xs = keras.Input((T, D))
    qs = keras.Input((D,))
    h = FastWeightsRNN(D, return_sequences=True)(xs)
    h = QRN(D)([h, qs])
    h = LayerNormLSTM(D)(h)
    parseval = dict(
        kernel_initializer="orthogonal", kernel_constraint=ParsevalConstraint(beta=0.05)
    )
    h = keras.layers.Dense(D, activation="tanh", **parseval)(h)
    return keras.Model([xs, qs], keras.layers.Dense(K, activation="softmax", **parseval)(h))


initial_weights = build().get_weights()


def run():
    model = build()
    model.set_weights(initial_weights)
    model.compile(
        keras.optimizers.SGD(CyclicalLearningRate(0.02, 0.2, step_size=4), momentum=0.5),
        loss="sparse_categorical_crossentropy",
        metrics=[ExpectedCalibrationError(num_bins=10)],
    )
    history = model.fit(
        [story, question], labels, batch_size=GLOBAL_BATCH, epochs=3, shuffle=False, verbose=0
    )
    mesh = getattr(model.layers[-1].kernel.value.sharding, "mesh", None)
    return {
        "history": {k: [float(v) for v in values] for k, values in history.history.items()},
        "mesh_devices": 1 if mesh is None else int(mesh.size),
    }


results = {"backend": keras.backend.backend(), "devices": len(jax.devices("cpu"))}
results["single"] = run()
keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices("cpu")))
results["data_parallel"] = run()
print(json.dumps(results))
"""


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_jax_data_parallel_matches_single_device():
    # The script sets its own backend and XLA_FLAGS (2 CPU devices).
    runs = run_script(JAX_DATA_PARALLEL_SCRIPT, without=("KERAS_BACKEND", "XLA_FLAGS"))
    assert (runs["backend"], runs["devices"]) == ("jax", 2)
    single, parallel = runs["single"], runs["data_parallel"]
    assert (single["mesh_devices"], parallel["mesh_devices"]) == (1, 2)  # weights on the mesh
    # Same tolerance and reasoning as the MirroredStrategy test (summation order only).
    for key in ("loss", "expected_calibration_error"):
        np.testing.assert_allclose(
            parallel["history"][key], single["history"][key], rtol=1e-4, err_msg=key
        )
    assert single["history"]["loss"][-1] < single["history"]["loss"][0]
