"""StochasticWeightAveraging: the average of the weights at the chosen epochs, swapped in with
exact batch-norm statistics, resumable through BackupAndRestore."""

import warnings

import keras
import numpy as np
import pytest

from keras_normkit.callbacks import BackupAndRestore, StochasticWeightAveraging
from tests.callbacks.interrupt import Interrupt

RNG = np.random.default_rng(0)
X = RNG.normal(size=(96, 5)).astype("float32")
Y = (X @ RNG.normal(size=(5, 1)) + 0.1 * RNG.normal(size=(96, 1))).astype("float32")


def make_model(batch_norm=True):
    keras.utils.set_random_seed(0)
    layers = [keras.Input((5,)), keras.layers.Dense(8, activation="tanh", name="hidden")]
    if batch_norm:
        layers.append(keras.layers.BatchNormalization(name="bn"))
    model = keras.Sequential([*layers, keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.05, momentum=0.5), loss="mse")
    return model


class RecordWeights(keras.callbacks.Callback):
    """The trainable weights at the end of every epoch (runs before SWA in the list)."""

    def __init__(self):
        super().__init__()
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append([np.array(v) for v in self.model.trainable_variables])


def fit(model, callbacks, epochs=7, **kwargs):
    return model.fit(
        X, Y, epochs=epochs, batch_size=16, shuffle=False, verbose=0, callbacks=callbacks, **kwargs
    )


@pytest.mark.parametrize("start_epoch, cycle", [(0, 1), (1, 2), (3, 3)])
def test_the_average_is_the_mean_of_the_weights_at_the_cycle_ends(start_epoch, cycle):
    model = make_model()
    record = RecordWeights()
    swa = StochasticWeightAveraging(start_epoch, cycle, batch_norm_data=X, verbose=0)
    fit(model, [record, swa])
    epochs = list(range(start_epoch, 7, cycle))
    assert swa.count == len(epochs)
    for i, average in enumerate(swa.averaged_weights()):
        expected = np.mean([np.float64(record.weights[e][i]) for e in epochs], axis=0)
        np.testing.assert_allclose(average, expected, rtol=1e-12, atol=1e-12)
        # swapped in at the end of fit (float32 in the model)
        np.testing.assert_allclose(model.trainable_variables[i], expected, rtol=1e-6, atol=1e-7)
    assert swa.swapped


def test_the_batch_norm_statistics_are_those_of_the_averaged_weights():
    model = make_model()
    swa = StochasticWeightAveraging(2, batch_norm_data=X, verbose=0)
    fit(model, [swa])
    hidden = keras.ops.convert_to_numpy(model.get_layer("hidden")(X)).astype(
        np.float64
    )  # the BN's inputs
    bn = model.get_layer("bn")
    np.testing.assert_allclose(bn.moving_mean, hidden.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.moving_variance, hidden.var(axis=0), rtol=1e-5, atol=1e-6)


def test_swap_twice_restores_the_training_weights_and_statistics():
    model = make_model()
    swa = StochasticWeightAveraging(1, batch_norm_data=X, swap_at_end=False, verbose=0)
    fit(model, [swa])
    assert not swa.swapped
    trained = model.get_weights()
    assert swa.swap() is True and swa.swapped
    assert any(not np.array_equal(a, b) for a, b in zip(trained, model.get_weights(), strict=True))
    assert swa.swap() is False and not swa.swapped
    for a, b in zip(trained, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(RuntimeError, match="swap"):  # fitting the averaged weights is refused
        swa.swap()
        fit(model, [swa], epochs=1)


def test_warns_without_batch_norm_data_and_when_nothing_was_averaged():
    with pytest.warns(UserWarning, match="batch_norm_data"):
        fit(make_model(), [StochasticWeightAveraging(0, verbose=0)], epochs=2)
    with pytest.warns(UserWarning, match="no weights were averaged"):
        fit(make_model(), [StochasticWeightAveraging(5, verbose=0)], epochs=2)
    with warnings.catch_warnings():
        warnings.simplefilter(
            "error", UserWarning
        )  # no BN: nothing to recompute, nothing to warn about
        fit(make_model(batch_norm=False), [StochasticWeightAveraging(0, verbose=0)], epochs=2)
    with pytest.raises(ValueError, match="no weights averaged"):
        swa = StochasticWeightAveraging(5, swap_at_end=False, verbose=0)
        fit(make_model(), [swa], epochs=1)
        swa.swap()


def test_an_interrupted_fit_resumes_with_the_same_average(tmp_path):
    def run(backup, extra=()):
        model = make_model()
        swa = StochasticWeightAveraging(1, batch_norm_data=X, verbose=0)
        fit(model, [BackupAndRestore(str(backup)), swa, *extra])
        return swa, model

    whole, whole_model = run(tmp_path / "whole")
    with pytest.raises(RuntimeError, match="Interrupting"):
        run(tmp_path / "cut", [Interrupt(4)])
    resumed, resumed_model = run(tmp_path / "cut")  # new model and callback, from the backup
    assert resumed.count == whole.count == 6
    for a, b in zip(resumed.averaged_weights(), whole.averaged_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    for a, b in zip(resumed_model.get_weights(), whole_model.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_config_and_bad_arguments():
    swa = StochasticWeightAveraging(3, cycle=2, batch_size=8, swap_at_end=False, verbose=0)
    config = swa.get_config()
    assert StochasticWeightAveraging(**config).get_config() == config
    assert keras.saving.get_registered_name(StochasticWeightAveraging) == (
        "keras_normkit>StochasticWeightAveraging"
    )
    with pytest.raises(ValueError, match="start_epoch"):
        StochasticWeightAveraging(-1)
    with pytest.raises(TypeError, match="start_epoch"):
        StochasticWeightAveraging("3")
    with pytest.raises(ValueError, match="cycle"):
        StochasticWeightAveraging(0, cycle=0)
    with pytest.raises(TypeError, match="swap_at_end"):
        StochasticWeightAveraging(0, swap_at_end="yes")
    with pytest.raises(RuntimeError, match="model"):
        StochasticWeightAveraging(0).swap()
