"""Calibrating on 2 * 10^6 examples x 100 classes from a tf.data.Dataset spills to disk (slow)."""

import os
import tempfile
import time

import keras
import pytest

from keras_normkit.calibration import TemperatureScaling, collect
from tests.conftest import requires_tensorflow

NUM_BATCHES, BATCH, CLASSES = 200, 10_000, 100


@pytest.mark.slow
@requires_tensorflow
def test_two_million_examples_spill_to_disk(tmp_path, monkeypatch):
    import tensorflow as tf

    def batch(i):
        # Calibrated logits z (labels drawn from softmax(z)); the model outputs 2.5 z.
        z = tf.random.stateless_normal((BATCH, CLASSES), seed=tf.stack([i, 0])) * 2.0
        y = tf.random.stateless_categorical(z, 1, seed=tf.stack([i, 1]))[:, 0]
        return z, y

    dataset = tf.data.Dataset.range(NUM_BATCHES).map(batch).prefetch(2)
    model = keras.Sequential([keras.Input((CLASSES,)), keras.layers.Rescaling(2.5)])

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = []
    finish = collect._Store.finish

    def recording_finish(store):
        result = finish(store)
        seen.append((result.spilled, result.logits.shape, sorted(os.listdir(tmp_path))))
        return result

    monkeypatch.setattr(collect._Store, "finish", recording_finish)
    start = time.perf_counter()
    wrapper = TemperatureScaling(model).calibrate(dataset, verbose=0, max_memory_bytes=64 * 2**20)
    elapsed = time.perf_counter() - start
    spilled, shape, files = seen[0]
    assert spilled and shape == (NUM_BATCHES * BATCH, CLASSES)
    assert len(files) == 2  # the logits (800 MB) and labels spill files existed
    assert os.listdir(tmp_path) == []  # and are gone
    assert wrapper.temperature_ == pytest.approx(2.5, rel=0.02)
    print(f"2e6 x 100 calibrated in {elapsed:.0f} s, T = {wrapper.temperature_:.4f}")
