"""Ensemble temperature scaling (Zhang, Kailkhura, Han, ICML 2020):
`fit_ensemble_temperature_scaling` and `EnsembleTemperatureScaling`.

The calibrated probabilities are a convex combination of three predictions:

    q = w_1 softmax(z / T) + w_2 softmax(z) + w_3 / k,    w_j >= 0, w_1 + w_2 + w_3 = 1,

the temperature-scaled one, the classifier's own, and the uniform distribution over the k
classes (for a single binary logit z, sigmoid takes the place of softmax and k = 2). T is
the temperature of temperature scaling (minimum NLL, `fit_temperature`); the weights then
minimize the mean squared error (Brier score) of q against the one-hot labels,
(1/n) sum_i |q_i - e_{y_i}|^2. That objective is w^T G w - 2 c^T w + 1 with the 3 x 3
Gram matrix G = (1/n) sum_i P_i^T P_i of the three predictions P_i = [p_T, p_1, u] (k x 3)
and c = (1/n) sum_i P_i[y_i], a quadratic program over the simplex solved exactly: the
minimizer lies in the relative interior of one of the simplex's 7 faces, where it solves a
linear (KKT) system; the feasible candidate with the smallest objective is kept.

softmax(z / T) and softmax(z) are both largest at the argmax of z and the uniform term
adds the same to every class, so the mixture keeps the argmax: accuracy is unchanged, as
with temperature scaling. The uniform term (w_3 > 0) lowers every confidence towards 1 / k,
which T alone can only do by also flattening the ranking of the other classes.

The reference code (zhang64-llnl/Mix-n-Match-Calibration, `ets_calibrate`) fits T with a
squared-error loss by default; here, as in the paper's description ("T from temperature
scaling"), T is the NLL temperature (pass `temperature=` to use another).

Reference: Zhang, Kailkhura, Han, "Mix-n-Match: Ensemble and Compositional Methods for
Uncertainty Calibration in Deep Learning", ICML 2020, arXiv:2003.07329, Section 4.1.
"""

import itertools

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_number
from keras_normkit.calibration import _arrays, _numeric, _validation
from keras_normkit.calibration.base import CalibrationWrapper
from keras_normkit.calibration.scaling._map import ScalingMap
from keras_normkit.calibration.scaling.temperature import fit_temperature

__all__ = [
    "EnsembleTemperatureScaling",
    "EnsembleTemperatureScalingMap",
    "fit_ensemble_temperature_scaling",
]


def _components(z, temperature):
    """The three predictions `(n, k, 3)`: softmax(z / T), softmax(z), uniform (float64)."""
    z = _numeric.two_class_logits(np.asarray(z, np.float64))  # binary: softmax over (0, z)
    uniform = np.full(z.shape, 1.0 / z.shape[1])
    return np.stack([_numeric.softmax(z / temperature), _numeric.softmax(z), uniform], axis=2)


def _simplex_least_squares(gram, cross):
    """argmin over the probability simplex of w^T G w - 2 c^T w (exact, by faces)."""
    size = len(cross)
    best, best_value = None, np.inf
    for count in range(1, size + 1):
        for face in itertools.combinations(range(size), count):
            face = list(face)
            kkt = np.zeros((count + 1, count + 1))
            kkt[:count, :count] = 2.0 * gram[np.ix_(face, face)]
            kkt[:count, count] = kkt[count, :count] = 1.0
            rhs = np.concatenate([2.0 * cross[face], [1.0]])
            solution = np.linalg.lstsq(kkt, rhs, rcond=None)[0][:count]
            if (solution < -1e-12).any():
                continue
            w = np.zeros(size)
            w[face] = np.maximum(solution, 0.0)
            w /= w.sum()
            value = w @ gram @ w - 2.0 * cross @ w
            if value < best_value - 1e-15:
                best, best_value = w, value
    return best


class EnsembleTemperatureScalingMap(ScalingMap):
    """A fitted ensemble temperature scaling: T and the weights (w_1, w_2, w_3).

    Attributes:
        temperature: The temperature T > 0 (a float).
        weights: `(3,)` weights on the simplex, of softmax(z / T), softmax(z) and 1 / k.

    `predict(logits)` returns q = w_1 softmax(z / T) + w_2 softmax(z) + w_3 / k for logits
    `(n, k)`, or the probability of class 1 (sigmoid in place of softmax, k = 2) for one
    binary logit `(n,)`/`(n, 1)`, in the shape of `logits`.
    """

    def __init__(self, temperature, weights):
        self.temperature = float(temperature)
        self.weights = np.asarray(weights, np.float64).reshape(3)

    def _probabilities(self, z):
        return _components(z, self.temperature) @ self.weights

    def __repr__(self):
        return (
            f"EnsembleTemperatureScalingMap(temperature={self.temperature:.6g}, "
            f"weights={self.weights.tolist()})"
        )


def fit_ensemble_temperature_scaling(logits, labels, temperature=None):
    """Ensemble temperature scaling: T by NLL, then simplex weights by minimum MSE.

    Fits q = w_1 softmax(z / T) + w_2 softmax(z) + w_3 / k: T is the temperature of
    temperature scaling (`fit_temperature`, minimum NLL) unless given, and w minimizes the
    mean squared error (1/n) sum_i |q_i - e_{y_i}|^2 over the simplex w_j >= 0,
    sum_j w_j = 1, exactly (a 3-variable quadratic program, solved face by face). For a
    single binary logit z, sigmoid takes the place of softmax and k = 2.

    Args:
        logits: `(n, k)` pre-softmax logits, or `(n,)`/`(n, 1)` logits of a binary
            classifier (memmap OK: read in chunks).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        temperature: `None` (default: fitted by `fit_temperature`) or a positive float.

    Returns:
        An `EnsembleTemperatureScalingMap` (`temperature`, `weights`; `predict(logits)`).

    Raises:
        ValueError: for bad input, when the labels are all one class, or when
            `fit_temperature` finds no finite temperature (see there).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_ensemble_temperature_scaling
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(20000, 10)) * 2
    >>> p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    >>> y = (p.cumsum(1) > rng.random((20000, 1))).argmax(1)  # y ~ softmax(z)
    >>> fitted = fit_ensemble_temperature_scaling(2.5 * z, y)  # over-confident logits
    >>> round(fitted.temperature, 1), bool(fitted.weights[0] > 0.9)
    (2.5, True)

    Reference: Zhang, Kailkhura, Han, ICML 2020, arXiv:2003.07329, Section 4.1.
    """
    if temperature is not None:
        temperature = check_number("temperature", temperature, 0.0, strict_minimum=True)
    logits, labels, _ = _validation.check_logits_and_labels(logits, labels)
    _validation.check_two_classes(
        labels,
        "Ensemble temperature scaling",
        "its temperature would be arbitrary and its weights would favour whichever "
        "component is most confident in that class",
    )
    if temperature is None:
        temperature = fit_temperature(logits, labels).temperature
    gram, cross = np.zeros((3, 3)), np.zeros(3)
    for rows in _arrays.chunk_slices(len(logits), 3 * (logits.shape[1] + 1)):
        components = _components(_arrays.read_rows(logits, rows), temperature)
        gram += np.einsum("nkc,nkd->cd", components, components)
        label_rows = np.asarray(labels[rows])
        cross += components[np.arange(len(label_rows)), label_rows].sum(axis=0)
    weights = _simplex_least_squares(gram / len(logits), cross / len(logits))
    return EnsembleTemperatureScalingMap(temperature, weights)


@keras.saving.register_keras_serializable(package="keras_normkit")
class EnsembleTemperatureScaling(CalibrationWrapper):
    """Ensemble temperature scaling of a trained classifier.

    q = w_1 softmax(z / T) + w_2 softmax(z) + w_3 / k, w on the simplex: a mixture of the
    temperature-scaled, the original and the uniform prediction (for a single binary logit,
    sigmoid in place of softmax and k = 2). `calibrate(x, y)` fits T by minimum NLL
    (temperature scaling) and then the weights by minimum mean squared error on held-out
    data (see `fit_ensemble_temperature_scaling`). The argmax, hence accuracy, is
    unchanged. T and w are non-trainable weights `temperature` `()` and `ensemble_weights`
    `(3,)`, saved with the model and served by `model.export()`. Before `calibrate`,
    calling, predicting with or exporting the wrapper, and reading `calibration_map_`,
    raise `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` classifier with one output `(batch, k)`: logits, or
            softmax/sigmoid probabilities (then logits are recovered, with a warning).
            `k = 1` is a binary classifier (sigmoid of a single logit).
        output: `"probabilities"` (default) or `"logits"` (log q, floored at 1.2e-38, or
            for `k = 1` the log-odds of q: softmax/sigmoid of them gives q back).
        model_output: `"auto"` (default: detected from the last layer's activation),
            `"logits"` or `"probabilities"`: what the wrapped model outputs.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.

    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import EnsembleTemperatureScaling
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(512, 8)).astype("float32")
    >>> y = (x[:, 0] + 0.5 * rng.normal(size=512) > 0).astype("int32")
    >>> model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
    >>> kernel = np.zeros((8, 2), "float32")
    >>> kernel[0] = [-5.0, 5.0]  # logits (-5 x0, 5 x0): too sharp for labels with noise
    >>> model.layers[0].set_weights([kernel, np.zeros(2, "float32")])
    >>> calibrated = EnsembleTemperatureScaling(model).calibrate(x, y, verbose=0)
    >>> fitted = calibrated.calibration_map_
    >>> bool(fitted.temperature > 1), round(float(fitted.weights.sum()), 6)
    (True, 1.0)
    >>> tuple(calibrated(x[:2]).shape)
    (2, 2)

    Reference: Zhang, Kailkhura, Han, "Mix-n-Match: Ensemble and Compositional Methods for
    Uncertainty Calibration in Deep Learning", ICML 2020, arXiv:2003.07329, Section 4.1.
    """

    def __init__(self, model, output="probabilities", model_output="auto", **kwargs):
        super().__init__(model, output=output, model_output=model_output, **kwargs)
        self._create_calibration_weights(None)

    def _create_calibration_weights(self, num_classes):
        if getattr(self, "temperature", None) is None:
            self.temperature = self.add_weight(
                shape=(), initializer="ones", trainable=False, name="temperature"
            )
            self.ensemble_weights = self.add_weight(
                shape=(3,),
                initializer=keras.initializers.Constant([1.0, 0.0, 0.0]),
                trainable=False,
                name="ensemble_weights",
            )

    def _calibration_weights_created(self):
        return getattr(self, "temperature", None) is not None

    def _probabilities(self, logits):
        temperature = ops.cast(self.temperature, logits.dtype)
        weights = ops.cast(self.ensemble_weights, logits.dtype)
        if logits.shape[-1] == 1:
            scaled, original, uniform = ops.sigmoid(logits / temperature), ops.sigmoid(logits), 0.5
        else:
            scaled = ops.softmax(logits / temperature, axis=-1)
            original = ops.softmax(logits, axis=-1)
            uniform = 1.0 / logits.shape[-1]
        return weights[0] * scaled + weights[1] * original + weights[2] * uniform

    def call(self, inputs, training=False):
        self._check_calibrated()
        logits = self._logits(self.classifier(inputs, training=training))
        return self._output_from_probabilities(self._probabilities(logits))

    def _fit(self, logits, labels):
        fitted = fit_ensemble_temperature_scaling(logits, labels)
        self.temperature.assign(np.float32(fitted.temperature))
        self.ensemble_weights.assign(fitted.weights.astype("float32"))

    @property
    def calibration_map_(self):
        """The fitted `EnsembleTemperatureScalingMap` (from the weights); `NotCalibratedError`
        before `calibrate`."""
        self._check_calibrated("report a fitted map")
        return EnsembleTemperatureScalingMap(
            ops.convert_to_numpy(self.temperature), ops.convert_to_numpy(self.ensemble_weights)
        )
