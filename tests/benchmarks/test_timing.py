"""benchmarks/_timing.py: call order, warm-up, shape and statistics, on a fake clock."""

import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "_timing.py"
_spec = importlib.util.spec_from_file_location("_timing", _PATH)
timing = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(timing)


class FakeClock:
    """A clock that only moves when a fake function runs; the functions log their calls."""

    def __init__(self):
        self.now = 0.0
        self.log = []

    def __call__(self):
        return self.now

    def function(self, name, durations):
        """A function that takes `durations[k]` seconds on its k-th call (warm-ups included)
        and returns `(name, k)`."""
        calls = iter(range(len(durations)))

        def fn():
            k = next(calls)
            self.log.append(name)
            self.now += durations[k]
            return name, k

        return fn


def test_fixed_order_warmup_shape_and_times():
    clock = FakeClock()
    functions = {
        "a": clock.function("a", [100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        "b": clock.function("b", [200.0, 200.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]),
    }
    times = timing.interleaved(functions, rounds=3, repeats=2, warmup=1, clock=clock)
    # Warm-up: one call of a, then one of b; then each round: a twice, b twice.
    assert clock.log == ["a", "b"] + ["a", "a", "b", "b"] * 3
    assert set(times) == {"a", "b"}
    assert times["a"].shape == times["b"].shape == (3, 2)
    np.testing.assert_array_equal(times["a"], [[1, 2], [3, 4], [5, 6]])  # warm-up not timed
    np.testing.assert_array_equal(times["b"], [[200, 10], [20, 30], [40, 50]])


@pytest.mark.parametrize("warmup", [0, 1, 3])
def test_warmup_calls_each_function_in_turn(warmup):
    clock = FakeClock()
    functions = {name: clock.function(name, [1.0] * 10) for name in "ab"}
    times = timing.interleaved(functions, rounds=1, warmup=warmup, clock=clock)
    assert clock.log == ["a"] * warmup + ["b"] * warmup + ["a", "b"]
    assert times["a"].shape == (1, 1)


def test_alternate_reverses_every_other_round():
    clock = FakeClock()
    functions = {name: clock.function(name, [1.0] * 10) for name in "ab"}
    timing.interleaved(functions, rounds=4, warmup=0, order="alternate", clock=clock)
    assert clock.log == ["a", "b", "b", "a", "a", "b", "b", "a"]


def test_alternate_pairs_keep_their_positions():
    """With `order="alternate"` row r of each array is still pair r, whichever ran first."""
    clock = FakeClock()
    functions = {
        "a": clock.function("a", [1.0, 2.0, 3.0]),
        "b": clock.function("b", [10.0, 20.0, 30.0]),
    }
    times = timing.interleaved(functions, rounds=3, warmup=0, order="alternate", clock=clock)
    np.testing.assert_array_equal(times["a"][:, 0], [1, 2, 3])
    np.testing.assert_array_equal(times["b"][:, 0], [10, 20, 30])


def test_rotate_starts_each_round_one_further():
    clock = FakeClock()
    functions = {name: clock.function(name, [1.0] * 10) for name in "abc"}
    timing.interleaved(functions, rounds=4, warmup=0, order="rotate", clock=clock)
    assert clock.log == list("abc" + "bca" + "cab" + "abc")


def test_unknown_order_is_refused():
    with pytest.raises(ValueError, match="order"):
        timing.interleaved({"a": lambda: None}, rounds=1, order="random")


def test_after_runs_inside_the_timed_region_on_timed_calls_only():
    clock = FakeClock()
    seen = []

    def after(result):
        seen.append(result)
        clock.now += 0.5

    functions = {"a": clock.function("a", [7.0, 1.0, 2.0])}
    times = timing.interleaved(functions, rounds=2, warmup=1, after=after, clock=clock)
    assert seen == [("a", 1), ("a", 2)]  # not the warm-up call's result
    np.testing.assert_array_equal(times["a"], [[1.5], [2.5]])


def test_results_are_the_timed_calls_return_values_in_order():
    clock = FakeClock()
    functions = {name: clock.function(name, [1.0] * 10) for name in "ab"}
    results = {"stale": [0]}
    timing.interleaved(
        functions, rounds=2, repeats=2, warmup=1, order="alternate", results=results, clock=clock
    )
    assert results["a"] == [("a", 1), ("a", 2), ("a", 3), ("a", 4)]
    assert results["b"] == [("b", 1), ("b", 2), ("b", 3), ("b", 4)]


def test_call_by_call_alternation_as_rounds_of_one_call():
    """The recipe of the module docstring: `rounds * repeats` rounds of single calls,
    reshaped, put `repeats` consecutive calls of each function in one row."""
    clock = FakeClock()
    functions = {
        "a": clock.function("a", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        "b": clock.function("b", [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]),
    }
    times = timing.interleaved(functions, rounds=2 * 3, warmup=0, clock=clock)
    assert clock.log == ["a", "b"] * 6
    np.testing.assert_array_equal(times["a"].reshape(2, 3), [[1, 2, 3], [4, 5, 6]])


def test_the_default_clock_is_perf_counter():
    assert timing.interleaved.__kwdefaults__["clock"] is time.perf_counter
    times = timing.interleaved({"a": lambda: None}, rounds=2, repeats=3)
    assert times["a"].shape == (2, 3)
    assert (times["a"] >= 0).all()


# Rounds of 3 calls; the statistics tell the definitions apart: min of the rounds' medians
# (4), min of all calls (1), median of all calls (4.5), median of the rounds' minima (2.5).
TIMES = np.array([[1.0, 5.0, 9.0], [4.0, 4.0, 100.0]])


def test_best_round_median():
    assert timing.best_round_median(TIMES) == 4.0
    assert isinstance(timing.best_round_median(TIMES), float)


def test_minimum():
    assert timing.minimum(TIMES) == 1.0
    assert isinstance(timing.minimum(TIMES), float)


def test_median_pools_every_round():
    assert timing.median(TIMES) == 4.5


def test_quartiles():
    # Sorted: 1, 4, 4, 5, 9, 100; linear interpolation at positions 1.25, 2.5, 3.75.
    assert timing.quartiles(TIMES) == (4.0, 4.5, 8.0)
    assert all(isinstance(q, float) for q in timing.quartiles(TIMES))


def test_paired_ratio_quartiles_pair_by_position():
    numerator = np.array([[2.0], [3.0], [8.0], [1.0]])
    denominator = np.array([[1.0], [3.0], [2.0], [4.0]])
    # Ratios 2, 1, 4, 0.25 (sorted 0.25, 1, 2, 4); the quartiles of the sorted sides'
    # ratios would be different (1, 1, 1, 2).
    assert timing.paired_ratio_quartiles(numerator, denominator) == (0.8125, 1.5, 2.5)
