"""`calibration_report`: every calibration measure with a percentile-bootstrap interval.

The measures are those of the other modules of `metrics/`, each evaluated on the examples
and on every bootstrap resample (`_bootstrap.py`) at once.
"""

import collections

import numpy as np

from keras_normkit._validation import check_int, check_number, check_seed
from keras_normkit.calibration import _bins, _bootstrap, _validation
from keras_normkit.calibration.metrics import binned, debiased, scores, selective, smooth
from keras_normkit.calibration.metrics._top_label import top_label

__all__ = ["CalibrationReport", "calibration_report"]

Estimate = collections.namedtuple("Estimate", ["value", "low", "high"])

#: (key, description) of the measures, in the order of the table.
MEASURES = (
    ("accuracy", "accuracy (argmax)"),
    ("ece", "ECE, {M} equal-width bins"),
    ("ece_equal_mass", "ECE, {M} equal-mass bins"),
    ("debiased_ce", "debiased L2 CE, {M} equal-mass bins"),
    ("smooth_ece", "smooth ECE"),
    ("classwise_ece", "class-wise ECE, {M} bins"),
    ("brier", "Brier score"),
    ("aurc", "AURC"),
)


def _all_measures(probabilities, labels, confidence, correct, num_bins, weights=None):
    """Every measure as an array of shape `()` (no `weights`) or `(B,)`.

    The examples must be sorted by increasing confidence (the measures do not depend on
    the order, and the equal-mass bins and the AURC are then cheaper).
    """
    total = len(labels) if weights is None else weights.sum(axis=1)
    first = _bins.tie_group_starts(confidence)
    equal_mass = _bins.sorted_equal_mass_bins(first, num_bins, weights)

    def mean(values):
        return values.sum() / total if weights is None else weights @ values / total

    classwise = 0.0
    num_classes = probabilities.shape[1]
    for k in range(num_classes):
        index = _bins.bin_indices(probabilities[:, k], num_bins)
        gaps = _bins.binned_sums(index, (labels == k) - probabilities[:, k], num_bins, weights)
        classwise = classwise + np.abs(gaps).sum(axis=-1) / total
    scale = scores.brier_scale("auto", num_classes)
    squared = debiased.debiased_squared_error(
        confidence, correct, num_bins, "equal_mass", weights, equal_mass
    )
    backwards = None if weights is None else weights[:, ::-1]
    return {
        "accuracy": mean(correct),
        "ece": binned.ece_from_top_label(confidence, correct, num_bins, "equal_width", weights),
        "ece_equal_mass": binned.ece_from_top_label(
            confidence, correct, num_bins, "equal_mass", weights, equal_mass
        ),
        "debiased_ce": np.sqrt(np.maximum(squared, 0.0)),
        "smooth_ece": smooth.smooth_error_and_bandwidth(confidence, correct, None, weights)[0],
        "classwise_ece": classwise / num_classes,
        "brier": scale * mean(scores.brier_losses(probabilities, labels)),
        "aurc": selective.aurc_from_scores(confidence[::-1], 1.0 - correct[::-1], backwards),
    }


class CalibrationReport:
    """Point values and bootstrap intervals of the calibration measures of a classifier.

    Made by `calibration_report`. `report["ece"]` is an `Estimate(value, low, high)`;
    `str(report)` (or `print(report)`) is a plain-text table, `to_markdown()` a Markdown
    table and `as_dict()` a JSON-ready dict.

    Attributes:
        estimates: Dict `{key: Estimate(value, low, high)}` in table order.
        num_examples: Number of examples n.
        num_bins: Number of bins M of the binned measures.
        bootstrap: Number of bootstrap resamples (0: no intervals, `low`/`high` are NaN).
        seed: Seed of the resampling.
        confidence_level: Coverage of the intervals (0.95).
    """

    def __init__(self, estimates, num_examples, num_bins, bootstrap, seed, confidence_level):
        self.estimates = estimates
        self.num_examples = num_examples
        self.num_bins = num_bins
        self.bootstrap = bootstrap
        self.seed = seed
        self.confidence_level = confidence_level

    def __getitem__(self, key):
        return self.estimates[key]

    def _rows(self):
        level = f"{100 * self.confidence_level:g} % interval"
        header = ["measure", "value", level]
        rows = []
        for key, description in MEASURES:
            estimate = self.estimates[key]
            interval = f"[{estimate.low:.4f}, {estimate.high:.4f}]" if self.bootstrap else "n/a"
            rows.append([description.format(M=self.num_bins), f"{estimate.value:.4f}", interval])
        return header, rows

    def _caption(self):
        return (
            f"n = {self.num_examples}, percentile bootstrap with {self.bootstrap} resamples "
            f"(seed {self.seed})"
        )

    def __str__(self):
        header, rows = self._rows()
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]

        def line(row):
            return "  ".join(
                cell.ljust(width) if i == 0 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ).rstrip()

        rule = "-" * len(line(header))
        return "\n".join([line(header), rule, *map(line, rows), rule, self._caption()])

    def __repr__(self):
        return f"<CalibrationReport n={self.num_examples} bootstrap={self.bootstrap}>"

    def to_markdown(self):
        """The table in Markdown (GitHub flavour), with the sample size under it."""
        header, rows = self._rows()
        lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join([*lines, "", self._caption()])

    def as_dict(self):
        """`{key: {"value", "low", "high"}}` plus the settings, as plain Python floats."""
        result = {
            key: {
                name: float(x) for name, x in zip(("value", "low", "high"), estimate, strict=True)
            }
            for key, estimate in self.estimates.items()
        }
        result["settings"] = {
            "num_examples": self.num_examples,
            "num_bins": self.num_bins,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "confidence_level": self.confidence_level,
        }
        return result


def calibration_report(
    probabilities, labels, bootstrap=1000, seed=0, num_bins=15, confidence_level=0.95
):
    """Every calibration measure of a classifier, each with a percentile-bootstrap interval.

    The measures (keys of the report): `accuracy`; `ece` and `ece_equal_mass`
    (`expected_calibration_error` with M equal-width and equal-mass bins); `debiased_ce`
    (`debiased_calibration_error`, equal-mass bins); `smooth_ece`
    (`smooth_calibration_error`); `classwise_ece` (`classwise_expected_calibration_error`);
    `brier` (`brier_score`, scikit-learn's convention); `aurc`
    (`area_under_risk_coverage`). Each value equals the function's.

    Intervals: the n examples are resampled with replacement `bootstrap` times (the
    multiplicities drawn from `numpy.random.default_rng(seed)`), every measure is computed
    on every resample (vectorized: a resample is a row of multiplicities, so 1000
    resamples of 10k examples take seconds), and the interval is the (2.5, 97.5)
    percentiles of the resampled values (for `confidence_level=0.95`). A resampled
    duplicate is a tie, handled as each measure handles ties. The percentile interval of
    a biased estimator inherits its bias, and resampling adds more: a binned ECE of a
    well-calibrated model is mostly noise, so its resampled values (noisier still) can
    all exceed the point value, as in the example below. Such an interval bounds what the
    estimator returns at this n, not the calibration error itself; the debiased and
    smooth measures are the ones to compare models with.

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        bootstrap: Number of bootstrap resamples (0: point values only).
        seed: Integer seed of the resampling.
        num_bins: Number of bins M of the binned measures.
        confidence_level: Coverage of the intervals, in (0, 1).

    Returns:
        A `CalibrationReport`.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import calibration_report, expected_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> p = rng.dirichlet(np.ones(3), size=2000)
    >>> y = (p.cumsum(axis=1) > rng.random((2000, 1))).argmax(axis=1)  # calibrated labels
    >>> report = calibration_report(p, y, bootstrap=200, seed=0)
    >>> abs(report["ece"].value - expected_calibration_error(p, y)) < 1e-12
    True
    >>> print(report)
    measure                              value     95 % interval
    ------------------------------------------------------------
    accuracy (argmax)                   0.6015  [0.5825, 0.6220]
    ECE, 15 equal-width bins            0.0190  [0.0149, 0.0450]
    ECE, 15 equal-mass bins             0.0272  [0.0291, 0.0563]
    debiased L2 CE, 15 equal-mass bins  0.0000  [0.0000, 0.0560]
    smooth ECE                          0.0210  [0.0201, 0.0360]
    class-wise ECE, 15 bins             0.0212  [0.0269, 0.0413]
    Brier score                         0.5048  [0.4889, 0.5212]
    AURC                                0.2580  [0.2379, 0.2824]
    ------------------------------------------------------------
    n = 2000, percentile bootstrap with 200 resamples (seed 0)

    References: B. Efron, R. Tibshirani, "An Introduction to the Bootstrap", 1993,
    Chapter 13 (percentile intervals); the measures' own papers in their functions.
    """
    bootstrap = check_int("bootstrap", bootstrap, 0)
    seed = check_seed(seed)
    num_bins = _validation.check_num_bins(num_bins)
    confidence_level = check_number(
        "confidence_level", confidence_level, 0.0, 1.0, strict_minimum=True, strict_maximum=True
    )
    probabilities, labels, _ = _validation.check_probabilities_and_labels(probabilities, labels)
    confidence, correct = top_label(probabilities, labels)
    order = np.argsort(confidence, kind="stable")
    probabilities, labels = probabilities[order], labels[order]
    confidence, correct = confidence[order], correct[order]
    point = _all_measures(probabilities, labels, confidence, correct, num_bins)
    resampled = {key: [] for key in point}
    for weights in _bootstrap.resample_weights(len(labels), bootstrap, seed):
        for key, values in _all_measures(
            probabilities, labels, confidence, correct, num_bins, weights
        ).items():
            resampled[key].append(values)
    estimates = {}
    for key, _ in MEASURES:
        low = high = np.nan
        if bootstrap:
            low, high = _bootstrap.percentile_interval(
                np.concatenate(resampled[key]), confidence_level
            )
        estimates[key] = Estimate(float(point[key]), float(low), float(high))
    return CalibrationReport(estimates, len(labels), num_bins, bootstrap, seed, confidence_level)
