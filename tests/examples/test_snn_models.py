"""The seven networks of the SNN benchmarks (`examples/snn_benchmarks/snn_models.py`)."""

import pathlib
import sys

import keras
import numpy as np
import pytest

from keras_normkit.callbacks import ActivationStatistics
from keras_normkit.layers import SELU, AlphaDropout, WeightNormalization

BENCH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "snn_benchmarks"
sys.path.insert(0, str(BENCH))

import snn_models  # noqa: E402

sys.path.remove(str(BENCH))


def kernels(model):
    """The number of hidden Dense kernels (the output layer excluded)."""
    return sum(
        1 for w in model.weights if w.path.endswith("kernel") and not w.path.startswith("output")
    )


@pytest.mark.parametrize("method", snn_models.METHODS)
def test_each_method_builds_and_trains_a_step(method):
    keras.utils.set_random_seed(0)
    model = snn_models.build(method, 5, 3, layers=4, units=8, dropout=0.05)
    x = np.random.default_rng(0).normal(size=(16, 5)).astype("float32")
    y = np.arange(16) % 3
    model.compile("adam", "sparse_categorical_crossentropy")
    before = [np.array(w) for w in model.trainable_weights]
    loss = model.train_on_batch(x, y)
    assert np.isfinite(loss)
    assert any(
        not np.allclose(b, np.array(w))
        for b, w in zip(before, model.trainable_weights, strict=True)
    )
    probabilities = model.predict(x, verbose=0)
    assert probabilities.shape == (16, 3)
    np.testing.assert_allclose(probabilities.sum(-1), 1, atol=1e-5)
    # depth: 4 hidden layers; highway has 2 kernels per layer (H, T) and a projection,
    # resnet 2 per block (2 blocks) and a projection
    assert kernels(model) == {"highway": 9, "resnet": 5}.get(method, 4)
    layer_types = {type(layer) for layer in model.layers}
    if method == "snn":
        assert {SELU, AlphaDropout} <= layer_types
    if method == "weightnorm":
        assert WeightNormalization in layer_types
    if method == "batchnorm":
        assert keras.layers.BatchNormalization in layer_types
    if method == "layernorm":
        assert keras.layers.LayerNormalization in layer_types


def test_snn_activations_stay_near_zero_one_at_depth_16():
    keras.utils.set_random_seed(1)
    model = snn_models.build("snn", 64, 2, layers=16, units=256, dropout=0.05)
    x = np.random.default_rng(1).normal(size=(512, 64)).astype("float32")
    hidden = snn_models.hidden_layer_names(model)
    assert len(hidden) == 16
    probe = ActivationStatistics(x, layers=hidden)
    probe.set_model(model)
    stats = probe.statistics()
    for name in hidden:
        assert abs(stats[name]["mean"]) < 0.15, (name, stats[name])
        assert 0.8 < stats[name]["variance"] < 1.2, (name, stats[name])
    # without the SNN recipe (ReLU, He init) the mean is far from 0
    relu = snn_models.build("msra", 64, 2, layers=16, units=256)
    probe = ActivationStatistics(x, layers=snn_models.hidden_layer_names(relu))
    probe.set_model(relu)
    relu_stats = probe.statistics()
    assert all(s["mean"] > 0.3 for s in relu_stats.values())


def test_bad_arguments():
    with pytest.raises(ValueError, match="method"):
        snn_models.build("selu", 3, 2, 2, 4)
    with pytest.raises(ValueError, match="layers"):
        snn_models.build("snn", 3, 2, 0, 4)


def test_sigmoid_output_for_binary_tasks():
    model = snn_models.build("resnet", 3, 12, layers=2, units=4, output="sigmoid")
    out = model.predict(np.zeros((2, 3), "float32"), verbose=0)
    assert out.shape == (2, 12) and np.all((out > 0) & (out < 1))
