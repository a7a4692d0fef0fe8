"""DeepEnsemble: the mean of its members' softmax probabilities, in inference mode; saves
and reloads; refuses members that do not fit together."""

import keras
import numpy as np
import pytest

from keras_normkit.uncertainty import DeepEnsemble
from tests.conftest import requires_tensorflow


def _member(seed, activation=None, width=3):
    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8),
            keras.layers.BatchNormalization(),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(width, activation=activation),
        ]
    )


def _x():
    return np.random.default_rng(0).normal(size=(6, 4)).astype("float32")


def _softmax(z):
    z = np.asarray(z, np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_mean_of_member_probabilities_logits_and_softmax_members():
    members = [_member(0), _member(1), _member(2, activation="softmax")]
    x = _x()
    expected = np.mean(
        [_softmax(m.predict(x, verbose=0)) for m in members[:2]]
        + [members[2].predict(x, verbose=0)],
        axis=0,
    )
    ensemble = DeepEnsemble(members)
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), expected, atol=1e-5)
    # inference mode: the same output twice (dropout off, BN moving statistics)
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), expected, atol=1e-5)


def test_save_and_load(tmp_path):
    members = [_member(0), _member(1)]
    ensemble = DeepEnsemble(members)
    expected = ensemble.predict(_x(), verbose=0)
    ensemble.save(tmp_path / "ensemble.keras")
    loaded = keras.saving.load_model(tmp_path / "ensemble.keras")
    assert isinstance(loaded, DeepEnsemble) and len(loaded.members) == 2
    np.testing.assert_allclose(loaded.predict(_x(), verbose=0), expected, atol=1e-6)


def test_errors():
    with pytest.raises(TypeError, match="list"):
        DeepEnsemble(_member(0))
    with pytest.raises(ValueError, match="at least one"):
        DeepEnsemble([])
    with pytest.raises(ValueError, match="same number of classes"):
        DeepEnsemble([_member(0), _member(1, width=4)])
    with pytest.raises(TypeError, match=r"models\[1\]"):
        DeepEnsemble([_member(0), "not a model"])


def test_feeds_the_calibration_and_conformal_tools():
    from keras_normkit.calibration import expected_calibration_error
    from keras_normkit.uncertainty import ConformalClassifier

    ensemble = DeepEnsemble([_member(0), _member(1)])
    x = np.random.default_rng(1).normal(size=(60, 4)).astype("float32")
    y = np.random.default_rng(2).integers(0, 3, 60)
    p = ensemble.predict(x, verbose=0)
    assert 0 <= expected_calibration_error(p, y) <= 1
    sets = ConformalClassifier(ensemble, "lac", alpha=0.2, model_output="probabilities")
    assert sets.calibrate(x, y, verbose=0).predict(x[:3], verbose=0).shape == (3, 3)


@requires_tensorflow
def test_export_and_serve(tmp_path):
    import tensorflow as tf

    ensemble = DeepEnsemble([_member(0), _member(1)])
    ensemble.export(str(tmp_path / "ensemble"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "ensemble"))
    np.testing.assert_allclose(
        served.serve(tf.constant(_x())).numpy(), ensemble.predict(_x(), verbose=0), atol=1e-6
    )
