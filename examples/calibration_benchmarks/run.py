"""Guo et al. (2017) Table 1, text rows: train, cache the logits, calibrate, write the JSON.

Two steps, one command per data set:

1. *Train* (expensive, once per data set and seed): the network (`text_model.py`: a 3-layer DAN
   with batch norm for 20 News and Reuters, a bidirectional `LayerNormLSTM` for SST) is
   trained on the training split, keeping the weights of the epoch of best validation
   accuracy (ties: lower validation loss); its uncalibrated validation and test logits and
   labels go to `--cache DIR/<dataset>/seed<k>.npz` (with the training record in
   `seed<k>.json`). A cached seed is not trained again (`--retrain` forces it).
2. *Calibrate* (cheap): every method of `METHODS` is fitted on the validation logits only
   and applied to the test logits; the measures (ECE, equal-width 15 bins, in %, with a
   percentile-bootstrap 95 % interval; test error; MCE; NLL; Brier; classwise ECE) are
   merged into `--json` as one row per data set, method and seed (a row of the same
   data set, method and seed is replaced). Methods that the installed keras_normkit does
   not have yet are skipped with a note; `--calibrate-only` skips step 1 (cached seeds
   only).

    python examples/calibration_benchmarks/run.py --data DIR --dataset 20news \\
        --seeds 0 1 2 3 4 --json notebooks/data/calibration_table1.json

On a shared machine run it with one thread (the flags below are read before TensorFlow
starts): `OMP_NUM_THREADS=1 TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 nice -n 10`.
"""

import argparse
import json
import os
import pathlib
import sys
import time

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402

import keras_normkit  # noqa: E402
from keras_normkit import calibration  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import text_data  # noqa: E402
import text_model  # noqa: E402

sys.path.insert(1, str(pathlib.Path(__file__).resolve().parents[1]))
from result_commands import environment_prefix  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_CACHE = ROOT / "examples" / "calibration_benchmarks" / "cache"
NUM_BINS = 15
BOOTSTRAP = 1000

#: Per data set: the network and its training (chosen on the validation split, see
#: README.md). `max_length`: tokens kept per document; `vocab`: most frequent training words;
#: `optimizer`: "adam" (the default) or "adagrad" (the DAN paper's, with its rate and batch).
CONFIGS = {
    "20news": dict(
        model="dan",
        vocab=20000,
        max_length=300,
        epochs=8,
        batch_size=64,
        learning_rate=2e-3,
        select="last",
    ),
    "reuters": dict(
        model="dan",
        vocab=15000,
        max_length=300,
        epochs=10,
        batch_size=15,
        optimizer="adagrad",
        learning_rate=5e-3,
        select="best",
    ),
    "sst-binary": dict(
        model="bilstm",
        vocab=16000,
        max_length=56,
        epochs=3,
        batch_size=50,
        learning_rate=2e-3,
        select="last",
        buckets=True,
    ),
    "sst-fine": dict(
        model="bilstm",
        vocab=16000,
        max_length=56,
        epochs=3,
        batch_size=50,
        learning_rate=2e-3,
        select="last",
        buckets=True,
    ),
}
MODEL_NAMES = {
    "dan": "DAN-3, batch norm (embeddings from scratch)",
    "bilstm": "bidirectional LayerNormLSTM (not a Tree-LSTM; embeddings from scratch)",
}


# ----------------------------------------------------------------------------- step 1
class BestValidation(keras.callbacks.Callback):
    """Records the per-epoch validation accuracy and NLL; with `select="best"` keeps the
    weights of the epoch of best validation accuracy (ties: lower NLL) and restores them at
    the end of training (with `"last"` the last epoch's weights stay)."""

    def __init__(self, x_val, y_val, select="best"):
        super().__init__()
        self.x_val, self.y_val, self.select = x_val, y_val, select
        self.best, self.best_epoch, self.weights, self.history = None, None, None, []

    def on_epoch_end(self, epoch, logs=None):
        logits = self.model.predict(self.x_val, batch_size=256, verbose=0)
        accuracy = float(np.mean(logits.argmax(1) == self.y_val))
        loss = calibration.negative_log_likelihood(logits, self.y_val, from_logits=True)
        self.history.append(
            {
                "epoch": epoch + 1,
                "loss": float(logs["loss"]),
                "val_accuracy": accuracy,
                "val_nll": loss,
            }
        )
        if self.select == "last" or self.best is None or (accuracy, -loss) > self.best:
            self.best, self.best_epoch = (accuracy, -loss), epoch + 1
            self.weights = self.model.get_weights()

    def on_train_end(self, logs=None):
        self.model.set_weights(self.weights)


OPTIMIZERS = {"adam": keras.optimizers.Adam, "adagrad": keras.optimizers.Adagrad}


def make_optimizer(config):
    """The config's optimizer (`"adam"` unless it names another) at its learning rate."""
    name = config.get("optimizer", "adam")
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}. Received: {name!r}")
    return OPTIMIZERS[name](config["learning_rate"])


def build(config, vocab_size, num_classes, seed):
    if config["model"] == "dan":
        return text_model.dan(vocab_size, num_classes, config["max_length"], seed=seed)
    return text_model.bilstm(vocab_size, num_classes, config["max_length"], seed=seed)


def train(splits, config, seed, verbose=0):
    """Trains one network; returns `(val_logits, test_logits, record)`."""
    keras.utils.set_random_seed(seed)
    vocab = text_data.vocabulary(splits.train[0], config["vocab"])
    x = {
        name: text_data.encode(split[0], vocab, config["max_length"])
        for name, split in zip(
            ("train", "val", "test"),
            (splits.train, splits.validation, splits.test),
            strict=True,
        )
    }
    network = build(config, len(vocab) + 2, len(splits.classes), seed)
    network.compile(
        optimizer=make_optimizer(config),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    best = BestValidation(x["val"], splits.validation[1], config.get("select", "best"))
    start = time.time()
    if config.get("buckets"):
        batches = text_model.LengthBuckets(
            x["train"], splits.train[1], config["batch_size"], seed=seed
        )
        network.fit(batches, epochs=config["epochs"], callbacks=[best], verbose=verbose)
    else:
        network.fit(
            x["train"],
            splits.train[1],
            batch_size=config["batch_size"],
            epochs=config["epochs"],
            callbacks=[best],
            verbose=verbose,
        )
    record = {
        "seconds": round(time.time() - start, 1),
        "best_epoch": best.best_epoch,
        "val_error": round(100 * (1 - best.best[0]), 2),
        "history": best.history,
        "config": config,
        "backend": keras.backend.backend(),
        "keras_normkit": keras_normkit.__version__,
    }
    predict = lambda a: network.predict(a, batch_size=256, verbose=0).astype(np.float64)  # noqa: E731
    return predict(x["val"]), predict(x["test"]), record


def cached_logits(cache, dataset, seed):
    """`(arrays, record)` of a cached seed, or None."""
    path = pathlib.Path(cache) / dataset / f"seed{seed}.npz"
    if not path.exists():
        return None
    with np.load(path) as arrays:
        arrays = dict(arrays)
    return arrays, json.loads(path.with_suffix(".json").read_text())


def write_cache(cache, dataset, seed, arrays, record):
    folder = pathlib.Path(cache) / dataset
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / f"seed{seed}.npz", **arrays)
    (folder / f"seed{seed}.json").write_text(json.dumps(record, indent=1))


# ----------------------------------------------------------------------------- step 2
def softmax(logits):
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _uncalibrated(val_logits, val_labels, test_logits):
    return softmax(test_logits)


def _histogram_binning(val_logits, val_labels, test_logits):
    fitted = calibration.fit_histogram_binning(
        softmax(val_logits), val_labels, num_bins=NUM_BINS, min_samples_per_bin=0
    )
    return fitted.predict(softmax(test_logits))


def _isotonic(val_logits, val_labels, test_logits):
    fitted = calibration.fit_isotonic_calibration(softmax(val_logits), val_labels)
    return fitted.predict(softmax(test_logits))


def _temperature(val_logits, val_labels, test_logits):
    return softmax(test_logits / calibration.fit_temperature(val_logits, val_labels).temperature)


def _vector(val_logits, val_labels, test_logits):
    fitted = calibration.fit_vector_scaling(val_logits, val_labels)
    return softmax(test_logits * fitted.scale + fitted.bias)


def _matrix(val_logits, val_labels, test_logits):
    fitted = calibration.fit_matrix_scaling(val_logits, val_labels)
    return softmax(test_logits @ fitted.kernel + fitted.bias)


def _dirichlet_odir(val_logits, val_labels, test_logits):
    """Dirichlet calibration with ODIR as Kull et al. (2019) ran it: the off-diagonal and bias
    weights (lambda = mu, 1e-4 ... 10) chosen by 5-fold cross-validated NLL on the validation
    split (`select_dirichlet_regularization`), then the map fitted on the whole split."""
    chosen = calibration.select_dirichlet_regularization(val_logits, val_labels, cv=5, seed=0)
    fitted = calibration.fit_dirichlet_calibration(
        val_logits, val_labels, off_diagonal_l2=chosen.off_diagonal_l2, bias_l2=chosen.bias_l2
    )
    return np.asarray(fitted.predict(test_logits), np.float64)


def _isotonic_cross_fitted(val_logits, val_labels, test_logits, cv=5):
    """The mean of `cv` isotonic calibrators, each fitted on one fold of the validation
    split (`CrossFittedCalibration`, a Keras model, here around the identity: the cached
    logits are the classifier's outputs). The folds are contiguous, so the validation
    examples are shuffled first (a fixed permutation)."""
    import keras

    order = np.random.default_rng(0).permutation(len(val_labels))
    identity = keras.Sequential([keras.Input((val_logits.shape[1],)), keras.layers.Identity()])
    wrapper = calibration.CrossFittedCalibration(calibration.IsotonicCalibration(identity), cv=cv)
    wrapper.calibrate(val_logits[order], val_labels[order], verbose=0)
    return np.asarray(wrapper.predict(test_logits, batch_size=4096, verbose=0), np.float64)


def _library_method(names, takes):
    """A method of the installed keras_normkit.calibration found by one of `names` (a
    function `fit(inputs, labels)` returning a map with `predict(inputs)`), or None.
    `takes`: `"probabilities"` or `"logits"`, what the fit and predict receive."""
    for name in names:
        fit = getattr(calibration, name, None)
        if callable(fit):
            break
    else:
        return None

    def method(val_logits, val_labels, test_logits):
        inputs = softmax if takes == "probabilities" else (lambda z: z)
        out = np.asarray(fit(inputs(val_logits), val_labels).predict(inputs(test_logits)))
        if out.shape != test_logits.shape or not np.allclose(out.sum(1), 1, atol=1e-4):
            raise ValueError(f"calibration.{name}(...).predict did not return probabilities")
        return out

    method.library_name = name
    return method


#: The table's columns: name -> `method(val_logits, val_labels, test_logits)` returning
#: test probabilities, or `(candidate names in keras_normkit.calibration, what they take)`
#: for a method that newer releases of keras_normkit add (skipped with a note when absent).
METHODS = {
    "uncalibrated": _uncalibrated,
    "histogram_binning": _histogram_binning,
    "isotonic": _isotonic,
    "bbq": (("fit_bayesian_binning", "fit_bbq"), "probabilities"),
    "temperature": _temperature,
    "vector": _vector,
    "matrix": _matrix,
    # our three additions
    "dirichlet_odir": _dirichlet_odir,
    "ensemble_temperature": (
        ("fit_ensemble_temperature_scaling", "fit_ensemble_temperature"),
        "logits",
    ),
    "isotonic_cross_fitted": _isotonic_cross_fitted,
}
PAPER_METHODS = (
    "uncalibrated",
    "histogram_binning",
    "isotonic",
    "bbq",
    "temperature",
    "vector",
    "matrix",
)


def available_methods(methods=None, log=print):
    """`{name: method}` of the methods this keras_normkit has; a note for each other."""
    out = {}
    for name, entry in (methods or METHODS).items():
        if not callable(entry):
            found = _library_method(*entry)
            if found is None:
                log(
                    f"note: skipping {name}: keras_normkit.calibration has none of "
                    f"{', '.join(entry[0])} (keras_normkit {keras_normkit.__version__})"
                )
                continue
            entry = found
        out[name] = entry
    return out


def bootstrap_ece(probabilities, labels, num_bins=NUM_BINS, samples=BOOTSTRAP, seed=0):
    """Percentile bootstrap of the equal-width ECE: `samples` resamples of the test
    examples (with replacement); returns the `(2.5, 97.5)` percentiles of their ECEs."""
    confidence = probabilities.max(axis=1)
    correct = (probabilities.argmax(axis=1) == labels).astype(np.float64)
    bins = np.clip(np.ceil(confidence * num_bins).astype(int) - 1, 0, num_bins - 1)
    n = len(labels)
    rows = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    offsets = (np.arange(samples) * num_bins)[:, None]
    flat = (bins[rows] + offsets).ravel()
    size = samples * num_bins
    gap = np.bincount(flat, weights=(confidence - correct)[rows].ravel(), minlength=size)
    eces = np.abs(gap.reshape(samples, num_bins)).sum(axis=1) / n
    return tuple(float(v) for v in np.percentile(eces, [2.5, 97.5]))


def brier_score(probabilities, labels):
    """Mean over examples of sum_k (p_k - [y = k])^2 (Brier 1950, multiclass)."""
    onehot = np.eye(probabilities.shape[1])[labels]
    return float(np.mean(np.sum((probabilities - onehot) ** 2, axis=1)))


#: Measures that newer keras_normkit releases add: row key -> (candidate names in
#: keras_normkit.calibration of a function `f(probabilities, labels) -> float` in [0, 1],
#: reported in %), used when `calibration_report` is absent. Absent ones are left out of the
#: rows (step 2 adds them later from the cache).
OPTIONAL_MEASURES = {
    "debiased_ce": ("debiased_calibration_error",),
    "smooth_ece": ("smooth_calibration_error", "smooth_ece"),
}
#: The measures of `calibration_report` (newer keras_normkit) kept in the rows, in %, each
#: with its bootstrap interval (`<key>_low`, `<key>_high`).
REPORT_MEASURES = ("ece", "ece_equal_mass", "debiased_ce", "smooth_ece")


def _optional_measures(probabilities, labels):
    out = {}
    for key, names in OPTIONAL_MEASURES.items():
        function = next((getattr(calibration, n) for n in names if hasattr(calibration, n)), None)
        if function is not None:
            out[key] = 100 * float(function(probabilities, labels))
    return out


def _bootstrapped(probabilities, labels):
    """ECE and its percentile-bootstrap interval (in %), and the other measures with
    intervals: from `keras_normkit.calibration.calibration_report` where the installed
    keras_normkit has it, else from `bootstrap_ece` (ECE only) and `OPTIONAL_MEASURES`."""
    report = getattr(calibration, "calibration_report", None)
    if report is None:
        low, high = bootstrap_ece(probabilities, labels)
        ece = calibration.expected_calibration_error(probabilities, labels, NUM_BINS)
        found = {"ece": 100 * ece, "ece_low": 100 * low, "ece_high": 100 * high}
        return {**_optional_measures(probabilities, labels), **found}
    estimates = report(probabilities, labels, bootstrap=BOOTSTRAP, seed=0, num_bins=NUM_BINS)
    out = {}
    for key in REPORT_MEASURES:
        try:
            estimate = estimates[key]
        except KeyError:
            continue
        out[key] = 100 * float(estimate.value)
        out[f"{key}_low"] = 100 * float(estimate.low)
        out[f"{key}_high"] = 100 * float(estimate.high)
    return out


def measures(probabilities, labels):
    """The row's measures of test probabilities (ECE, error and MCE in %; the ECE's
    bootstrap interval; the newer measures the installed keras_normkit has)."""
    clipped = np.clip(probabilities, 1e-12, 1.0)
    return {
        **_bootstrapped(probabilities, labels),
        "test_error": 100 * float(np.mean(probabilities.argmax(1) != labels)),
        "mce": 100 * calibration.maximum_calibration_error(probabilities, labels, NUM_BINS),
        "nll": calibration.negative_log_likelihood(clipped, labels),
        "brier": brier_score(probabilities, labels),
        "classwise_ece": 100
        * calibration.classwise_expected_calibration_error(probabilities, labels, NUM_BINS),
    }


def reliability_record(probabilities, labels):
    """Per bin: counts, accuracy and confidence (for the guide's diagrams), and the
    risk-coverage curve (error among the most confident fraction) at 20 coverages."""
    bins = calibration.calibration_bins(probabilities, labels, NUM_BINS)
    order = np.argsort(-probabilities.max(axis=1), kind="stable")
    wrong = (probabilities.argmax(1) != labels)[order]
    coverages = np.linspace(0.05, 1.0, 20)
    kept = np.maximum(1, np.round(coverages * len(labels)).astype(int))
    risk = np.cumsum(wrong)[kept - 1] / kept
    return {
        "counts": bins.counts.tolist(),
        "accuracy": np.round(bins.accuracy, 6).tolist(),
        "confidence": np.round(bins.confidence, 6).tolist(),
        "coverage": np.round(coverages, 4).tolist(),
        "risk": np.round(100 * risk, 4).tolist(),
        "aurc": float(100 * np.mean(np.cumsum(wrong) / np.arange(1, len(wrong) + 1))),
    }


def calibrate(arrays, methods, details=False):
    """`{method: row measures}` (and the reliability record if `details`)."""
    out = {}
    for name, method in methods.items():
        start = time.time()
        probabilities = method(arrays["val_logits"], arrays["val_labels"], arrays["test_logits"])
        row = {k: round(v, 4) for k, v in measures(probabilities, arrays["test_labels"]).items()}
        row["fit_seconds"] = round(time.time() - start, 2)
        if details:
            row["reliability"] = reliability_record(probabilities, arrays["test_labels"])
        out[name] = row
    return out


def merge_rows(path, rows):
    """Replaces the rows of the same (dataset, method, seed) in the JSON file and sorts."""
    path = pathlib.Path(path)
    old = json.loads(path.read_text())["rows"] if path.exists() else []
    keys = {(r["dataset"], r["method"], r["seed"]) for r in rows}
    merged = [r for r in old if (r["dataset"], r["method"], r["seed"]) not in keys] + rows
    order = {name: i for i, name in enumerate(METHODS)}
    datasets = {name: i for i, name in enumerate(text_data.DATASETS)}
    merged.sort(
        key=lambda r: (
            datasets.get(r["dataset"], 99),
            r["seed"],
            order.get(r["method"], 99),
            r["method"],
        )
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "description": "Guo et al. (2017) Table 1, text rows, reproduced by "
        "examples/calibration_benchmarks/run.py: one row per dataset, method and seed; "
        "ece, ece_low, ece_high (percentile bootstrap 95 %, 1000 resamples of the test "
        "set), test_error, mce, classwise_ece in %; equal-width 15 bins.",
        "rows": merged,
    }
    path.write_text(json.dumps(document, indent=1) + "\n")
    return merged


def run(
    dataset,
    data,
    seeds,
    json_path,
    cache=DEFAULT_CACHE,
    calibrate_only=False,
    retrain=False,
    config=None,
    command=None,
    log=print,
    splits=None,
    verbose=0,
):
    """Both steps for one data set; returns the rows written."""
    config = dict(config or CONFIGS[dataset])
    methods = available_methods(log=log)
    rows = []
    for seed in seeds:
        cached = None if retrain else cached_logits(cache, dataset, seed)
        if cached is None:
            if calibrate_only:
                log(f"{dataset} seed {seed}: no cached logits in {cache}, skipped")
                continue
            if splits is None:
                splits = text_data.load(dataset, data)
                log(f"{dataset}: splits {splits.sizes()} (paper {text_data.PAPER_SPLITS[dataset]})")
            val_logits, test_logits, record = train(splits, config, seed, verbose=verbose)
            arrays = {
                "val_logits": val_logits,
                "val_labels": splits.validation[1],
                "test_logits": test_logits,
                "test_labels": splits.test[1],
            }
            record["splits"] = splits.sizes()
            write_cache(cache, dataset, seed, arrays, record)
            cached = arrays, record
        arrays, record = cached
        results = calibrate(arrays, methods, details=seed == min(seeds))
        for name, row in results.items():
            rows.append(
                {
                    "dataset": dataset,
                    "method": name,
                    "seed": seed,
                    **row,
                    "model": MODEL_NAMES[record["config"]["model"]],
                    "splits": list(record["splits"]),
                    "train_seconds": record["seconds"],
                    "best_epoch": record["best_epoch"],
                    "command": command,
                }
            )
        summary = ", ".join(f"{m} {r['ece']:.2f}" for m, r in results.items())
        log(
            f"{dataset} seed {seed}: test error {results['uncalibrated']['test_error']:.2f} %, "
            f"{record['seconds']:.0f} s (best epoch {record['best_epoch']}); ECE % {summary}"
        )
        merge_rows(json_path, [r for r in rows if r["seed"] == seed])
    return rows


def limit_threads():
    """Honours `TF_NUM_INTRAOP_THREADS` / `TF_NUM_INTEROP_THREADS` on TensorFlow."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        intra = os.environ.get("TF_NUM_INTRAOP_THREADS")
        inter = os.environ.get("TF_NUM_INTEROP_THREADS")
        if intra:
            tf.config.threading.set_intra_op_parallelism_threads(int(intra))
        if inter:
            tf.config.threading.set_inter_op_parallelism_threads(int(inter))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=None, help="the data set's folder (or $NORMKIT_..._DATA)")
    parser.add_argument("--dataset", choices=text_data.DATASETS, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--json", default=str(ROOT / "notebooks/data/calibration_table1.json"))
    parser.add_argument("--cache", default=str(DEFAULT_CACHE))
    parser.add_argument("--calibrate-only", action="store_true")
    parser.add_argument("--retrain", action="store_true")
    parser.add_argument("--epochs", type=int, default=None)
    args = parser.parse_args(argv)
    config = dict(CONFIGS[args.dataset])
    if args.epochs:
        config["epochs"] = args.epochs
    command = (
        f"{environment_prefix()} python examples/calibration_benchmarks/run.py --data DIR "
        f"--dataset {args.dataset} "
        f"--seeds {' '.join(map(str, args.seeds))}"
        + (f" --epochs {args.epochs}" if args.epochs else "")
    )
    limit_threads()
    run(
        args.dataset,
        args.data,
        args.seeds,
        args.json,
        args.cache,
        args.calibrate_only,
        args.retrain,
        config,
        command,
        verbose=2,
    )


if __name__ == "__main__":
    main()
