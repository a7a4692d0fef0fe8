"""`fold_batch_normalization`: folded == unfolded, what is (not) folded, save/export, errors."""

import keras
import numpy as np
import pytest

from keras_normkit.utils import fold_batch_normalization
from tests.conformance import LayerConformanceTestCase

layers = keras.layers


def _randomize_bn(model, seed=0):
    """Non-trivial gamma, beta and moving statistics in every BatchNormalization."""
    rng = np.random.default_rng(seed)
    for layer in _all_layers(model):
        if isinstance(layer, layers.BatchNormalization):
            c = layer.moving_mean.shape[0]
            layer.moving_mean.assign(rng.normal(size=c).astype("float32"))
            layer.moving_variance.assign(rng.uniform(0.2, 3.0, size=c).astype("float32"))
            if layer.scale:
                layer.gamma.assign(rng.uniform(0.5, 2.0, size=c).astype("float32"))
            if layer.center:
                layer.beta.assign(rng.normal(size=c).astype("float32"))


def _all_layers(model):
    for layer in model.layers:
        yield layer
        if isinstance(layer, keras.Model):
            yield from _all_layers(layer)


def _bn_count(model):
    return sum(isinstance(layer, layers.BatchNormalization) for layer in _all_layers(model))


def _assert_same_predictions(model, folded, x, atol=1e-5):
    expected = model.predict(x, verbose=0)
    actual = folded.predict(x, verbose=0)
    np.testing.assert_allclose(actual, expected, atol=atol, rtol=1e-5)


def test_dense_bn_after_training():
    rng = np.random.default_rng(0)
    x = rng.normal(loc=2.0, scale=3.0, size=(128, 6)).astype("float32")
    y = rng.integers(0, 3, size=128)
    model = keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(16),
            layers.BatchNormalization(),
            layers.ReLU(),
            layers.Dense(8, use_bias=False),
            layers.BatchNormalization(center=False),
            layers.Activation("tanh"),
            layers.Dense(3),
        ]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(True))
    model.fit(x, y, epochs=2, batch_size=32, verbose=0)
    bn = model.layers[1]
    # Training moved the statistics far from their initial (0, 1).
    assert np.abs(keras.ops.convert_to_numpy(bn.moving_mean)).max() > 0.1
    original_weights = [w.copy() for w in model.get_weights()]

    folded, report = fold_batch_normalization(model, verbose=False, return_report=True)

    assert [type(layer).__name__ for layer in folded.layers] == [
        "Dense",
        "ReLU",
        "Dense",
        "Activation",
        "Dense",
    ]
    assert [e["folded_into"] for e in report["folded"]] == [
        model.layers[0].name,
        model.layers[3].name,
    ]
    assert folded.layers[2].use_bias and not model.layers[3].use_bias
    _assert_same_predictions(model, folded, x)
    # The original is untouched.
    assert _bn_count(model) == 2
    for before, after in zip(original_weights, model.get_weights(), strict=True):
        np.testing.assert_array_equal(before, after)


def test_conv2d_bn_functional_after_training_with_skips(capsys):
    rng = np.random.default_rng(1)
    x = rng.normal(loc=1.0, size=(32, 8, 8, 3)).astype("float32")
    inputs = keras.Input((8, 8, 3))
    a = layers.Conv2D(4, 3, padding="same", name="conv_a")(inputs)
    a = layers.BatchNormalization(name="bn_a")(a)  # folded
    b = layers.Conv2D(4, 3, padding="same", activation="relu", name="conv_b")(inputs)
    b = layers.BatchNormalization(name="bn_b")(b)  # kept: activation before BN
    c = layers.Conv2D(4, 1, name="conv_c")(inputs)
    c_bn = layers.BatchNormalization(name="bn_c")(c)  # kept: conv_c also feeds `added`
    added = layers.Add()([a, b, c_bn, c])
    d = layers.BatchNormalization(name="bn_d")(added)  # kept: follows Add
    outputs = layers.GlobalAveragePooling2D()(layers.ReLU()(d))
    model = keras.Model(inputs, layers.Dense(2)(outputs))
    model.compile("sgd", "mse")
    model.fit(x, rng.normal(size=(32, 2)), epochs=2, batch_size=8, verbose=0)

    folded, report = fold_batch_normalization(model, return_report=True)

    assert report["folded"] == [
        {"batch_normalization": "bn_a", "folded_into": "conv_a", "layer_class": "Conv2D"}
    ]
    assert set(report["skipped"]) == {"bn_b", "bn_c", "bn_d"}
    assert "activation" in report["skipped"]["bn_b"]
    assert "also used" in report["skipped"]["bn_c"]
    assert "Folded bn_a into conv_a" in capsys.readouterr().out
    assert _bn_count(folded) == 3 and _bn_count(model) == 4
    _assert_same_predictions(model, folded, x)


FOLDABLE_LAYERS = [
    ((10, 4), lambda: layers.Dense(5)),
    ((9, 3), lambda: layers.Dense(5, use_bias=False)),
    ((9, 3), lambda: layers.Conv1D(4, 3, padding="causal")),
    ((6, 6, 3), lambda: layers.Conv2D(4, 3, strides=2, use_bias=False)),
    ((6, 6, 4), lambda: layers.Conv2D(6, 3, groups=2)),
    ((4, 4, 4, 2), lambda: layers.Conv3D(3, 2)),
    ((5, 5, 3), lambda: layers.Conv2DTranspose(4, 3, strides=2)),
    ((7, 3), lambda: layers.Conv1DTranspose(4, 3, use_bias=False)),
    ((6, 6, 3), lambda: layers.DepthwiseConv2D(3, depth_multiplier=2)),
    ((9, 3), lambda: layers.DepthwiseConv1D(3, depth_multiplier=3, use_bias=False)),
    ((6, 6, 3), lambda: layers.SeparableConv2D(5, 3, depth_multiplier=2)),
    ((9, 3), lambda: layers.SeparableConv1D(4, 3, use_bias=False)),
]


def test_every_supported_layer_folds_exactly():
    for index, (shape, make) in enumerate(FOLDABLE_LAYERS):
        inputs = keras.Input(shape)
        producer = make()
        outputs = layers.BatchNormalization(epsilon=1e-3)(producer(inputs))
        model = keras.Model(inputs, outputs)
        _randomize_bn(model, seed=index)
        if producer.use_bias:
            producer.bias.assign(np.linspace(-1, 1, producer.bias.shape[0]).astype("float32"))
        folded, report = fold_batch_normalization(model, verbose=False, return_report=True)
        assert len(report["folded"]) == 1 and _bn_count(folded) == 0, producer
        x = np.random.default_rng(index).normal(size=(4, *shape)).astype("float32")
        _assert_same_predictions(model, folded, x)


def test_nested_sequential_and_axis_mismatch():
    inner = keras.Sequential(
        [keras.Input((5, 4)), layers.Dense(6), layers.BatchNormalization(name="inner_bn")]
    )
    inputs = keras.Input((5, 4))
    h = inner(inputs)
    h = layers.Dense(5, name="dense_t")(h)
    h = layers.BatchNormalization(axis=1, name="time_bn")(h)  # normalizes time, not units
    model = keras.Model(inputs, h)
    _randomize_bn(model)
    folded, report = fold_batch_normalization(model, verbose=False, return_report=True)
    assert [e["batch_normalization"] for e in report["folded"]] == ["inner_bn"]
    assert "axis" in report["skipped"]["time_bn"]
    assert _bn_count(folded) == 1
    x = np.random.default_rng(3).normal(size=(3, 5, 4)).astype("float32")
    _assert_same_predictions(model, folded, x)


def test_bn_called_in_training_mode_is_kept():
    inputs = keras.Input((4,))
    h = layers.BatchNormalization(name="always_training")(layers.Dense(3)(inputs), training=True)
    model = keras.Model(inputs, h)
    folded, report = fold_batch_normalization(model, verbose=False, return_report=True)
    assert report["folded"] == [] and "training=True" in report["skipped"]["always_training"]
    assert _bn_count(folded) == 1


class FoldedModelSavesAndExports(LayerConformanceTestCase):
    def test_keras_and_saved_model_round_trips(self):
        model = keras.Sequential(
            [
                keras.Input((8, 8, 2)),
                layers.Conv2D(4, 3, use_bias=False),
                layers.BatchNormalization(),
                layers.ReLU(),
                layers.Flatten(),
                layers.Dense(3),
                layers.BatchNormalization(),
            ]
        )
        _randomize_bn(model)
        folded = fold_batch_normalization(model, verbose=False)
        x = np.random.default_rng(4).normal(size=(2, 8, 8, 2)).astype("float32")
        reloaded = self.assert_keras_round_trip(folded, x, atol=1e-6)
        assert _bn_count(reloaded) == 0
        self.assert_saved_model_round_trip(folded, x, atol=1e-6)
        _assert_same_predictions(model, reloaded, x)


class _Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = layers.Dense(3)
        self.bn = layers.BatchNormalization()

    def call(self, x):
        return self.bn(self.dense(x))


def test_bad_models():
    with pytest.raises(TypeError, match="Sequential and Functional.*_Subclassed"):
        fold_batch_normalization(_Subclassed())
    with pytest.raises(TypeError, match="`model` must be.*Dense"):
        fold_batch_normalization(layers.Dense(3))
    with pytest.raises(ValueError, match="must be built"):
        fold_batch_normalization(keras.Sequential([layers.Dense(3), layers.BatchNormalization()]))


class FunctionalSubclassModel(keras.Model):
    """A subclass built with the Functional API (`super().__init__(inputs, outputs)`)."""

    def __init__(self):
        inputs = keras.Input((4,))
        outputs = layers.BatchNormalization()(layers.Dense(3)(inputs))
        super().__init__(inputs, outputs)


def test_functional_subclass_and_nested_functional_fold():
    model = FunctionalSubclassModel()
    _randomize_bn(model)
    x = np.random.default_rng(0).normal(size=(5, 4)).astype("float32")
    folded, report = fold_batch_normalization(model, verbose=False, return_report=True)
    assert _bn_count(folded) == 0 and len(report["folded"]) == 1
    _assert_same_predictions(model, folded, x)
    inputs = keras.Input((4,))
    outer = keras.Model(inputs, layers.Dense(2)(model(inputs)))  # a Functional inside
    folded = fold_batch_normalization(outer, verbose=False)
    assert _bn_count(folded) == 0
    _assert_same_predictions(outer, folded, x)
