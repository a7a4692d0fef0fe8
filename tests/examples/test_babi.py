"""End to end (slow): the bAbI example's QRN learns generated task 1."""

import pathlib
import sys

import numpy as np
import pytest

BABI = pathlib.Path(__file__).resolve().parents[2] / "examples" / "babi"


@pytest.fixture(scope="module")
def babi():
    sys.path.insert(0, str(BABI))
    try:
        import generate
        import train

        yield generate, train
    finally:
        sys.path.remove(str(BABI))


def replay(story, question):
    """The answer, recomputed by replaying the story's sentences."""
    place, holder, dropped_at = {}, {}, {}
    for who, verb, *_, last in story:
        if verb in ("went", "journeyed", "travelled", "moved"):
            place[who] = last
        elif verb in ("got", "grabbed", "picked", "took"):
            holder[last] = who
        else:
            dropped_at[last] = place[who]
            del holder[last]
    target = question[-1]
    if target in place:
        return place[target]
    return place[holder[target]] if target in holder else dropped_at[target]


def test_generator_is_seeded_and_consistent(babi):
    generate, _ = babi
    assert generate.generate(2, 20, seed=3) == generate.generate(2, 20, seed=3)
    assert generate.generate(2, 20, seed=3) != generate.generate(2, 20, seed=4)
    for task in (1, 2):
        for story, question, answer in generate.generate(task, 300, seed=1):
            assert answer in generate.PLACES
            assert replay(story, question) == answer
    (stories, questions), answers = generate.load(2, 50, 10)[0]
    assert stories.shape[0] == questions.shape[0] == answers.shape[0] == 50
    assert (stories[:, 0] > 0).any(axis=-1).all()  # every story has a first sentence


@pytest.mark.slow
def test_qrn_learns_task1(babi):
    _, train = babi
    accuracy, curve, _, _ = train.train("qrn", 1, epochs=16, n_test=500, seed=0)
    assert np.all(np.isfinite(curve))
    assert accuracy >= 0.95, f"test accuracy {accuracy:.3f} after {len(curve)} epochs: {curve}"


def test_model_uses_library_position_encoding_with_padded_length(babi):
    sys.path.insert(0, str(BABI))
    try:
        import model
    finally:
        sys.path.remove(str(BABI))
    from keras_normkit.layers import PositionEncoding

    encoder = model.build_qrn(3, 4, 10, dim=6).get_layer("position_encoding")
    assert isinstance(encoder, PositionEncoding)
    assert encoder.use_padded_length  # J = padded length, as before: bAbI numbers unchanged
