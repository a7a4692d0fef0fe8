"""Calibration benchmark: ours against scikit-learn and NumPy (one run).

1. `fit_temperature` on 50,000 x 100 float32 logits vs scikit-learn's temperature scaling
   (`sklearn.calibration._TemperatureScaling`, what `CalibratedClassifierCV(method=
   "temperature")` fits) on the same logits: best-of-3 wall time and the two temperatures.
2. Peak memory of `TemperatureScaling.calibrate` on a `tf.data.Dataset` of N x 100 logits
   (N = 5 * 10^5 and 2 * 10^6) with `max_memory_bytes` = 64 MiB, each in a fresh process:
   the peak of NumPy/Python allocations (tracemalloc), the resident memory before, and the
   peak resident memory during `calibrate` (Linux VmHWM, reset just before the call).

3. `--section nonparametric`: on 10^6 binary scores, `fit_isotonic_calibration` vs
   scikit-learn's `IsotonicRegression(out_of_bounds="clip").fit`, and
   `fit_histogram_binning` (15 bins, uniform and quantile) vs a NumPy reference (a mask
   per bin) and scikit-learn's `calibration_curve` (the same bins): interleaved rounds
   (ours, then theirs, 5 times), median and best times, ratios, and the largest difference
   of the fitted maps.

    .venv/bin/python benchmarks/bench_calibration.py                # sections 1 and 2
    .venv/bin/python benchmarks/bench_calibration.py --section nonparametric [--json PATH]
    .venv/bin/python benchmarks/bench_calibration.py --report PATH [--write-block]  # tables

`--json` records the run, `--report` prints the tables of recorded runs
(`benchmarks/_results.py`).
"""

import argparse
import os
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
from _results import Recorder, add_arguments, reported
from _timing import interleaved, median, minimum

BUDGET = 64 * 2**20
SCRIPT = "benchmarks/bench_calibration.py"


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def best_of(fn, repeats=3):
    """`(fastest of `repeats` calls in a row, in seconds; the last call's result)`."""
    stats, results = median_and_best({"fn": fn}, repeats)
    return stats["fn"][1], results["fn"]


def bench_fit_temperature(recorder, n=50_000):
    from sklearn.calibration import _TemperatureScaling

    from keras_normkit.calibration import fit_temperature

    rng = np.random.default_rng(0)
    z = rng.normal(size=(n, 100)) * 2
    y = (softmax(z).cumsum(axis=1) > rng.random((len(z), 1))).argmax(axis=1)
    logits = (2.5 * z).astype(np.float32)
    ours_time, ours = best_of(lambda: fit_temperature(logits, y).temperature)
    theirs_time, fitted = best_of(lambda: _TemperatureScaling().fit(logits, y))
    theirs = 1.0 / float(fitted.beta_)
    # Reference T: scikit-learn in float64 (its float32 run is limited by float32 losses).
    reference = 1.0 / float(_TemperatureScaling().fit(logits.astype(np.float64), y).beta_)
    recorder.table(
        "temperature",
        f"fit_temperature, {n:,} x 100 float32 logits (best of 3)",
        [
            ("implementation", ""),
            ("time (ms)", ".1f"),
            ("ratio ours / theirs", ".3f"),
            ("T", ".7f"),
            ("|ΔT| / T vs float64 reference", ".1e"),
        ],
    )
    gap = abs(ours - reference) / reference
    ratio = ours_time / theirs_time
    recorder.row("temperature", "keras_normkit fit_temperature", 1e3 * ours_time, ratio, ours, gap)
    gap = abs(theirs - reference) / reference
    recorder.row("temperature", "sklearn _TemperatureScaling", 1e3 * theirs_time, 1.0, theirs, gap)
    recorder.row(
        "temperature",
        "sklearn on float64 logits (reference, not timed)",
        None,
        None,
        reference,
        0.0,
    )


def _status_kib(field):
    """A memory field of /proc/self/status in KiB (None where unavailable)."""
    try:
        with open("/proc/self/status") as f:
            return int(next(line for line in f if line.startswith(field)).split()[1])
    except (OSError, StopIteration):
        return None


def memory_child(num_examples):
    """Run in a fresh process: calibrate on a dataset and print the peaks."""
    import resource
    import tracemalloc

    import keras
    import tensorflow as tf

    from keras_normkit.calibration import TemperatureScaling

    batch, classes = 10_000, 100

    def make(i):
        z = tf.random.stateless_normal((batch, classes), seed=tf.stack([i, 0])) * 2.0
        return z, tf.random.stateless_categorical(z, 1, seed=tf.stack([i, 1]))[:, 0]

    dataset = tf.data.Dataset.range(num_examples // batch).map(make).prefetch(2)
    model = keras.Sequential([keras.Input((classes,)), keras.layers.Rescaling(2.5)])
    wrapper = TemperatureScaling(model)
    wrapper.build((None, classes))  # build before measuring (calling it needs calibrate)
    rss_before = _status_kib("VmRSS") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:  # reset the peak-RSS counter (VmHWM) so that the peak is that of calibrate()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    tracemalloc.start()
    calibrate = {
        "calibrate": lambda: wrapper.calibrate(dataset, verbose=0, max_memory_bytes=BUDGET)
    }
    elapsed = minimum(interleaved(calibrate, 1, warmup=0)["calibrate"])  # the one call
    _, peak = tracemalloc.get_traced_memory()
    rss_after = _status_kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"{num_examples} {elapsed:.1f} {peak / 2**20:.1f} {rss_before / 2**10:.0f} "
        f"{rss_after / 2**10:.0f} {wrapper.temperature_:.4f}"
    )


def bench_memory(recorder):
    recorder.table(
        "memory",
        f"TemperatureScaling.calibrate on a tf.data.Dataset, max_memory_bytes = {BUDGET >> 20} "
        "MiB, batches of 10,000 x 100 float32 (3.8 MiB), a fresh process each",
        [
            ("N", ""),
            ("logits (MiB)", ".0f"),
            ("time (s)", ".1f"),
            ("NumPy peak (MiB)", ".1f"),
            ("RSS before (MiB)", ".0f"),
            ("peak RSS (MiB)", ".0f"),
            ("T", ".4f"),
        ],
    )
    for n in (500_000, 2_000_000):
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(n)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        n_, elapsed, peak, rss0, rss1, temperature = out[-6:]
        row = [float(v) for v in (elapsed, peak, rss0, rss1, temperature)]
        recorder.row("memory", int(n_), int(n_) * 400 / 2**20, *row)


def median_and_best(functions, rounds=5):
    """Run each function once per round, in turn; per function (median, best) seconds, and
    per function the last call's result."""
    results = {}
    times = interleaved(functions, rounds, warmup=0, results=results)
    stats = {name: (median(t), minimum(t)) for name, t in times.items()}
    return stats, {name: values[-1] for name, values in results.items()}


def binning_reference(p, y, num_bins, strategy):
    """Histogram binning in plain NumPy: one boolean mask per bin (edges as calibration_curve)."""
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, num_bins + 1)
    else:
        edges = np.percentile(p, np.linspace(0, 1, num_bins + 1) * 100)
    values, lower = [], -np.inf
    for m in range(1, num_bins + 1):
        upper = edges[m] if m < num_bins else np.inf
        in_bin = (p > lower) & (p <= upper)
        if in_bin.any():
            values.append(y[in_bin].mean())
            lower = upper
    return np.array(values)


def bench_nonparametric(recorder, n=1_000_000):
    from sklearn.calibration import calibration_curve
    from sklearn.isotonic import IsotonicRegression

    from keras_normkit.calibration import fit_histogram_binning, fit_isotonic_calibration

    rng = np.random.default_rng(0)
    p = rng.random(n)
    y = (rng.random(n) < p**2).astype(np.int64)  # over-confident scores: P(y=1) = p^2
    grid = np.linspace(0, 1, 100_001)

    recorder.table(
        "nonparametric",
        f"Fits on {n:,} binary scores (5 interleaved rounds)",
        [
            ("fit", ""),
            ("ours median (ms)", ".1f"),
            ("ours best (ms)", ".1f"),
            ("reference", ""),
            ("reference median (ms)", ".1f"),
            ("reference best (ms)", ".1f"),
            ("ratio (medians)", ".2f"),
            ("largest difference", ".1e"),
        ],
    )
    stats, fitted = median_and_best(
        {
            "ours": lambda: fit_isotonic_calibration(p, y),
            "sklearn": lambda: IsotonicRegression(out_of_bounds="clip").fit(p, y),
        }
    )
    gap = np.abs(fitted["ours"].predict(grid) - fitted["sklearn"].predict(grid)).max()
    ours, theirs = stats["ours"], stats["sklearn"]
    recorder.row(
        "nonparametric",
        f"fit_isotonic_calibration ({len(fitted['ours'].x_thresholds[0])} thresholds)",
        1e3 * ours[0],
        1e3 * ours[1],
        f"IsotonicRegression.fit ({len(fitted['sklearn'].X_thresholds_)} thresholds)",
        1e3 * theirs[0],
        1e3 * theirs[1],
        ours[0] / theirs[0],
        float(gap),
    )

    for strategy in ("uniform", "quantile"):
        stats, fitted = median_and_best(
            {
                "ours": lambda s=strategy: fit_histogram_binning(p, y, 15, s),
                "numpy": lambda s=strategy: binning_reference(p, y, 15, s),
                "curve": lambda s=strategy: calibration_curve(y, p, n_bins=15, strategy=s),
            }
        )
        ours = stats["ours"]
        for name, label, values in (
            ("numpy", "NumPy (a mask per bin)", fitted["numpy"]),
            ("curve", "sklearn calibration_curve", fitted["curve"][0]),
        ):
            gap = np.abs(fitted["ours"].values[0] - values).max()
            recorder.row(
                "nonparametric",
                f"fit_histogram_binning, 15 {strategy} bins",
                1e3 * ours[0],
                1e3 * ours[1],
                label,
                1e3 * stats[name][0],
                1e3 * stats[name][1],
                ours[0] / stats[name][0],
                float(gap),
            )


SECTIONS = {
    "temperature": bench_fit_temperature,
    "memory": bench_memory,
    "nonparametric": bench_nonparametric,
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--section", choices=list(SECTIONS), default=None, help="one section (default: 1 and 2)"
    )
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.memory_child is not None:
        memory_child(args.memory_child)
        return
    if reported(args, SCRIPT):
        return
    recorder = Recorder(SCRIPT, sys.argv[1:] if argv is None else argv, args.json)
    for section in [args.section] if args.section else ["temperature", "memory"]:
        SECTIONS[section](recorder)


if __name__ == "__main__":
    main()
