"""`SELU` layer: math, conformance, serialization, bad input."""

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit import activations
from keras_normkit.layers import SELU
from tests.conformance import LayerConformanceTestCase
from tests.conftest import requires_xla
from tests.test_activations import numpy_selu


class SELUConformanceTest(LayerConformanceTestCase):
    def test_conformance_default(self):
        self.run_conformance_test(
            SELU,
            {},
            input_shape=(4, 3, 5),
            expected_output_shape=(4, 3, 5),
            supports_masking=True,
            expected_num_trainable_weights=0,
        )

    def test_conformance_other_fixed_point(self):
        self.run_conformance_test(
            SELU,
            {"fixed_point": (0.2, 1.5)},
            input_shape=(4, 7),
            expected_output_shape=(4, 7),
            supports_masking=True,
        )


@pytest.mark.parametrize("fixed_point", [(0.0, 1.0), (0.2, 1.5), (-0.1, 0.8)])
def test_matches_numpy(fixed_point):
    layer = SELU(fixed_point=fixed_point)
    alpha, scale = activations.selu_parameters(*fixed_point)
    assert (layer.alpha, layer.scale) == (alpha, scale)
    x = np.random.default_rng(0).normal(size=(32, 16)).astype("float32") * 3
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(layer(x)), numpy_selu(x, alpha, scale), rtol=1e-5, atol=1e-6
    )


def test_config_stores_solved_floats():
    config = SELU(fixed_point=(0.1, 1.2)).get_config()
    assert isinstance(config["alpha"], float) and isinstance(config["scale"], float)
    assert config["fixed_point"] == [0.1, 1.2]
    assert SELU.from_config(config).alpha == config["alpha"]


def test_mixed_precision_output_dtype():
    layer = SELU(fixed_point=(0.1, 1.2), dtype="mixed_float16")
    y = layer(np.ones((2, 3), "float32"))
    assert keras.backend.standardize_dtype(y.dtype) == "float16"


@requires_xla
def test_xla():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), SELU((0.1, 1.2))])
    model.compile("sgd", "mse", jit_compile=True)
    x = np.random.default_rng(0).normal(size=(16, 8)).astype("float32")
    model.fit(x, x[:, :4], epochs=1, verbose=0)
    assert np.isfinite(model.predict(x, verbose=0)).all()


@given(
    bad=st.one_of(
        st.just((0.0, 0.0)),
        st.just((0.0, -1.0)),
        st.just((float("nan"), 1.0)),
        st.just((0.0, float("inf"))),
        st.just((1.0,)),
        st.just((5.0, 1.0)),
    )
)
def test_bad_fixed_point(bad):
    with pytest.raises(ValueError, match="fixed_point|No SELU"):
        SELU(fixed_point=bad)


@pytest.mark.parametrize("bad", ["abc", 0.5, None, (0.0, "1")])
def test_fixed_point_of_the_wrong_type(bad):
    with pytest.raises(
        TypeError, match=r"`fixed_point` must be a pair of numbers \(mean, variance"
    ):
        SELU(fixed_point=bad)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool"])
def test_integer_inputs_are_cast_to_the_compute_dtype(dtype):
    x = np.array([[0, 1, 2], [1, 0, 3]]).astype(dtype)
    layer = SELU(fixed_point=(0.1, 1.2))
    y = layer(x)
    assert keras.backend.standardize_dtype(y.dtype) == "float32"
    expected = numpy_selu(x.astype("float64"), layer.alpha, layer.scale)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(y), expected, rtol=1e-6)
    negative = SELU()(np.array([-1, 0, 2], "int32"))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(negative),
        numpy_selu([-1.0, 0.0, 2.0], activations.ALPHA01, activations.LAMBDA01),
        rtol=1e-6,
    )


def test_integer_inputs_in_a_functional_model_and_float16():
    inputs = keras.Input((3,), dtype="int32")
    model = keras.Model(inputs, SELU()(inputs))
    assert model.output.dtype == "float32"
    y = model.predict(np.array([[-2, 0, 5]], "int32"), verbose=0)
    assert y.dtype == np.float32
    np.testing.assert_allclose(
        y, numpy_selu([[-2.0, 0.0, 5.0]], activations.ALPHA01, activations.LAMBDA01), rtol=1e-6
    )
    half = SELU(dtype="mixed_float16")(np.array([1, 2], "int32"))
    assert keras.backend.standardize_dtype(half.dtype) == "float16"


def test_selu_documents_the_integer_cast():
    assert "Integer (or bool) inputs are cast" in SELU.__doc__


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"alpha": 1.0}, "alpha"),
        ({"alpha": -1.0, "scale": 1.0}, "alpha"),
        ({"alpha": 1.0, "scale": 0.0}, "scale"),
    ],
)
def test_bad_explicit_constants(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SELU(**kwargs)
