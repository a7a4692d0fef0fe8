"""DeepEnsemble: the mean of its members' softmax probabilities, in inference mode; saves
and reloads; refuses members that do not fit together."""

import keras
import numpy as np
import pytest

from keras_normkit.uncertainty import DeepEnsemble


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
