"""Tables of the two benchmarks (from their JSON) beside the papers' numbers, and the
targets of the issue met or not; `--write-guide` puts them in
`docs/guides/when_not_to_trust.md` between their markers (a test checks the guide holds what
this makes of the committed JSON).

    python examples/uncertainty_benchmarks/uncertainty_report.py --write-guide
"""

import argparse
import collections
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

from markdown_blocks import write_block  # noqa: E402

OOD_JSON = ROOT / "notebooks" / "data" / "ood_text.json"
CONFORMAL_JSON = ROOT / "notebooks" / "data" / "conformal_20news.json"
GUIDE = ROOT / "docs" / "guides" / "when_not_to_trust.md"

#: Hendrycks & Gimpel (2017), Tables 2-3 (text rows, %): (AUROC, AUPR-In, AUPR-Out), test error.
PUBLISHED = {
    ("15 Newsgroups", "misclassification"): (89, 99, 42),
    ("Reuters 6", "misclassification"): (89, 100, 35),
    ("15 Newsgroups", "ood"): (75, 92, 45),
    ("Reuters 6", "ood"): (92, 100, 56),
}
PUBLISHED_ERROR = {"15 Newsgroups": 7.31, "Reuters 6": 2.53}
DATASETS = (
    "15 Newsgroups",
    "15 Newsgroups (notebook labels)",
    "15 Newsgroups (notebook labels, the published split)",
    "15 Newsgroups (notebook labels and text, the published split)",
    "Reuters 6",
    "Reuters 6 (the published split)",
)
SCORES = {
    "msp": "MSP",
    "max_logit": "max-logit",
    "energy": "energy",
    "mahalanobis": "Mahalanobis",
    "relative_mahalanobis": "relative Mahalanobis",
    "msp_dropout_net": "MSP, network with dropout",
    "mc_dropout": "MC dropout (30 masks), MSP",
    "ensemble": "ensemble of 5, MSP",
}
TARGET_POINTS = 3.0

#: Angelopoulos et al. (ICLR 2021) Table 1, ImageNet, alpha = 0.1, ResNet-152: coverage and
#: mean set size (median over 100 splits).
PAPER_CONFORMAL = {"naive": (0.894, 9.68), "aps": (0.90, 10.4), "raps": (0.90, 2.09)}
METHOD_NAMES = {
    ("naive_uncalibrated", True): "naive, without temperature scaling",
    ("naive", True): "naive (top labels to mass 1 − α)",
    ("lac", False): "LAC",
    ("aps", True): "APS, randomized",
    ("raps", True): "RAPS, randomized",
    ("aps", False): "APS, not randomized",
    ("raps", False): "RAPS, not randomized",
}
#: Sampling tolerance on a median coverage over the splits (each on ~3,766 posts).
COVERAGE_TOLERANCE = 0.005


def load(path):
    return json.loads(pathlib.Path(path).read_text())


def _mean_sd(values):
    values = np.asarray(values, np.float64)
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{values.mean():.1f} ± {values.std(ddof=1):.1f}"


def _groups(rows):
    groups = collections.defaultdict(list)
    for row in rows:
        groups[row["dataset"], row["task"], row["score"]].append(row)
    return groups


def ood_table(rows, task):
    """The markdown table of one task: every score of every data set, the paper's row under
    each data set's scores."""
    groups = _groups(rows)
    succ = task == "misclassification"
    header = (
        "| Data set | Score | AUROC | "
        + ("AUPR-Succ | AUPR-Err" if succ else "AUPR-In | AUPR-Out")
        + " | FPR at 95 % TPR | test error | seeds |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    for dataset in DATASETS:
        present = [s for s in SCORES if (dataset, task, s) in groups]
        for score in present:
            group = sorted(groups[dataset, task, score], key=lambda r: r["seed"])
            cells = [
                _mean_sd([r[k] for r in group]) for k in ("auroc", "aupr_in", "aupr_out", "fpr95")
            ]
            name = SCORES[score]
            if score == "msp":
                name, dataset_cell = f"**{name}**", f"**{dataset}**"
            else:
                dataset_cell = dataset
            seeds = ", ".join(str(r["seed"]) for r in group)
            error = _mean_sd([r["error"] for r in group])
            lines.append(f"| {dataset_cell} | {name} | {' | '.join(cells)} | {error} | {seeds} |")
        base = dataset.split(" (")[0]
        if present and (base, task) in PUBLISHED:
            auroc, aupr_in, aupr_out = PUBLISHED[base, task]
            lines.append(
                f"| {base}, paper | MSP | {auroc} | {aupr_in} | {aupr_out} | — | "
                f"{PUBLISHED_ERROR[base]} | 1 run |"
            )
    return "\n".join(lines)


def ood_targets(rows):
    """One line per published row: the MSP AUROC (mean ± sd) within 3 points or not."""
    groups = _groups(rows)
    lines = []
    for dataset in DATASETS:
        base = dataset.split(" (")[0]
        for task in ("misclassification", "ood"):
            group = groups.get((dataset, task, "msp"))
            if not group:
                continue
            values = np.array([r["auroc"] for r in group])
            published = PUBLISHED[base, task][0]
            gap = values.mean() - published
            met = abs(gap) <= TARGET_POINTS
            lines.append(
                f"- {'met' if met else '**not met**'}: {dataset}, {task}: MSP AUROC "
                f"{_mean_sd(values)} against the paper's {published} ({gap:+.1f} points; "
                f"target: within {TARGET_POINTS:g}, {len(values)} seeds)"
            )
    return "\n".join(lines)


def conformal_table(rows):
    lines = [
        "| Network | α | Method | coverage | mean set size | splits below 1 − α |",
        "|---|---|---|---|---|---|",
    ]
    order = list(METHOD_NAMES)
    models = list(dict.fromkeys(r["model"] for r in rows))
    for model in models:
        mine = [r for r in rows if r["model"] == model]
        mine.sort(key=lambda r: (-r["alpha"], order.index((r["score"], r["randomized"]))))
        for row in mine:
            name = METHOD_NAMES[row["score"], row["randomized"]]
            if row["score"] == "raps":
                name += f" (k_reg {row['k_reg']}, λ {row['lam']:g})"
            lines.append(
                f"| {model} | {row['alpha']:g} | {name} | {row['coverage']:.4f} | "
                f"{row['average_set_size']:.2f} | {100 * row['below_target']:.0f} % |"
            )
    lines.append("")
    for model in models:
        first = next(r for r in rows if r["model"] == model)
        lines.append(
            f"- {model}: test error {first['test_error']:.2f} %, temperature "
            f"{first['temperature']:.2f} (median over the calibration halves; > 1: "
            "over-confident)."
        )
    first = rows[0]
    lines.append(
        f"- Medians over {first['splits']} random halvings of the "
        f"{first['n_calibration'] + first['n_test']:,} test posts ({first['n_calibration']:,} "
        f"calibration, {first['n_test']:,} evaluation): the guarantee is coverage in "
        f"[1 − α, 1 − α + 1/(n + 1)] = [0.900, {0.9 + 1 / (first['n_calibration'] + 1):.4f}] "
        f"for α = 0.1 and [0.950, {0.95 + 1 / (first['n_calibration'] + 1):.4f}] for α = 0.05 "
        "(randomized sets)."
    )
    return "\n".join(lines)


def paper_conformal_table():
    lines = ["| α | Method | coverage | mean set size |", "|---|---|---|---|"]
    for method, (cov, size) in PAPER_CONFORMAL.items():
        name = METHOD_NAMES[method, True]
        lines.append(f"| 0.1 | {name} | {cov:.3f} | {size:.2f} |")
    return "\n".join(lines)


def conformal_targets(rows):
    lines = []
    for model in dict.fromkeys(r["model"] for r in rows):
        by = {(r["score"], r["randomized"], r["alpha"]): r for r in rows if r["model"] == model}
        for alpha in sorted({key[2] for key in by}, reverse=True):
            prefix = f"{model}, α = {alpha:g}"
            for key, what in (
                ("naive", "after temperature scaling"),
                ("naive_uncalibrated", "without temperature scaling"),
            ):
                naive = by.get((key, True, alpha))
                if naive is None:
                    continue
                ok = naive["coverage"] < 1 - alpha
                relation = "<" if ok else ">="
                lines.append(
                    f"- {'met' if ok else '**not met**'}: {prefix}: the naive sets {what} "
                    f"under-cover ({naive['coverage']:.4f} {relation} {1 - alpha:.2f})"
                )
            for score, randomized in (("lac", False), ("aps", True), ("raps", True)):
                row = by[score, randomized, alpha]
                low, high = row["coverage_range"]
                ok = low - COVERAGE_TOLERANCE <= row["coverage"] <= high + COVERAGE_TOLERANCE
                lines.append(
                    f"- {'met' if ok else '**not met**'}: {prefix}: "
                    f"{METHOD_NAMES[score, randomized]} covers {row['coverage']:.4f}, in "
                    f"[{low:.3f}, {high:.4f}] ± {COVERAGE_TOLERANCE}"
                )
            aps, raps = by["aps", True, alpha], by["raps", True, alpha]
            ok = raps["average_set_size"] <= aps["average_set_size"]
            lines.append(
                f"- {'met' if ok else '**not met**'}: {prefix}: RAPS's mean set "
                f"({raps['average_set_size']:.2f}) no larger than APS's "
                f"({aps['average_set_size']:.2f})"
            )
    return "\n".join(lines)


def blocks(ood_rows, conformal_rows):
    """`{marker: text}` of every generated block of the guide."""
    return {
        "OOD_MISCLASSIFICATION": ood_table(ood_rows, "misclassification"),
        "OOD_OOD": ood_table(ood_rows, "ood"),
        "OOD_TARGETS": ood_targets(ood_rows),
        "CONFORMAL_20NEWS": conformal_table(conformal_rows),
        "CONFORMAL_PAPER": paper_conformal_table(),
        "CONFORMAL_TARGETS": conformal_targets(conformal_rows),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ood-json", default=str(OOD_JSON))
    parser.add_argument("--conformal-json", default=str(CONFORMAL_JSON))
    parser.add_argument("--write-guide", action="store_true")
    parser.add_argument("--guide", default=str(GUIDE))
    args = parser.parse_args(argv)
    generated = blocks(load(args.ood_json), load(args.conformal_json))
    for marker, text in generated.items():
        print(f"## {marker}\n{text}\n")
        if args.write_guide:
            write_block(args.guide, marker, text)


if __name__ == "__main__":
    main()
