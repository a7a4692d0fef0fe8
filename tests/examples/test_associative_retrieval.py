"""examples/associative_retrieval.py: the task generator, and a reduced task learnt end to end."""

import json
import pathlib
import sys

import numpy as np
import pytest

from keras_normkit.callbacks import ReduceLROnPlateau

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))

import associative_retrieval as ar  # noqa: E402
import fast_weights_table as table  # noqa: E402


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
        jit_compile="auto",  # XLA on JAX; TensorFlow on a CPU and torch: none
        verbose=False,
    )
    assert [p["updates"] for p in curve] == [30, 60, 70]
    assert int(model.optimizer.iterations.numpy()) == 70
    # The paper's ports clip the global norm, not each variable's.
    assert model.optimizer.global_clipnorm == 5.0 and model.optimizer.clipnorm is None


def test_train_ends_at_the_best_validation_point():
    sizes = {"pairs": 2, "num_keys": 8, "num_values": 4}
    train = ar.make_task(200, seed=0, **sizes)
    x_val, y_val = ar.make_task(100, seed=1, **sizes)
    model = ar.build_model("fw", 8, vocab=13, num_classes=4, embed=8, seed=0)
    curve = ar.train(
        model,
        (train, (x_val, y_val)),
        updates=60,
        batch_size=20,
        learning_rate=3e-2,  # large: the validation accuracy moves between evaluations
        eval_every=10,
        jit_compile="auto",  # XLA on JAX; TensorFlow on a CPU and torch: none
        verbose=False,
    )
    best = [p for p in curve if p["best"]]
    assert len(best) == 1
    (best,) = best
    key = lambda p: (p["val_accuracy"], -p["val_loss"])  # noqa: E731
    assert key(best) == max(key(p) for p in curve)
    val_loss, val_acc = model.evaluate(x_val, y_val, verbose=0)
    np.testing.assert_allclose(
        [val_loss, val_acc], [best["val_loss"], best["val_accuracy"]], rtol=1e-5
    )


def test_train_drives_a_plateau_callback_at_every_evaluation():
    """Each evaluation is an epoch end for the callbacks: the rate halves on the plateau rule."""
    sizes = {"pairs": 2, "num_keys": 8, "num_values": 4}
    train = ar.make_task(100, seed=0, **sizes)
    val = ar.make_task(50, seed=1, **sizes)
    model = ar.build_model("lstm", 4, vocab=13, num_classes=4, embed=4, seed=0)
    # min_delta 10: no evaluation after the first improves on it, so with patience 2 the
    # rate halves at evaluations 2 and 4 (counting from 0), and the updates after them run
    # at the halved rate.
    plateau = ReduceLROnPlateau("val_loss", factor=0.5, patience=2, min_delta=10.0)
    curve = ar.train(
        model,
        (train, val),
        updates=60,
        batch_size=10,
        learning_rate=1e-3,
        eval_every=10,
        jit_compile="auto",  # XLA on JAX; TensorFlow on a CPU and torch: none
        callbacks=[plateau],
        verbose=False,
    )
    rates = [p["learning_rate"] for p in curve]
    np.testing.assert_allclose(rates, [1e-3, 1e-3, 1e-3, 5e-4, 5e-4, 2.5e-4], rtol=1e-6)
    assert ar.rate_reductions(curve) == [30, 50]  # evaluations 2 and 4: 30 and 50 updates
    assert [epoch for epoch, _ in plateau.reductions] == [2, 4]
    assert float(model.optimizer.learning_rate.numpy()) == pytest.approx(2.5e-4, rel=1e-6)
    assert int(model.optimizer.iterations.numpy()) == 60
    # Without callbacks the rate is constant.
    model = ar.build_model("lstm", 4, vocab=13, num_classes=4, embed=4, seed=0)
    curve = ar.train(
        model,
        (train, val),
        updates=30,
        batch_size=10,
        eval_every=10,
        jit_compile="auto",
        verbose=False,
    )
    assert [p["learning_rate"] for p in curve] == pytest.approx([1e-3] * 3)
    assert ar.rate_reductions(curve) == []


def test_updates_to_reach():
    curve = [{"updates": 500 * (i + 1), "val_accuracy": a} for i, a in enumerate([0.4, 0.96, 0.9])]
    assert ar.updates_to_reach(curve, 0.95) == 1000
    assert ar.updates_to_reach(curve, 0.99) is None


def test_unit_scale_inputs():
    """The default embedding puts a symbol at norm ~1 (Keras's default: ~0.3)."""
    for initializer, low, high in [("glorot_uniform", 0.9, 1.3), ("uniform", 0.2, 0.4)]:
        model = ar.build_model("lstm", 4, embeddings_initializer=initializer, seed=0)
        norms = np.linalg.norm(model.layers[0].embeddings.numpy(), axis=1)
        assert low < np.median(norms) < high, (initializer, np.median(norms))


def _fake_run(error, val_accuracy, to_95, seconds=60.0):
    return {
        "test_error": error,
        "best_val_accuracy": val_accuracy,
        "updates_to_95": to_95,
        "seconds": seconds,
    }


def test_table_chooses_the_tuned_rate_on_validation_only():
    results = {
        # 3e-3 has the better test error but the worse validation accuracy: 1e-3 is chosen.
        table.key("tuned", "lstm", 20, 1e-3, 0): _fake_run(0.05, 0.96, 9000),
        table.key("tuned", "lstm", 20, 3e-3, 0): _fake_run(0.01, 0.95, 4000),
        table.key("tuned", "lstm", 20, 1e-3, 1): _fake_run(0.07, 0.93, None),
        table.key("tuned", "lstm", 20, 3e-3, 1): _fake_run(0.00, 1.0, 1000),
    }
    assert table.chosen_rate(results, "tuned", "lstm", 20) == 1e-3
    assert table.chosen_rate(results, "tuned", "fw", 20) is None  # no pilot yet
    assert table.chosen_rate({}, "paper", "fw", 20) == 1e-4
    # Ties on validation accuracy: fewer updates to 95 % wins.
    tie = {
        table.key("tuned", "fw", 50, 1e-3, 0): _fake_run(0.0, 1.0, 9000),
        table.key("tuned", "fw", 50, 3e-3, 0): _fake_run(0.0, 1.0, 4000),
    }
    assert table.chosen_rate(tie, "tuned", "fw", 50) == 3e-3
    lr, runs = table.table_runs(results, "tuned", "lstm", 20, [0, 1, 2])
    assert lr == 1e-3 and [r["test_error"] for r in runs] == [0.05, 0.07]
    text = table.report(results, ["tuned"], ["lstm"], [20], [0, 1, 2], [0])
    row = text.splitlines()[-1]
    # paper 60.81; ours mean 6.00 +- 1.41, median 6.00, worst 7.00; 1 of 2 reached 95 %.
    assert "| 60.81 | 6.00 ± 1.41 | 6.00 | 7.00 | 2/3 | 9.0k (1/2 reached) | 1.0 min |" in row


def test_decay_budget_halves_on_a_plateau_for_up_to_100k_updates(monkeypatch):
    """`tuned-decay`: the tuned rates, 100k updates, a patience of 10 evaluations; own keys."""
    assert table.BUDGETS["tuned-decay"] == table.BUDGETS["tuned"]
    assert table.UPDATES == {"paper": 50_000, "tuned": 50_000, "tuned-decay": 100_000}
    assert set(table.PLATEAU_PATIENCE) == {"tuned-decay"}
    calls = []

    def fake_run(kind, units, lr, updates, seed, **kwargs):
        calls.append((kind, units, lr, updates, seed, kwargs["plateau_patience"]))
        return {"test_error": 0.1, "updates_run": updates, "halvings": [], "seconds": 1.0}

    monkeypatch.setattr(table.ar, "run", fake_run)
    decay = table.run_one("tuned-decay", "lstm", 50, 3e-3, 1, data=None)
    constant = table.run_one("tuned", "lstm", 50, 3e-3, 1, data=None)
    smoke = table.run_one("tuned-decay", "lstm", 50, 3e-3, 1, data=None, updates=300)
    assert calls == [
        ("lstm", 50, 3e-3, 100_000, 1, 10),
        ("lstm", 50, 3e-3, 50_000, 1, None),
        ("lstm", 50, 3e-3, 300, 1, 10),
    ]
    assert decay["command"].endswith("--updates 100000 --seed 1 --plateau-patience 10")
    assert constant["command"].endswith("--updates 50000 --seed 1")
    assert smoke["budget"] == "tuned-decay"
    # The two budgets' runs have distinct keys, so one results file holds both.
    assert table.key("tuned-decay", "lstm", 50, 3e-3, 0) != table.key("tuned", "lstm", 50, 3e-3, 0)


def test_results_file_keeps_every_value_with_a_curve_point_per_line():
    results = {
        "tuned/fw-20/lr0.001/seed0": {
            "test_error": 0.1 + 0.2,
            "command": 'python "x"',
            "curve": [{"updates": 500, "val_accuracy": 1 / 3}, {"updates": 1000, "best": True}],
        },
        "tuned/lstm-20/lr0.001/seed0": {"test_error": 0.5},
    }
    text = table.dumps(results)
    assert json.loads(text) == results
    lines = text.splitlines()
    assert '   {"updates": 500, "val_accuracy": 0.3333333333333333},' in lines
    assert '   {"updates": 1000, "best": true}' in lines


def test_report_puts_the_budgets_side_by_side():
    def runs(budget, lr, errors, halvings=(0, 0, 0)):
        made = {}
        for seed, (error, count) in enumerate(zip(errors, halvings, strict=False)):
            run = _fake_run(error, 0.97 - seed / 100, 20_000)
            run["halvings"] = [5000 * (i + 1) for i in range(count)]
            made[table.key(budget, "lstm", 50, lr, seed)] = run
        return made

    results = {
        **runs("tuned", 3e-3, [0.025, 0.040, 0.0485]),
        **runs("tuned", 1e-3, [0.0415]),  # seed 0's pilot at the other rate: worse validation
        **runs("tuned-decay", 3e-3, [0.01, 0.02, 0.03], halvings=[2, 3, 5]),
        **runs("tuned-decay", 1e-3, [0.05]),
    }
    results[table.key("tuned", "lstm", 50, 1e-3, 0)]["best_val_accuracy"] = 0.95
    results[table.key("tuned-decay", "lstm", 50, 1e-3, 0)]["best_val_accuracy"] = 0.95
    text = table.side_by_side(results, ["tuned", "tuned-decay"], ["lstm"], [50], [0, 1, 2], [0])
    head, _, row = text.splitlines()
    assert head.startswith("| model | R | paper | tuned: Adam rate | tuned: mean ± sd |")
    assert head.endswith("| tuned-decay: rate halvings (median) |")
    # tuned: 2.50, 4.00, 4.85 -> mean 3.78, sd 1.19 (the guide's LSTM-50 row); decay: 1, 2, 3.
    assert row == (
        "| LSTM | 50 | 1.85 | 0.003 | 3.78 ± 1.19 | 4.00 | 3/3 "
        "| 0.003 | 2.00 ± 1.00 | 2.00 | 3/3 | 3 |"
    )
    # A model without runs under a budget: dashes, not an error.
    text = table.side_by_side(results, ["tuned", "tuned-decay"], ["fw"], [50], [0], [0, 1])
    assert (
        text.splitlines()[-1]
        == "| Fast weights | 50 | 0.00 | – | – | – | 0/2 | – | – | – | 0/2 | – |"
    )


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
        jit_compile=False,  # XLA compilation costs more than it saves here
        verbose=False,
    )
    _, test_acc = model.evaluate(x_test, y_test, batch_size=1000, verbose=0)
    assert test_acc >= 0.90, f"test accuracy {test_acc:.3f}; curve {curve}"


def test_the_guide_tables_are_the_json():
    """docs/guides/fast_weights.md's Table 1 blocks are generated from the committed JSON
    (`fast_weights_table.py --report ... --write-block / --write-side-by-side`)."""
    import json

    from markdown_blocks import read_block

    root = pathlib.Path(__file__).resolve().parents[2]
    results = json.loads((root / "notebooks" / "data" / "fast_weights_table.json").read_text())
    guide = root / "docs" / "guides" / "fast_weights.md"
    seeds, fw50 = [0, 1, 2], [0, 1, 2, 3, 4]
    expected = table.report(
        results, ["tuned", "paper"], ["fw", "lstm", "irnn"], [20, 50], seeds, fw50
    )
    assert read_block(guide, "FW_TABLE") == expected
    decay = table.side_by_side(
        results, ["tuned", "tuned-decay"], ["fw", "lstm", "irnn"], [20, 50], seeds, fw50
    )
    assert read_block(guide, "FW_TABLE_DECAY") == decay
