"""GradientStatistics: against a direct GradientTape / torch.autograd, analytic gradients,
Glorot & Bengio."""

import inspect
import math

import keras
import numpy as np
import pytest

from keras_normkit.callbacks import GradientStatistics
from tests.conftest import requires_tensorflow


def probe_batch(n=48, d=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype("float32")
    y = rng.normal(size=(n, 2)).astype("float32")
    w = rng.uniform(0.5, 2.0, size=(n,)).astype("float32")
    return x, y, w


def small_model():
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [
            keras.Input((5,)),
            keras.layers.Dense(7, activation="tanh", name="tanh"),
            keras.layers.Dense(6, activation="sigmoid", name="sigmoid"),
            keras.layers.Dense(2, name="out"),
        ]
    )
    model.compile(keras.optimizers.SGD(0.1), loss="mse")
    return model


@requires_tensorflow
def test_statistics_equal_a_direct_gradient_tape_computation():
    import tensorflow as tf

    x, y, w = probe_batch()
    model = small_model()
    stats = GradientStatistics((x, y, w), log_values=True)
    before = [layer.get_weights() for layer in model.layers]
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0, callbacks=[stats])
    assert stats.epochs == [0, 1, 2]
    # The reference: the layers applied one by one, the weighted mse written out by hand.
    with tf.GradientTape(persistent=True) as tape:
        h, outputs = tf.constant(x), {}
        for layer in model.layers:
            h = layer(h)
            tape.watch(h)
            outputs[layer.name] = h
        per_example = tf.reduce_mean(tf.square(h - y), axis=-1)
        loss = tf.reduce_sum(per_example * w) / len(x)
    for layer, old in zip(model.layers, before, strict=True):
        recorded = stats.history[layer.name]
        grads = tape.gradient(loss, layer.trainable_weights)
        g = np.concatenate([np.ravel(t.numpy()) for t in grads]).astype("float64")
        a_grad = tape.gradient(loss, outputs[layer.name]).numpy().astype("float64")
        assert recorded["grad_norm"][-1] == pytest.approx(np.linalg.norm(g), rel=1e-6)
        assert recorded["grad_mean"][-1] == pytest.approx(g.mean(), rel=1e-6, abs=1e-9)
        assert recorded["grad_std"][-1] == pytest.approx(g.std(), rel=1e-6)
        assert recorded["output_grad_std"][-1] == pytest.approx(a_grad.std(), rel=1e-6)
        assert math.isnan(recorded["update_ratio"][0])
        # The change since the previous record (after epoch 1) is not known here; the one
        # over the whole run is, from the first record: check it with a second callback.
        now = np.concatenate([np.ravel(v) for v in layer.get_weights()]).astype("float64")
        assert np.linalg.norm(now) > 0 and len(old) == 2
        assert history.history[f"{layer.name}/grad_norm"] == recorded["grad_norm"][1:]
    a = outputs["tanh"].numpy()
    assert stats.history["tanh"]["saturation"][-1] == pytest.approx(np.mean(np.abs(a) > 0.99))
    s = outputs["sigmoid"].numpy()
    want = np.mean((s < 0.01) | (s > 0.99))
    assert stats.history["sigmoid"]["saturation"][-1] == pytest.approx(want)
    assert "saturation" not in stats.history["out"]


def test_update_ratio_and_analytic_gradients_of_the_last_layer():
    """Backend-agnostic: dL/da = 2 w (a - y) / (N k) for the weighted mse; dL/dW = h^T dL/da."""
    x, y, w = probe_batch()
    model = small_model()
    stats = GradientStatistics((x, y, w), layers=["out"], every_n_epochs=2)
    recorder = {}

    class Weights(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            recorder[epoch + 1] = model.get_layer("out").get_weights()

    recorder[0] = model.get_layer("out").get_weights()
    model.fit(x, y, epochs=4, batch_size=16, shuffle=False, verbose=0, callbacks=[stats, Weights()])
    assert stats.epochs == [0, 2, 4]
    hidden = keras.Model(model.inputs[0], model.get_layer("sigmoid").output)
    h = keras.ops.convert_to_numpy(hidden(x)).astype("float64")
    a = keras.ops.convert_to_numpy(model(x)).astype("float64")
    a_grad = 2 * w[:, None] * (a - y) / (len(x) * 2)
    g = np.concatenate([(h.T @ a_grad).ravel(), a_grad.sum(axis=0)])
    out = stats.history["out"]
    assert out["output_grad_std"][-1] == pytest.approx(a_grad.std(), rel=1e-5)
    assert out["grad_norm"][-1] == pytest.approx(np.linalg.norm(g), rel=1e-5)
    assert out["grad_std"][-1] == pytest.approx(g.std(), rel=1e-5)

    def flat(weights):
        return np.concatenate([np.ravel(v) for v in weights]).astype("float64")

    for i, epoch in enumerate([2, 4], start=1):
        change = np.linalg.norm(flat(recorder[epoch]) - flat(recorder[epoch - 2]))
        want = change / np.linalg.norm(flat(recorder[epoch]))
        assert out["update_ratio"][i] == pytest.approx(want, rel=1e-6)


def deep_net(activation, initializer, depth=10, width=64):
    """`initializer()` gives each layer a new initializer: an unseeded Keras 3 initializer
    instance fixes its seed when created, so one shared instance would give every layer the
    same kernel."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,))])
    for i in range(depth):
        model.add(
            keras.layers.Dense(
                width, activation=activation, kernel_initializer=initializer(), name=f"h{i}"
            )
        )
    model.add(keras.layers.Dense(10, kernel_initializer=initializer()))
    model.compile(
        keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def digits(n=256):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x[:n] / 16.0).astype("float32"), y[:n]


def initial_statistics(model, probe):
    stats = GradientStatistics(probe, layers=[f"h{i}" for i in range(10)])
    stats.set_model(model)
    stats.on_train_begin()
    stats.on_epoch_begin(0)  # the record before training
    return {name: {k: v[0] for k, v in s.items()} for name, s in stats.history.items()}


def test_glorot_and_bengio_saturation_and_vanishing_gradients():
    """Glorot & Bengio 2010, at initialization, 10 layers of 64 units on digits.

    Measured (seed 0): sigmoid with N(0, 1) weights saturates 24-50 % of the units of every
    layer; with Glorot's normalized initialization none. The back-propagated gradients
    (`output_grad_std`) of a tanh net with the paper's "standard" U[-1/sqrt(n), 1/sqrt(n)]
    shrink toward the input (first/last layer 0.006), with Glorot's initialization they stay
    comparable (0.5): the paper's Figure 7. For sigmoid, Glorot's initialization does not
    prevent the vanishing (sigmoid' <= 1/4: first/last 2e-6), and N(0, 1) weights do not
    make the gradients vanish (0.32) but saturate the units. Each layer gets its own
    initializer (a shared unseeded instance would give all layers the same kernel).
    """
    probe = digits()
    n = 64

    def standard_normal():
        return keras.initializers.RandomNormal(0.0, 1.0)

    sigmoid_normal = initial_statistics(deep_net("sigmoid", standard_normal), probe)
    sigmoid_glorot = initial_statistics(
        deep_net("sigmoid", keras.initializers.GlorotUniform), probe
    )
    for i in range(10):
        assert sigmoid_normal[f"h{i}"]["saturation"] > 0.2, i
        assert sigmoid_glorot[f"h{i}"]["saturation"] < 0.01, i
    assert np.mean([s["saturation"] for s in sigmoid_normal.values()]) > 0.3

    def first_over_last(stats):
        return stats["h0"]["output_grad_std"] / stats["h9"]["output_grad_std"]

    def paper_standard():
        return keras.initializers.RandomUniform(-1 / np.sqrt(n), 1 / np.sqrt(n))

    tanh_standard = initial_statistics(deep_net("tanh", paper_standard), probe)
    tanh_glorot = initial_statistics(deep_net("tanh", keras.initializers.GlorotUniform), probe)
    assert first_over_last(tanh_standard) < 0.05  # vanishing toward the input
    assert first_over_last(tanh_glorot) > 0.3  # roughly constant
    ratios = [tanh_standard[f"h{i}"]["output_grad_std"] for i in range(10)]
    assert all(a < b for a, b in zip(ratios, ratios[1:], strict=False))  # monotone with depth
    assert first_over_last(sigmoid_glorot) < 1e-4
    assert first_over_last(sigmoid_normal) > 0.1


def test_logs_every_n_epochs_state_config_and_errors():
    x, y, w = probe_batch()
    model = small_model()
    stats = GradientStatistics((x, y), layers=["sigmoid"], every_n_epochs=2, log_values=True)
    history = model.fit(x, y, epochs=3, verbose=0, callbacks=[stats])
    column = history.history["sigmoid/grad_norm"]
    assert math.isnan(column[0]) and column[1] == stats.history["sigmoid"]["grad_norm"][1]
    assert math.isnan(column[2]) and len(history.history["sigmoid/saturation"]) == 3
    quiet = GradientStatistics((x, y))  # log_values=False by default
    history = model.fit(x, y, epochs=1, verbose=0, callbacks=[quiet])
    assert sorted(history.history) == ["loss"] and quiet.epochs == [0, 1]
    clone = GradientStatistics((x, y))
    clone.set_state(quiet.get_state())
    np.testing.assert_equal(clone.history, quiet.history)
    config = GradientStatistics((x, y, w), layers=["out"], every_n_epochs=3).get_config()
    assert set(config) == set(inspect.signature(GradientStatistics).parameters)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(GradientStatistics((x, y, w), layers=["out"]))
    )
    np.testing.assert_array_equal(restored.probe_data[2], w)
    assert restored.get_config()["layers"] == ["out"]
    with pytest.raises(TypeError, match="probe_data"):
        GradientStatistics(x)
    with pytest.raises(ValueError, match="probe_data"):
        GradientStatistics((x,))
    with pytest.raises(ValueError, match="every_n_epochs"):
        GradientStatistics((x, y), every_n_epochs=0)
    with pytest.raises(TypeError, match="log_values"):
        GradientStatistics((x, y), log_values="yes")
    with pytest.raises(TypeError, match="layers"):
        GradientStatistics((x, y), layers=[1])
    bad = GradientStatistics((x, y), layers=["nope"])
    bad.set_model(model)
    with pytest.raises(ValueError, match="'nope'"):
        bad.on_train_begin()


def skip_connection_model(regularization=0.01):
    """x -> h = tanh(x W1 + b1) -> g = sigmoid(h W2 + b2) -> out = [h, g] W3 + b3 (L2 on W3)."""
    keras.utils.set_random_seed(2)
    inputs = keras.Input((5,), name="x")
    h = keras.layers.Dense(4, activation="tanh", name="h")(inputs)
    g = keras.layers.Dense(3, activation="sigmoid", name="g")(h)
    both = keras.layers.Concatenate(name="both")([h, g])
    out = keras.layers.Dense(
        2, name="out", kernel_regularizer=keras.regularizers.L2(regularization)
    )(both)
    model = keras.Model(inputs, out)
    model.compile(keras.optimizers.SGD(0.1), loss="mse")
    return model


def numpy_chain_rule(model, x, y, w, regularization=0.01):
    """The gradients of the weighted mse + L2 of the skip-connection model, by hand."""
    (w1, b1), (w2, b2), (w3, b3) = (model.get_layer(n).get_weights() for n in ("h", "g", "out"))
    x, y, w = (np.asarray(a, dtype="float64") for a in (x, y, w))
    h = np.tanh(x @ w1 + b1)
    g = 1 / (1 + np.exp(-(h @ w2 + b2)))
    both = np.concatenate([h, g], axis=1)
    out = both @ w3 + b3
    d_out = 2 * w[:, None] * (out - y) / (len(x) * 2)
    d_both = d_out @ w3.T
    d_g = d_both[:, 4:]
    d_gz = d_g * g * (1 - g)
    d_h = d_both[:, :4] + d_gz @ w2.T  # the skip connection adds its part
    d_hz = d_h * (1 - h**2)
    return {
        "h": (h, d_h, [x.T @ d_hz, d_hz.sum(0)]),
        "g": (g, d_g, [h.T @ d_gz, d_gz.sum(0)]),
        "both": (both, d_both, []),
        "out": (out, d_out, [both.T @ d_out + 2 * regularization * w3, d_out.sum(0)]),
    }


def test_functional_model_with_a_skip_connection_matches_the_chain_rule():
    """Every backend: a Functional model (a skip connection, an L2 penalty) by hand."""
    from keras_normkit.backend.gradients import gradient_function

    x, _, w = probe_batch()
    y = np.random.default_rng(3).normal(size=(len(x), 2)).astype("float32")
    model = skip_connection_model()
    layers = [model.get_layer(n) for n in ("h", "g", "both", "out")]
    computed = gradient_function(model, layers)(x, y, w)
    for name, (output, output_grad, weight_grads) in numpy_chain_rule(model, x, y, w).items():
        np.testing.assert_allclose(computed[name]["output"], output, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(computed[name]["output_grad"], output_grad, rtol=1e-4, atol=1e-8)
        assert len(computed[name]["weight_grads"]) == len(weight_grads)
        for got, want in zip(computed[name]["weight_grads"], weight_grads, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-8)
    # The callback on the same model, after training: the last record is the chain rule's.
    stats = GradientStatistics((x, y, w), layers=["h", "g", "out"])
    model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0, callbacks=[stats])
    reference = numpy_chain_rule(model, x, y, w)
    for name in ("h", "g", "out"):
        _, output_grad, weight_grads = reference[name]
        g = np.concatenate([np.ravel(a) for a in weight_grads])
        recorded = stats.history[name]
        assert recorded["output_grad_std"][-1] == pytest.approx(output_grad.std(), rel=1e-4)
        assert recorded["grad_norm"][-1] == pytest.approx(np.linalg.norm(g), rel=1e-4)
    # The probe graph leaves the model's own graph alone: `layer.output` is still the
    # model's tensor and the config still rebuilds the model.
    assert model.get_layer("h").output is model.get_layer("g").input
    rebuilt = keras.Model.from_config(model.get_config())
    assert [layer.name for layer in rebuilt.layers] == [layer.name for layer in model.layers]


def test_a_watched_layer_passes_its_mask_on():
    """Every backend: watching the layer before a masked LSTM leaves the LSTM's mask in place,
    so the probe computes the model's own output (without the mask the LSTM would also run
    over the padded steps)."""
    from keras_normkit.backend.gradients import gradient_function

    rng = np.random.default_rng(4)
    x = rng.normal(size=(6, 5, 3)).astype("float32")
    x[:3, 2:] = 0.0  # half of the sequences are padded after 2 steps
    y = rng.normal(size=(6, 2)).astype("float32")
    inputs = keras.Input((5, 3))
    h = keras.layers.Masking(name="masking")(inputs)
    h = keras.layers.Dense(4, name="dense")(h)
    h = keras.layers.LSTM(3, name="lstm")(h)
    model = keras.Model(inputs, keras.layers.Dense(2, name="out")(h))
    model.compile("sgd", loss="mse")
    computed = gradient_function(model, [model.get_layer("dense"), model.get_layer("out")])(x, y)
    expected = keras.ops.convert_to_numpy(model(x))
    np.testing.assert_allclose(computed["out"]["output"], expected, rtol=1e-5, atol=1e-6)
    # The padded steps get no gradient through the masked LSTM.
    np.testing.assert_array_equal(computed["dense"]["output_grad"][:3, 2:], 0.0)
    assert np.abs(computed["dense"]["output_grad"][3:, 2:]).max() > 0


def test_a_shared_layer_cannot_be_watched_on_jax_and_torch():
    from keras_normkit.backend.gradients import gradient_function

    inputs = keras.Input((3,))
    shared = keras.layers.Dense(3, name="shared")
    out = keras.layers.Dense(1, name="out")(shared(shared(inputs)))
    model = keras.Model(inputs, out)
    model.compile("sgd", loss="mse")
    if keras.backend.backend() not in ("jax", "torch"):
        pytest.skip("the error of the JAX and PyTorch implementation")
    with pytest.raises(ValueError, match="'shared' is called more than once"):
        gradient_function(model, [model.get_layer("shared")])
    gradient_function(model, [model.get_layer("out")])  # the other layers can be watched


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="a direct torch.autograd reference")
def test_torch_gradients_equal_a_direct_autograd_computation_without_side_effects():
    """PyTorch: the layers applied one by one, `retain_grad` on each output, `loss.backward()`
    on a copy of the weights; the model's parameters' `.grad` and flags are left alone."""
    import torch

    from keras_normkit.backend.gradients import gradient_function

    x, y, w = probe_batch()
    model = small_model()
    params = [v.value for v in model.trainable_variables]
    assert all(isinstance(p, torch.nn.Parameter) for p in params)
    gradient_function(model, model.layers)(x, y, w)
    assert all(p.grad is None and p.requires_grad for p in params)  # nothing accumulated
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)  # away from the initialization
    params = [v.value for v in model.trainable_variables]
    before = [p.grad.clone() for p in params]  # the trainer's last step leaves its `.grad`
    with torch.no_grad():  # the computation enables gradients itself
        computed = gradient_function(model, model.layers)(x, y, w)
    for p, grad in zip(params, before, strict=True):
        torch.testing.assert_close(p.grad, grad, rtol=0, atol=0)
    # The reference: a copy of the weights as leaf tensors, the weighted mse written out.
    h, outputs, leaves = torch.tensor(x), {}, {}
    for layer in model.layers:
        kernel, bias = (torch.tensor(v, requires_grad=True) for v in layer.get_weights())
        leaves[layer.name] = (kernel, bias)
        h = h @ kernel + bias
        h = {"tanh": torch.tanh, "sigmoid": torch.sigmoid}.get(layer.name, lambda t: t)(h)
        h.retain_grad()
        outputs[layer.name] = h
    loss = (torch.mean((h - torch.tensor(y)) ** 2, dim=-1) * torch.tensor(w)).sum() / len(x)
    loss.backward()
    for layer in model.layers:
        got = computed[layer.name]
        want = outputs[layer.name]
        np.testing.assert_allclose(got["output"], want.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["output_grad"], want.grad.numpy(), rtol=1e-5, atol=1e-9)
        for g, leaf in zip(got["weight_grads"], leaves[layer.name], strict=True):
            np.testing.assert_allclose(g, leaf.grad.numpy(), rtol=1e-5, atol=1e-9)
    # Nothing else changed: no optimizer variables, the same compiled loss, the modules'
    # training flags.
    n_optimizer, loss_fn = len(model.optimizer.variables), model.loss
    flags = [module.training for module in model.modules()]
    gradient_function(model, [model.get_layer("out")])(x, y)
    assert len(model.optimizer.variables) == n_optimizer and model.loss is loss_fn
    assert [module.training for module in model.modules()] == flags
