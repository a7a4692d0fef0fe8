"""ActivationStatistics: exact statistics, SNN vs ReLU activations, logs, errors."""

import inspect

import keras
import numpy as np
import pytest

from keras_normkit.callbacks import ActivationStatistics
from keras_normkit.layers.selu import SELU


def digits():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-8)  # standardized inputs, as SNNs need
    return x.astype("float32"), y


def deep_net(kind, depth=8, width=64):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,))])
    for i in range(depth):
        if kind == "snn":
            model.add(keras.layers.Dense(width, kernel_initializer="lecun_normal"))
            model.add(SELU(name=f"act{i}"))
        else:
            model.add(keras.layers.Dense(width, kernel_initializer="glorot_uniform"))
            model.add(keras.layers.ReLU(name=f"act{i}"))
    model.add(keras.layers.Dense(10))
    model.compile(
        keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def test_statistics_are_the_moments_and_percentiles_of_the_activations():
    x, y = digits()
    model = deep_net("relu", depth=2)
    probe = x[:100]
    stats = ActivationStatistics(probe, layers=["act1"], percentiles=(10, 50, 97.5))
    history = model.fit(x[:200], y[:200], epochs=2, batch_size=100, callbacks=[stats], verbose=0)
    probe_model = keras.Model(model.inputs[0], model.get_layer("act1").output)
    activations = keras.ops.convert_to_numpy(probe_model(probe))
    values = activations.astype("float64").ravel()
    recorded = stats.history["act1"]
    assert stats.epochs == [0, 1, 2]
    assert recorded["mean"][-1] == pytest.approx(values.mean(), rel=1e-6)
    assert recorded["variance"][-1] == pytest.approx(values.var(), rel=1e-5)
    for p in (10, 50, 97.5):
        key = f"p{p:g}"
        assert recorded[key][-1] == pytest.approx(np.percentile(values, p), rel=1e-6, abs=1e-7)
        assert history.history[f"act1/{key}"] == recorded[key][1:]  # written to logs too
    assert recorded["mean"][0] != recorded["mean"][-1]  # training moved them


def test_snn_activations_stay_near_zero_mean_unit_variance_relu_do_not():
    x, y = digits()
    probe = x[:256]
    results = {}
    for kind in ("snn", "relu"):
        model = deep_net(kind)
        stats = ActivationStatistics(probe, layers=[f"act{i}" for i in range(8)])
        model.fit(x[:256], y[:256], epochs=1, batch_size=64, callbacks=[stats], verbose=0)
        results[kind] = stats.history
    # Measured (seed 0): SNN |mean| <= 0.04 and variance 0.82-1.17 in every layer and epoch.
    for i in range(8):
        snn = results["snn"][f"act{i}"]
        assert max(abs(m) for m in snn["mean"]) < 0.1, (i, snn["mean"])
        assert all(0.75 < v < 1.3 for v in snn["variance"]), (i, snn["variance"])
    # ReLU (Glorot init): non-negative activations whose variance collapses with depth
    # (0.27 in the first layer, 0.003 in the eighth).
    variances = [results["relu"][f"act{i}"]["variance"][-1] for i in range(8)]
    for i in range(8):
        relu = results["relu"][f"act{i}"]
        assert min(relu["mean"]) > 0.02 and max(relu["p15"]) == 0.0, i
        assert max(relu["variance"]) < 0.3, (i, relu["variance"])
    assert variances[-1] < 0.05 * variances[0]


def test_default_layers_and_every_n_epochs():
    x, y = digits()
    model = deep_net("snn", depth=2)
    stats = ActivationStatistics(x[:32], every_n_epochs=2)
    model.fit(x[:64], y[:64], epochs=4, batch_size=64, callbacks=[stats], verbose=0)
    assert stats.epochs == [0, 2, 4]
    assert list(stats.history) == [layer.name for layer in model.layers]


def test_bad_input_and_config():
    x, _ = digits()
    with pytest.raises(ValueError, match="percentiles"):
        ActivationStatistics(x[:4], percentiles=(50, 101))
    with pytest.raises(ValueError, match="every_n_epochs"):
        ActivationStatistics(x[:4], every_n_epochs=0)
    with pytest.raises(TypeError, match="layers"):
        ActivationStatistics(x[:4], layers=[3])
    with pytest.raises(ValueError, match="probe_data"):
        ActivationStatistics(None)
    model = deep_net("snn", depth=1)
    stats = ActivationStatistics(x[:4], layers=["nope"])
    stats.set_model(model)
    with pytest.raises(ValueError, match="'nope'"):
        stats.on_train_begin()
    stats = ActivationStatistics(x[:4], layers=["act0"], percentiles=(5, 95), every_n_epochs=3)
    config = stats.get_config()
    assert set(config) == set(inspect.signature(ActivationStatistics).parameters)
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(stats))
    assert clone.get_config() == config
    np.testing.assert_allclose(clone.probe_data, x[:4])


def test_every_n_epochs_values_reach_csv_logger_and_log_values_false_keeps_them_out(tmp_path):
    """CSVLogger fixes its columns at the first epoch: the off epochs carry NaN, not a gap."""
    import csv

    x, y = digits()
    model = deep_net("snn", depth=1)
    stats = ActivationStatistics(x[:32], layers=["act0"], every_n_epochs=2)
    path = str(tmp_path / "log.csv")
    history = model.fit(
        x[:64],
        y[:64],
        epochs=4,
        batch_size=64,
        verbose=0,
        callbacks=[stats, keras.callbacks.CSVLogger(path)],
    )
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert [row["epoch"] for row in rows] == ["0", "1", "2", "3"]
    for stat in ("mean", "variance", "p15", "p50", "p85"):
        column = [float(row[f"act0/{stat}"]) for row in rows]
        recorded = stats.history["act0"][stat]  # epochs 0 (before training), 2, 4
        assert np.isnan(column[0]) and np.isnan(column[2])
        assert column[1] == pytest.approx(recorded[1], rel=1e-12)  # after 2 epochs
        assert column[3] == pytest.approx(recorded[2], rel=1e-12)
        np.testing.assert_array_equal(history.history[f"act0/{stat}"], column)

    model = deep_net("snn", depth=1)
    quiet = ActivationStatistics(x[:32], layers=["act0"], log_values=False)
    path = str(tmp_path / "quiet.csv")
    history = model.fit(
        x[:64], y[:64], epochs=2, verbose=0, callbacks=[quiet, keras.callbacks.CSVLogger(path)]
    )
    assert sorted(history.history) == ["loss"]
    with open(path) as f:
        assert not any("act0" in column for column in next(csv.reader(f)))
    assert quiet.epochs == [0, 1, 2] and len(quiet.history["act0"]["mean"]) == 3
    with pytest.raises(TypeError, match="log_values"):
        ActivationStatistics(x[:4], log_values=1)
