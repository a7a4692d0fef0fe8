"""DivergenceGuard: detection rule, stop, rollback with a float rate and with a schedule."""

import inspect

import keras
import numpy as np
import pytest

from keras_normkit.callbacks import DivergenceGuard
from keras_normkit.schedules import NaturalExpDecay


def compiled(learning_rate, momentum=0.9):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(keras.optimizers.SGD(learning_rate, momentum=momentum), loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def run_epoch(guard, model, epoch, batch_losses, epoch_loss=None):
    guard.on_epoch_begin(epoch)
    for batch, loss in enumerate(batch_losses):
        guard.on_train_batch_end(batch, {"loss": loss})
    logs = {"loss": batch_losses[-1] if epoch_loss is None else epoch_loss}
    guard.on_epoch_end(epoch, logs)
    return logs


def test_detection_rule_nan_inf_and_factor():
    model = compiled(0.1)
    guard = DivergenceGuard(factor=10.0)
    guard.set_model(model)
    guard.on_train_begin()
    run_epoch(guard, model, 0, [3.0, 1.0])  # best = 1.0
    run_epoch(guard, model, 1, [9.9, 0.8])  # 9.9 <= 10 * 1.0: fine; best = 0.8
    assert not model.stop_training and guard.best == 0.8
    run_epoch(guard, model, 2, [8.1, 0.8])  # 8.1 > 10 * 0.8
    assert model.stop_training and guard.events[-1]["batch"] == 0
    for bad in (float("nan"), float("inf")):
        model.stop_training = False
        guard = DivergenceGuard()
        guard.set_model(model)
        guard.on_train_begin()
        run_epoch(guard, model, 0, [1.0, bad])  # no best needed for NaN/Inf
        assert (
            model.stop_training
            and guard.events
            == [{"epoch": 0, "batch": 1, "value": bad, "action": "stop", "trigger": "loss"}]
            or np.isnan(guard.events[0]["value"])
        )


def test_rollback_restores_weights_and_slots_and_halves_a_float_rate():
    model = compiled(0.1)
    # The scripted epoch 0 leaves NaN weights with a good loss: only the loss is watched.
    guard = DivergenceGuard(on_divergence="rollback", check_weights=False)
    guard.set_model(model)
    guard.on_train_begin()
    rng = np.random.default_rng(0)
    model.train_on_batch(rng.normal(size=(4, 3)), rng.normal(size=(4, 2)))  # momentum != 0
    optimizer = model.optimizer
    slots = [
        v for v in optimizer.variables if v is not optimizer.iterations and "learning" not in v.name
    ]
    assert len(slots) == 2  # the two momentums

    def spoil():
        model.set_weights([np.full_like(w, np.nan) for w in model.get_weights()])
        for v in slots:
            v.assign(np.full(v.shape, 7.0, "float32"))

    # The training loss of an epoch measures the weights at its start: epoch 0 is good, so
    # the state at the start of epoch 0 is the one restored.
    good = [w.copy() for w in model.get_weights()]
    good_slots = [keras.ops.convert_to_numpy(v) for v in slots]
    guard.on_epoch_begin(0)
    spoil()  # what epoch 0's updates did
    guard.on_epoch_end(0, {"loss": 1.0})
    optimizer.iterations.assign(5)
    run_epoch(guard, model, 1, [float("nan")])
    for got, want in zip(model.get_weights(), good, strict=True):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(slots, good_slots, strict=True):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(got), want)
    assert int(model.optimizer.iterations) == 5  # the step keeps counting
    assert float(model.optimizer.learning_rate) == pytest.approx(0.05)
    assert not model.stop_training and guard.events[-1]["learning_rate"] == pytest.approx(0.05)
    run_epoch(guard, model, 2, [1.0, 20.0], epoch_loss=20.0)  # 20 > 10 * best: again
    assert float(model.optimizer.learning_rate) == pytest.approx(0.025)


def test_rollback_halves_a_schedule_through_its_multiplier():
    schedule = NaturalExpDecay(0.1, 0.01)
    model = compiled(schedule)
    guard = DivergenceGuard(on_divergence="rollback")
    guard.set_model(model)
    guard.on_train_begin()
    run_epoch(guard, model, 0, [1.0])
    model.optimizer.iterations.assign(10)
    run_epoch(guard, model, 1, [float("inf")])
    assert float(model.optimizer.learning_rate) == pytest.approx(0.5 * float(schedule(10)))
    guard.on_train_end()


def test_real_divergent_fit_stop_and_rollback():
    x = np.random.default_rng(0).normal(size=(64, 2)).astype("float32")
    y = x @ np.array([[1.0], [2.0]], "float32")
    results = {}
    for action in ("stop", "rollback"):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(keras.optimizers.SGD(3.0), loss="mse")  # lr far above 2 / L: diverges
        guard = DivergenceGuard(on_divergence=action)
        history = model.fit(x, y, batch_size=64, epochs=12, callbacks=[guard], verbose=0)
        results[action] = (history.history["loss"], guard, model)
    losses, guard, _ = results["stop"]
    assert len(losses) == 2 and len(guard.events) == 1  # epoch 1's loss is 28x epoch 0's
    losses, guard, model = results["rollback"]
    assert len(losses) == 12 and len(guard.events) >= 2
    assert float(model.optimizer.learning_rate) == pytest.approx(3.0 * 0.5 ** len(guard.events))
    assert losses[-1] < 0.1 * losses[0] and all(np.isfinite(w).all() for w in model.get_weights())


def test_bad_input_and_config():
    with pytest.raises(ValueError, match="factor"):
        DivergenceGuard(factor=1.0)
    with pytest.raises(ValueError, match="on_divergence"):
        DivergenceGuard(on_divergence="ignore")
    with pytest.raises(TypeError, match="monitor"):
        DivergenceGuard(monitor=None)
    guard = DivergenceGuard("val_loss", 5.0, "rollback")
    config = guard.get_config()
    assert set(config) == set(inspect.signature(DivergenceGuard).parameters)
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(guard))
    assert clone.get_config() == config


def test_weights_and_gradient_norm_triggers():
    """NaN weights, an absolute gradient-norm bound and a multiple of the running median."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 3)).astype("float32"), rng.normal(size=(16, 2)).astype("float32")

    def grad_norm(model):  # the reference: the mse gradient of a Dense layer by hand
        kernel, bias = model.get_weights()
        a_grad = 2 * (x @ kernel + bias - y) / y.size
        return np.sqrt(np.sum((x.T @ a_grad) ** 2) + np.sum(a_grad.sum(axis=0) ** 2))

    model = compiled(0.1, momentum=0.0)
    guard = DivergenceGuard()
    guard.set_model(model)
    guard.on_train_begin()
    run_epoch(guard, model, 0, [1.0])
    assert not model.stop_training
    kernel, bias = model.get_weights()
    model.set_weights([kernel, np.array([np.inf, 0.0], "float32")])
    run_epoch(guard, model, 1, [1.0])  # a good loss, but infinite weights
    assert model.stop_training and guard.events[-1]["trigger"] == "weights"
    assert guard.events[-1]["value"] == 1.0  # one non-finite weight

    model = compiled(0.1, momentum=0.0)
    norm = grad_norm(model)
    guard = DivergenceGuard(probe_data=(x, y), max_grad_norm=2 * norm)
    guard.set_model(model)
    guard.on_train_begin()
    run_epoch(guard, model, 0, [1.0])
    assert not model.stop_training
    assert guard.grad_norms == [pytest.approx(norm, rel=1e-5)]
    kernel, bias = model.get_weights()
    model.set_weights([kernel * 10.0, bias])  # a larger gradient
    run_epoch(guard, model, 1, [1.0])
    assert (
        guard.grad_norms[-1] == pytest.approx(grad_norm(model), rel=1e-5)
        and norm * 2 < (guard.grad_norms[-1])
    )
    assert model.stop_training and guard.events[-1]["trigger"] == "grad_norm"

    model = compiled(0.1, momentum=0.0)
    guard = DivergenceGuard(on_divergence="rollback", probe_data=(x, y), grad_norm_factor=3.0)
    guard.set_model(model)
    guard.on_train_begin()
    good = model.get_weights()
    for epoch in range(3):
        run_epoch(guard, model, epoch, [1.0])  # same weights: a steady norm
    assert guard.events == []
    guard.on_epoch_begin(3)
    kernel, bias = model.get_weights()
    model.set_weights([kernel * 10.0, bias])  # well above 3 x the median
    guard.on_epoch_end(3, {"loss": 1.0})
    assert guard.events[-1]["trigger"] == "grad_norm" and guard.events[-1]["epoch"] == 3
    for got, want in zip(model.get_weights(), good, strict=True):  # rolled back
        np.testing.assert_array_equal(got, want)
    assert float(model.optimizer.learning_rate) == pytest.approx(0.05)
    state = guard.get_state()
    clone = DivergenceGuard(on_divergence="rollback", probe_data=(x, y), grad_norm_factor=3.0)
    clone.set_state(state)
    assert clone.grad_norms == guard.grad_norms and clone.events == guard.events
    config = clone.get_config()
    assert set(config) == set(inspect.signature(DivergenceGuard).parameters)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(clone))
    assert restored.get_config()["grad_norm_factor"] == 3.0
    np.testing.assert_array_equal(restored.probe_data[0], x)
    with pytest.raises(ValueError, match="probe_data"):
        DivergenceGuard(max_grad_norm=1.0)
    with pytest.raises(ValueError, match="grad_norm_factor"):
        DivergenceGuard(probe_data=(x, y), grad_norm_factor=1.0)
    with pytest.raises(TypeError, match="check_weights"):
        DivergenceGuard(check_weights=None)
