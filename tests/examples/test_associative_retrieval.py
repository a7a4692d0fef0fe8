"""examples/associative_retrieval.py: the task generator, and a reduced task learnt end to end."""

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))

import associative_retrieval as ar  # noqa: E402


def test_task_generator_follows_the_definition():
    tokens, labels = ar.make_task(500, pairs=4, seed=3)
    assert tokens.shape == (500, 11) and labels.shape == (500,)
    assert tokens.max() < 37 and tokens.min() >= 0
    for seq, label in zip(tokens, labels, strict=True):
        text = ar.decode(seq)
        assert text[8:10] == "??"
        keys, values = text[0:8:2], text[1:8:2]
        assert len(set(keys)) == 4 and all(k.isalpha() for k in keys)
        assert all(v.isdigit() for v in values)
        assert int(values[keys.index(text[10])]) == label
    again, _ = ar.make_task(500, pairs=4, seed=3)
    np.testing.assert_array_equal(tokens, again)  # seeded
    assert not np.array_equal(tokens, ar.make_task(500, pairs=4, seed=4)[0])


def test_train_runs_exactly_the_requested_updates():
    """More updates per evaluation than one pass over the training set holds."""
    sizes = {"pairs": 2, "num_keys": 8, "num_values": 4}
    train = ar.make_task(100, seed=0, **sizes)
    val = ar.make_task(50, seed=1, **sizes)
    model = ar.build_model("lstm", 4, vocab=13, num_classes=4, embed=4, seed=0)
    curve = ar.train(
        model,
        (train, val),
        updates=70,
        batch_size=10,
        eval_every=30,
        jit_compile=False,
        verbose=False,
    )
    assert [p["updates"] for p in curve] == [30, 60, 70]
    assert int(model.optimizer.iterations.numpy()) == 70


@pytest.mark.slow
def test_fast_weights_learns_reduced_task():
    """K = 2 pairs of 8 keys and 4 values (length 7): FastWeightsRNN reaches >= 90 %."""
    sizes = {"pairs": 2, "num_keys": 8, "num_values": 4}
    train = ar.make_task(20_000, seed=0, **sizes)
    val = ar.make_task(2_000, seed=1, **sizes)
    x_test, y_test = ar.make_task(4_000, seed=2, **sizes)
    model = ar.build_model("fw", 32, vocab=13, num_classes=4, embed=32, seed=0)
    curve = ar.train(
        model,
        (train, val),
        updates=6000,
        batch_size=64,
        learning_rate=3e-3,
        eval_every=500,
        target_accuracy=0.97,
        max_seconds=150,
        jit_compile=False,  # XLA compilation costs more than it saves here
        verbose=False,
    )
    _, test_acc = model.evaluate(x_test, y_test, batch_size=1000, verbose=0)
    assert test_acc >= 0.90, f"test accuracy {test_acc:.3f}; curve {curve}"
