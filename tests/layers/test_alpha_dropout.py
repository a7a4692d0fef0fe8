"""`AlphaDropout`: fixed-point preservation, equality with Keras, conformance, bad input."""

import inspect

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit import activations
from keras_normkit.layers import SELU, AlphaDropout
from tests.conformance import LayerConformanceTestCase
from tests.conftest import requires_xla


class AlphaDropoutConformanceTest(LayerConformanceTestCase):
    def test_conformance(self):
        self.run_conformance_test(
            AlphaDropout,
            {"rate": 0.1, "seed": 1},
            input_shape=(4, 3, 5),
            expected_output_shape=(4, 3, 5),
            supports_masking=True,
            expected_num_seed_generators=1,
        )

    def test_conformance_fixed_point_noise_shape(self):
        self.run_conformance_test(
            AlphaDropout,
            {"rate": 0.2, "fixed_point": (0.1, 1.5), "noise_shape": (None, 1, None), "seed": 3},
            input_shape=(4, 3, 5),
            expected_output_shape=(4, 3, 5),
            supports_masking=True,
        )


@pytest.mark.parametrize("rate", [0.05, 0.1, 0.2])
@pytest.mark.parametrize("fixed_point", [(0.0, 1.0), (0.2, 1.5)])
def test_keeps_mean_and_variance(rate, fixed_point):
    mean, variance = fixed_point
    x = np.random.default_rng(0).normal(mean, np.sqrt(variance), size=(1000, 1000))
    layer = AlphaDropout(rate, fixed_point=fixed_point, seed=7)
    y = keras.ops.convert_to_numpy(layer(x.astype("float32"), training=True)).astype(np.float64)
    assert abs(y.mean() - mean) < 0.01
    assert abs(y.var() - variance) < 0.01
    # It really dropped about `rate` of the units (to the saturation before the affine map).
    dropped = np.isclose(y, layer._a * layer._saturation + layer._b, atol=1e-5)
    assert abs(dropped.mean() - rate) < 0.005


@pytest.mark.parametrize("rate", [0.05, 0.1, 0.3])
def test_equals_keras_alpha_dropout_with_same_mask(rate):
    x = np.random.default_rng(1).normal(size=(256, 128)).astype("float32")
    ours = keras.ops.convert_to_numpy(AlphaDropout(rate, seed=42)(x, training=True))
    theirs = keras.ops.convert_to_numpy(keras.layers.AlphaDropout(rate, seed=42)(x, training=True))
    assert np.max(np.abs(ours - theirs)) < 1e-6


def test_identity_at_inference_and_rate_zero():
    x = np.random.default_rng(2).normal(size=(8, 4)).astype("float32")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(AlphaDropout(0.5)(x)), x)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(AlphaDropout(0.0)(x, training=True)), x
    )


def test_noise_shape_with_none_shares_mask_over_time():
    x = np.random.default_rng(3).normal(size=(4, 6, 5)).astype("float32")
    layer = AlphaDropout(0.5, noise_shape=(None, 1, None), seed=0)
    y = keras.ops.convert_to_numpy(layer(x, training=True))
    dropped = np.isclose(y, layer._a * layer._saturation + layer._b, atol=1e-5)
    assert dropped.any()
    assert np.all(dropped == dropped[:, :1, :])


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision(policy):
    layer = AlphaDropout(0.1, dtype=policy, seed=0)
    x = np.random.default_rng(4).normal(size=(200, 200)).astype("float32")
    y = layer(x, training=True)
    assert keras.backend.standardize_dtype(y.dtype) == policy.split("_")[1]
    y = keras.ops.convert_to_numpy(keras.ops.cast(y, "float32"))
    assert np.isfinite(y).all() and abs(y.mean()) < 0.05


@requires_xla
def test_xla_training():
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16),
            AlphaDropout(0.1, seed=1),
            keras.layers.Dense(1),
        ]
    )
    model.compile("sgd", "mse", jit_compile=True)
    x = np.random.default_rng(0).normal(size=(32, 8)).astype("float32")
    history = model.fit(x, x[:, :1], epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@given(
    rate=st.one_of(
        st.floats(min_value=1.0),
        st.floats(max_value=-1e-12),
        st.sampled_from([float("nan"), float("inf"), "0.1", None, True]),
    )
)
def test_bad_rate(rate):
    wrong_type = isinstance(rate, (str, bool)) or rate is None
    with pytest.raises(TypeError if wrong_type else ValueError, match="`rate`.*Received: rate="):
        AlphaDropout(rate)


@pytest.mark.parametrize(
    "kwargs,name,error",
    [
        ({"noise_shape": (0, 1)}, "noise_shape", ValueError),
        ({"noise_shape": "ab"}, "noise_shape", ValueError),
        ({"seed": 1.5}, "seed", TypeError),
        ({"fixed_point": (0.0, -1.0)}, "fixed_point", ValueError),
    ],
)
def test_bad_arguments(kwargs, name, error):
    with pytest.raises(error, match=name):
        AlphaDropout(0.1, **kwargs)


def test_noise_shape_rank_mismatch():
    with pytest.raises(ValueError, match="noise_shape"):
        AlphaDropout(0.1, noise_shape=(None, 1))(np.zeros((2, 3, 4), "float32"), training=True)


@pytest.mark.parametrize("training", [False, True])
def test_integer_inputs_are_cast_to_the_compute_dtype(training):
    x = np.arange(-6, 6).reshape(3, 4).astype("int32")
    layer = AlphaDropout(0.5, seed=3)
    y = keras.ops.convert_to_numpy(layer(x, training=training))
    assert y.dtype == np.float32
    if not training:
        np.testing.assert_array_equal(y, x.astype("float32"))
    else:
        reference = keras.ops.convert_to_numpy(
            AlphaDropout(0.5, seed=3)(x.astype("float32"), training=True)
        )
        np.testing.assert_allclose(y, reference, rtol=1e-6)
        assert not np.allclose(y, x)  # dropout applied
    assert "Integer (or bool) inputs are cast" in AlphaDropout.__doc__


def _selu_then_dropout(activation_layer, dropout):
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(8), activation_layer, dropout])


@pytest.mark.parametrize(
    "make_model,theirs",
    [
        (lambda: _selu_then_dropout(SELU((0.2, 1.5)), AlphaDropout(0.1)), r"\(0.2, 1.5\)"),
        (
            lambda: _selu_then_dropout(
                keras.layers.Activation("selu"), AlphaDropout(0.1, fixed_point=(0.2, 1.5))
            ),
            r"\(0.0, 1.0\)",
        ),
        (
            lambda: keras.Sequential(
                [
                    keras.Input((8,)),
                    keras.layers.Dense(8, activation="selu"),
                    AlphaDropout(0.1, fixed_point=(0.2, 1.5)),
                ]
            ),
            r"\(0.0, 1.0\)",
        ),
    ],
)
def test_warns_after_a_selu_with_another_fixed_point(make_model, theirs):
    with pytest.warns(
        UserWarning,
        match=r"AlphaDropout '.*' has fixed_point=\(.*\) .* "
        r"applied to the output of .* with fixed_point=" + theirs,
    ):
        make_model()


def test_warns_in_a_functional_model_naming_both_fixed_points():
    inputs = keras.Input((8,))
    hidden = SELU((0.2, 1.5), name="my_selu")(keras.layers.Dense(8)(inputs))
    with pytest.warns(UserWarning) as record:
        keras.Model(inputs, AlphaDropout(0.1, fixed_point=(0.0, 1.0), name="my_drop")(hidden))
    message = str(record[0].message)
    assert "AlphaDropout 'my_drop' has fixed_point=(0.0, 1.0)" in message
    assert "SELU 'my_selu' with fixed_point=(0.2, 1.5)" in message


def test_warns_when_the_constants_differ_at_the_same_fixed_point():
    alpha, scale = activations.selu_parameters(-0.1, 2.0, weight_sum=1.0)
    with pytest.warns(UserWarning, match="alpha=1.9769"):
        _selu_then_dropout(
            SELU((-0.1, 2.0), alpha=alpha, scale=scale), AlphaDropout(0.1, fixed_point=(-0.1, 2.0))
        )


@pytest.mark.parametrize(
    "activation_layer,dropout",
    [
        (lambda: SELU((0.2, 1.5)), lambda: AlphaDropout(0.1, fixed_point=[0.2, 1.5])),
        (lambda: SELU(), lambda: AlphaDropout(0.1)),
        (lambda: keras.layers.Activation("selu"), lambda: AlphaDropout(0.1)),
        (lambda: keras.layers.ReLU(), lambda: AlphaDropout(0.1, fixed_point=(0.2, 1.5))),
    ],
)
def test_no_warning_when_the_fixed_points_agree(activation_layer, dropout):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = _selu_then_dropout(activation_layer(), dropout())
        model(np.zeros((2, 8), "float32"))  # concrete calls never warn either


def _named_parameters(cls):
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p.default for p in parameters if p.name != "self" and p.kind not in variadic}


def test_every_keras_argument_keeps_keras_default():
    """Same name as `keras.layers.AlphaDropout`: its arguments, its defaults; ours optional."""
    ours, theirs = _named_parameters(AlphaDropout), _named_parameters(keras.layers.AlphaDropout)
    assert set(theirs) == {"rate", "noise_shape", "seed"}  # what Keras 3 has
    for name, default in theirs.items():
        assert name in ours, name
        assert (ours[name], type(ours[name])) == (default, type(default)), name
    extras = {name: default for name, default in ours.items() if name not in theirs}
    assert extras and all(d is not inspect.Parameter.empty for d in extras.values()), extras
    layer, keras_layer = AlphaDropout(0.1), keras.layers.AlphaDropout(0.1)
    for name in ("rate", "noise_shape", "seed", "supports_masking"):
        assert getattr(layer, name) == getattr(keras_layer, name), name
