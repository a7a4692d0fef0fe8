"""`check_probabilities_and_labels` (`_validation.py`): the one check of every measure and of
every fit on probabilities."""

import numpy as np
import pytest

from keras_normkit.calibration._validation import check_probabilities_and_labels


def test_binary_and_multiclass_inputs_and_labels():
    p, labels, binary = check_probabilities_and_labels(np.array([0.2, 0.9]), [[0], [1]])
    assert binary and p.tolist() == [[0.8, 0.2], [pytest.approx(0.1), 0.9]]
    assert labels.tolist() == [0, 1] and labels.dtype == np.int64
    p, labels, binary = check_probabilities_and_labels(
        np.array([[0.2, 0.8], [0.6, 0.4]], np.float32), np.eye(2)[[1, 0]]
    )
    assert not binary and p.dtype == np.float64 and labels.tolist() == [1, 0]


@pytest.mark.parametrize(
    "probabilities, labels, match",
    [
        (np.array([[0.5, 0.6]]), [0], "sum to 1"),
        (np.array([[2.0, -1.0]]), [0], r"\[0, 1\]"),
        (np.array([[0.5, 0.5]]), [2], r"\[0, 1\]"),
        (np.array([0.3, 0.7]), [0, 1, 1], "one entry per example"),
        (np.array([[np.nan, 1.0]]), [0], "finite"),
    ],
)
def test_bad_input_names_the_argument(probabilities, labels, match):
    with pytest.raises(ValueError, match=match):
        check_probabilities_and_labels(probabilities, labels, name="y_pred")
    with pytest.raises(ValueError, match="y_pred|labels"):
        check_probabilities_and_labels(probabilities, labels, name="y_pred")
