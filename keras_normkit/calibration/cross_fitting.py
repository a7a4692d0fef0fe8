"""Cross-fitted calibration: `CrossFittedCalibration`, the average of k calibrators.

The held-out examples are split into k contiguous folds (as scikit-learn's
`KFold(k, shuffle=False)`: the first n mod k folds hold one example more); calibrator i is
fitted on fold i alone, and the calibrated probabilities are the mean of the k calibrators'
probabilities. For a fixed (pre-trained) classifier this is scikit-learn's
`CalibratedClassifierCV(FrozenEstimator(classifier), cv=KFold(k), ensemble=True)`: there
each split's classifier is the same frozen one and its calibrator is fitted on the split's
test fold. Averaging k maps fitted on disjoint data smooths the steps of the
non-parametric maps (histogram binning, isotonic regression, BBQ) and makes the fit less
dependent on the particular held-out examples; each member sees 1/k of the data.

Any calibration wrapper of this package can be the member: `CrossFittedCalibration(
IsotonicCalibration(model), cv=5)` holds five `IsotonicCalibration`s that share the
classifier (run once per call; the maps are applied to its logits).

Reference: scikit-learn's `CalibratedClassifierCV(ensemble=True)` (Pedregosa et al., JMLR
2011); Zadrozny & Elkan, KDD 2002 (fitting calibrators on held-out folds).
"""

import keras
import numpy as np

from keras_normkit._validation import check_int
from keras_normkit.calibration import _arrays
from keras_normkit.calibration.base import CalibrationWrapper

__all__ = ["CrossFittedCalibration"]


def fold_bounds(num_examples, cv):
    """Row bounds `[b_0 = 0, b_1, ..., b_k = n]` of k contiguous folds (as `KFold`)."""
    sizes = np.full(cv, num_examples // cv, dtype=np.int64)
    sizes[: num_examples % cv] += 1
    return np.concatenate([[0], np.cumsum(sizes)]).tolist()


def _member_kwargs(config):
    """A member's constructor arguments from its config, without the classifier."""
    return {key: value for key, value in config.items() if key != "model"}


@keras.saving.register_keras_serializable(package="keras_normkit")
class CrossFittedCalibration(CalibrationWrapper):
    """Cross-fitted calibration: the mean of k calibrators, each fitted on one fold.

    `calibrate(x, y)` runs the classifier once over the held-out data, splits the examples
    into `cv` contiguous folds (the first n mod k one example larger) and fits member i,
    a copy of `calibrator`, on fold i. The wrapper outputs the mean of the members'
    calibrated probabilities, as scikit-learn's `CalibratedClassifierCV(ensemble=True)`
    does for a frozen classifier with `cv=KFold(k)`. The members share the wrapped
    classifier, which runs once per call; their fitted maps are their own weights, saved
    with the model and served by `model.export()`. Shuffle the held-out data first if its
    order is not random (each fold must hold examples of at least two classes). Before
    `calibrate`, calling, predicting with or exporting the wrapper, and reading
    `calibrators_`, raise `NotCalibratedError`.

    Args:
        calibrator: An uncalibrated calibration wrapper of this package (e.g.
            `IsotonicCalibration(model)`): its class, classifier and arguments define the
            members, and its `output` the wrapper's output.
        cv: Number of folds k >= 2 (default 5).
        member_configs: `None` (default), or the k members' configs as `get_config` writes
            them (how a saved wrapper restores members whose weights were sized by their
            fit).
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.

    Call arguments:
        inputs: Inputs of the wrapped model.
        training: Passed to the wrapped model (calibration is an inference-time map).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.calibration import CrossFittedCalibration, IsotonicCalibration
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2000, 1)).astype("float32")
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-x[:, 0]))).astype("int32")
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Rescaling(4.0)])
    >>> wrapper = CrossFittedCalibration(IsotonicCalibration(model), cv=5)
    >>> wrapper = wrapper.calibrate(x, y, verbose=0)
    >>> len(wrapper.calibrators_)
    5
    >>> p = keras.ops.convert_to_numpy(wrapper(np.array([[-1.0], [0.0], [1.0]])))
    >>> bool(np.all(np.diff(p[:, 0]) >= 0))  # a mean of non-decreasing maps
    True

    Reference: scikit-learn's `CalibratedClassifierCV(ensemble=True)`; Zadrozny & Elkan,
    KDD 2002.
    """

    def __init__(self, calibrator, cv=5, member_configs=None, **kwargs):
        if not isinstance(calibrator, CalibrationWrapper) or isinstance(
            calibrator, CrossFittedCalibration
        ):
            raise TypeError(
                "`calibrator` must be a calibration wrapper of keras_normkit.calibration "
                "(e.g. IsotonicCalibration(model)), not a CrossFittedCalibration. Received: "
                f"calibrator={calibrator!r} of type {type(calibrator).__name__}"
            )
        cv = check_int("cv", cv, 2)
        if calibrator.is_calibrated:
            raise ValueError(
                "`calibrator` must not be calibrated yet: CrossFittedCalibration fits its own "
                f"{cv} copies of it. Received a calibrated {type(calibrator).__name__}."
            )
        template = calibrator.get_config()
        super().__init__(
            calibrator.classifier,
            output=template["output"],
            model_output=template["model_output"],
            **kwargs,
        )
        self.cv = cv
        self.calibrator_class = type(calibrator)
        self._template = template
        if member_configs is None:
            member_configs = [
                {**_member_kwargs(template), "name": f"{template['name']}_fold_{i}"}
                for i in range(cv)
            ]
        if len(member_configs) != cv:
            raise ValueError(
                f"`member_configs` must hold one config per fold ({cv}). Received "
                f"{len(member_configs)}."
            )
        self.members = [
            self.calibrator_class(calibrator.classifier, **_member_kwargs(config))
            for config in member_configs
        ]

    def _create_calibration_weights(self, num_classes):
        for member in getattr(self, "members", []):
            if not member._calibration_weights_created():
                member.num_classes = num_classes
                member._create_calibration_weights(num_classes)

    def _calibration_weights_created(self):
        members = getattr(self, "members", [])
        return bool(members) and all(m._calibration_weights_created() for m in members)

    def _create_weights_for_calibration(self, num_classes):
        for member in self.members:
            if not member._calibration_weights_created():
                member.num_classes = num_classes
                member._create_weights_for_calibration(num_classes)

    def _probabilities(self, logits):
        total = self.members[0]._probabilities(logits)
        for member in self.members[1:]:
            total = total + member._probabilities(logits)
        return total / float(len(self.members))

    def call(self, inputs, training=False):
        self._check_calibrated()
        logits = self._logits(self.classifier(inputs, training=training))
        return self._output_from_probabilities(self._probabilities(logits))

    def _fit(self, logits, labels):
        bounds = fold_bounds(len(logits), self.cv)
        if len(logits) < self.cv:
            raise ValueError(
                f"Cross-fitting with cv={self.cv} folds needs at least {self.cv} held-out "
                f"examples. Received {len(logits)}."
            )
        for i, member in enumerate(self.members):
            rows = slice(bounds[i], bounds[i + 1])
            fold_logits = _arrays.read_rows(logits, rows)
            fold_labels = np.asarray(labels[rows])
            try:
                member._fit(fold_logits, fold_labels)
            except ValueError as error:
                raise ValueError(
                    f"Cross-fitting fold {i} of {self.cv} (held-out rows {rows.start}.."
                    f"{rows.stop - 1}): {error}"
                ) from error
            member._is_calibrated = True
            member.built = True

    @property
    def calibrators_(self):
        """The k fitted member wrappers; `NotCalibratedError` before `calibrate`."""
        self._check_calibrated("report its fitted calibrators")
        return list(self.members)

    def compute_output_shape(self, input_shape):
        return self.classifier.compute_output_shape(input_shape)

    def get_config(self):
        template = {**self._template, "model": keras.saving.serialize_keras_object(self.classifier)}
        return {
            "name": self.name,
            "trainable": self.trainable,
            "calibrator": {
                "class_name": keras.saving.get_registered_name(self.calibrator_class),
                "config": template,
            },
            "cv": self.cv,
            "member_configs": [_member_kwargs(m.get_config()) for m in self.members],
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        calibrator = config["calibrator"]
        calibrator_class = keras.saving.get_registered_object(calibrator["class_name"])
        template = dict(calibrator["config"])
        template["model"] = keras.saving.deserialize_keras_object(template["model"])
        config["calibrator"] = calibrator_class(**template)
        return cls(**config)
