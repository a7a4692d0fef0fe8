"""Conformal prediction sets for a Keras classifier: `ConformalClassifier`."""

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import (
    check_bool,
    check_number,
    check_seed,
    check_string_choice,
)
from keras_normkit.calibration import NotCalibratedError, collect_logits
from keras_normkit.uncertainty import _arrays, _models
from keras_normkit.uncertainty.conformal import _ranking
from keras_normkit.uncertainty.conformal.fit import fit_prediction_sets
from keras_normkit.uncertainty.conformal.raps import check_regularization

__all__ = ["ConformalClassifier"]

_CALIBRATED_KEY = "calibrated"


@keras.saving.register_keras_serializable(package="keras_normkit")
class ConformalClassifier(keras.Model):
    """Split conformal prediction sets around a trained classifier, as a Keras model.

    Calibrated once on held-out data (`calibrate(x, y)`), it outputs for each input a set of
    labels, as a boolean mask `(batch, classes)`, that holds the true label with probability
    at least 1 - alpha, whatever the model and the data distribution, provided calibration
    and test examples are exchangeable (Vovk et al. 2005). The score decides the sets' shape:

    * `"lac"` (Sadinle et al. 2019): s = 1 - pi_y, C(x) = {y : pi_y(x) >= 1 - tau}: the
      smallest sets on average, coverage marginal only.
    * `"aps"` (Romano et al. 2020): s = rho_x(y) + u * pi_y(x), rho the mass of the labels
      ranked above y: the top labels until their mass reaches tau, so uncertain inputs get
      larger sets.
    * `"raps"` (Angelopoulos et al. 2021): s = rho_x(y) + u * pi_y(x) +
      lam * (o_x(y) - k_reg)+, o the rank of y: APS with a penalty on deep ranks, whose
      sets are much smaller than APS's when the tail of the softmax is noisy. `k_reg` and
      `lam` are given, or chosen on a held-out `tuning_fraction` of the calibration data
      (as the paper's code does: k_reg the (1 - alpha) quantile of the true label's 0-based
      rank, plus 1; lam the value of (0.001, 0.01, 0.1, 0.2, 0.5) with the smallest sets).

    The threshold tau is the ceil((n + 1)(1 - alpha))-th smallest calibration score
    (`conformal_quantile`): the finite-sample correction the guarantee needs, which the
    official RAPS code omits (it takes `np.quantile(E, 1 - alpha, "higher")`). Calibration
    scores of APS/RAPS always draw u ~ U(0, 1). With `randomized=True` the served sets draw
    u too (one per input, from the seeded generator of the model): coverage is then
    between 1 - alpha and 1 - alpha + 1 / (n + 1), and a set may be empty. With
    `randomized=False` a set keeps the label whose mass crosses tau: never empty, coverage
    a little above 1 - alpha. With `mondrian=True` the threshold is fitted per class
    (class-conditional coverage 1 - alpha for every class; needs (1 - alpha) / alpha
    calibration examples per class).

    The sets are computed from softmax(z), z the wrapped model's logits. For
    temperature-scaled probabilities (smaller APS/RAPS sets, same guarantee), wrap a
    `keras_normkit.calibration.TemperatureScaling(model, output="logits")` fitted on other
    held-out data, or pass scaled logits to `calibrate_from_logits`. The fitted thresholds
    and RAPS parameters are non-trainable weights: the wrapper saves to `.keras`, exports
    with `model.export()` and serves; before calibration it raises `NotCalibratedError`.

    Args:
        model: A trained `keras.Model` classifier outputting logits `(batch, k)` (or
            probabilities, see `model_output`); `k = 1` is a binary classifier (one logit or
            sigmoid unit), whose sets are over the two classes.
        score: `"lac"`, `"aps"` or `"raps"`.
        alpha: Miscoverage level in (0, 1): sets cover the label with probability >= 1 - alpha.
        randomized: APS/RAPS: randomized sets (exact coverage) or not (never empty).
        k_reg: RAPS: integer >= 0, or None to choose it on tuning data.
        lam: RAPS: penalty >= 0, or None to choose it on tuning data.
        mondrian: Class-conditional (Mondrian) thresholds, one per class.
        tuning_fraction: RAPS with `k_reg` or `lam` None: the fraction of the calibration data
            held out to choose them, in (0, 1).
        seed: Optional integer seed of the uniforms drawn by the randomized sets served.
        model_output: `"auto"` (detected from the last layer's activation), `"logits"` or
            `"probabilities"`.
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.

    Call arguments:
        inputs: Inputs of the wrapped model.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.uncertainty import ConformalClassifier, coverage
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2000, 2)).astype("float32")
    >>> y = (x[:, 0] + 0.8 * rng.normal(size=2000) > 0).astype("int32")
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    >>> model.layers[0].set_weights([np.array([[-2, 2], [0, 0]], "float32"), np.zeros(2, "float32")])
    >>> sets = ConformalClassifier(model, score="lac", alpha=0.1)
    >>> sets = sets.calibrate(x[:1000], y[:1000], seed=0, verbose=0)
    >>> mask = sets.predict(x[1000:], verbose=0)
    >>> mask.dtype, mask.shape, 0.87 <= coverage(mask, y[1000:]) <= 0.93
    (dtype('bool'), (1000, 2), True)

    Reference: Angelopoulos, Bates, Malik, Jordan, "Uncertainty Sets for Image Classifiers
    using Conformal Prediction", ICLR 2021, arXiv:2009.14193; Romano, Sesia, Candes,
    NeurIPS 2020; Sadinle, Lei, Wasserman, JASA 2019; Vovk, Gammerman, Shafer 2005.
    """

    def __init__(
        self,
        model,
        score="lac",
        alpha=0.1,
        randomized=True,
        k_reg=None,
        lam=None,
        mondrian=False,
        tuning_fraction=0.3,
        seed=None,
        model_output="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.classifier = _models.check_model(model)
        self.score = check_string_choice("score", score, _ranking.SCORES)
        self.alpha = _arrays.check_alpha(alpha)
        self.randomized = check_bool("randomized", randomized)
        if k_reg is not None:
            k_reg = check_regularization(k_reg, 0.0)[0]
        if lam is not None:
            lam = check_regularization(0, lam)[1]
        self.k_reg, self.lam = k_reg, lam
        self.mondrian = check_bool("mondrian", mondrian)
        self.tuning_fraction = check_number(
            "tuning_fraction", tuning_fraction, 0.0, 1.0, strict_minimum=True, strict_maximum=True
        )
        self.seed = check_seed(seed)
        self.model_output = _models.resolve_model_output(model, model_output)
        self._is_calibrated = False
        self.seed_generator = keras.random.SeedGenerator(seed)
        num_classes = _models.static_num_classes(model)
        self.num_classes = None if num_classes is None else max(2, num_classes)
        self.thresholds = None
        if self.num_classes is not None:
            self._create_weights(self.num_classes)

    # -- weights -------------------------------------------------------------------------

    def _create_weights(self, num_classes):
        if self.thresholds is not None:
            return
        self.num_classes = num_classes
        self.thresholds = self.add_weight(
            shape=(num_classes,), initializer="zeros", trainable=False, name="thresholds"
        )
        self.k_reg_weight = self.add_weight(
            shape=(), initializer="zeros", trainable=False, name="k_reg"
        )
        self.lam_weight = self.add_weight(
            shape=(), initializer="zeros", trainable=False, name="lam"
        )

    def build(self, input_shape):
        if self.thresholds is None:
            spec = self.classifier.compute_output_spec(keras.KerasTensor(input_shape))
            if isinstance(spec, (list, tuple, dict)):
                raise ValueError(
                    "The wrapped model must have a single output of shape (batch, "
                    f"num_classes). Received a structure of outputs: {spec}"
                )
            self._create_weights(max(2, _models.check_output_shape(spec.shape)))
        self.built = True

    # -- fitted attributes ---------------------------------------------------------------

    @property
    def is_calibrated(self):
        """Whether `calibrate` fitted the threshold (or a calibrated save was loaded)."""
        return self._is_calibrated

    def _check_calibrated(self, what="be called (or predict, evaluate, export)"):
        if not self._is_calibrated:
            raise NotCalibratedError(
                f"This ConformalClassifier ({self.name!r}) is not calibrated yet, so it cannot "
                f"{what}: call `calibrate(x_val, y_val)` with held-out data first."
            )

    @property
    def threshold_(self):
        """The fitted threshold tau (a float), or `(k,)` one per class with `mondrian=True`."""
        self._check_calibrated("report a threshold")
        thresholds = ops.convert_to_numpy(self.thresholds).astype(np.float64)
        return thresholds if self.mondrian else float(thresholds[0])

    @property
    def k_reg_(self):
        """RAPS's k_reg, given or chosen (0 for LAC and APS)."""
        self._check_calibrated("report k_reg")
        return int(round(float(ops.convert_to_numpy(self.k_reg_weight))))

    @property
    def lam_(self):
        """RAPS's lam, given or chosen (0 for LAC and APS), as stored (float32, shown to 7
        significant digits: 0.1, not 0.10000000149)."""
        self._check_calibrated("report lam")
        return float(f"{float(ops.convert_to_numpy(self.lam_weight)):.7g}")

    def __getattr__(self, name):
        # A fitted-attribute property raising `NotCalibratedError` (an AttributeError) makes
        # Python call `__getattr__`; on PyTorch (layers are `torch.nn.Module`s) that would
        # replace the error with a bare "has no attribute". Re-raise the property's own.
        attribute = getattr(type(self), name, None)
        if isinstance(attribute, property):
            return attribute.__get__(self, type(self))
        parent = getattr(super(), "__getattr__", None)
        if parent is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return parent(name)

    # -- calibration ---------------------------------------------------------------------

    def _fit(self, logits, labels, seed):
        logits = _arrays.check_logits(logits)
        if self.num_classes is not None and logits.shape[1] != self.num_classes:
            raise ValueError(
                f"The wrapped model has {self.num_classes} classes. Received logits of shape "
                f"{logits.shape}."
            )
        fitted = fit_prediction_sets(
            _arrays.softmax(logits),
            labels,
            score=self.score,
            alpha=self.alpha,
            randomized=self.randomized,
            k_reg=self.k_reg,
            lam=self.lam,
            mondrian=self.mondrian,
            tuning_fraction=self.tuning_fraction,
            seed=check_seed(seed),
        )
        self._create_weights(logits.shape[1])
        self.thresholds.assign(np.broadcast_to(fitted.thresholds, (logits.shape[1],)))
        self.k_reg_weight.assign(float(fitted.k_reg))
        self.lam_weight.assign(fitted.lam)
        self._is_calibrated = True
        return fitted

    def calibrate(self, x, y=None, seed=None, batch_size=None, verbose="auto"):
        """Fit the threshold (and RAPS's parameters) on held-out data; returns `self`.

        Runs the wrapped classifier once over the data in inference mode (batch by batch,
        `keras_normkit.calibration.collect_logits`), then fits in NumPy
        (`fit_prediction_sets`).

        Args:
            x: Held-out inputs (never the training data) as arrays, or a batched
                `tf.data.Dataset` of `(x, y)`.
            y: Integer labels `(n,)` or one-hot `(n, k)` when `x` is an array; None for a
                dataset.
            seed: Integer seed of the calibration draws (RAPS's tuning split, the uniforms).
            batch_size: Batch size for arrays (default 256).
            verbose: `"auto"`/1 for a progress bar, 0 for silence.

        Returns:
            `self`, calibrated.
        """
        check_seed(seed)
        first = []

        def predict_batch(x_batch):
            if not first:
                first.append(keras.tree.map_structure(lambda a: a[:1], x_batch))
            outputs = self.classifier.predict_on_batch(x_batch)
            return _models.numpy_logits(outputs, self.model_output)

        with collect_logits(predict_batch, x, y, batch_size, verbose) as data:
            self._fit(np.asarray(data.logits), np.asarray(data.labels), seed)
        self(first[0])
        return self

    def calibrate_from_logits(self, logits, labels, seed=None):
        """Fit on logits already collected (e.g. by `collect_logits`); returns `self`.

        Args:
            logits: `(n, k)` held-out logits of the wrapped model (for a model that outputs
                probabilities: their logarithms), possibly temperature-scaled.
            labels: Integer labels `(n,)` (or one-hot).
            seed: Integer seed of the calibration draws.

        Returns:
            `self`, calibrated (call it once on an input before `export` if the wrapped
            model's input shape is not static).
        """
        self._fit(logits, labels, seed)
        self._build_on_example()
        return self

    def _build_on_example(self):
        try:
            inputs = self.classifier.inputs
        except (AttributeError, ValueError):
            return
        if not inputs:
            return
        example = [np.zeros((1, *[d or 1 for d in t.shape[1:]]), dtype=t.dtype) for t in inputs]
        try:
            self(example[0] if len(example) == 1 else example)
        except Exception:  # noqa: BLE001 - best effort: the caller may call it on real data
            pass

    # -- Keras ---------------------------------------------------------------------------

    def call(self, inputs):
        self._check_calibrated()
        logits = _models.logits_from_outputs(
            self.classifier(inputs, training=False), self.model_output
        )
        probabilities = ops.softmax(logits, axis=-1)
        thresholds = ops.cast(self.thresholds, probabilities.dtype)
        if self.score == "lac":
            return ops.less_equal(1.0 - probabilities, thresholds)
        num_classes = probabilities.shape[-1]
        ordered, order = ops.top_k(probabilities, k=num_classes, sorted=True)
        scores = ops.cumsum(ordered, axis=-1) - ordered
        if self.score == "raps":
            ranks = ops.arange(1, num_classes + 1, dtype=probabilities.dtype)
            k_reg = ops.cast(self.k_reg_weight, probabilities.dtype)
            lam = ops.cast(self.lam_weight, probabilities.dtype)
            scores = scores + lam * ops.relu(ranks - k_reg)
        if self.randomized:
            u = keras.random.uniform(
                ops.shape(ordered[:, :1]), seed=self.seed_generator, dtype=probabilities.dtype
            )
            scores = scores + u * ordered
        scores = ops.take_along_axis(scores, ops.argsort(order, axis=-1), axis=-1)
        if self.randomized:
            return ops.less_equal(scores, thresholds)
        return ops.less(scores, thresholds)

    def compute_output_shape(self, input_shape):
        shape = self.classifier.compute_output_shape(input_shape)
        return (*shape[:-1], max(2, shape[-1]))

    def compute_output_spec(self, *args, **kwargs):
        spec = super().compute_output_spec(*args, **kwargs)
        return keras.KerasTensor(spec.shape, dtype="bool")

    def save_own_variables(self, store):
        super().save_own_variables(store)
        store[_CALIBRATED_KEY] = np.array(self._is_calibrated)

    def load_own_variables(self, store):
        keys = list(store.keys())
        calibrated = bool(np.asarray(store[_CALIBRATED_KEY])) if _CALIBRATED_KEY in keys else True
        super().load_own_variables({k: store[k] for k in keys if k != _CALIBRATED_KEY})
        self._is_calibrated = calibrated

    def set_weights(self, weights):
        """Set the weights (the classifier's and the thresholds); counts as calibrated."""
        super().set_weights(weights)
        self._is_calibrated = True

    # Checked before Keras's loop starts: on JAX, `predict` detaches the variables for the
    # loop, and an error raised while tracing would leave the classifier without weights.
    def predict(self, *args, **kwargs):
        self._check_calibrated()
        return super().predict(*args, **kwargs)

    def predict_on_batch(self, *args, **kwargs):
        self._check_calibrated()
        return super().predict_on_batch(*args, **kwargs)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "model": keras.saving.serialize_keras_object(self.classifier),
            "score": self.score,
            "alpha": self.alpha,
            "randomized": self.randomized,
            "k_reg": self.k_reg,
            "lam": self.lam,
            "mondrian": self.mondrian,
            "tuning_fraction": self.tuning_fraction,
            "seed": self.seed,
            "model_output": self.model_output,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["model"] = keras.saving.deserialize_keras_object(config["model"])
        return cls(**config)
