"""The top-label view of a classifier that the binned, smooth, debiased and selective measures
take: the confidence c_i = max_k p_ik and whether the argmax is right."""

import numpy as np

from keras_normkit.calibration import _validation


def top_label(probabilities, labels):
    """Confidence max_k p_k and correctness (argmax == label, as 0./1.) of validated inputs."""
    confidence = probabilities.max(axis=1)
    correct = (probabilities.argmax(axis=1) == labels).astype(np.float64)
    return confidence, correct


def checked_top_label(probabilities, labels):
    """`top_label` of probabilities and labels checked by `check_probabilities_and_labels`."""
    probabilities, labels, _ = _validation.check_probabilities_and_labels(probabilities, labels)
    return top_label(probabilities, labels)
