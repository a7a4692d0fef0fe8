"""Deep ensembles (Lakshminarayanan et al. 2017) as a Keras model: `DeepEnsemble`."""

import keras
from keras import ops

from keras_normkit._validation import check_string_choice
from keras_normkit.uncertainty import _models

__all__ = ["DeepEnsemble"]


@keras.saving.register_keras_serializable(package="keras_normkit")
class DeepEnsemble(keras.Model):
    """A deep ensemble: the mean of its members' probabilities, p = (1 / M) sum_m p_m.

    M networks trained independently from different random initializations (and data
    orders) make different mistakes, and disagree most away from the training data; the
    average of their softmax outputs is better calibrated and a better detector of unusual
    inputs than any one of them (Lakshminarayanan et al. 2017; Ovadia et al. 2019 find it
    the most robust under dataset shift). Each member runs in inference mode.

    Args:
        models: A list of M >= 1 trained `keras.Model` classifiers with the same inputs,
            each outputting logits or probabilities `(batch, k)` for the same k classes.
        model_output: `"auto"` (detected per member from its last layer's activation),
            `"logits"` or `"probabilities"` (for every member).
        **kwargs: Base `keras.Model` keyword arguments, such as `name`.

    Call arguments:
        inputs: Inputs of the members.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.uncertainty import DeepEnsemble
    >>> members = [keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    ...            for _ in range(3)]
    >>> x = np.ones((2, 4), "float32")
    >>> p = keras.ops.convert_to_numpy(DeepEnsemble(members)(x))
    >>> mean = np.mean([keras.ops.convert_to_numpy(keras.ops.softmax(m(x))) for m in members], 0)
    >>> bool(np.allclose(p, mean, atol=1e-6))
    True

    Reference: Lakshminarayanan, Pritzel, Blundell, "Simple and Scalable Predictive
    Uncertainty Estimation using Deep Ensembles", NeurIPS 2017, arXiv:1612.01474.
    """

    def __init__(self, models, model_output="auto", **kwargs):
        super().__init__(**kwargs)
        if isinstance(models, keras.Model) or not isinstance(models, (list, tuple)):
            raise TypeError(
                f"`models` must be a list of trained keras.Model classifiers. Received: "
                f"models={models!r}"
            )
        if len(models) == 0:
            raise ValueError("`models` must hold at least one model. Received: models=[]")
        check_string_choice("model_output", model_output, _models.MODEL_OUTPUTS)
        self.members = [_models.check_model(m, f"models[{i}]") for i, m in enumerate(models)]
        self.model_output = model_output
        self._member_outputs = [_models.resolve_model_output(m, model_output) for m in models]
        widths = {_models.static_num_classes(m) for m in models} - {None}
        if len(widths) > 1:
            raise ValueError(
                f"Every member must output the same number of classes. Received outputs of "
                f"widths {sorted(widths)}."
            )
        _models.build_on_symbolic_inputs(self, models[0])

    def call(self, inputs):
        total = None
        for member, output in zip(self.members, self._member_outputs, strict=True):
            logits = _models.logits_from_outputs(member(inputs, training=False), output)
            probabilities = ops.softmax(logits, axis=-1)
            total = probabilities if total is None else total + probabilities
        return total / len(self.members)

    def compute_output_shape(self, input_shape):
        shape = self.members[0].compute_output_shape(input_shape)
        return (*shape[:-1], max(2, shape[-1]))

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "models": [keras.saving.serialize_keras_object(m) for m in self.members],
            "model_output": self.model_output,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["models"] = [keras.saving.deserialize_keras_object(m) for m in config["models"]]
        return cls(**config)
