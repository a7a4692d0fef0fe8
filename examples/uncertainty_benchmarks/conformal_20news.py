"""Conformal prediction sets on 20 Newsgroups (all 20 classes): Angelopoulos et al.'s
Table 1 effect on a text classifier.

Two networks, each trained once on all 20 newsgroups and its 7,532 test logits cached:
`--model embedding`, the network of `hg_protocol.py` (mean of 30-d embeddings, linear
softmax; Hendrycks & Gimpel's training, the best of 20 epochs on 1,500 held-out training
posts), and `--model dan`, Guo et al.'s DAN-3 of `examples/calibration_benchmarks/` (its
20 News configuration and split; over-confident, the calibration guide's network). Then,
for each of
`--splits` random halvings of the test set into calibration and evaluation posts, as the
paper's code does on ImageNet's validation set:

1. temperature scaling is fitted on the calibration half (`fit_temperature`, as their
   `ConformalModelLogits` does before anything else);
2. on softmax(z / T): the naive sets (the top labels until their mass reaches 1 - alpha,
   randomized as theirs; also on the network's own softmax(z), without temperature
   scaling), and LAC, APS, RAPS (randomized; RAPS's k_reg and lam chosen on
   30 % of the calibration half) calibrated with `fit_prediction_sets`, plus APS and RAPS
   not randomized;
3. coverage and mean set size on the evaluation half.

The JSON row of each method and alpha holds the medians over the splits (coverage,
set size, and the fraction of splits whose coverage is below 1 - alpha), the range the
theory gives, [1 - alpha, 1 - alpha + 1 / (n + 1)] for n calibration posts, and the command.

    OMP_NUM_THREADS=1 TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 \\
        python examples/uncertainty_benchmarks/conformal_20news.py --data DIR
"""

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from keras_normkit import calibration, uncertainty  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import hg_protocol  # noqa: E402
import ood_text  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_JSON = ROOT / "notebooks" / "data" / "conformal_20news.json"
MODELS = {
    "embedding": "mean of embeddings (Hendrycks & Gimpel)",
    "dan": "DAN-3 (Guo et al.)",
}
ALPHAS = (0.1, 0.05)
#: (row name, score, randomized); the naive sets are not calibrated ("naive": on the
#: temperature-scaled softmax, as the paper's; "naive_uncalibrated": on the network's own).
METHODS = (
    ("naive_uncalibrated", None, True),
    ("naive", None, True),
    ("lac", "lac", False),
    ("aps", "aps", True),
    ("raps", "raps", True),
    ("aps", "aps", False),
    ("raps", "raps", False),
)


def test_logits(data, cache, seed=0, model="embedding"):
    """`(logits, labels, record)` of the 20-class network's test posts (cached)."""
    folder = "20news-all" if model == "embedding" else "20news-dan"
    path = pathlib.Path(cache) / folder / f"seed{seed}.npz"
    if path.exists():
        with np.load(path) as arrays:
            return arrays["logits"], arrays["labels"], json.loads(str(arrays["record"]))
    if model == "dan":
        sys.path.insert(0, str(ROOT / "examples" / "calibration_benchmarks"))
        import run as calibration_run

        splits = hg_protocol.text_data.load("20news", data)
        _, logits, record = calibration_run.train(splits, calibration_run.CONFIGS["20news"], seed)
        labels = np.asarray(splits.test[1])
        record = {k: record[k] for k in ("seconds", "best_epoch", "val_error")}
    else:
        corpus = hg_protocol.Corpus("20news", data)
        split = corpus.split(seed, num_in=len(corpus.classes))
        network, record = ood_text.trained_member("20news-all", split, seed, 0, cache)
        x, labels = split["test_in"]
        logits = np.asarray(network.predict(x, batch_size=500, verbose=0), np.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, logits=logits, labels=labels, record=json.dumps(record))
    return logits, labels, record


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def one_split(logits, labels, split, alpha):
    """{(name, randomized): (coverage, size, k_reg, lam)} of one random halving."""
    rng = np.random.default_rng(split)
    order = rng.permutation(len(labels))
    cal, test = order[: len(order) // 2], order[len(order) // 2 :]
    temperature = calibration.fit_temperature(logits[cal], labels[cal])
    p, raw = _softmax(logits / temperature), _softmax(logits)
    out = {}
    for name, score, randomized in METHODS:
        if score is None:
            q = raw if name == "naive_uncalibrated" else p
            sets = uncertainty.naive_prediction_sets(q[test], alpha, randomized, seed=rng)
            k_reg = lam = 0
        else:
            fitted = uncertainty.fit_prediction_sets(
                p[cal], labels[cal], score, alpha, randomized, seed=rng
            )
            sets = fitted.predict(p[test], seed=rng)
            k_reg, lam = fitted.k_reg, fitted.lam
        out[name, randomized] = (
            uncertainty.coverage(sets, labels[test]),
            uncertainty.average_set_size(sets),
            k_reg,
            lam,
        )
    return out, temperature, len(cal)


def rows_for(logits, labels, splits, command, record, model="embedding"):
    rows = []
    for alpha in ALPHAS:
        results, temperatures = {}, []
        for split in range(splits):
            out, temperature, n_cal = one_split(logits, labels, split, alpha)
            temperatures.append(temperature)
            for key, value in out.items():
                results.setdefault(key, []).append(value)
        for (name, randomized), values in results.items():
            values = np.array(values, dtype=np.float64)
            row = {
                "model": MODELS[model],
                "score": name,
                "randomized": randomized,
                "alpha": alpha,
                "coverage": round(float(np.median(values[:, 0])), 4),
                "average_set_size": round(float(np.median(values[:, 1])), 3),
                "below_target": round(float(np.mean(values[:, 0] < 1 - alpha)), 2),
                "coverage_range": [round(1 - alpha, 4), round(1 - alpha + 1 / (n_cal + 1), 4)],
                "splits": splits,
                "n_calibration": n_cal,
                "n_test": len(labels) - n_cal,
                "temperature": round(float(np.median(temperatures)), 3),
                "test_error": round(100 * float((logits.argmax(1) != labels).mean()), 2),
                "command": command,
            }
            if name == "raps":
                row["k_reg"] = int(np.median(values[:, 2]))
                lams, counts = np.unique(values[:, 3], return_counts=True)
                row["lam"] = float(lams[counts.argmax()])
            rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=None, help="the 20news folder (or $NORMKIT_20NEWS_DATA)")
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0, help="the network's training seed")
    parser.add_argument("--model", choices=sorted(MODELS), default="embedding")
    parser.add_argument("--json", default=str(DEFAULT_JSON))
    parser.add_argument("--cache", default=str(ood_text.DEFAULT_CACHE))
    args = parser.parse_args(argv)
    ood_text.limit_threads()
    start = time.time()
    logits, labels, record = test_logits(args.data, args.cache, args.seed, args.model)
    ood_text.log(f"test error {100 * (logits.argmax(1) != labels).mean():.2f} % ({record})")
    command = (
        "KERAS_BACKEND=tensorflow OMP_NUM_THREADS=1 TF_NUM_INTRAOP_THREADS=1 "
        "TF_NUM_INTEROP_THREADS=1 python examples/uncertainty_benchmarks/conformal_20news.py "
        f"--data DIR --splits {args.splits} --seed {args.seed} --model {args.model}"
    )
    rows = rows_for(logits, labels, args.splits, command, record, args.model)
    path = pathlib.Path(args.json)
    old = json.loads(path.read_text()) if path.exists() else []
    rows = [r for r in old if r.get("model") != MODELS[args.model]] + rows
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1) + "\n")
    for row in rows[-2 * len(METHODS) :]:
        ood_text.log(
            f"alpha {row['alpha']} {row['score']:5s} randomized={row['randomized']!s:5s} "
            f"coverage {row['coverage']:.4f} size {row['average_set_size']:.2f}"
        )
    ood_text.log(f"{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
