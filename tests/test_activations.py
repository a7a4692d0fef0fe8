"""The SELU family against independent NumPy references, Monte-Carlo and the paper's numbers."""

import math

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit import activations
from keras_normkit.activations import ALPHA01, LAMBDA01
from tests.conftest import requires_tensorflow

# Closed form for the fixed point (0, 1) of Klambauer et al. (2017): alpha01 = -sqrt(2/pi) / (e^{1/2} erfc(1/sqrt 2) - 1).
ALPHA01_CLOSED_FORM = -math.sqrt(2 / math.pi) / (math.exp(0.5) * math.erfc(1 / math.sqrt(2)) - 1)


def numpy_selu(x, alpha, scale):
    x = np.asarray(x, dtype=np.float64)
    return scale * np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0)) - 1))


def monte_carlo_moments(mean, variance, alpha, scale, omega, tau, n=1_000_000, seed=0):
    z = np.random.default_rng(seed).normal(mean * omega, math.sqrt(variance * tau), size=n)
    y = numpy_selu(z, alpha, scale)
    return y.mean(), y.var()


class TestSelu:
    @pytest.mark.parametrize("alpha,scale", [(ALPHA01, LAMBDA01), (1.2, 0.9), (2.5, 1.3)])
    def test_matches_numpy(self, alpha, scale):
        x = np.linspace(-8, 8, 1001).astype("float32")
        y = keras.ops.convert_to_numpy(activations.selu(x, alpha=alpha, scale=scale))
        np.testing.assert_allclose(y, numpy_selu(x, alpha, scale), rtol=1e-5, atol=1e-6)

    def test_default_is_keras_selu(self):
        x = np.random.default_rng(0).normal(size=(64, 32)).astype("float32")
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(activations.selu(x)),
            keras.ops.convert_to_numpy(keras.activations.selu(x)),
        )

    @requires_tensorflow
    def test_no_overflow_in_value_or_gradient(self):
        import tensorflow as tf

        x = tf.constant([-1e4, -50.0, 0.0, 50.0, 1e4, 3e38], dtype="float32")
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = activations.selu(x, alpha=1.5, scale=1.1)
        grad = tape.gradient(y, x).numpy()
        assert np.all(np.isfinite(y.numpy()[:-1])) and np.all(np.isfinite(grad))
        np.testing.assert_allclose(grad[-3:], 1.1)

    def test_closed_form_constants(self):
        assert ALPHA01 == pytest.approx(ALPHA01_CLOSED_FORM, rel=1e-14)


class TestMoments:
    @pytest.mark.parametrize(
        "mean,variance,alpha,scale,omega,tau",
        [
            (0.0, 1.0, ALPHA01, LAMBDA01, 0.0, 1.0),
            (0.3, 1.4, ALPHA01, LAMBDA01, 0.1, 1.05),
            (-0.5, 0.6, 1.9, 1.1, 1.0, 1.0),
            (1.0, 3.0, 0.8, 1.3, -0.5, 0.7),
        ],
    )
    def test_against_monte_carlo(self, mean, variance, alpha, scale, omega, tau):
        mu, nu = activations.selu_moments(mean, variance, alpha, scale, omega, tau)
        mc_mu, mc_nu = monte_carlo_moments(mean, variance, alpha, scale, omega, tau)
        # Monte-Carlo standard errors with 1e6 samples are ~1e-3 for these scales.
        assert mu == pytest.approx(mc_mu, abs=5e-3)
        assert nu == pytest.approx(mc_nu, rel=1e-2)

    def test_fixed_point_zero_one(self):
        mu, nu = activations.selu_moments(0.0, 1.0)
        assert abs(mu) < 1e-12 and nu == pytest.approx(1.0, abs=1e-12)

    def test_array_inputs(self):
        mu, nu = activations.selu_moments(np.array([0.0, 0.5]), np.array([1.0, 2.0]))
        assert mu.shape == (2,) and nu.shape == (2,)
        assert mu[1] == pytest.approx(activations.selu_moments(0.5, 2.0)[0])

    def test_extreme_arguments_are_finite(self):
        for mean, variance, omega in [(50.0, 0.01, 1.0), (-50.0, 0.01, 1.0), (0.0, 400.0, 0.0)]:
            mu, nu = activations.selu_moments(mean, variance, weight_sum=omega)
            assert math.isfinite(mu) and math.isfinite(nu) and nu >= -1e-9


class TestJacobian:
    def test_paper_values(self):
        jac = activations.selu_jacobian(0.0, 1.0)
        np.testing.assert_allclose(jac, [[0.0, 0.088834], [0.0, 0.782648]], atol=5e-6)
        assert np.linalg.norm(jac, 2) == pytest.approx(0.7877, abs=5e-5)

    @pytest.mark.parametrize(
        "point", [(0.0, 1.0, 0.0, 1.0), (0.2, 1.3, 0.1, 1.05), (-0.4, 0.7, 0.8, 0.9)]
    )
    def test_finite_differences(self, point):
        mean, variance, omega, tau = point
        jac = activations.selu_jacobian(mean, variance, weight_sum=omega, weight_square_sum=tau)
        h = 1e-6
        numeric = np.zeros((2, 2))
        for j, (dm, dv) in enumerate([(h, 0.0), (0.0, h)]):
            plus = activations.selu_moments(
                mean + dm, variance + dv, weight_sum=omega, weight_square_sum=tau
            )
            minus = activations.selu_moments(
                mean - dm, variance - dv, weight_sum=omega, weight_square_sum=tau
            )
            numeric[:, j] = (np.array(plus) - np.array(minus)) / (2 * h)
        np.testing.assert_allclose(jac, numeric, atol=1e-7)


class TestParameters:
    def test_reproduces_standard_constants(self):
        alpha, scale = activations.selu_parameters(0.0, 1.0)
        assert abs(alpha - ALPHA01) < 1e-10 and abs(scale - LAMBDA01) < 1e-10

    def test_reference_notebook_value(self):
        # bioinf-jku/SNNs notebook: (mu, nu) = (-0.1, 2) with omega = tau = 1.
        alpha, scale = activations.selu_parameters(-0.1, 2.0, weight_sum=1.0, weight_square_sum=1.0)
        assert alpha == pytest.approx(1.9769021954242, abs=1e-10)
        assert scale == pytest.approx(1.07385123961605, abs=1e-10)

    @pytest.mark.parametrize(
        "mean,variance,omega,tau",
        [
            (0.0, 2.0, 0.0, 1.0),
            (0.5, 1.0, 0.0, 1.0),
            (-0.5, 1.0, 0.0, 1.0),
            (0.2, 0.5, 0.0, 1.0),
            (-0.1, 2.0, 1.0, 1.0),
            (0.1, 1.2, 0.5, 1.1),
        ],
    )
    def test_is_fixed_point(self, mean, variance, omega, tau):
        alpha, scale = activations.selu_parameters(mean, variance, omega, tau)
        assert alpha > 0 and scale > 0
        mu, nu = activations.selu_moments(mean, variance, alpha, scale, omega, tau)
        assert abs(mu - mean) < 1e-8 and abs(nu - variance) < 1e-8

    @given(
        mean=st.floats(-0.3, 0.3),
        variance=st.floats(0.3, 3.0),
    )
    def test_fixed_point_property(self, mean, variance):
        alpha, scale = activations.selu_parameters(mean, variance)
        mu, nu = activations.selu_moments(mean, variance, alpha, scale)
        assert abs(mu - mean) < 1e-8 and abs(nu - variance) < 1e-8

    def test_unreachable_fixed_point_raises(self):
        with pytest.raises(ValueError, match="No SELU"):
            activations.selu_parameters(3.0, 1.0)

    @given(variance=st.one_of(st.floats(max_value=0.0), st.just(float("nan"))))
    def test_bad_variance(self, variance):
        with pytest.raises(ValueError, match="variance"):
            activations.selu_parameters(0.0, variance)

    @given(
        value=st.sampled_from([float("nan"), float("inf"), -float("inf")]),
        name=st.sampled_from(["mean", "weight_sum", "weight_square_sum"]),
    )
    def test_non_finite_inputs(self, value, name):
        with pytest.raises(ValueError, match=name):
            activations.selu_parameters(**{name: value})

    @pytest.mark.parametrize(
        "fixed_point", [(0.1, 0.9), [0.1, 0.9], np.array([0.1, 0.9]), (np.float32(0.1), 0.9)]
    )
    def test_accepts_the_fixed_point_forms_of_selu(self, fixed_point):
        expected = activations.selu_parameters(0.1, 0.9)
        got = activations.selu_parameters(fixed_point)
        assert got == pytest.approx(expected, rel=1e-7)
        # The same constants as the SELU layer solves for the same argument.
        from keras_normkit.layers import SELU

        layer = SELU(fixed_point=fixed_point)
        assert (layer.alpha, layer.scale) == pytest.approx(got, rel=1e-12)

    def test_pair_with_weight_sum(self):
        assert activations.selu_parameters((-0.1, 2.0), weight_sum=1.0) == (
            activations.selu_parameters(-0.1, 2.0, weight_sum=1.0)
        )

    @pytest.mark.parametrize(
        "args,error,message",
        [
            (
                ("abc",),
                TypeError,
                r"`mean` must be a number, or the fixed point as a pair.*"
                r"Received: mean='abc' of type str",
            ),
            ((None,), TypeError, r"`mean` must be a number.*Received: mean=None"),
            (((0.1, 0.9), 2.0), TypeError, r"either as a pair.*not both.*variance=2.0"),
            (
                ((0.1,),),
                ValueError,
                r"`fixed_point` must be a pair of numbers \(mean, "
                r"variance\).*Received: fixed_point=\(0.1,\) \(1 entry\)",
            ),
            (
                ((0.1, "a"),),
                TypeError,
                r"`fixed_point` must be a pair of numbers.*entry of "
                r"type str",
            ),
            (((0.1, -1.0),), ValueError, r"variance > 0. Received: fixed_point=\(0.1, -1.0\)"),
            (((float("nan"), 1.0),), ValueError, r"finite values"),
        ],
    )
    def test_bad_fixed_point_forms_say_what_is_expected(self, args, error, message):
        with pytest.raises(error, match=message):
            activations.selu_parameters(*args)

    def test_weight_sum_one_reproduces_the_snn_reference_notebook(self):
        # bioinf-jku/SNNs, getSELUparameters.ipynb ("To obtain new parameters for mean zero
        # and variance 2", fixed point (-0.1, 2.0)) prints (1.9769021954241999,
        # 1.073851239616047); its (0, 1) cell prints (1.6732632423543774, 1.0507009873554802).
        # The notebook's pre-activation is N(mean, variance): weight_sum=1, weight_square_sum=1.
        alpha, scale = activations.selu_parameters(-0.1, 2.0, weight_sum=1.0)
        assert alpha == pytest.approx(1.9769021954241999, rel=1e-12)
        assert scale == pytest.approx(1.073851239616047, rel=1e-12)
        alpha, scale = activations.selu_parameters(0.0, 1.0, weight_sum=1.0)
        assert alpha == pytest.approx(1.6732632423543774, rel=1e-12)
        assert scale == pytest.approx(1.0507009873554802, rel=1e-12)
        # Our default convention (weight sum 0) differs away from mean 0, as documented.
        default = activations.selu_parameters(-0.1, 2.0)
        assert abs(default[0] - 1.9769021954241999) > 0.1
        # ... and those constants are a fixed point of the moment map with weight sum 1.
        mean, variance = activations.selu_moments(
            -0.1, 2.0, alpha=1.9769021954241999, scale=1.073851239616047, weight_sum=1.0
        )
        assert (mean, variance) == pytest.approx((-0.1, 2.0), abs=1e-12)

    def test_docstrings_state_the_weight_sum_convention(self):
        from keras_normkit.layers import SELU, AlphaDropout

        for obj in (activations.selu_parameters, SELU, AlphaDropout):
            doc = " ".join(obj.__doc__.split())
            assert "bioinf-jku/SNNs" in doc, obj
            assert "weight_sum=1.0" in doc, obj


class TestAlphaDropoutParameters:
    @pytest.mark.parametrize("rate,a,b", [(0.05, 0.954844, 0.083936), (0.10, 0.921285, 0.161971)])
    def test_paper_values(self, rate, a, b):
        got_a, got_b, sat = activations.alpha_dropout_parameters(rate)
        assert got_a == pytest.approx(a, abs=1e-6) and got_b == pytest.approx(b, abs=1e-6)
        assert sat == pytest.approx(-ALPHA01 * LAMBDA01)

    @pytest.mark.parametrize("rate", [0.05, 0.2])
    @pytest.mark.parametrize("fixed_point", [(0.0, 1.0), (0.3, 2.0)])
    def test_closed_form_preserves_moments(self, rate, fixed_point):
        # Exact expectation of a*(mask ? x : sat) + b for x with the fixed point's moments.
        mean, variance = fixed_point
        alpha, scale = activations.selu_parameters(*fixed_point)
        a, b, sat = activations.alpha_dropout_parameters(rate, mean, variance, alpha, scale)
        q = 1 - rate
        m1 = q * mean + (1 - q) * sat
        m2 = q * (variance + mean**2) + (1 - q) * sat**2
        assert a * m1 + b == pytest.approx(mean, abs=1e-12)
        assert a * a * (m2 - m1 * m1) == pytest.approx(variance, abs=1e-12)

    @given(
        rate=st.one_of(st.floats(max_value=-1e-9), st.floats(min_value=1.0), st.just(float("nan")))
    )
    def test_bad_rate(self, rate):
        with pytest.raises(ValueError, match="rate"):
            activations.alpha_dropout_parameters(rate)


class TestActivationGain:
    """gamma = 1 / sqrt(Var f(z)), z ~ N(0, 1): closed forms and SciPy's adaptive quadrature."""

    def test_relu_closed_form(self):
        # Var relu(z) = E[relu^2] - E[relu]^2 = 1/2 - 1/(2 pi).
        expected = math.sqrt(2.0 / (1.0 - 1.0 / math.pi))
        assert activations.activation_gain("relu") == pytest.approx(expected, rel=1e-7)
        assert activations.activation_gain(keras.layers.ReLU()) == pytest.approx(expected, rel=1e-7)
        from keras_normkit.layers import TLU

        # Our TLU, max(x, tau), is a ReLU at initialization (tau = 0).
        assert activations.activation_gain(TLU()) == pytest.approx(expected, rel=1e-7)

    def test_identity_and_none(self):
        assert activations.activation_gain(None) == 1.0
        assert activations.activation_gain("linear") == pytest.approx(1.0, rel=1e-7)

    def test_selu_at_any_fixed_point(self):
        # The standard SELU keeps N(0, 1): gain 1; another fixed point's SELU maps N(0, 1)
        # to the variance of the closed-form moment map.
        assert activations.activation_gain("selu") == pytest.approx(1.0, rel=1e-6)
        from keras_normkit.layers import SELU

        for fixed_point in [(0.0, 2.0), (-0.1, 1.5)]:
            alpha, scale = activations.selu_parameters(*fixed_point)
            _, variance = activations.selu_moments(0.0, 1.0, alpha, scale)
            expected = 1.0 / math.sqrt(variance)
            assert activations.activation_gain(SELU(fixed_point)) == pytest.approx(
                expected, rel=1e-6
            )

    @pytest.mark.parametrize(
        "name,function",
        [
            ("tanh", np.tanh),
            ("sigmoid", lambda z: 1.0 / (1.0 + np.exp(-z))),
            ("softplus", lambda z: np.logaddexp(0.0, z)),
            ("elu", lambda z: np.where(z > 0, z, np.expm1(np.minimum(z, 0.0)))),
            ("relu6", lambda z: np.clip(z, 0.0, 6.0)),
            ("hard_sigmoid", lambda z: np.clip(z / 6.0 + 0.5, 0.0, 1.0)),
        ],
    )
    def test_against_scipy_quadrature(self, name, function):
        from scipy import integrate

        def moment(k):
            def integrand(z):
                return float(function(np.float64(z))) ** k * math.exp(-z * z / 2)

            value, _ = integrate.quad(integrand, -40, 40, points=[-3, 0, 3, 6], limit=200)
            return value / math.sqrt(2 * math.pi)

        variance = moment(2) - moment(1) ** 2
        assert activations.activation_gain(name) == pytest.approx(variance**-0.5, rel=1e-6)

    def test_monte_carlo_unit_variance(self):
        z = np.random.default_rng(0).normal(size=1_000_000).astype("float32")
        gain = activations.activation_gain("gelu")
        y = keras.ops.convert_to_numpy(keras.activations.gelu(z)).astype("float64")
        assert (gain * y).var() == pytest.approx(1.0, abs=5e-3)

    def test_bad_activation(self):
        with pytest.raises(TypeError, match="`activation` must be None, the name"):
            activations.activation_gain(3.0)
        with pytest.raises(ValueError, match="finite, non-zero variance"):
            activations.activation_gain(lambda x: 0.0 * x)
        with pytest.raises(ValueError, match="elementwise"):
            activations.activation_gain(lambda x: keras.ops.sum(x))
