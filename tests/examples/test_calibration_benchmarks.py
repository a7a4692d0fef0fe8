"""The calibration benchmark (`examples/calibration_benchmarks/`): the whole pipeline (train,
cache, calibrate on validation only, JSON, table) on tiny synthetic text, the bootstrap
interval against a plain loop over the library's ECE, the method registry, and the guide's
tables against what report.py generates from the committed JSON."""

import collections
import json
import pathlib
import sys

import numpy as np
import pytest

from keras_normkit import calibration

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "calibration_benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(EXAMPLE))
    try:
        import report
        import run
        import text_data as data

        yield data, run, report
    finally:
        sys.path.remove(str(EXAMPLE))


#: A DAN small enough for the synthetic documents below (tests add `epochs`).
TINY_DAN = dict(model="dan", vocab=100, max_length=16, batch_size=32, learning_rate=3e-3)


def synthetic_splits(data, sizes=(300, 150, 200), classes=3, seed=0):
    """Documents of random words where one of three cue words gives the label 80 % of the
    time (so a network learns, but not perfectly)."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        labels = rng.integers(0, classes, n)
        docs = []
        for y in labels:
            cue = y if rng.random() < 0.8 else rng.integers(0, classes)
            words = [f"w{rng.integers(0, 40)}" for _ in range(rng.integers(3, 12))]
            words.insert(int(rng.integers(0, len(words))), f"cue{cue}")
            docs.append(words)
        out.append((docs, labels))
    return data.Splits(*out, [f"class{k}" for k in range(classes)])


def test_pipeline_trains_caches_calibrates_and_reports(bench, tmp_path, monkeypatch):
    data, run, report = bench
    # 50 bootstrap resamples, not the benchmark's 1000: the intervals' code path is the same,
    # and the smooth ECE's bandwidth search over 1000 resamples took 75 of the test's 90 s.
    monkeypatch.setattr(run, "BOOTSTRAP", 50)
    splits = synthetic_splits(data)
    config = dict(TINY_DAN, epochs=2)
    path = tmp_path / "table.json"
    notes = []
    rows = run.run(
        "reuters",
        None,
        [0, 1],
        path,
        cache=tmp_path / "cache",
        config=config,
        command="test",
        log=notes.append,
        splits=splits,
    )
    methods = set(run.available_methods(log=lambda _: None))
    assert {
        "uncalibrated",
        "histogram_binning",
        "isotonic",
        "temperature",
        "vector",
        "matrix",
    } <= methods
    assert len(rows) == 2 * len(methods)
    saved = json.loads(path.read_text())["rows"]
    assert [(r["method"], r["seed"]) for r in saved] == [(r["method"], r["seed"]) for r in rows]
    for row in saved:
        assert row["ece_low"] <= row["ece"] + 1e-6 or row["ece"] < 1
        assert 0 <= row["ece_low"] <= row["ece_high"] <= 100
        assert row["command"] == "test" and row["splits"] == [300, 150, 200]
    # the cache holds the uncalibrated logits; the rows recompute from it, fitted on the
    # validation split only (the test labels never reach a calibrator)
    arrays, record = run.cached_logits(tmp_path / "cache", "reuters", 0)
    assert arrays["val_logits"].shape == (150, 3) and arrays["test_logits"].shape == (200, 3)
    assert np.array_equal(arrays["test_labels"], splits.test[1])
    t = calibration.fit_temperature(arrays["val_logits"], splits.validation[1]).temperature
    expected = calibration.expected_calibration_error(
        run.softmax(arrays["test_logits"] / t), splits.test[1]
    )
    row = next(r for r in saved if r["method"] == "temperature" and r["seed"] == 0)
    assert row["ece"] == pytest.approx(100 * expected, abs=1e-4)
    assert record["best_epoch"] in (1, 2)
    # calibrating again from the cache (no training) replaces the rows, does not add any
    again = run.run(
        "reuters",
        None,
        [0],
        path,
        cache=tmp_path / "cache",
        calibrate_only=True,
        command="again",
        log=notes.append,
    )
    assert [r["ece"] for r in again] == [r["ece"] for r in rows if r["seed"] == 0]
    saved = json.loads(path.read_text())["rows"]
    assert len(saved) == len(rows)
    assert {r["command"] for r in saved} == {"again", "test"}
    # and the report's table has the data set's row beside the paper's
    text = report.table(saved)
    assert "Reuters R8 (DAN-3)**, ours (2 seeds)" in text and "| Reuters (DAN-3), paper |" in text


def test_bilstm_gives_logits(bench):
    _, run, _ = bench
    model = run.build(dict(model="bilstm", max_length=6), vocab_size=20, num_classes=5, seed=0)
    ids = np.array([[3, 4, 5, 0, 0, 0], [7, 0, 0, 0, 0, 0]], "int32")
    assert tuple(model.predict(ids, verbose=0).shape) == (2, 5)


def test_word_dropout_drops_about_the_rate_and_only_in_training(bench):
    import text_model

    layer = text_model.WordDropout(0.3, seed=1)
    ids = np.arange(1, 20001, dtype="int32").reshape(100, 200)
    dropped = np.asarray(layer(ids, training=True)) == 0
    assert abs(dropped.mean() - 0.3) < 0.02
    assert np.array_equal(np.asarray(layer(ids)), ids)


def test_bootstrap_interval_matches_a_loop_over_the_librarys_ece(bench):
    _, run, _ = bench
    rng = np.random.default_rng(3)
    probabilities = rng.dirichlet(np.ones(4) * 0.5, size=300)
    labels = rng.integers(0, 4, 300)
    low, high = run.bootstrap_ece(probabilities, labels, samples=200, seed=5)
    rows = np.random.default_rng(5).integers(0, 300, size=(200, 300))
    eces = [calibration.expected_calibration_error(probabilities[r], labels[r]) for r in rows]
    assert (low, high) == pytest.approx(tuple(np.percentile(eces, [2.5, 97.5])), abs=1e-12)
    point = calibration.expected_calibration_error(probabilities, labels)
    assert low < point < high


def test_brier_score_against_a_direct_sum(bench):
    _, run, _ = bench
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    assert run.brier_score(p, np.array([0, 1])) == pytest.approx(
        ((0.3**2 + 0.2**2 + 0.1**2) + (0.1**2 + 0.9**2 + 0.8**2)) / 2
    )


def test_method_registry_uses_new_library_methods_and_skips_missing_ones(bench, monkeypatch):
    _, run, _ = bench

    class Map:
        def predict(self, p):
            return np.full_like(p, 1 / p.shape[1])

    monkeypatch.setattr(calibration, "fit_bbq", lambda p, y: Map(), raising=False)
    notes = []
    methods = run.available_methods(
        {"bbq": (("fit_bbq",), "probabilities"), "nothing": (("fit_nothing",), "logits")},
        log=notes.append,
    )
    assert list(methods) == ["bbq"] and "skipping nothing" in notes[0]
    z = np.random.default_rng(0).normal(size=(10, 3))
    assert np.allclose(methods["bbq"](z, np.arange(10) % 3, z), 1 / 3)
    monkeypatch.setattr(
        calibration,
        "fit_bbq",
        lambda p, y: type("M", (), {"predict": lambda self, q: q[:, :2]})(),
        raising=False,
    )
    broken = run.available_methods({"bbq": (("fit_bbq",), "probabilities")})["bbq"]
    with pytest.raises(ValueError, match="did not return probabilities"):
        broken(z, np.arange(10) % 3, z)


def test_guide_tables_are_the_reports_of_the_committed_json(bench):
    _, _, report = bench
    rows = report.load(report.JSON)
    guide = report.GUIDE.read_text()
    assert report.guide_text(rows, guide) == guide, (
        "the guide's tables are stale: run python examples/calibration_benchmarks/report.py "
        "--write-guide"
    )
    assert {r["dataset"] for r in rows} <= set(report.DATASETS)


def test_targets_read_the_rows(bench):
    _, _, report = bench

    def row(dataset, method, seed, ece, low, high, error=20.0):
        return dict(
            dataset=dataset,
            method=method,
            seed=seed,
            ece=ece,
            ece_low=low,
            ece_high=high,
            test_error=error,
        )

    rows = [
        row("20news", "uncalibrated", 0, 8.0, 7.0, 9.0),
        row("20news", "temperature", 0, 3.9, 3.0, 7.5),  # halved, but the intervals overlap
        row("reuters", "uncalibrated", 0, 1.0, 0.5, 1.5, error=3.0),
        row("reuters", "matrix", 0, 2.5, 2.0, 3.0, error=3.0),
    ]
    held = dict(report.targets(rows))
    assert held["20news: uncalibrated ECE 8.00 % >= 4 %"]
    assert held["20news: temperature scaling halves the ECE in every seed"]
    assert not held["20news: its 95 % interval lies below the uncalibrated one's in every seed"]
    assert not held["reuters: every method <= 2 % (worst: matrix 2.50 %)"]
    assert held["20news: test error -0.06 points from the paper's (target: within 5)"]


def test_length_buckets_cover_every_sentence_once_cut_to_their_longest(bench):
    import text_model

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 30, 103)
    ids = np.zeros((103, 32), "int32")
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(2, 50, n)
    labels = np.arange(103)
    buckets = text_model.LengthBuckets(ids, labels, batch_size=10, seed=1)
    for _ in range(2):
        seen = []
        for index in range(len(buckets)):
            x, y = buckets[index]
            assert x.shape[1] % 8 == 0 and x.shape[1] >= lengths[y].max()
            assert x.shape[1] - lengths[y].max() < 8  # cut to the longest, rounded up
            assert np.array_equal(x, ids[y, : x.shape[1]])
            seen.extend(y.tolist())
        assert sorted(seen) == list(range(103)) and len(buckets) == 11
        buckets.on_epoch_end()


def test_optional_measures_join_the_rows_when_the_library_has_them(bench, monkeypatch):
    _, run, _ = bench
    p = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4]])
    y = np.array([0, 1, 1])
    monkeypatch.delattr(calibration, "calibration_report", raising=False)
    monkeypatch.setattr(calibration, "smooth_ece", lambda q, labels: 0.125, raising=False)
    monkeypatch.delattr(calibration, "smooth_calibration_error", raising=False)
    assert run.measures(p, y)["smooth_ece"] == 12.5


def test_calibration_report_gives_the_intervals_when_the_library_has_it(bench, monkeypatch):
    _, run, _ = bench
    estimate = collections.namedtuple("Estimate", "value low high")
    calls = []

    def report(probabilities, labels, bootstrap, seed, num_bins):
        calls.append((bootstrap, seed, num_bins))
        return {"ece": estimate(0.05, 0.04, 0.07), "smooth_ece": estimate(0.03, 0.02, 0.05)}

    monkeypatch.setattr(calibration, "calibration_report", report, raising=False)
    p = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4]])
    row = run.measures(p, np.array([0, 1, 1]))
    assert calls == [(run.BOOTSTRAP, 0, 15)]
    assert (row["ece"], row["ece_low"], row["ece_high"]) == pytest.approx((5.0, 4.0, 7.0))
    assert (row["smooth_ece"], row["smooth_ece_high"]) == pytest.approx((3.0, 5.0))
    assert "ece_equal_mass" not in row and row["test_error"] == pytest.approx(100 / 3)


def test_length_buckets_train_a_model_whatever_the_first_batches_width(bench):
    """Keras (TensorFlow) fixes the input signature from the first two batches: they must
    differ in width, else a batch of another width fails (it did, in one seed of 3)."""
    _, run, _ = bench
    import keras
    import text_model

    ids = np.zeros((64, 24), "int32")
    ids[:56, :5] = 7  # 7 batches of width 8 ...
    ids[56:, :20] = 9  # ... and one of width 24
    labels = (ids[:, 10] > 0).astype("int32")
    for seed in range(4):
        buckets = text_model.LengthBuckets(ids, labels, batch_size=8, seed=seed)
        assert buckets[0][0].shape[1] != buckets[1][0].shape[1]
    network = run.build(dict(model="bilstm", max_length=24), vocab_size=10, num_classes=2, seed=0)
    network.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    network.fit(buckets, epochs=1, verbose=0)


def test_swa_watches_the_table_training_without_changing_it(bench, tmp_path):
    """`swa.py` on tiny synthetic text: its last iterate is the network trained without any
    callback (and, on TensorFlow and JAX, the one `run.py` trains: same seed, same config);
    averaging only the last epoch with the last iterate's BN statistics gives the last
    iterate back exactly; rows merge by seed, start and variant."""
    import keras
    import swa

    data, run, _ = bench
    splits = synthetic_splits(data)
    config = dict(TINY_DAN, epochs=3, select="last")
    rows = swa.run_seed(splits, 0, [0, 2], config, log=lambda _: None)
    assert [(r["start_epoch"], r["variant"]) for r in rows] == [
        (start, variant) for start in (0, 2) for variant in swa.VARIANTS
    ]
    by = {(r["start_epoch"], r["variant"]): r for r in rows}
    assert by[0, "swa"]["averaged"] == 3 and by[2, "swa"]["averaged"] == 1

    # the same training with no callback at all
    keras.utils.set_random_seed(0)
    vocab = data.vocabulary(splits.train[0], config["vocab"])
    x = [
        data.encode(split[0], vocab, 16) for split in (splits.train, splits.validation, splits.test)
    ]
    network = run.build(config, len(vocab) + 2, 3, 0)
    network.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    network.fit(x[0], splits.train[1], batch_size=32, epochs=3, verbose=0)
    val_logits, test_logits = (network.predict(a, verbose=0).astype(np.float64) for a in x[1:])
    references = [(val_logits, test_logits)]
    if keras.backend.backend() != "torch":
        # run.py validates after every epoch; on PyTorch Keras's `predict` draws from torch's
        # global generator, which the next epoch's shuffling draws from too, so there its
        # networks differ from a training without that callback
        references.append(run.train(splits, config, 0)[:2])
    for val_logits, test_logits in references:
        expected = swa.measure(test_logits, splits.test[1], val_logits, splits.validation[1])
        for start in (0, 2):
            for name, value in expected.items():
                assert by[start, "last"][name] == pytest.approx(value, rel=1e-5, abs=1e-9), name
    for name in (*swa.MEASURES, "val_error", "val_nll"):
        assert by[2, "swa_stale"][name] == pytest.approx(by[2, "last"][name], abs=1e-6), name
    assert by[0, "swa"]["nll"] != pytest.approx(by[0, "last"]["nll"], abs=1e-6)
    path = tmp_path / "swa.json"
    swa.merge_rows(path, rows)
    swa.merge_rows(path, [dict(rows[0], error=-1.0)])
    saved = json.loads(path.read_text())
    assert len(saved) == len(rows) and saved[0]["error"] == -1.0


def test_swa_summary_chooses_the_start_on_validation_only(bench):
    import swa

    def row(seed, start, variant, val_nll, error):
        return {
            "seed": seed,
            "start_epoch": start,
            "epochs": 8,
            "variant": variant,
            "val_nll": val_nll,
            "val_error": 10.0,
            "error": error,
            "ece": error / 2,
            "nll": error / 10,
            "brier": 0.1,
            "ece_temperature": 1.0,
        }

    rows = []
    for seed in (0, 1):
        for start, val_nll, test_error in ((2, 0.9, 30.0), (5, 0.8, 35.0)):
            rows += [
                row(seed, start, "last", 1.0, 33.0),
                row(seed, start, "swa_stale", 0.95, 31.0),
                row(seed, start, "swa", val_nll, test_error),
            ]
    rows.append(row(2, 2, "swa", 0.1, 1.0))  # seed 2 lacks the other rows: left out
    assert swa.complete_seeds(rows) == [0, 1]
    # the lower validation NLL wins, though its test error is the higher one
    assert swa.chosen_start(rows) == 5
    text = swa.summary(rows)
    assert "| SWA, BN recomputed **(chosen)** | 6–8 |" in text
    assert "| SWA, BN recomputed | 3–8 |" in text
    assert "2 seeds (0, 1)" in text
    start_3 = next(line for line in text.splitlines() if "| 3–8 |" in line)
    assert start_3.endswith("| 2/2 / 2/2 / 2/2 |")  # 30 < 33 on both seeds
    chosen = next(line for line in text.splitlines() if "(chosen)" in line)
    assert chosen.endswith("| 0/2 / 0/2 / 0/2 |")


def test_training_guide_swa_table_is_the_summary_of_the_committed_json(bench):
    import swa
    from markdown_blocks import read_block

    rows = json.loads((ROOT / "notebooks" / "data" / "swa_20news.json").read_text())
    assert swa.complete_seeds(rows), "the committed SWA file has no complete seed"
    guide = ROOT / "docs" / "guides" / "training.md"
    assert read_block(guide, "SWA_20NEWS") == swa.summary(rows).rstrip("\n"), (
        "the guide's SWA table is stale: run python examples/calibration_benchmarks/swa.py "
        "--report --write-block docs/guides/training.md SWA_20NEWS"
    )


def test_the_config_names_the_optimizer(bench):
    import keras

    _, run, _ = bench
    adagrad = run.make_optimizer(run.CONFIGS["reuters"])
    assert isinstance(adagrad, keras.optimizers.Adagrad)
    assert float(adagrad.learning_rate) == pytest.approx(5e-3)
    assert isinstance(run.make_optimizer(run.CONFIGS["20news"]), keras.optimizers.Adam)
    with pytest.raises(ValueError, match="'sgd'"):
        run.make_optimizer({"optimizer": "sgd", "learning_rate": 0.1})
