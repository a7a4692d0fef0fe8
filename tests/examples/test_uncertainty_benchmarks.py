"""The uncertainty benchmarks (`examples/uncertainty_benchmarks/`): Hendrycks & Gimpel's
encodings and splits (the notebook's label reading included), the scoring of one seed on a
tiny network, the conformal splits, the report's targets, and the guide's tables against
what uncertainty_report.py makes of the committed JSON."""

import json
import os
import pathlib
import sys

import numpy as np
import pytest

from keras_normkit import uncertainty

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "uncertainty_benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(EXAMPLE))
    try:
        import conformal_20news
        import hg_protocol
        import ood_text
        import uncertainty_report as report

        yield hg_protocol, ood_text, conformal_20news, report
    finally:
        sys.path.remove(str(EXAMPLE))


def test_encodings_follow_the_notebooks(bench):
    hg, *_ = bench
    ranked = ["a", "b", "c", "d"]
    ids = hg.encode_ids([["a", "x", "d", "b"], ["c"] * 5, []], ranked, vocab=3, length=3)
    # ranks 1..2 kept (vocab - 1 words), others -> 3; the last 3 ids, padded in front
    np.testing.assert_array_equal(ids, [[3, 3, 2], [3, 3, 3], [0, 0, 0]])
    bag = hg.encode_bag([["a", "c", "a"], ["zzz"]], ranked, vocab=3)
    np.testing.assert_array_equal(bag, [[1, 0, 1], [0, 0, 1]])
    assert "the" in hg.STOP_WORDS and "newsgroup" not in hg.STOP_WORDS


def test_notebook_text_is_the_files_no_short_letters_and_the_leaked_digit(bench):
    hg, *_ = bench
    posts = [
        ["re", "win3", "x11r5", "don't", "of", "graphics", "2nd"],
        ["re", "windows", "3", "1"],
        ["ok", "a"],
    ]
    text = hg.notebook_text(posts, [13, 2, 10])
    # Letters only, words of 3+ letters; newsgroups 10..19 keep their number's second digit
    # (what the notebook's `line[1:]` leaves of "13 ...") as the first word.
    assert text == [["3", "win", "don", "graphics"], ["windows"], ["0"]]
    assert hg.notebook_text(posts[:1], [1]) == [["win", "don", "graphics"]]
    assert hg.CONFIGS["20news-notebook-file"]["notebook_labels"]
    assert hg.CONFIGS["20news-notebook-file"]["published_split"]
    assert not hg.CONFIGS["20news-notebook"].get("published_split")
    with pytest.raises(ValueError):
        hg.notebook_text(posts, [1])


def _corpus(hg, dataset, labels_train, labels_test):
    corpus = hg.Corpus.__new__(hg.Corpus)
    corpus.dataset, corpus.config = dataset, dict(hg.CONFIGS[dataset], dev=10)
    corpus.train_labels, corpus.test_labels = np.asarray(labels_train), np.asarray(labels_test)
    corpus.classes = [str(c) for c in range(20)]
    corpus.train = np.arange(len(labels_train))[:, None]
    corpus.test = np.arange(len(labels_test))[:, None]
    return corpus


def test_class_and_dev_splits(bench):
    hg, *_ = bench
    rng = np.random.default_rng(0)
    corpus = _corpus(hg, "20news", rng.integers(0, 20, 400), rng.integers(0, 20, 300))
    split = corpus.split(3)
    inside = np.random.default_rng(3).permutation(20)[:15]
    assert split["in_classes"] == [str(c) for c in np.sort(inside)]
    x_train, y_train = split["train"]
    x_dev, _ = split["dev"]
    assert len(set(x_train[:, 0]) & set(x_dev[:, 0])) == 0
    assert len(x_dev) <= 10 and y_train.max() == 14 and split["num_outputs"] == 15
    assert np.isin(corpus.train_labels[x_train[:, 0]], inside).all()
    assert not np.isin(corpus.test_labels[split["test_out"][:, 0]], inside).any()
    # relabeled in the order of the original labels
    original = corpus.train_labels[x_train[:, 0]]
    np.testing.assert_array_equal(np.sort(inside)[y_train], original)


def test_notebook_labels_merge_the_two_digit_newsgroups(bench):
    hg, ood_text, *_ = bench
    first_digit = np.array([int(str(i)[0]) for i in range(20)])
    assert first_digit[10:].tolist() == [1] * 10 and first_digit[:10].tolist() == list(range(10))
    seeds = ood_text.published_like_seeds(5)
    assert seeds == [4, 5, 16, 20, 35]
    rng = np.random.default_rng(1)
    corpus = _corpus(
        hg,
        "20news-notebook",
        first_digit[rng.integers(0, 20, 400)],
        first_digit[rng.integers(0, 20, 300)],
    )
    for seed in seeds:
        split = corpus.split(seed)
        assert "1" in split["in_classes"] and len(split["out_classes"]) == 3
        assert split["num_outputs"] == 15 and split["train"][1].max() < len(split["in_classes"])


# 20 Newsgroups "bydate": test posts of each newsgroup, alphabetically (7,532 in all).
BYDATE_TEST_POSTS = [319, 389, 394, 392, 385, 395, 390, 396, 398, 397]
BYDATE_TEST_POSTS += [399, 396, 393, 396, 394, 398, 364, 376, 310, 251]


def test_the_published_split_holds_out_the_published_runs_posts(bench):
    _, ood_text, *_ = bench
    first_digit = [int(str(i)[0]) for i in range(20)]
    test_posts = np.bincount(first_digit, weights=BYDATE_TEST_POSTS, minlength=10)
    assert test_posts.sum() == 7532 and test_posts[1] == 4066
    seeds = ood_text.published_like_seeds(5, test_posts)
    assert seeds == [71, 81, 98, 135, 172]
    for seed in seeds:
        classes = np.random.default_rng(seed).permutation(20)
        outside = set(classes[15:]) & set(range(10))
        held_out = sum(test_posts[label] for label in outside)
        assert 1 in classes[:15] and len(outside) == 3 and 0 in outside
        assert 1101 <= held_out <= 1105


def test_the_published_reuters_split_holds_out_grain_and_money_fx(bench):
    _, ood_text, *_ = bench
    # R8's test posts, classes alphabetically: acq, crude, earn, grain, interest, money-fx,
    # ship, trade.
    test_posts = np.array([696, 121, 1083, 10, 81, 87, 36, 75])
    seeds = ood_text.published_reuters_seeds(5, test_posts)
    assert seeds == [17, 53, 57, 78, 79]
    for seed in seeds:
        assert set(np.random.default_rng(seed).permutation(8)[6:]) == {3, 5}


def test_score_rows_on_a_tiny_network(bench):
    hg, ood_text, *_ = bench
    rng = np.random.default_rng(0)
    centers = rng.random((4, 20)) < 0.3

    def docs(labels):
        return (centers[labels] ^ (rng.random((len(labels), 20)) < 0.1)).astype("float32")

    y_train, y_in = rng.integers(0, 3, 200), rng.integers(0, 3, 60)
    split = {
        "train": (docs(y_train), y_train),
        "dev": (docs(y_in[:10]), y_in[:10]),
        "test_in": (docs(y_in), y_in),
        "test_out": docs(np.full(30, 3)),
        "num_outputs": 3,
    }
    models = [hg.reuters_model(3, vocab=20, hidden=8) for _ in range(2)]
    rows = ood_text.score_rows("reuters", 0, split, models, "cmd", mc_samples=4)
    scores = {
        "msp",
        "max_logit",
        "energy",
        "mahalanobis",
        "relative_mahalanobis",
        "mc_dropout",
        "ensemble",
    }
    assert {(r["task"], r["score"]) for r in rows} == {
        (t, s) for t in ("misclassification", "ood") for s in scores
    }
    msp = next(r for r in rows if r["score"] == "msp" and r["task"] == "ood")
    logits = models[0].predict(split["test_in"][0], verbose=0)
    right = logits.argmax(1) == y_in
    expected = uncertainty.detection_measures(
        uncertainty.max_softmax_probability(logits)[right],
        uncertainty.max_softmax_probability(models[0].predict(split["test_out"], verbose=0)),
    )
    assert msp["auroc"] == pytest.approx(100 * expected.auroc, abs=0.01)
    assert msp["n_out"] == 30 and msp["command"] == "cmd" and msp["dataset"] == "Reuters 6"
    assert all(0 <= r[k] <= 100 for r in rows for k in ("auroc", "aupr_in", "aupr_out", "fpr95"))


def test_conformal_rows(bench):
    _, _, conformal, _ = bench
    rng = np.random.default_rng(0)
    z = 2 * rng.normal(size=(600, 5))
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) > rng.random((600, 1))).argmax(axis=1)
    rows = conformal.rows_for(3 * z, y, splits=3, command="cmd", record={})
    assert len(rows) == 2 * len(conformal.METHODS)
    for row in rows:
        assert row["coverage_range"] == [
            round(1 - row["alpha"], 4),
            round(1 - row["alpha"] + 1 / 301, 4),
        ]
        assert 0 <= row["coverage"] <= 1 and 0 <= row["average_set_size"] <= 5
    # the deterministic sets hold the randomized ones: larger on the median
    by = {(r["score"], r["randomized"], r["alpha"]): r for r in rows}
    assert by["aps", False, 0.1]["average_set_size"] >= by["aps", True, 0.1]["average_set_size"]


def test_report_targets(bench):
    *_, report = bench
    rows = [
        {
            "dataset": "Reuters 6",
            "task": "ood",
            "score": "msp",
            "seed": s,
            "auroc": a,
            "aupr_in": 99,
            "aupr_out": 50,
            "fpr95": 30,
            "error": 3,
        }
        for s, a in enumerate((90.0, 92.0))
    ]
    assert report.ood_targets(rows) == (
        "- met: Reuters 6, ood: MSP AUROC 91.0 ± 1.4 against the paper's 92 (-1.0 points; "
        "target: within 3, 2 seeds)"
    )
    rows[0]["auroc"] = 80.0
    assert report.ood_targets(rows).startswith("- **not met**")


def test_guide_tables_are_the_committed_json(bench):
    *_, report = bench
    from markdown_blocks import read_block

    for path in (report.OOD_JSON, report.CONFORMAL_JSON):
        assert path.exists(), f"{path} is not committed"
    generated = report.blocks(report.load(report.OOD_JSON), report.load(report.CONFORMAL_JSON))
    for marker, text in generated.items():
        assert read_block(report.GUIDE, marker) == text, (
            f"the guide's {marker} block is stale: run python "
            "examples/uncertainty_benchmarks/uncertainty_report.py --write-guide"
        )


@pytest.mark.slow
def test_one_reuters_seed_on_the_real_data(bench, tmp_path):
    hg, ood_text, *_ = bench
    data = os.environ.get("NORMKIT_REUTERS_R8_DATA")
    if not data:
        pytest.skip("NORMKIT_REUTERS_R8_DATA is not set")
    ood_text.main(
        [
            "--dataset",
            "reuters",
            "--data",
            data,
            "--seeds",
            "0",
            "--members",
            "1",
            "--cache",
            str(tmp_path),
            "--json",
            str(tmp_path / "rows.json"),
        ]
    )
    rows = json.loads((tmp_path / "rows.json").read_text())
    msp = {r["task"]: r for r in rows if r["score"] == "msp"}
    assert msp["ood"]["error"] < 6 and msp["ood"]["auroc"] > 85
    assert msp["misclassification"]["auroc"] > 80
