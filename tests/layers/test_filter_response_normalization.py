"""`FilterResponseNormalization` and `TLU`: NumPy reference, TF-Addons 0.23's outputs with the
same weights, batch independence, masking, conformance, mixed precision, bad input."""

import pathlib

import keras
import numpy as np
import pytest

from keras_normkit.layers import TLU, FilterResponseNormalization
from tests.conformance import LayerConformanceTestCase

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "migration" / "fixtures"


def np_frn(x, gamma, beta, channel_axis=-1, eps=1e-6, learned_eps=0.0, mask=None):
    """Singh & Krishnan (2020), Algorithm 1, in float64: `nu2 = mean(x^2)` over the spatial
    axes per example and channel, `y = gamma * x / sqrt(nu2 + |eps| + |eps_l|) + beta`."""
    x = x.astype("float64")
    channel_axis %= x.ndim
    spatial = tuple(a for a in range(1, x.ndim) if a != channel_axis)
    shape = [1] * x.ndim
    shape[channel_axis] = x.shape[channel_axis]
    if mask is None:
        nu2 = (x**2).mean(axis=spatial, keepdims=True) if spatial else x**2
    else:
        w = np.expand_dims(mask.astype("float64"), channel_axis)
        nu2 = (x**2 * w).sum(axis=spatial, keepdims=True) / np.maximum(
            w.sum(axis=spatial, keepdims=True), 1.0
        )
    y = x / np.sqrt(nu2 + abs(eps) + abs(learned_eps))
    return np.reshape(gamma, shape) * y + np.reshape(beta, shape)


def np_tlu(x, tau, alpha=None):
    return np.maximum(x, tau + (0.0 if alpha is None else alpha * x))


def numpy_of(tensor):
    return keras.ops.convert_to_numpy(tensor)


class FilterResponseNormalizationConformanceTest(LayerConformanceTestCase):
    def test_images(self):
        self.run_conformance_test(
            FilterResponseNormalization,
            {"learned_epsilon": True},
            input_shape=(2, 4, 5, 3),
            expected_output_shape=(2, 4, 5, 3),
            supports_masking=True,
            expected_num_trainable_weights=3,
        )

    def test_channels_first_sequences(self):
        self.run_conformance_test(
            FilterResponseNormalization,
            {"axis": 1, "epsilon": 1e-3},
            input_shape=(2, 3, 6),
            expected_output_shape=(2, 3, 6),
            supports_masking=True,
            expected_num_trainable_weights=2,
            dynamic_axes=(2,),
        )


class TLUConformanceTest(LayerConformanceTestCase):
    def test_per_channel(self):
        self.run_conformance_test(
            TLU,
            {"shared_axes": [1, 2]},
            input_shape=(2, 4, 5, 3),
            expected_output_shape=(2, 4, 5, 3),
            supports_masking=True,
            expected_num_trainable_weights=1,
            dynamic_axes=(1, 2),
        )

    def test_affine_per_element(self):
        self.run_conformance_test(
            TLU,
            {"affine": True},
            input_shape=(2, 4, 3),
            expected_output_shape=(2, 4, 3),
            supports_masking=True,
            expected_num_trainable_weights=2,
        )


@pytest.mark.parametrize(
    "shape,axis,learned",
    [
        ((2, 4, 5, 3), -1, False),
        ((2, 3, 4, 5), 1, True),
        ((3, 7, 2), -1, False),
        ((4, 3), -1, True),
    ],
)
def test_frn_matches_numpy(shape, axis, learned):
    rng = np.random.default_rng(0)
    x = rng.normal(size=shape).astype("float32") * 3.0
    layer = FilterResponseNormalization(axis=axis, epsilon=1e-4, learned_epsilon=learned)
    layer.build(shape)
    gamma = rng.normal(size=layer.gamma.shape).astype("float32")
    beta = rng.normal(size=layer.beta.shape).astype("float32")
    layer.gamma.assign(gamma)
    layer.beta.assign(beta)
    learned_eps = 0.0
    if learned:
        learned_eps = -0.05  # its absolute value is used
        layer.epsilon_l.assign(learned_eps)
    expected = np_frn(x, gamma, beta, axis, 1e-4, learned_eps)
    np.testing.assert_allclose(numpy_of(layer(x)), expected, rtol=1e-5, atol=1e-5)


def test_frn_output_has_unit_mean_square_and_ignores_the_batch():
    """With gamma = 1, beta = 0 and a small epsilon, every channel of every example has
    mean square 1 (Singh & Krishnan, eq. 1-2); an example's output does not depend on the
    other examples of its batch (the reason for FRN)."""
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(5, 6, 6, 4)) * rng.uniform(0.1, 10, size=(5, 1, 1, 4))).astype("float32")
    layer = FilterResponseNormalization()
    y = numpy_of(layer(x)).astype("float64")
    np.testing.assert_allclose((y**2).mean(axis=(1, 2)), 1.0, rtol=1e-4)
    alone = numpy_of(layer(x[2:3]))
    np.testing.assert_allclose(alone, y[2:3], rtol=1e-6, atol=1e-6)


def test_frn_mask_leaves_out_padding_and_is_passed_on():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    padded = x.copy()
    padded[0, 4:] = 100.0  # padding values must not change the statistics
    layer = FilterResponseNormalization()
    y = numpy_of(layer(padded, mask=mask))
    gamma, beta = np.ones(3), np.zeros(3)
    expected = np_frn(padded, gamma, beta, mask=mask)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y[0, :4], np_frn(x[:1, :4], gamma, beta)[0], rtol=1e-5)
    inputs = keras.Input((6, 3))
    masked = keras.layers.Masking(0.0)(inputs)
    assert layer.compute_mask(masked, mask=keras.ops.ones((1, 6), "bool")) is not None
    # A (batch, time) mask of rank-4 inputs broadcasts over the trailing axes.
    x4 = rng.normal(size=(2, 5, 2, 3)).astype("float32")
    mask4 = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    y4 = numpy_of(FilterResponseNormalization()(x4, mask=mask4))
    full_mask = np.repeat(mask4[:, :, None], 2, axis=2)
    np.testing.assert_allclose(y4, np_frn(x4, gamma, beta, mask=full_mask), rtol=1e-5, atol=1e-5)


def test_tlu_matches_numpy():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 4, 5, 3)).astype("float32")
    for shared_axes, affine, shape in (
        ([1, 2], False, (1, 1, 3)),
        (None, True, (4, 5, 3)),
        ([1, -1], True, (1, 5, 1)),
        (2, False, (4, 1, 3)),
    ):
        layer = TLU(shared_axes=shared_axes, affine=affine)
        layer.build(x.shape)
        assert tuple(layer.tau.shape) == shape
        tau = rng.normal(size=shape).astype("float32")
        layer.tau.assign(tau)
        alpha = None
        if affine:
            alpha = rng.normal(size=shape).astype("float32")
            layer.alpha.assign(alpha)
        expected = np_tlu(x, tau[None], None if alpha is None else alpha[None])
        np.testing.assert_allclose(numpy_of(layer(x)), expected, rtol=1e-6, atol=1e-7)
    # tau = 0 (the default initializer): a ReLU.
    np.testing.assert_array_equal(numpy_of(TLU()(x)), np.maximum(x, 0.0))


@pytest.mark.parametrize("name", ["frn", "frn_learned"])
def test_frn_equals_tensorflow_addons(name):
    """TF-Addons 0.23's `FilterResponseNormalization` on the same input with the same
    (perturbed) weights, written by tests/migration/write_fixtures.py: its gamma and beta
    (1, 1, 1, C) are ours (C,), its learned_epsilon (1,) ours ()."""
    data = np.load(FIXTURES / "frn_layers.npz")
    x = data["x"]
    learned = name == "frn_learned"
    layer = FilterResponseNormalization(epsilon=1e-6 if learned else 1e-4, learned_epsilon=learned)
    layer.build(x.shape)
    weights = [data[f"{name}_gamma"].reshape(-1), data[f"{name}_beta"].reshape(-1)]
    if learned:
        weights.append(data[f"{name}_learned_epsilon"].reshape(()))
    layer.set_weights(weights)
    np.testing.assert_allclose(numpy_of(layer(x)), data[f"{name}_y"], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["tlu", "tlu_affine"])
def test_tlu_equals_tensorflow_addons(name):
    """TF-Addons' TLU has one `tau` (and `alpha`) per element, as ours by default."""
    data = np.load(FIXTURES / "frn_layers.npz")
    x = data["x"]
    affine = name == "tlu_affine"
    layer = TLU(affine=affine)
    layer.build(x.shape)
    layer.set_weights([data[f"{name}_tau"]] + ([data[f"{name}_alpha"]] if affine else []))
    np.testing.assert_array_equal(numpy_of(layer(x)), data[f"{name}_y"])


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_frn_mixed_precision_large_inputs(policy):
    """x = 300: x^2 overflows float16 (> 65504); nu2 is computed in float32."""
    x = np.full((2, 4, 4, 2), 300.0, "float32")
    layer = FilterResponseNormalization(dtype=policy)
    compute = policy.split("_")[1]
    y = layer(keras.ops.cast(x, compute))
    assert keras.backend.standardize_dtype(y.dtype) == compute
    assert layer.gamma.dtype == "float32"
    np.testing.assert_allclose(numpy_of(keras.ops.cast(y, "float32")), 1.0, rtol=1e-2)


def test_frn_trains_gamma_and_learned_epsilon():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(8, 1, 1, 3)).astype("float32")  # 1x1: the learned epsilon's case
    model = keras.Sequential(
        [keras.Input((1, 1, 3)), FilterResponseNormalization(learned_epsilon=True), TLU()]
    )
    model.compile(keras.optimizers.SGD(0.1), "mse")
    before = [numpy_of(w).copy() for w in model.trainable_weights]
    model.fit(x, 0.5 * x, epochs=2, batch_size=8, verbose=0)
    after = [numpy_of(w) for w in model.trainable_weights]
    assert len(after) == 4
    assert all(not np.allclose(b, a) for b, a in zip(before, after, strict=True))


def test_bad_arguments():
    for epsilon in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="`epsilon`.*Received: epsilon="):
            FilterResponseNormalization(epsilon=epsilon)
    for epsilon in ("1e-6", True, None):
        with pytest.raises(TypeError, match="`epsilon`.*Received: epsilon="):
            FilterResponseNormalization(epsilon=epsilon)
    for axis in ([1, 2], "channels_last", 1.0, None, True):
        with pytest.raises(TypeError, match="`axis` must be an int. Received: axis="):
            FilterResponseNormalization(axis=axis)
    with pytest.raises(TypeError, match="`learned_epsilon`.*Received: learned_epsilon=1"):
        FilterResponseNormalization(learned_epsilon=1)
    with pytest.raises(ValueError, match="out of bounds"):
        FilterResponseNormalization(axis=4)(np.zeros((2, 3, 3, 2), "float32"))
    with pytest.raises(ValueError, match="batch axis"):
        FilterResponseNormalization(axis=0)(np.zeros((2, 3, 3, 2), "float32"))
    with pytest.raises(ValueError, match="must be known"):
        FilterResponseNormalization().build((None, 4, None))
    for shared_axes in ([], "last", [1.0], 1.0):
        with pytest.raises(TypeError, match="`shared_axes` must be an int or a non-empty list"):
            TLU(shared_axes=shared_axes)
    with pytest.raises(ValueError, match="`shared_axes` must not repeat"):
        TLU(shared_axes=[2, 2])
    with pytest.raises(ValueError, match="the same axis twice"):
        TLU(shared_axes=[1, -1]).build((None, 3))
    with pytest.raises(TypeError, match="`affine`.*Received: affine='yes'"):
        TLU(affine="yes")
    with pytest.raises(ValueError, match="batch axis"):
        TLU(shared_axes=[0, 1]).build((None, 3))
    with pytest.raises(ValueError, match="must be known"):
        TLU(shared_axes=2).build((None, None, 3))
