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


def test_tied_layers_compute_the_untied_model_with_the_first_layers_weights(babi):
    """`tie_layers=True`: the last layer reads the first layer's update gate and candidate,
    so the tied model equals the untied one whose last layer holds copies of them."""
    sys.path.insert(0, str(BABI))
    try:
        import model
    finally:
        sys.path.remove(str(BABI))
    dim, sentences, words, vocab = 6, 5, 4, 12
    tied = model.build_qrn(sentences, words, vocab, dim=dim, tie_layers=True)
    untied = model.build_qrn(sentences, words, vocab, dim=dim)
    # Tied, the last layer adds no variable; untied, it has its own gate, kernel and biases.
    assert len(untied.trainable_weights) - len(tied.trainable_weights) == 4
    assert isinstance(tied.get_layer("qrn_2"), model.TiedLastQRN)
    first = tied.get_layer("qrn_1").cell
    for name in ("embedding", "qrn_1", "answer"):
        untied.get_layer(name).set_weights(tied.get_layer(name).get_weights())
    gate_kernel, gate_bias, kernel, bias = first.get_weights()
    untied.get_layer("qrn_2").set_weights([gate_kernel[:, :1], gate_bias[:1], kernel, bias])
    rng = np.random.default_rng(0)
    stories = rng.integers(1, vocab + 1, size=(3, sentences, words))
    stories[0, 3:] = 0  # padding sentences are masked
    stories[1, :, 2:] = 0  # and padding words
    questions = rng.integers(1, vocab + 1, size=(3, words))
    np.testing.assert_allclose(
        tied.predict([stories, questions], verbose=0),
        untied.predict([stories, questions], verbose=0),
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="last_bidirectional"):
        model.build_qrn(sentences, words, vocab, dim=dim, tie_layers=True, last_bidirectional=True)


def test_reset_gate_per_direction_and_the_papers_initialization(babi):
    """The bidirectional layer has `[z | r_fwd | r_bwd]` (the shared form `[z | r]`); the
    paper's init draws the embedding and answer weights N(0, 1/sqrt(d)), the reference's
    uniform in [-sqrt(3), sqrt(3)]."""
    sys.path.insert(0, str(BABI))
    try:
        import model
    finally:
        sys.path.remove(str(BABI))
    dim = 64
    own = model.build_qrn(3, 4, 200, dim=dim)
    shared = model.build_qrn(3, 4, 200, dim=dim, share_reset_gate=True)
    assert tuple(own.get_layer("qrn_1").cell.gate_kernel.shape) == (dim, 3)
    assert tuple(shared.get_layer("qrn_1").cell.gate_kernel.shape) == (dim, 2)
    for net in (own, shared):
        bias = net.get_layer("qrn_1").cell.gate_bias.numpy()
        assert bias[0] == -2.5 and np.all(bias[1:] == 0)  # only the update gate's
    paper = model.build_qrn(3, 4, 200, dim=dim, init="paper")
    for name in ("embedding", "answer"):
        weights = paper.get_layer(name).get_weights()[0]
        assert abs(weights.std() - dim**-0.5) < 0.01, name
        assert abs(own.get_layer("embedding").get_weights()[0].std() - 1.0) < 0.05
    gate = paper.get_layer("qrn_1").cell.gate_kernel.numpy()
    assert np.abs(gate).max() <= (6 / (dim + 3)) ** 0.5  # Glorot uniform, not +-sqrt(3)
    with pytest.raises(ValueError, match="init"):
        model.build_qrn(3, 4, 10, init="keras")


def test_rerun_command_trains_the_selected_run_alone(babi):
    _, train = babi
    argv = ["train.py", "--data", "d", "--task", "1", "2", "--seed", "3", "--json", "o.json"]
    argv += ["--protocol", "paper", "--restarts=4", "--tag", "_x", "--epochs", "9"]
    assert train.rerun_command(argv, 2, "qrn", 5) == (
        "python examples/babi/train.py --data d --protocol paper --epochs 9 "
        "--task 2 --model qrn --seed 5 --restarts 1"
    )


def test_selection_rules_of_the_two_protocols(babi):
    _, train = babi
    sure = {"val_accuracy": 0.9, "val_loss": 0.5}
    calibrated = {"val_accuracy": 0.8, "val_loss": 0.4}
    assert train.better(sure, calibrated, "head") and not train.better(calibrated, sure, "head")
    assert train.better(calibrated, sure, "paper") and not train.better(sure, calibrated, "paper")
    tie = {"val_accuracy": 0.9, "val_loss": 0.3}
    assert train.better(tie, sure, "head")


def test_saved_rows_keep_the_curves_of_the_selected_run_only(babi):
    _, train = babi
    result = {
        "selected_run": 1,
        "test_error": 0.1,
        "runs": [{"seed": s, "test_error": 0.1 * s, "curves": {"val": [s]}} for s in range(3)],
    }
    row = train.saved_row(result)
    assert row["runs"] == [
        {"seed": 0, "test_error": 0.0},
        {"seed": 1, "test_error": 0.1, "curves": {"val": [1]}},
        {"seed": 2, "test_error": 0.2},
    ]
    assert row["test_error"] == 0.1 and all("curves" in r for r in result["runs"])
