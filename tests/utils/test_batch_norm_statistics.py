"""`recompute_batch_norm_statistics`: exact population statistics of every BN's inputs."""

import keras
import numpy as np
import pytest

from keras_normkit.utils import fold_batch_normalization, recompute_batch_norm_statistics
from tests.conftest import requires_tensorflow


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


def np_stats(values, axis):
    """Population mean and variance (1/n) per channel on `axis`, in float64."""
    values = np.moveaxis(np.asarray(values, "float64"), axis, -1)
    values = values.reshape(-1, values.shape[-1])
    return values.mean(axis=0), values.var(axis=0)


def scramble(model, seed=0, affine=True):
    """Far-off moving statistics (and non-trivial gamma/beta if `affine`) in every BN."""
    rng = np.random.default_rng(seed)
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.BatchNormalization):
            c = layer.moving_mean.shape[0]
            layer.moving_mean.assign(rng.normal(3.0, 1.0, c).astype("float32"))
            layer.moving_variance.assign(rng.uniform(5.0, 9.0, c).astype("float32"))
            if affine:
                layer.gamma.assign(rng.uniform(0.5, 2.0, c).astype("float32"))
                layer.beta.assign(rng.normal(0.0, 1.0, c).astype("float32"))


def assert_stats(bn, values, axis=-1):
    mean, var = np_stats(values, axis)
    np.testing.assert_allclose(to_numpy(bn.moving_mean), mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_numpy(bn.moving_variance), var, rtol=1e-5, atol=1e-5)


def nested_model():
    inner = keras.Sequential(
        [
            keras.Input((6,)),
            keras.layers.Dense(5),
            keras.layers.BatchNormalization(name="inner_bn"),
            keras.layers.Activation("tanh"),
        ],
        name="inner",
    )
    inputs = keras.Input((4,))
    h = keras.layers.Dense(6, name="d1")(inputs)
    h = keras.layers.BatchNormalization(name="bn1")(h)
    h = keras.layers.ReLU(name="relu1")(h)
    side = keras.layers.BatchNormalization(name="side_bn")(inputs)  # level 0, beside bn1
    h = inner(h)
    h = keras.layers.Concatenate()([h, side])
    h = keras.layers.Dense(3, name="d2")(h)
    outputs = keras.layers.BatchNormalization(name="bn_out")(h)
    model = keras.Model(inputs, outputs)
    scramble(model)
    return model, inner


def test_nested_model_matches_independent_statistics_level_by_level():
    keras.utils.set_random_seed(0)
    model, inner = nested_model()
    x = np.random.default_rng(1).normal(1.0, 2.0, size=(53, 4)).astype("float32")
    report = recompute_batch_norm_statistics(model, x, batch_size=8, verbose=0)
    levels = {entry["name"]: entry["level"] for entry in report}
    assert levels == {"bn1": 0, "side_bn": 0, "inner_bn": 1, "bn_out": 2}
    assert all(entry["examples"] == 53 and entry["count"] == 53 for entry in report)
    # Independent measurement, with the (already corrected) earlier BNs in inference mode.
    probe = keras.Model(model.input, [model.get_layer(n).input for n in ("bn1", "side_bn")])
    bn1_in, side_in = (to_numpy(t) for t in probe(x, training=False))
    assert_stats(model.get_layer("bn1"), bn1_in)
    assert_stats(model.get_layer("side_bn"), side_in)
    to_inner = keras.Model(model.input, model.get_layer("relu1").output)
    inner_probe = keras.Model(inner.inputs[0], inner.get_layer("inner_bn").input)
    assert_stats(inner.get_layer("inner_bn"), to_numpy(inner_probe(to_inner(x, training=False))))
    bn_out = model.get_layer("bn_out")
    assert_stats(bn_out, to_numpy(keras.Model(model.input, bn_out.input)(x, training=False)))
    # Population (1/n) variance, not the unbiased one: with n = 53 they differ by ~2 %.
    _, var = np_stats(bn1_in, -1)
    assert not np.allclose(to_numpy(model.get_layer("bn1").moving_variance), var * 53 / 52)
    # A second run changes nothing: the statistics are a fixed point.
    again = recompute_batch_norm_statistics(model, x, batch_size=53, verbose=0)
    assert max(e["max_mean_change"] for e in again) < 1e-4
    assert max(e["max_variance_change"] for e in again) < 1e-4


def test_one_pass_would_not_be_exact():
    # The statistics of inner_bn measured with bn1's *old* statistics are different: the test
    # above would fail if the levels were measured in one pass.
    keras.utils.set_random_seed(0)
    model, inner = nested_model()
    x = np.random.default_rng(1).normal(1.0, 2.0, size=(53, 4)).astype("float32")
    stale = to_numpy(inner_probe_of(model, inner)(x))
    recompute_batch_norm_statistics(model, x, verbose=0)
    exact = to_numpy(inner_probe_of(model, inner)(x))
    assert np.abs(np_stats(stale, -1)[0] - np_stats(exact, -1)[0]).max() > 0.1


def inner_probe_of(model, inner):
    to_inner = keras.Model(model.input, model.get_layer("relu1").output)
    inner_probe = keras.Model(inner.inputs[0], inner.get_layer("inner_bn").input)
    return lambda x: inner_probe(to_inner(x, training=False))


def test_conv_channels_last_and_axis_1():
    keras.utils.set_random_seed(2)
    inputs = keras.Input((6, 5, 3))
    h = keras.layers.Conv2D(4, 3, padding="same")(inputs)
    h = keras.layers.BatchNormalization(axis=-1, name="bn_channels")(h)
    h = keras.layers.BatchNormalization(axis=1, name="bn_rows")(h)  # one statistic per row
    model = keras.Model(inputs, h)
    scramble(model, seed=3)
    x = np.random.default_rng(4).normal(size=(21, 6, 5, 3)).astype("float32")
    report = recompute_batch_norm_statistics(model, x, batch_size=5, verbose=0)
    assert [(e["name"], e["count"]) for e in report] == [
        ("bn_channels", 21 * 6 * 5),
        ("bn_rows", 21 * 5 * 4),
    ]
    for name, axis in (("bn_channels", -1), ("bn_rows", 1)):
        bn = model.get_layer(name)
        values = to_numpy(keras.Model(model.input, bn.input)(x, training=False))
        assert_stats(bn, values, axis)
    assert model.get_layer("bn_rows").moving_mean.shape == (6,)


def two_level_sequential(seed=5):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(4),
            keras.layers.BatchNormalization(),
            keras.layers.Dense(2),
            keras.layers.BatchNormalization(),
        ]
    )
    scramble(model, seed)
    return model


def exact_by_hand(model, x):
    """Expected statistics of a two-level Sequential model, set one BN after the other."""
    _, bn_a, _, bn_b = model.layers
    values_a = to_numpy(model.layers[0](x))
    mean_a, var_a = np_stats(values_a, -1)
    normed = (values_a - mean_a) / np.sqrt(var_a + bn_a.epsilon) * to_numpy(bn_a.gamma) + to_numpy(
        bn_a.beta
    )
    values_b = to_numpy(model.layers[2](normed.astype("float32")))
    return (mean_a, var_a), np_stats(values_b, -1)


@pytest.mark.parametrize("kind", ["numpy", "list", "callable", "generator_one_level"])
def test_data_kinds(kind):
    model = two_level_sequential()
    x = np.random.default_rng(6).normal(2.0, 3.0, size=(40, 3)).astype("float32")
    (mean_a, var_a), (mean_b, var_b) = exact_by_hand(model, x)
    batches = [x[i : i + 6] for i in range(0, 40, 6)]
    if kind == "numpy":
        data = x
    elif kind == "list":
        data = [(b, np.zeros(len(b))) for b in batches]  # (x, y) pairs
    elif kind == "callable":
        data = lambda: iter(batches)  # noqa: E731
    else:
        model = keras.Sequential(model.layers[:2])  # one level: a generator is enough
        data = (b for b in batches)
    recompute_batch_norm_statistics(model, data, verbose=0)
    bn_a = model.layers[1]
    np.testing.assert_allclose(to_numpy(bn_a.moving_mean), mean_a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_numpy(bn_a.moving_variance), var_a, rtol=1e-5, atol=1e-5)
    if kind != "generator_one_level":
        bn_b = model.layers[3]
        np.testing.assert_allclose(to_numpy(bn_b.moving_mean), mean_b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(to_numpy(bn_b.moving_variance), var_b, rtol=1e-5, atol=1e-5)


def test_steps_limits_the_batches():
    model = keras.Sequential([keras.Input((2,)), keras.layers.BatchNormalization()])
    x = np.random.default_rng(7).normal(size=(50, 2)).astype("float32")
    report = recompute_batch_norm_statistics(model, x, steps=2, batch_size=10, verbose=0)
    assert report[0]["count"] == 20
    assert_stats(model.layers[0], x[:20])


def test_training_then_recompute_moves_outputs_to_the_exact_model():
    keras.utils.set_random_seed(8)
    rng = np.random.default_rng(8)
    x = rng.normal(4.0, 3.0, size=(256, 5)).astype("float32")
    y = (x @ rng.normal(size=(5, 1))).astype("float32")
    model = keras.Sequential(
        [
            keras.Input((5,)),
            keras.layers.Dense(8),
            keras.layers.BatchNormalization(),  # default momentum 0.99: slow moving averages
            keras.layers.ReLU(),
            keras.layers.Dense(1),
        ]
    )
    model.compile("adam", "mse")
    model.fit(x, y, batch_size=32, epochs=2, verbose=0)
    bn = model.layers[1]
    # The model with exact statistics, computed independently.
    exact = keras.models.clone_model(model)
    exact.set_weights(model.get_weights())
    mean, var = np_stats(to_numpy(model.layers[0](x)), -1)
    exact.layers[1].moving_mean.assign(mean.astype("float32"))
    exact.layers[1].moving_variance.assign(var.astype("float32"))
    target = to_numpy(exact(x, training=False))
    before = np.abs(to_numpy(model(x, training=False)) - target).max()
    report = recompute_batch_norm_statistics(model, x, verbose=0)
    after = np.abs(to_numpy(model(x, training=False)) - target).max()
    assert before > 0.1 and after < 1e-4 * max(1.0, np.abs(target).max())
    assert report[0]["name"] == bn.name and report[0]["max_mean_change"] > 0.1


def test_before_fold_batch_normalization():
    model = two_level_sequential(seed=9)
    x = np.random.default_rng(9).normal(size=(30, 3)).astype("float32")
    recompute_batch_norm_statistics(model, x, verbose=0)
    folded = fold_batch_normalization(model, verbose=False)
    assert not any(isinstance(layer, keras.layers.BatchNormalization) for layer in folded.layers)
    expected = to_numpy(model(x, training=False))
    np.testing.assert_allclose(to_numpy(folded(x, training=False)), expected, atol=1e-4)
    # With exact statistics the last BN's outputs have mean beta over `x`.
    np.testing.assert_allclose(expected.mean(axis=0), to_numpy(model.layers[3].beta), atol=1e-4)


def test_verbose_prints_progress_and_report(capsys):
    model = keras.Sequential([keras.Input((2,)), keras.layers.BatchNormalization(name="bn")])
    recompute_batch_norm_statistics(model, np.ones((4, 2), "float32"), verbose=1)
    out = capsys.readouterr().out
    assert "Pass 1/1" in out and "Recomputed bn: 4 values per channel" in out


def test_errors():
    x = np.ones((4, 3), "float32")
    plain = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="no BatchNormalization"):
        recompute_batch_norm_statistics(plain, x, verbose=0)
    model = two_level_sequential()
    with pytest.raises(ValueError, match="empty"):
        recompute_batch_norm_statistics(model, np.zeros((0, 3), "float32"), verbose=0)
    with pytest.raises(ValueError, match="no batches"):
        recompute_batch_norm_statistics(model, [], verbose=0)
    with pytest.raises(ValueError, match="steps"):
        recompute_batch_norm_statistics(model, x, steps=0, verbose=0)
    with pytest.raises(TypeError, match="steps"):
        recompute_batch_norm_statistics(model, x, steps=1.5, verbose=0)
    with pytest.raises(TypeError, match="batch_size"):
        recompute_batch_norm_statistics(model, x, batch_size=None, verbose=0)
    with pytest.raises(ValueError, match=r"`verbose` must be one of 0, 1, 2\. Received"):
        recompute_batch_norm_statistics(model, x, verbose=3)
    with pytest.raises(ValueError, match="one-shot generator"):
        recompute_batch_norm_statistics(model, (b for b in [x]), verbose=0)
    with pytest.raises(TypeError, match="data"):
        recompute_batch_norm_statistics(model, 3.0, verbose=0)
    with pytest.raises(TypeError, match="model"):
        recompute_batch_norm_statistics(keras.layers.Dense(2), x, verbose=0)

    class Opaque(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.bn = keras.layers.BatchNormalization()

        def call(self, x):
            return self.bn(x)

    inputs = keras.Input((3,))
    with pytest.raises(TypeError, match="cannot look inside"):
        recompute_batch_norm_statistics(keras.Model(inputs, Opaque()(inputs)), x, verbose=0)
    # The hooks are removed, also after an error.
    assert "call" not in vars(model.layers[1])


@requires_tensorflow
def test_tf_data_x_and_xy_and_synchronized():
    import tensorflow as tf

    keras.utils.set_random_seed(10)
    model = keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(4),
            keras.layers.BatchNormalization(synchronized=True),
            keras.layers.Dense(2),
            keras.layers.BatchNormalization(),
        ]
    )
    scramble(model, 10)
    x = np.random.default_rng(10).normal(1.0, 2.0, size=(45, 3)).astype("float32")
    (mean_a, var_a), (mean_b, var_b) = exact_by_hand(model, x)
    for dataset in (
        tf.data.Dataset.from_tensor_slices(x).batch(8),
        tf.data.Dataset.from_tensor_slices((x, np.zeros(45))).batch(8),
    ):
        scramble(model, 11, affine=False)
        recompute_batch_norm_statistics(model, dataset, verbose=0)
        np.testing.assert_allclose(to_numpy(model.layers[1].moving_mean), mean_a, atol=1e-5)
        np.testing.assert_allclose(to_numpy(model.layers[1].moving_variance), var_a, atol=1e-5)
        np.testing.assert_allclose(to_numpy(model.layers[3].moving_mean), mean_b, atol=1e-5)
        np.testing.assert_allclose(to_numpy(model.layers[3].moving_variance), var_b, atol=1e-5)
    with pytest.raises(ValueError, match="infinite"):
        recompute_batch_norm_statistics(model, dataset.repeat(), verbose=0)
    report = recompute_batch_norm_statistics(model, dataset.repeat(), steps=3, verbose=0)
    assert report[0]["count"] == 24


def test_masked_positions_are_left_out():
    tokens = np.array([[1, 2, 0, 0], [3, 0, 0, 0], [2, 2, 1, 0]], "int32")
    inputs = keras.Input((4,), dtype="int32")
    embed = keras.layers.Embedding(4, 3, mask_zero=True)
    bn = keras.layers.BatchNormalization()
    model = keras.Model(inputs, bn(embed(inputs)))
    report = recompute_batch_norm_statistics(model, tokens, verbose=0)
    assert report[0]["count"] == 6  # the unmasked positions only
    assert_stats(bn, to_numpy(embed.embeddings)[tokens[tokens != 0]])
