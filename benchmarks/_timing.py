"""The benchmarks' one timing loop: functions timed in interleaved rounds, and its statistics.

On a shared machine, load from other processes comes in bursts of seconds. Timing one
function for a while and then the other would let a burst fall on one side only and bias
their ratio. `interleaved` instead calls every function in turn within each round, so that
a burst hits all of them alike; a statistic (say, the best round's median) is then taken
per function over the rounds.

    times = interleaved({"ours": ours, "theirs": theirs}, rounds=5, repeats=10, warmup=1)
    ratio = best_round_median(times["ours"]) / best_round_median(times["theirs"])

Method. First `warmup` untimed calls of each function (all of the first function's, then
the next function's, ...: tracing, compiling, filling caches). Then `rounds` rounds; in
each, every function in turn is called `repeats` times in a row, each call timed on its
own with `time.perf_counter`. `order` is the order of the functions within a round:

* `"fixed"`: the order of the dictionary, every round;
* `"alternate"`: that order in even rounds, reversed in odd ones (with `repeats=1` and two
  functions, alternating pairs of single calls: the second call of a pair no longer always
  belongs to the same side);
* `"rotate"`: round `r` starts with function `r % len(functions)` and wraps around.

The result is, per function, an array of shape `(rounds, repeats)` of seconds: row `r`
holds round `r`'s calls in the order they ran. The statistics below reduce such an array.

Two protocols are other shapes of the same call:

* functions alternating call by call within a round (rather than each called `repeats`
  times in a row): `interleaved(functions, rounds * repeats)` and reshape each array to
  `(rounds, repeats)`;
* an untimed warm-up call at the start of every round's block: time `repeats + 1` calls
  with `warmup=0` and drop the first column (`times[:, 1:]`).
"""

import time

import numpy as np

ORDERS = ("fixed", "alternate", "rotate")


def interleaved(
    functions,
    rounds,
    repeats=1,
    *,
    warmup=1,
    order="fixed",
    after=None,
    results=None,
    clock=time.perf_counter,
):
    """Time each function in interleaved rounds (see the module docstring for the method).

    Args:
        functions: `{name: callable}` of functions of no argument, timed in this order.
        rounds: rounds; every function runs in each.
        repeats: timed calls in a row of each function per round.
        warmup: untimed calls of each function before the first round.
        order: `"fixed"`, `"alternate"` or `"rotate"`: the functions' order per round.
        after: optional `callable(result)` applied to each timed call's result inside the
            timed region (e.g. to materialize outputs: `np.asarray`); not applied to the
            warm-up calls.
        results: optional dict; if given, `results[name]` is set to the list of the timed
            calls' return values (before `after`), in the order they ran.
        clock: the clock, in seconds (tests pass a fake one).

    Returns:
        `{name: numpy array of shape (rounds, repeats)}` of seconds per call.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}; got {order!r}")
    names = list(functions)
    times = {name: np.zeros((rounds, repeats)) for name in names}
    if results is not None:
        results.update({name: [] for name in names})
    for name in names:
        for _ in range(warmup):
            functions[name]()
    for round_ in range(rounds):
        if order == "alternate" and round_ % 2:
            sequence = names[::-1]
        elif order == "rotate":
            shift = round_ % len(names)
            sequence = names[shift:] + names[:shift]
        else:
            sequence = names
        for name in sequence:
            fn = functions[name]
            for repeat in range(repeats):
                start = clock()
                result = fn()
                if after is not None:
                    after(result)
                times[name][round_, repeat] = clock() - start
                if results is not None:
                    results[name].append(result)
    return times


def best_round_median(times):
    """The smallest over rounds of the median of a round's calls (seconds)."""
    return float(np.min(np.median(times, axis=1)))


def minimum(times):
    """The fastest single call (seconds)."""
    return float(np.min(times))


def median(times):
    """The median of all calls, every round pooled (seconds)."""
    return float(np.median(times))


def quartiles(values):
    """`(25th percentile, median, 75th percentile)` of all values, pooled."""
    q25, q50, q75 = np.percentile(values, [25, 50, 75])
    return float(q25), float(q50), float(q75)


def paired_ratio_quartiles(numerator, denominator):
    """`quartiles` of the ratios of the calls made at the same (round, repeat) position.

    With `repeats=1` and `order="alternate"`, the ratios within each alternating pair.
    """
    return quartiles(np.asarray(numerator) / np.asarray(denominator))
