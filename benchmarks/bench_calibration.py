"""Calibration benchmark (one run; see benchmarks/README.md).

1. `fit_temperature` on 50,000 x 100 float32 logits vs scikit-learn's temperature scaling
   (`sklearn.calibration._TemperatureScaling`, what `CalibratedClassifierCV(method=
   "temperature")` fits) on the same logits: best-of-3 wall time and the two temperatures.
2. Peak memory of `TemperatureScaling.calibrate` on a `tf.data.Dataset` of N x 100 logits
   (N = 5 * 10^5 and 2 * 10^6) with `max_memory_bytes` = 64 MiB, each in a fresh process:
   the peak of NumPy/Python allocations (tracemalloc), the resident memory before, and the
   peak resident memory during `calibrate` (Linux VmHWM, reset just before the call).

    .venv/bin/python benchmarks/bench_calibration.py
"""

import os
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

BUDGET = 64 * 2**20


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def best_of(fn, repeats=3):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def bench_fit_temperature():
    from sklearn.calibration import _TemperatureScaling

    from keras_normkit.calibration import fit_temperature

    rng = np.random.default_rng(0)
    z = rng.normal(size=(50_000, 100)) * 2
    y = (softmax(z).cumsum(axis=1) > rng.random((len(z), 1))).argmax(axis=1)
    logits = (2.5 * z).astype(np.float32)
    ours_time, ours = best_of(lambda: fit_temperature(logits, y))
    theirs_time, fitted = best_of(lambda: _TemperatureScaling().fit(logits, y))
    theirs = 1.0 / float(fitted.beta_)
    # Reference T: scikit-learn in float64 (its float32 run is limited by float32 losses).
    reference = 1.0 / float(_TemperatureScaling().fit(logits.astype(np.float64), y).beta_)
    print("fit_temperature, 50,000 x 100 float32 logits (best of 3)")
    print(f"  keras_normkit.fit_temperature: {ours_time * 1e3:8.1f} ms   T = {ours:.7f}")
    print(f"  sklearn _TemperatureScaling:   {theirs_time * 1e3:8.1f} ms   T = {theirs:.7f}")
    print(f"  sklearn on float64 logits (reference, not timed):   T = {reference:.7f}")
    print(
        f"  ratio ours/theirs = {ours_time / theirs_time:.3f} "
        f"(speed-up {theirs_time / ours_time:.1f}x); |dT|/T vs sklearn float32 = "
        f"{abs(ours - theirs) / theirs:.1e}, vs float64 reference = "
        f"{abs(ours - reference) / reference:.1e}"
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
    start = time.perf_counter()
    wrapper.calibrate(dataset, verbose=0, max_memory_bytes=BUDGET)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    rss_after = _status_kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"{num_examples} {elapsed:.1f} {peak / 2**20:.1f} {rss_before / 2**10:.0f} "
        f"{rss_after / 2**10:.0f} {wrapper.temperature_:.4f}"
    )


def bench_memory():
    print(
        f"\nTemperatureScaling.calibrate on a tf.data.Dataset, max_memory_bytes = {BUDGET >> 20}"
        " MiB, batch 10,000 x 100 float32 (3.8 MiB)"
    )
    print(
        f"  {'N':>9} {'time s':>7} {'NumPy peak MiB':>15} {'RSS before MiB':>15} "
        f"{'peak RSS MiB':>13} {'logits MiB':>11} {'T':>7}"
    )
    for n in (500_000, 2_000_000):
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(n)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        n_, elapsed, peak, rss0, rss1, temperature = out[-6:]
        print(
            f"  {int(n_):>9} {elapsed:>7} {peak:>15} {rss0:>15} {rss1:>13} "
            f"{int(n_) * 400 / 2**20:>11.0f} {temperature:>7}"
        )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--memory-child":
        memory_child(int(sys.argv[2]))
    else:
        bench_fit_temperature()
        bench_memory()
