"""benchmarks/bench_recurrent_cases.py: the accepted bounds and the pass/fail verdict.

Nothing real is timed: the two "models" are fake functions on the fake clock of
`test_timing.py`, so the ratios they produce are known exactly.
"""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from tests.benchmarks.test_timing import FakeClock

_DIR = Path(__file__).resolve().parents[2] / "benchmarks"


def _load():
    sys.path.insert(0, str(_DIR))  # the script imports `_timing` from its own folder
    try:
        spec = importlib.util.spec_from_file_location(
            "bench_recurrent_cases", _DIR / "bench_recurrent_cases.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(_DIR))
    return module


cases = _load()

# Issue 39's accepted bounds, ratio to an LSTM: (layer, call, jit_compile) -> bound.
ISSUE_39 = {
    ("layer_norm_lstm", "train", False): 1.5,
    ("layer_norm_lstm", "train", True): 1.5,
    ("layer_norm_lstm", "predict", False): 1.6,
    ("layer_norm_lstm", "predict", True): 1.6,
    ("layer_norm_lstm", "first", False): 3.0,
    ("layer_norm_lstm", "first", True): 3.0,
    ("fast_weights", "train", False): 2.2,
    ("fast_weights", "train", True): 2.2,
    ("fast_weights", "predict", False): 2.8,
    ("fast_weights", "predict", True): 1.5,
    ("fast_weights", "first", False): 3.0,
    ("fast_weights", "first", True): 3.0,
}


@pytest.mark.parametrize("batch", [32, 64, 256])
def test_every_case_has_the_issues_bound(batch):
    for (layer, call, jit), bound in ISSUE_39.items():
        assert cases.target(layer, call, jit, batch) == bound, (layer, call, jit)


def test_no_bound_below_the_smallest_measured_batch():
    assert cases.MIN_BATCH == 32
    for layer, call, jit in ISSUE_39:
        assert cases.target(layer, call, jit, 31) is None
        assert cases.target(layer, call, jit, 8) is None


def test_unknown_layer_has_no_bound_and_unknown_call_is_refused():
    assert cases.target("layer_norm_gru", "train", False, 64) is None
    with pytest.raises(ValueError, match="call"):
        cases.target("fast_weights", "step", False, 64)


def test_verdict_at_and_around_the_bound():
    assert cases.verdict(2.2, 2.2) == "pass"  # "at most"
    assert cases.verdict(2.19, 2.2) == "pass"
    assert cases.verdict(2.21, 2.2) == "FAIL"
    assert cases.verdict(99.0, None) == "—"


def fake_models(ours, lstm):
    """A fake clock and two functions taking `ours[k]` / `lstm[k]` seconds on call k."""
    clock = FakeClock()
    return clock, {"ours": clock.function("ours", ours), "lstm": clock.function("lstm", lstm)}


# Two rounds of three calls. ours: medians 2.3, 2.1 -> 2.1, minimum 1.9; LSTM: medians 1.0,
# 1.0 -> 1.0, minimum 0.95. Ratios 2.1 (median) and 2.0 (min).
OURS = [2.3, 1.9, 2.4, 2.1, 2.0, 2.2]
LSTM = [1.0, 0.95, 1.1, 1.0, 1.0, 1.05]


def test_measure_reduces_interleaved_rounds_to_both_statistics():
    clock, fns = fake_models(OURS, LSTM)
    t = cases.measure(fns, "block", rounds=2, repeats=3, clock=clock)
    assert clock.log == ["ours"] * 3 + ["lstm"] * 3 + ["ours"] * 3 + ["lstm"] * 3
    assert t["ours"] == pytest.approx((2.1, 1.9))
    assert t["lstm"] == pytest.approx((1.0, 0.95))
    clock, fns = fake_models(OURS, LSTM)
    t = cases.measure(fns, "single", rounds=2, repeats=3, clock=clock)
    assert clock.log == ["ours", "lstm"] * 6  # alternating call by call, same rows
    assert t["ours"] == pytest.approx((2.1, 1.9))


def _cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


@pytest.mark.parametrize(
    "layer, jit, call, verdict",
    [
        ("fast_weights", False, "train", "pass"),  # 2.1 <= 2.2
        ("fast_weights", True, "train", "pass"),
        ("fast_weights", False, "predict", "pass"),  # 2.1 <= 2.8
        ("fast_weights", True, "predict", "FAIL"),  # 2.1 > 1.5
        ("layer_norm_lstm", False, "train", "FAIL"),  # 2.1 > 1.5
        ("layer_norm_lstm", True, "first", "pass"),  # 2.1 <= 3
    ],
)
def test_row_prints_the_ratios_the_bound_and_the_verdict(layer, jit, call, verdict):
    clock, fns = fake_models(OURS, LSTM)
    t = cases.measure(fns, "block", rounds=2, repeats=3, clock=clock)
    cells = _cells(cases.row(layer, 200, 64, 32, "layer", jit, call, t["ours"], t["lstm"]))
    assert cells[:7] == [layer, "200", "64", "32", "layer", str(int(jit)), call]
    assert cells[7:11] == ["2100.0", "1000.0", "2.10", "2.00"]
    assert cells[11] == f"≤ {ISSUE_39[layer, call, jit]}"
    assert cells[12] == verdict


def test_row_below_the_smallest_batch_has_no_verdict():
    cells = _cells(cases.row("fast_weights", 50, 128, 16, "model", True, "train", (9, 9), (1, 1)))
    assert cells[11:] == ["—", "—"]


def test_the_decision_states_the_same_bounds():
    """The table of accepted bounds in benchmarks/DECISIONS.md says what `TARGETS` says."""
    sys.path.insert(0, str(_DIR.parent / "examples"))
    from markdown_blocks import read_block

    section = read_block(_DIR / "DECISIONS.md", "bounds-table")
    names = {"`LayerNormLSTM`": "layer_norm_lstm", "`FastWeightsRNN`": "fast_weights"}
    calls = {"train step": "train", "`predict`": "predict", "first `fit` epoch": "first"}
    found = {}
    for line in section.splitlines():
        cells = _cells(line) if line.startswith("|") else []
        if len(cells) == 4 and cells[0] in names:
            for jit, cell in ((False, cells[2]), (True, cells[3])):
                found[names[cells[0]], calls[cells[1]], jit] = float(
                    re.fullmatch(r"≤ ([0-9.]+)×", cell).group(1)
                )
    assert found == ISSUE_39


def _first_epoch(once, step, batches):
    """`(first epoch s, second epoch s)` of `batches` batches: `once` + `batches * step`."""
    return once + batches * step, batches * step


@pytest.mark.parametrize(
    "ours, lstm, expected",
    [
        # once 20 s, 0.1 s a batch against 1 s, 0.05 s: (20 + 0.1 n) <= 3 (1 + 0.05 n)
        # from n = 17 / 0.05 = 340 batches on, not at 339.
        ((20.0, 0.1), (1.0, 0.05), 340),
        # Within the bound from the first batch: 2 + 0.1 n <= 3 (1 + 0.05 n).
        ((2.0, 0.1), (1.0, 0.05), 1),
        # The steady ratio 4 is above the bound: long epochs never meet it.
        ((0.5, 0.2), (1.0, 0.05), None),
        # The steady ratio equals the bound: met iff the one-time part is.
        ((3.0, 0.15), (1.0, 0.05), 1),
        ((3.5, 0.15), (1.0, 0.05), None),
    ],
)
def test_break_even_batches_is_where_the_first_epoch_ratio_enters_the_bound(ours, lstm, expected):
    batches = 4
    ours_t, lstm_t = _first_epoch(*ours, batches), _first_epoch(*lstm, batches)
    n = cases.break_even_batches(ours_t, lstm_t, batches, 3.0)
    assert n == expected
    if n is not None:  # the ratio of an epoch of n batches meets it, of n - 1 does not
        ratio = lambda k: (ours[0] + k * ours[1]) / (lstm[0] + k * lstm[1])  # noqa: E731
        assert ratio(n) <= 3.0 + 1e-12
        assert n == 1 or ratio(n - 1) > 3.0


def test_first_epoch_split_prints_the_parts_and_the_break_even():
    case = ("fast_weights", 50, 128, 32, "layer", False)
    first = {"ours": (20.4, 20.4), "lstm": (1.2, 1.2)}
    second = {"ours": 0.4, "lstm": 0.2}
    table = cases.first_epoch_split([(case, first, second)], batches=4)
    cells = _cells(table.splitlines()[-1])
    assert cells[:6] == ["fast_weights", "50", "128", "32", "layer", "0"]
    # one-time 20.0 / 1.0 s; 100 / 50 ms a batch; 20 + 0.1 n <= 3 (1 + 0.05 n) from 340.
    assert cells[6:] == ["20.0 / 1.0", "100.0 / 50.0", "≤ 3.0", "340 batches"]
