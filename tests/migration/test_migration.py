"""`load_tfa_model` against the real thing: `.h5` files written by tf.keras 2 with TF-Addons 0.23.

The fixtures (tests/migration/fixtures/, written by tests/migration/write_fixtures.py, versions
in fixtures/versions.json) hold each model and, in its `.npz`, the input `x` and TF-Addons'
prediction `y`; the trained ones also one more training step run by TF-Addons (`next_x`,
`next_target`, its loss `next_loss` and the prediction after it, `next_y`), the schedules
their values at `steps`. `references.py` recomputes the recurrent fixtures in float64 from
TF-Addons' formulas. The loader reads `.h5` files with h5py and Keras only, so everything but
the SavedModel runs on every backend.
"""

import base64
import json
import marshal
import pathlib
import shutil
import warnings

import h5py
import keras
import numpy as np
import pytest

from keras_normkit.layers import LayerNormLSTMCell, LayerNormSimpleRNNCell, WeightNormalization
from keras_normkit.migration import load_tfa_model, tfa_gelu, tfa_sparsemax
from keras_normkit.schedules import CyclicalLearningRate
from tests.conftest import requires_tensorflow
from tests.migration import references

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"

# Every loadable fixture (the uninitialized WeightNormalization ones have their own tests).
MODELS = [
    "activation_layers",
    "activations",
    "adaptive_pooling",
    "adaptive_pooling_3d",
    "filter_response_norm",
    "focal_loss",
    "focal_loss_function",
    "focal_loss_logits",
    "group_norm",
    "optimizer_lookahead",
    "optimizer_moving_average",
    "optimizer_swa",
    "peephole_lstm",
    "spectral_norm",
    "triangular_cyclical_lr",
    "addons_loss",
    "bidirectional",
    "cyclical_lr",
    "layer_norm_lstm",
    "layer_norm_simple_rnn",
    "legacy_adam_exponential_cyclical_lr",
    "plain_keras2",
    "triangular2_cyclical_lr",
    "weight_norm_conv2d",
    "weight_norm_dense",
    "weight_norm_dense_no_data_init",
]
# Trained in TF-Addons, saved, then one more step: training continues the same way here.
TRAINED = [
    "cyclical_lr",
    "filter_response_norm",
    "focal_loss",
    "focal_loss_function",
    "focal_loss_logits",
    "group_norm",
    "peephole_lstm",
    "spectral_norm",
    "triangular_cyclical_lr",
    "layer_norm_lstm",
    "layer_norm_simple_rnn",
    "legacy_adam_exponential_cyclical_lr",
    "triangular2_cyclical_lr",
    "weight_norm_dense",
]
SCHEDULES = {
    "cyclical_lr": "triangular",  # Addons>CyclicalLearningRate, scale_fn=lambda x: 1.0
    "triangular_cyclical_lr": "triangular",
    "triangular2_cyclical_lr": "triangular2",
    "legacy_adam_exponential_cyclical_lr": "exp_range",
}


# TF-Addons' focal loss class defaults to reduction="none": tf.keras 2's compile then takes
# the gradient of the batch sum (as Keras's reduction="sum" here) but reports the batch mean.
REPORTED_AS_MEAN = {"focal_loss", "focal_loss_logits"}


def fixture(name):
    if name.startswith("adaptive_pooling") and not hasattr(keras.layers, "AdaptiveMaxPooling2D"):
        pytest.skip(f"Keras {keras.__version__} has no adaptive pooling layers")
    if name == "adaptive_pooling_3d" and keras.backend.backend() == "tensorflow":
        pytest.skip("Keras 3.15's 3-D adaptive poolings fail inside a TensorFlow graph")
    return FIXTURES / f"{name}.h5", dict(np.load(FIXTURES / f"{name}.npz"))


def load_quietly(path, **kwargs):
    """`load_tfa_model`, returning the model and the messages of its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_tfa_model(path, **kwargs)
    messages = [str(w.message) for w in caught if "load_tfa_model" in str(w.message)]
    return model, messages


def first(value):
    """The loss of a `train_on_batch` result (a scalar, or [loss, metrics...])."""
    return float(np.ravel(np.asarray(value, dtype="float64"))[0])


# --------------------------------------------------------------------------- predictions


@pytest.mark.parametrize("name", [m for m in MODELS if m != "bidirectional"])
def test_predicts_what_tf_addons_predicted(name):
    path, data = fixture(name)
    model, messages = load_quietly(path, compile=False)
    assert messages == []  # nothing to warn about without the training config
    np.testing.assert_allclose(model.predict(data["x"], verbose=0), data["y"], rtol=1e-6, atol=1e-6)


def test_bidirectional_predicts_within_float32_rounding():
    """Two bidirectional RNNs of TF-Addons cells: TF-Addons' own float32 output is 1.4e-6
    away from the exact (float64) values of its formulas; ours is as close, the two differ
    by float32 rounding (up to 2.9e-6 on PyTorch, 1.1e-6 on TensorFlow)."""
    path, data = fixture("bidirectional")
    x = data["x"].astype("float64")
    lstm = "bidirectional/{}_rnn_2/layer_norm_lstm_cell_1/"
    simple = "bidirectional_1/{}_rnn_3/layer_norm_simple_rnn_cell_{}/"
    forward = references.h5_weights(path, "bidirectional", lstm.format("forward"))
    backward = references.h5_weights(path, "bidirectional", lstm.format("backward"))
    h = np.concatenate(
        [
            references.layer_norm_lstm(x, forward, 1e-2),
            references.layer_norm_lstm(x, backward, 1e-2, go_backwards=True)[:, ::-1],
        ],
        axis=-1,
    )
    forward = references.h5_weights(path, "bidirectional_1", simple.format("forward", 2))
    backward = references.h5_weights(path, "bidirectional_1", simple.format("backward", 3))
    h = (
        references.layer_norm_simple_rnn(h, forward)[:, -1]
        + references.layer_norm_simple_rnn(h, backward, go_backwards=True)[:, -1]
    )
    exact = references.dense(h, references.h5_weights(path, "dense_2"), "dense_2")
    np.testing.assert_allclose(data["y"], exact, atol=2e-6)  # TF-Addons' rounding
    model, _ = load_quietly(path, compile=False)
    y = model.predict(data["x"], verbose=0)
    np.testing.assert_allclose(y, exact, atol=2e-6)
    np.testing.assert_allclose(y, data["y"], rtol=1e-6, atol=3e-6)


@pytest.mark.parametrize(
    "name, expected_classes",
    [
        ("layer_norm_lstm", ["LayerNormLSTMCell"]),
        ("layer_norm_simple_rnn", ["LayerNormSimpleRNNCell"]),
        ("bidirectional", ["LayerNormLSTMCell", "LayerNormSimpleRNNCell"]),
    ],
)
def test_recurrent_fixtures_match_float64_reference(name, expected_classes):
    """The cells are translated (not loaded some other way) and compute TF-Addons' formulas."""
    path, data = fixture(name)
    model, _ = load_quietly(path, compile=False)
    cells = []
    for layer in model.layers:
        rnn = getattr(layer, "forward_layer", layer)
        if hasattr(rnn, "cell"):
            cells.append(rnn.cell)
    assert [type(cell).__name__ for cell in cells] == expected_classes
    if name == "bidirectional":
        return  # its reference is the test above
    x = data["x"].astype("float64")
    rnn, head = [layer.name for layer in model.layers if layer.weights]
    scope = f"{rnn}/{'layer_norm_lstm_cell' if name == 'layer_norm_lstm' else 'layer_norm_simple_rnn_cell'}/"
    cell = references.h5_weights(path, rnn, scope)
    if name == "layer_norm_lstm":
        assert cells[0].carry_normalized_state and cells[0].norm_epsilon == 1e-3
        h = references.layer_norm_lstm(x, cell)
    else:
        assert cells[0].norm_epsilon == 1e-4  # layernorm_epsilon=1e-4
        relu = lambda a: np.maximum(a, 0.0)  # noqa: E731
        h = references.layer_norm_simple_rnn(x, cell, 1e-4, activation=relu)[:, -1]
    exact = references.dense(h, references.h5_weights(path, head), head)
    np.testing.assert_allclose(data["y"], exact, atol=1e-6)
    np.testing.assert_allclose(model.predict(data["x"], verbose=0), exact, atol=1e-6)


def test_layer_norm_simple_rnn_shift_is_zero_and_frozen():
    """TF-Addons' norm has no shift: ours is zero and stays out of training."""
    path, data = fixture("layer_norm_simple_rnn")
    model, _ = load_quietly(path)
    cell = model.get_layer("rnn_1").cell
    assert isinstance(cell, LayerNormSimpleRNNCell)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(cell.norm.beta), 0.0)
    assert not cell.norm.beta.trainable
    assert all(v is not cell.norm.beta for v in model.trainable_variables)
    model.train_on_batch(data["next_x"], data["next_target"])
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(cell.norm.beta), 0.0)


def test_weight_normalization_is_ours_with_tf_addons_weights():
    path, data = fixture("weight_norm_dense")
    model, _ = load_quietly(path, compile=False)
    layer = model.layers[0]
    assert isinstance(layer, WeightNormalization) and layer.data_init
    assert float(keras.ops.convert_to_numpy(layer.initialized)) == 1.0
    with h5py.File(path, "r") as f:
        group = f["model_weights"]["weight_normalization"]
        g = np.asarray(group["weight_normalization/g:0"])
        v = np.asarray(group["weight_normalization/kernel:0"])
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer.scale), g)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer.layer.kernel), v)
    # Never re-initialized by training: the flag came from the file.
    model.compile(optimizer="sgd", loss="mse")
    model.train_on_batch(data["x"], np.zeros_like(data["y"]))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer.g_offset), 0.0)


def test_weight_normalization_without_data_init_gets_the_norm_of_v():
    """Saved before its first call, TF-Addons' `g` is still ones; its first call sets it
    to ||v||, which the loader does."""
    path, data = fixture("weight_norm_dense_no_data_init")
    model, _ = load_quietly(path, compile=False)
    layer = model.layers[0]
    assert not layer.data_init
    v = keras.ops.convert_to_numpy(layer.layer.kernel)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(layer.g), np.linalg.norm(v, axis=0), rtol=1e-6
    )


# --------------------------------------------------------------------------- data init


@pytest.mark.parametrize(
    "name",
    [
        "weight_norm_dense_uninitialized",
        "weight_norm_conv2d_uninitialized",
        "weight_norm_functional_uninitialized",  # two in a row, the second without bias
    ],
)
def test_uninitialized_weight_normalization_with_data_init_batch(name):
    """Saved before its first call: TF-Addons initialized it on the first batch it predicted
    (`x`, giving `y`); `data_init_batch=x` runs the same initialization at load time."""
    path, data = fixture(name)
    model, messages = load_quietly(path, compile=False, data_init_batch=data["x"])
    assert messages == []
    np.testing.assert_allclose(model.predict(data["x"], verbose=0), data["y"], rtol=1e-6, atol=1e-6)
    if "x_after" in data:  # and what it predicted afterwards, on other data
        y_after = model.predict(data["x_after"], verbose=0)
        np.testing.assert_allclose(y_after, data["y_after"], rtol=1e-6, atol=1e-6)
    for layer in model.layers:
        if isinstance(layer, WeightNormalization):
            assert float(keras.ops.convert_to_numpy(layer.initialized)) == 1.0


def test_unused_data_init_batch_is_reported():
    path, data = fixture("weight_norm_dense")
    _, messages = load_quietly(path, compile=False, data_init_batch=data["x"])
    assert len(messages) == 1 and "`data_init_batch` is not used" in messages[0]


def test_uninitialized_weight_normalization_without_batch_warns_and_waits():
    path, data = fixture("weight_norm_dense_uninitialized")
    model, messages = load_quietly(path, compile=False)
    assert len(messages) == 1
    assert "'weight_normalization'" in messages[0] and "data_init_batch" in messages[0]
    layer = model.layers[0]
    assert float(keras.ops.convert_to_numpy(layer.initialized)) == 0.0
    # keras_normkit's initialization (the paper's) on the first training batch: the
    # pre-activation then has mean 0 and variance 1 on that batch.
    pre = keras.Model(model.inputs[0], model.layers[0].output)
    model.layers[0].layer.activation = keras.activations.linear
    t = keras.ops.convert_to_numpy(pre(data["x"], training=True))
    np.testing.assert_allclose(t.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(t.var(axis=0), 1.0, rtol=1e-4)


# --------------------------------------------------------------------------- training


@pytest.mark.parametrize("name", TRAINED)
def test_training_continues_as_in_tf_addons(name):
    """Optimizer, settings, learning-rate schedule, step count and moments are restored:
    one more training step gives TF-Addons' loss and weights."""
    if name == "spectral_norm" and keras.backend.backend() == "jax":
        pytest.skip(
            "Keras 3.15's SpectralNormalization on JAX: the kernel it normalizes inside "
            "call() (a trainable variable) is not kept by the stateless training step "
            "(docs/migration.md: 0.021 after one step)"
        )
    path, data = fixture(name)
    model, messages = load_quietly(path)
    assert messages == []
    loss = first(model.train_on_batch(data["next_x"], data["next_target"]))
    if name in REPORTED_AS_MEAN:
        loss /= len(data["next_x"])
    np.testing.assert_allclose(loss, first(data["next_loss"]), rtol=1e-5)
    y = model.predict(data["x"], verbose=0)
    np.testing.assert_allclose(y, data["next_y"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name, mode", sorted(SCHEDULES.items()))
def test_cyclical_learning_rate_comes_back_as_ours(name, mode):
    path, data = fixture(name)
    model, _ = load_quietly(path)
    config = model.optimizer.get_config()["learning_rate"]
    schedule = keras.optimizers.schedules.deserialize(config)
    assert isinstance(schedule, CyclicalLearningRate) and schedule.mode == mode
    ours = [float(keras.ops.convert_to_numpy(schedule(step))) for step in data["steps"]]
    np.testing.assert_allclose(ours, data["learning_rates"], rtol=1e-6)
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 2
    expected = data["learning_rates"][2]  # the rate of the next step
    np.testing.assert_allclose(float(model.optimizer.learning_rate), expected, rtol=1e-6)


def with_training_config(tmp_path, name, edit):
    """A copy of fixture `name` whose training config went through `edit(config)`."""
    target = tmp_path / f"{name}.h5"
    shutil.copy(FIXTURES / f"{name}.h5", target)
    with h5py.File(target, "r+") as f:
        config = json.loads(f.attrs["training_config"])
        edit(config)
        f.attrs["training_config"] = json.dumps(config)
    return target


def set_learning_rate(registered_name, **config):
    def edit(training_config):
        training_config["optimizer_config"]["config"]["learning_rate"] = {
            "class_name": registered_name.split(">")[1],
            "config": config,
            "registered_name": registered_name,
        }

    return edit


def lambda_config(function):
    code = base64.b64encode(marshal.dumps(function.__code__)).decode("ascii")
    return {"class_name": "__lambda__", "config": {"value": [code, None, None]}}


def tfa_cyclical(step, initial, maximal, step_size, scale):
    """TF-Addons' CyclicalLearningRate.__call__, in NumPy."""
    cycle = np.floor(1 + step / (2 * step_size))
    x = np.abs(step / step_size - 2 * cycle + 1)
    return initial + (maximal - initial) * np.maximum(0.0, 1 - x) * scale


def test_exponential_schedule_works_in_a_new_optimizer(tmp_path):
    """TF-Addons' ExponentialCyclicalLearningRate raised a TypeError in a tf.keras >= 2.11
    optimizer; its config (as an optimizer would save it) translates to ours, which works."""
    data = dict(np.load(FIXTURES / "exponential_cyclical_lr.npz"))
    saved = json.loads(str(data["config"]))

    def edit(training_config):
        training_config["optimizer_config"]["config"]["learning_rate"] = saved

    model, messages = load_quietly(with_training_config(tmp_path, "triangular2_cyclical_lr", edit))
    assert messages == []
    config = model.optimizer.get_config()["learning_rate"]
    schedule = keras.optimizers.schedules.deserialize(config)
    assert schedule.mode == "exp_range" and schedule.gamma == 0.9
    ours = [float(keras.ops.convert_to_numpy(schedule(step))) for step in data["steps"]]
    np.testing.assert_allclose(ours, data["learning_rates"], rtol=1e-6)
    model.train_on_batch(np.zeros((2, 4), "float32"), np.zeros((2, 1), "float32"))


def test_constant_scale_fn_is_an_amplitude(tmp_path):
    """`scale_fn=lambda x: 0.5` scales the wave: the maximum is halfway."""
    config = dict(initial_learning_rate=1e-3, maximal_learning_rate=1e-2, step_size=3)
    config.update(scale_fn=lambda_config(lambda x: 0.5), scale_mode="cycle")
    edit = set_learning_rate("Addons>CyclicalLearningRate", **config)
    model, messages = load_quietly(with_training_config(tmp_path, "cyclical_lr", edit))
    assert messages == []
    schedule = keras.optimizers.schedules.deserialize(model.optimizer.get_config()["learning_rate"])
    steps = np.arange(20.0)
    ours = [float(keras.ops.convert_to_numpy(schedule(step))) for step in steps]
    np.testing.assert_allclose(ours, tfa_cyclical(steps, 1e-3, 1e-2, 3, 0.5), rtol=1e-6)


@pytest.mark.parametrize(
    "registered_name, config",
    [
        # A scale_fn that is not a constant is never run: not translated.
        (
            "Addons>CyclicalLearningRate",
            dict(scale_fn=lambda_config(lambda x: 0.9**x), scale_mode="iterations"),
        ),
        ("Addons>Triangular2CyclicalLearningRate", dict(scale_mode="iterations")),
        ("Addons>ExponentialCyclicalLearningRate", dict(scale_mode="cycle", gamma=0.9)),
        ("Addons>TriangularCyclicalLearningRate", dict(step_size=2.5)),
    ],
)
def test_untranslatable_schedule_warns_and_uses_its_initial_rate(tmp_path, registered_name, config):
    config = {
        "initial_learning_rate": 1e-3,
        "maximal_learning_rate": 1e-2,
        "step_size": 4,
        **config,
    }
    edit = set_learning_rate(registered_name, **config)
    model, messages = load_quietly(with_training_config(tmp_path, "cyclical_lr", edit))
    assert len(messages) == 1 and registered_name in messages[0]
    assert "constant 0.001" in messages[0]
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 1e-3, rtol=1e-6)


def test_a_tf_keras_2_training_config_never_stops_the_load():
    """A plain tf.keras 2 model (no TF-Addons object): its training config (the metrics of
    tf.keras 2) is translated, and skipped with compile=False."""
    path, data = fixture("plain_keras2")
    model, messages = load_quietly(path)
    assert messages == []
    assert isinstance(model.optimizer, keras.optimizers.RMSprop)
    onehot = np.eye(2, dtype="float32")[np.arange(5) % 2]
    results = model.evaluate(data["x"], onehot, verbose=0, return_dict=True)
    assert set(results) == {"loss", "accuracy"}
    expected = -np.mean(np.log(np.sum(data["y"] * onehot, axis=-1)))
    np.testing.assert_allclose(results["loss"], expected, rtol=1e-5)
    model, _ = load_quietly(path, compile=False)
    assert getattr(model, "optimizer", None) is None


def np_sigmoid_focal_crossentropy(y, p, alpha=0.25, gamma=2.0, from_logits=False):
    """TF-Addons 0.23's `sigmoid_focal_crossentropy` in float64, per example: `alpha_t
    (1 - p_t)^gamma CE` summed over the last axis (no `alpha_t` for alpha 0/None)."""
    y, p = y.astype("float64"), p.astype("float64")
    if from_logits:
        p = 1.0 / (1.0 + np.exp(-p))
    p = np.clip(p, 1e-7, 1 - 1e-7)
    ce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    p_t = y * p + (1 - y) * (1 - p)
    alpha_t = y * alpha + (1 - y) * (1 - alpha) if alpha else 1.0
    return np.sum(alpha_t * (1 - p_t) ** gamma * ce, axis=-1)


@pytest.mark.parametrize(
    "name, alpha, gamma, from_logits, reduction",
    [
        ("focal_loss", 0.3, 1.5, False, "sum"),
        ("focal_loss_function", 0.25, 2.0, False, "sum_over_batch_size"),
        ("focal_loss_logits", 0.25, 0.0, True, "sum"),
        ("addons_loss", 0.25, 2.0, False, "sum"),
    ],
)
def test_sigmoid_focal_loss_is_kerass_binary_focal_crossentropy(
    name, alpha, gamma, from_logits, reduction
):
    """The class (reduction "none": the batch sum, as tf.keras 2's gradient) and the
    function (the batch mean) of TF-Addons, translated; the loss equals TF-Addons' formula
    (NumPy) on the fixture's predictions."""
    path, data = fixture(name)
    model, messages = load_quietly(path)
    assert messages == []
    loss = model.loss
    assert isinstance(loss, keras.losses.BinaryFocalCrossentropy)
    config = loss.get_config()
    assert config["apply_class_balancing"] and config["from_logits"] == from_logits
    assert config["alpha"] == pytest.approx(alpha) and config["gamma"] == pytest.approx(gamma)
    assert config["reduction"] == reduction
    target = np.asarray(data.get("target", np.ones_like(data["y"])), "float32")
    per_example = np_sigmoid_focal_crossentropy(target, data["y"], alpha, gamma, from_logits)
    expected = per_example.sum() if reduction == "sum" else per_example.mean()
    ours = float(keras.ops.convert_to_numpy(loss(target, data["y"])))
    np.testing.assert_allclose(ours, expected, rtol=1e-5)


def test_focal_loss_of_a_wide_output_and_other_addons_losses_are_dropped(tmp_path):
    def focal(config):
        config["loss"] = {
            "class_name": "Addons>SigmoidFocalCrossEntropy",
            "config": {"reduction": "none", "alpha": 0.25, "gamma": 2.0},
        }

    path = with_training_config(tmp_path, "optimizer_lookahead", focal)  # Dense(2)
    model, messages = load_quietly(path)
    assert len(messages) == 1
    assert "Addons>SigmoidFocalCrossEntropy is dropped" in messages[0]
    assert "wider than one unit" in messages[0] and "with a loss" in messages[0]

    def pinball(config):
        config["loss"] = "pinball_loss"  # tf.keras 2 saves a loss function by its name

    path = with_training_config(tmp_path, "focal_loss", pinball)
    model, messages = load_quietly(path)
    assert "the loss Addons>pinball_loss (TF-Addons') is dropped" in messages[0]
    assert isinstance(model.optimizer, keras.optimizers.SGD)
    model.compile(optimizer=model.optimizer, loss="mse")  # trains once given a loss
    model.train_on_batch(np.zeros((2, 5), "float32"), np.zeros((2, 1), "float32"))


@pytest.mark.parametrize(
    "name, wrapper, inner",
    [
        ("optimizer_lookahead", "Addons>Lookahead", keras.optimizers.Adam),
        ("optimizer_moving_average", "Addons>MovingAverage", keras.optimizers.Adam),
        ("optimizer_swa", "Addons>SWA", keras.optimizers.SGD),
    ],
)
def test_optimizer_wrappers_are_dropped_for_the_optimizer_they_wrap(name, wrapper, inner):
    """A compiled model with MovingAverage / SWA / Lookahead (and the metric
    Addons>RSquare): it loads, predicts as TF-Addons, compiled with the wrapped optimizer
    (its settings, step count and Adam moments restored); one warning names what is
    dropped: the wrapper, its averaged or slow weights, the metric."""
    path, data = fixture(name)
    model, messages = load_quietly(path)
    assert len(messages) == 1
    assert f"the optimizer wrapper {wrapper} is dropped" in messages[0]
    assert "the metric Addons>RSquare (TF-Addons') is dropped" in messages[0]
    assert "/average:0" in messages[0] or "/slow:0" in messages[0]
    assert isinstance(model.optimizer, inner)
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 2
    np.testing.assert_allclose(model.predict(data["x"], verbose=0), data["y"], rtol=1e-6, atol=1e-6)
    if inner is keras.optimizers.Adam:
        moments = [v for v in model.optimizer.variables if v.path.endswith("_momentum")]
        assert moments and all(np.any(keras.ops.convert_to_numpy(v) != 0) for v in moments)
    results = model.evaluate(data["x"], data["y"], verbose=0, return_dict=True)
    assert set(results) == {"loss", "mae"} and results["loss"] < 1e-10


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "name, names",
    [
        ("unsupported_layer", ["'Addons>Maxout'", "'maxout'"]),
        ("unsupported_activation", ["'Addons>lisht'"]),
    ],
)
def test_unknown_addons_object_raises_naming_it(name, names):
    path, _ = fixture(name)
    with pytest.raises(ValueError, match="cannot translate") as error:
        load_tfa_model(path)
    for text in names:
        assert text in str(error.value)
    assert "custom_objects" in str(error.value)


class Maxout(keras.layers.Layer):
    """TF-Addons' Maxout in Keras 3: channel `j * num_units + u` goes to unit `u`."""

    def __init__(self, num_units, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.num_units, self.axis = num_units, axis

    def call(self, inputs):
        channels = inputs.shape[-1]
        shape = (-1, channels // self.num_units, self.num_units)
        return keras.ops.max(keras.ops.reshape(inputs, shape), axis=1)

    def get_config(self):
        return {**super().get_config(), "num_units": self.num_units, "axis": self.axis}


def test_custom_objects_replace_what_has_no_equivalent():
    path, data = fixture("unsupported_layer")
    model, _ = load_quietly(path, custom_objects={"Addons>Maxout": Maxout})
    np.testing.assert_allclose(model.predict(data["x"], verbose=0), data["y"], rtol=1e-6, atol=1e-6)

    def lisht(x):
        return x * keras.ops.tanh(x)

    path, data = fixture("unsupported_activation")
    model, _ = load_quietly(path, custom_objects={"Addons>lisht": lisht})
    np.testing.assert_allclose(model.predict(data["x"], verbose=0), data["y"], rtol=1e-6, atol=1e-6)


def test_files_that_are_not_tf_keras_2_models_get_a_clear_error(tmp_path):
    text = tmp_path / "model.h5"
    text.write_text("not a model")
    with pytest.raises(ValueError, match="not an HDF5 file"):
        load_tfa_model(text)
    other = tmp_path / "data.h5"
    with h5py.File(other, "w") as f:
        f["x"] = np.zeros(3)
    with pytest.raises(ValueError, match="holds no model"):
        load_tfa_model(other)
    keras3 = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    keras3.save(tmp_path / "keras3.h5")
    with pytest.raises(ValueError, match="not written by tf.keras 2.*keras.models.load_model"):
        load_tfa_model(tmp_path / "keras3.h5")
    keras3.save(tmp_path / "keras3.keras")
    with pytest.raises(ValueError, match="not an HDF5 file.*keras.models.load_model"):
        load_tfa_model(tmp_path / "keras3.keras")
    keras3.save_weights(tmp_path / "keras3.weights.h5")
    with pytest.raises(ValueError, match="holds no model"):
        load_tfa_model(tmp_path / "keras3.weights.h5")
    with pytest.raises(ValueError, match="TFSMLayer"):
        load_tfa_model(FIXTURES / "saved_model_layer_norm_simple_rnn")
    with pytest.raises(FileNotFoundError, match="missing.h5"):
        load_tfa_model(tmp_path / "missing.h5")


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"path": 3}, TypeError, "`path` must be .* Received: path=3 of type int"),
        ({"path": b"model.h5"}, TypeError, "`path` must be"),
        ({"compile": "yes"}, TypeError, "`compile` must be a Python bool. Received: compile='yes'"),
        (
            {"custom_objects": ["Addons>Maxout"]},
            TypeError,
            "`custom_objects` must be None or a dict",
        ),
        ({"custom_objects": {1: Maxout}}, TypeError, "`custom_objects` must be None or a dict"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    arguments = {"path": FIXTURES / "layer_norm_lstm.h5", **kwargs}
    with pytest.raises(error, match=match):
        load_tfa_model(**arguments)


def test_data_init_batch_for_a_nested_layer_is_refused(tmp_path):
    """TF-Addons' initialization is reproduced for the model's own layers only."""
    path = FIXTURES / "weight_norm_dense_uninitialized.h5"
    target = tmp_path / "renamed.h5"
    shutil.copy(path, target)
    with h5py.File(target, "r+") as f:  # a model whose flag is not in its own layer
        group = f["model_weights"]["weight_normalization"]
        names = [n.decode() if isinstance(n, bytes) else n for n in group.attrs["weight_names"]]
        renamed = [n.replace("weight_normalization/", "weight_normalization/inner/") for n in names]
        for old, new in zip(names, renamed, strict=True):
            group.move(old, new)
        group.attrs["weight_names"] = [n.encode() for n in renamed]
    _, data = fixture("weight_norm_dense_uninitialized")
    with pytest.raises(ValueError, match="not for inner"):
        load_tfa_model(target, compile=False, data_init_batch=data["x"])


# --------------------------------------------------------------------------- the rest


def test_translated_model_round_trips_through_keras_format(tmp_path):
    path, data = fixture("activations")
    model, _ = load_quietly(path)
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(
        reloaded.predict(data["x"], verbose=0), data["y"], rtol=1e-6, atol=1e-6
    )


def test_tfa_sparsemax_projects_onto_the_simplex():
    z = np.random.default_rng(0).normal(scale=2.0, size=(64, 7)).astype("float32")
    y = keras.ops.convert_to_numpy(tfa_sparsemax(z))
    np.testing.assert_allclose(y, references.sparsemax(z), atol=1e-6)
    np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-6)
    z = np.array([[0.0, np.inf, 1.0], [1.0, 2.0, np.nan], [1.0, 2.0, 3.0]], "float32")
    y = keras.ops.convert_to_numpy(tfa_sparsemax(z))
    assert np.isnan(y[:2]).all()  # as TF-Addons
    np.testing.assert_allclose(y[2], [0.0, 0.0, 1.0])


def test_tfa_gelu_is_the_tanh_approximation():
    x = np.linspace(-5, 5, 101).astype("float32")
    expected = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(tfa_gelu(x)), expected, atol=1e-6)


@requires_tensorflow
def test_saved_model_loads_for_inference_through_tfsm_layer():
    """A tf.keras 2 SavedModel with a TF-Addons cell: `TFSMLayer` runs its serving
    signature (no TF-Addons needed: the graph is in the SavedModel)."""
    path = FIXTURES / "saved_model_layer_norm_simple_rnn"
    data = dict(np.load(FIXTURES / "saved_model_layer_norm_simple_rnn.npz"))
    layer = keras.layers.TFSMLayer(path, call_endpoint="serving_default")
    outputs = layer(data["x"])
    (y,) = outputs.values()  # a dict keyed by the output layer's name
    np.testing.assert_allclose(keras.ops.convert_to_numpy(y), data["y"], rtol=1e-6, atol=1e-6)


def test_cells_are_keras_normkit_classes():
    path, _ = fixture("bidirectional")
    model, _ = load_quietly(path, compile=False)
    lstm = model.layers[0].forward_layer.cell
    assert isinstance(lstm, LayerNormLSTMCell) and lstm.norm_epsilon == 1e-2
    assert isinstance(model.layers[1].backward_layer.cell, LayerNormSimpleRNNCell)


# --------------------------------------------------------------------------- documented


def rebuilt(model, old, new):
    """A copy of `model` (same weights) whose config has `old` replaced by `new`."""
    config = json.loads(json.dumps(model.get_config()).replace(old, new))
    copy = type(model).from_config(config)
    copy.set_weights(model.get_weights())
    return copy


def test_documented_differences_of_the_cells():
    """docs/migration.md: what our defaults would change on the fixtures."""
    path, data = fixture("layer_norm_lstm")
    model, _ = load_quietly(path, compile=False)
    paper = rebuilt(model, '"carry_normalized_state": true', '"carry_normalized_state": false')
    difference = np.abs(paper.predict(data["x"], verbose=0) - data["y"]).max()
    assert round(float(difference), 2) == 0.64
    path, data = fixture("bidirectional")
    model, _ = load_quietly(path, compile=False)
    default = rebuilt(model, '"norm_epsilon": 1e-05', '"norm_epsilon": 0.001')
    difference = np.abs(default.predict(data["x"], verbose=0) - data["y"]).max()
    np.testing.assert_allclose(difference, 4.5e-3, rtol=0.02)


@pytest.mark.parametrize(
    "name, difference, std_range",
    [
        ("weight_norm_dense_uninitialized", 0.46, (0.58, 0.72)),
        ("weight_norm_conv2d_uninitialized", 0.71, (0.46, 1.02)),
    ],
)
def test_documented_difference_of_the_data_dependent_initialization(name, difference, std_range):
    """TF-Addons' initialization does not normalize the pre-activation; the paper's (ours)
    does; their outputs on the first batch differ by the documented amount."""
    path, data = fixture(name)
    tfa, _ = load_quietly(path, compile=False, data_init_batch=data["x"])
    ours, _ = load_quietly(path, compile=False)
    ours(data["x"], training=True)  # keras_normkit's initialization on the same batch
    observed = np.abs(ours.predict(data["x"], verbose=0) - data["y"]).max()
    assert round(float(observed), 2) == difference
    for model, normalized in ((tfa, False), (ours, True)):
        layer = model.layers[0]
        layer.layer.activation = keras.activations.linear
        t = keras.ops.convert_to_numpy(keras.Model(model.inputs[0], layer.output)(data["x"]))
        std = t.reshape(-1, t.shape[-1]).std(axis=0)
        if normalized:
            np.testing.assert_allclose(std, 1.0, rtol=1e-4)
        else:
            assert (round(float(std.min()), 2), round(float(std.max()), 2)) == std_range


def test_documented_differences_of_the_activations():
    """TF-Addons' activations on a grid (fixtures/functions.npz) against ours and Keras's."""
    data = dict(np.load(FIXTURES / "functions.npz"))
    x = data["x"]

    def ours(fn):
        return keras.ops.convert_to_numpy(fn(x))

    np.testing.assert_allclose(ours(tfa_gelu), data["gelu"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours(keras.activations.mish), data["mish"], rtol=1e-6, atol=1e-6)
    for keras_name, tfa_name in [
        ("hard_shrink", "hardshrink"),
        ("soft_shrink", "softshrink"),
        ("tanh_shrink", "tanhshrink"),
    ]:
        fn = getattr(keras.activations, keras_name)
        np.testing.assert_allclose(ours(fn), data[tfa_name], rtol=1e-6, atol=1e-6)
    keras_default = np.abs(ours(keras.activations.gelu) - data["gelu"]).max()
    np.testing.assert_allclose(keras_default, 4.7e-4, rtol=0.02)
    z = data["z"]
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(tfa_sparsemax(z)), data["sparsemax"], rtol=1e-6, atol=1e-6
    )
    theirs = keras.ops.convert_to_numpy(keras.activations.sparsemax(z))
    if np.allclose(theirs.sum(axis=-1), 1.0, atol=1e-5):
        pytest.skip("Keras's sparsemax is now a projection: update docs/migration.md")
    assert round(float(np.abs(theirs - data["sparsemax"]).max()), 2) == 0.99


# --------------------------------------------------------------------------- layers


def h5_group(path, layer):
    """`{weight name: array}` of one layer group of a tf.keras 2 `.h5` model."""
    with h5py.File(path, "r") as f:
        group = f["model_weights"][layer]
        names = [n.decode() if isinstance(n, bytes) else n for n in group.attrs["weight_names"]]
        return {name: np.asarray(group[name]) for name in names}


def test_normalization_layers_are_keras_classes_with_tf_addons_arguments():
    """InstanceNormalization -> GroupNormalization(groups=-1), GroupNormalization ->
    Keras's with the same groups, axis (1: channels first) and epsilon; the fixture's
    prediction (checked above) fails if an epsilon or axis were wrong: see below."""
    path, data = fixture("group_norm")
    model, _ = load_quietly(path, compile=False)
    norms = [layer for layer in model.layers if isinstance(layer, keras.layers.GroupNormalization)]
    settings = [(n.groups, n.axis, n.epsilon, n.center, n.scale) for n in norms]
    assert settings == [
        (6, -1, 1e-2, True, True),  # InstanceNormalization(epsilon=1e-2): groups = channels
        (2, 1, 1e-4, True, True),
        (3, -1, 1e-3, False, True),
        (6, -1, 1e-3, True, False),
    ]
    norms[1].epsilon = 1e-3  # Keras's default instead of the file's: the output moves
    y = model.predict(data["x"], verbose=0)
    assert np.abs(y - data["y"]).max() > 1e-4


def test_spectral_normalization_keeps_the_power_iteration_vector():
    path, data = fixture("spectral_norm")
    model, _ = load_quietly(path, compile=False)
    for layer, tfa_name in zip(
        model.layers[::2], ["spectral_normalization", "spectral_normalization_1"], strict=True
    ):
        assert isinstance(layer, keras.layers.SpectralNormalization)
        saved = h5_group(path, tfa_name)
        u = keras.ops.convert_to_numpy(layer.vector_u)
        np.testing.assert_array_equal(u, saved[f"{tfa_name}/sn_u:0"])
    assert model.layers[-1].power_iterations == 3


def test_filter_response_normalization_and_tlu_are_ours():
    from keras_normkit.layers import TLU, FilterResponseNormalization

    path, _ = fixture("filter_response_norm")
    model, _ = load_quietly(path, compile=False)
    frn, tlu, _, frn_1, tlu_1 = model.layers[:5]
    assert isinstance(frn, FilterResponseNormalization) and frn.learned_epsilon
    assert isinstance(frn_1, FilterResponseNormalization) and frn_1.epsilon == 1e-3
    assert isinstance(tlu, TLU) and tlu.shared_axes is None and not tlu.affine
    assert isinstance(tlu_1, TLU) and tlu_1.affine
    saved = h5_group(path, "filter_response_normalization")
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(frn.epsilon_l), saved["learned_epsilon:0"][0]
    )
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(frn.gamma),
        saved["filter_response_normalization/gamma:0"].reshape(-1),
    )


def test_activation_layers_become_keras_activations():
    path, _ = fixture("activation_layers")
    model, _ = load_quietly(path, compile=False)
    activations = [l for l in model.layers if isinstance(l, keras.layers.Activation)]
    assert [a.activation for a in activations] == [
        tfa_gelu,
        keras.activations.gelu,
        tfa_sparsemax,
    ]


def test_sparsemax_layer_on_another_axis_is_an_error(tmp_path):
    target = tmp_path / "model.h5"
    shutil.copy(FIXTURES / "activation_layers.h5", target)
    with h5py.File(target, "r+") as f:
        config = json.loads(f.attrs["model_config"])
        config["config"]["layers"][-1]["config"]["axis"] = 1
        f.attrs["model_config"] = json.dumps(config)
    with pytest.raises(ValueError, match=r"Addons>Sparsemax\(axis=1\)"):
        load_tfa_model(target)


def test_translated_normalizations_round_trip_through_keras_format(tmp_path):
    for name in ("filter_response_norm", "group_norm", "spectral_norm", "activation_layers"):
        path, data = fixture(name)
        model, _ = load_quietly(path, compile=False)
        model.save(tmp_path / f"{name}.keras")
        reloaded = keras.models.load_model(tmp_path / f"{name}.keras")
        np.testing.assert_allclose(
            reloaded.predict(data["x"], verbose=0), data["y"], rtol=1e-6, atol=1e-6
        )


# -- tf.keras 2's BatchNormalization(virtual_batch_size=...) -------------------------------


def _keras2_batch_norm_file(path, bn_config, weights):
    """A `.h5` as tf.keras 2 writes it (`model.save("model.h5")`) for
    `Sequential([Input((5, 3)), BatchNormalization(...)])`: its model config (the layer's
    config as tf.keras 2's `get_config` gives it after `build`, `axis` a list) and its
    weights `gamma, beta, moving_mean, moving_variance`."""
    initializer = {"module": "keras.initializers", "config": {}, "registered_name": None}
    config = {
        "name": "bn",
        "trainable": True,
        "dtype": "float32",
        "axis": [2],
        "momentum": 0.9,
        "epsilon": 0.001,
        "center": True,
        "scale": True,
        "beta_initializer": {**initializer, "class_name": "Zeros"},
        "gamma_initializer": {**initializer, "class_name": "Ones"},
        "moving_mean_initializer": {**initializer, "class_name": "Zeros"},
        "moving_variance_initializer": {**initializer, "class_name": "Ones"},
        "beta_regularizer": None,
        "gamma_regularizer": None,
        "beta_constraint": None,
        "gamma_constraint": None,
        **bn_config,
    }
    model_config = {
        "class_name": "Sequential",
        "config": {
            "name": "sequential",
            "layers": [
                {
                    "class_name": "InputLayer",
                    "config": {
                        "batch_input_shape": [None, 5, 3],
                        "dtype": "float32",
                        "sparse": False,
                        "ragged": False,
                        "name": "input_1",
                    },
                },
                {"module": "keras.layers", "class_name": "BatchNormalization", "config": config},
            ],
        },
    }
    names = ["bn/gamma:0", "bn/beta:0", "bn/moving_mean:0", "bn/moving_variance:0"]
    with h5py.File(path, "w") as f:
        f.attrs["backend"] = "tensorflow"
        f.attrs["keras_version"] = "2.15.0"
        f.attrs["model_config"] = json.dumps(model_config)
        group = f.create_group("model_weights")
        group.attrs["layer_names"] = [b"bn"]
        group.attrs["backend"] = b"tensorflow"
        group.attrs["keras_version"] = b"2.15.0"
        layer = group.create_group("bn")
        layer.attrs["weight_names"] = [n.encode() for n in names]
        for name, value in zip(names, weights, strict=True):
            layer.create_dataset(name, data=value)


def _bn_weights(seed=0):
    rng = np.random.default_rng(seed)
    return [
        rng.uniform(0.5, 2.0, 3).astype("float32"),
        rng.normal(size=3).astype("float32"),
        rng.normal(size=3).astype("float32"),
        rng.uniform(0.5, 2.0, 3).astype("float32"),
    ]


def test_keras2_virtual_batch_size_loads_as_ghost_batch_normalization(tmp_path):
    from keras_normkit.layers import GhostBatchNormalization

    path = tmp_path / "ghost.h5"
    weights = _bn_weights()
    _keras2_batch_norm_file(path, {"virtual_batch_size": 4, "fused": False}, weights)
    with pytest.warns(UserWarning, match="GhostBatchNormalization"):
        model = load_tfa_model(path)
    layer = model.layers[-1]
    assert type(layer) is GhostBatchNormalization
    assert layer.virtual_batch_size == 4 and layer.axis == 2 and layer.momentum == 0.9
    for actual, expected in zip(layer.get_weights(), weights, strict=True):
        np.testing.assert_array_equal(actual, expected)
    # Inference: tf.keras 2's BN with the moving statistics, in NumPy.
    x = np.random.default_rng(1).normal(size=(6, 5, 3)).astype("float32")
    gamma, beta, mean, var = weights
    expected = gamma * (x - mean) / np.sqrt(var + 1e-3) + beta
    np.testing.assert_allclose(model.predict(x, verbose=0), expected, atol=1e-5)


def test_keras2_batch_normalization_without_virtual_batches_stays_keras(tmp_path):
    path = tmp_path / "bn.h5"
    _keras2_batch_norm_file(path, {"virtual_batch_size": None, "fused": None}, _bn_weights(1))
    model = load_tfa_model(path)
    assert type(model.layers[-1]) is keras.layers.BatchNormalization
    assert model.layers[-1].axis == 2


def test_keras2_virtual_batches_with_renorm_is_a_clear_error(tmp_path):
    path = tmp_path / "renorm.h5"
    config = {
        "virtual_batch_size": 4,
        "renorm": True,
        "renorm_clipping": {},
        "renorm_momentum": 0.9,
    }
    _keras2_batch_norm_file(path, config, _bn_weights())
    with pytest.raises(ValueError, match="renormalization"):
        load_tfa_model(path)
