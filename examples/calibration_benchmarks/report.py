"""The tables of `notebooks/data/calibration_table1.json`, beside Guo et al. (2017) Table 1.

    python examples/calibration_benchmarks/report.py                 # print the tables
    python examples/calibration_benchmarks/report.py --write-guide   # and put them in the guide
    python examples/calibration_benchmarks/report.py --figures       # the guide's figures

`--write-guide` replaces the text between `<!-- TABLE1 -->` and `<!-- /TABLE1 -->` (the
table, mean +- sd over seeds, beside the paper's) and between `<!-- TABLE1_MODEL -->` and
`<!-- /TABLE1_MODEL -->` (one model's report with its bootstrap intervals) and the targets
(`TABLE1_TARGETS`) in
`docs/guides/trust_confidence.md`. `--figures` draws the reliability diagrams before and
after temperature scaling (`keras_normkit.calibration.reliability_diagram`, from the cached
logits of run.py) and the risk-coverage curves (from the JSON) into `docs/guides/img/`.
"""

import argparse
import json
import pathlib
import re
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
JSON = ROOT / "notebooks" / "data" / "calibration_table1.json"
GUIDE = ROOT / "docs" / "guides" / "trust_confidence.md"
FIGURES = ROOT / "docs" / "guides" / "img"

DATASETS = {
    "20news": "20 News (DAN-3)",
    "reuters": "Reuters R8 (DAN-3)",
    "sst-binary": "SST binary (BiLSTM)",
    "sst-fine": "SST fine-grained (BiLSTM)",
}
PAPER_DATASETS = {
    "20news": "20 News (DAN-3)",
    "reuters": "Reuters (DAN-3)",
    "sst-binary": "SST binary (Tree-LSTM)",
    "sst-fine": "SST fine-grained (Tree-LSTM)",
}
METHODS = {
    "uncalibrated": "Uncal.",
    "histogram_binning": "Hist. bin.",
    "isotonic": "Isotonic",
    "bbq": "BBQ",
    "temperature": "Temp. scaling",
    "vector": "Vector",
    "matrix": "Matrix",
    "dirichlet_odir": "Dirichlet ODIR (CV)",
    "ensemble_temperature": "Ensemble TS",
    "isotonic_cross_fitted": "isotonic, cross-fitted (5)",
}
#: Guo et al. 2017, Table 1 (ECE %, 15 bins) and supplement Table S2 (test error %).
PAPER = {
    "20news": ([8.02, 3.60, 5.52, 4.98, 4.11, 4.61, 9.10], 20.06),
    "reuters": ([0.85, 1.75, 1.15, 0.97, 0.91, 0.66, 1.58], 2.97),
    "sst-binary": ([6.63, 1.93, 1.65, 2.27, 1.84, 1.84, 1.84], 11.81),
    "sst-fine": ([6.71, 2.09, 1.65, 2.61, 2.56, 2.98, 2.39], 49.50),
}
PAPER_ECE = {
    dataset: dict(zip(list(METHODS)[:7], eces, strict=True)) for dataset, (eces, _) in PAPER.items()
}


def load(path=JSON):
    return json.loads(pathlib.Path(path).read_text())["rows"]


def _group(rows):
    out = {}
    for row in rows:
        out.setdefault((row["dataset"], row["method"]), []).append(row)
    return out


def _mean_sd(values):
    values = np.asarray(values, np.float64)
    sd = values.std(ddof=1) if len(values) > 1 else 0.0
    return f"{values.mean():.2f} ± {sd:.2f}"


def table(rows):
    """Markdown: per data set a row of ours (mean ± sd over seeds) and one of the paper's;
    columns the methods that were run (and the paper's seven), ECE % then test error %."""
    groups = _group(rows)
    ran = [m for m in METHODS if any(key[1] == m for key in groups)]
    methods = [m for m in METHODS if m in ran or m in list(METHODS)[:7]]
    header = ["ECE % (15 bins)", *[METHODS[m] for m in methods], "test error %"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for dataset, name in DATASETS.items():
        if not any(key[0] == dataset for key in groups):
            continue
        seeds = len(groups.get((dataset, "uncalibrated"), []))
        cells = [f"**{name}**, ours ({seeds} seed{'s' if seeds > 1 else ''})"]
        for method in methods:
            found = groups.get((dataset, method))
            cells.append(_mean_sd([r["ece"] for r in found]) if found else "—")
        found = groups.get((dataset, "uncalibrated"), [])
        cells.append(_mean_sd([r["test_error"] for r in found]) if found else "—")
        lines.append("| " + " | ".join(cells) + " |")
        eces, error = PAPER[dataset]
        paper = [f"{PAPER_DATASETS[dataset]}, paper"]
        paper += [
            f"{PAPER_ECE[dataset][m]:.2f}" if m in PAPER_ECE[dataset] else "—" for m in methods
        ]
        lines.append("| " + " | ".join([*paper, f"{error:.2f}"]) + " |")
    return "\n".join(lines)


def model_report(rows, dataset="20news", seed=None):
    """Markdown: one network's test measures per method, with the bootstrap intervals."""
    chosen = [r for r in rows if r["dataset"] == dataset]
    if not chosen:
        return f"(no rows for {dataset})"
    seed = min(r["seed"] for r in chosen) if seed is None else seed
    chosen = [r for r in chosen if r["seed"] == seed]
    header = [
        "method",
        "ECE % [95 % interval]",
        "MCE %",
        "classwise ECE %",
        "NLL",
        "Brier",
        "test error %",
        "AURC %",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in chosen:
        aurc = row.get("reliability", {}).get("aurc")
        lines.append(
            "| "
            + " | ".join(
                [
                    METHODS.get(row["method"], row["method"]),
                    f"{row['ece']:.2f} [{row['ece_low']:.2f}, {row['ece_high']:.2f}]",
                    f"{row['mce']:.1f}",
                    f"{row['classwise_ece']:.3f}",
                    f"{row['nll']:.3f}",
                    f"{row['brier']:.3f}",
                    f"{row['test_error']:.2f}",
                    "—" if aurc is None else f"{aurc:.2f}",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def targets(rows):
    """The issue's targets, `[(text, held)]`."""
    groups = _group(rows)
    out = []

    def eces(dataset, method):
        return {r["seed"]: r for r in groups.get((dataset, method), [])}

    for dataset in ("20news", "sst-binary"):
        before, after = eces(dataset, "uncalibrated"), eces(dataset, "temperature")
        if not before:
            continue
        mean = np.mean([r["ece"] for r in before.values()])
        out.append((f"{dataset}: uncalibrated ECE {mean:.2f} % >= 4 %", mean >= 4))
        halved = all(after[s]["ece"] <= before[s]["ece"] / 2 for s in before if s in after)
        out.append((f"{dataset}: temperature scaling halves the ECE in every seed", halved))
        below = all(after[s]["ece_high"] < before[s]["ece_low"] for s in before if s in after)
        out.append(
            (f"{dataset}: its 95 % interval lies below the uncalibrated one's in every seed", below)
        )
    reuters = [
        (m, np.mean([r["ece"] for r in rs])) for (d, m), rs in groups.items() if d == "reuters"
    ]
    if reuters:
        worst = max(reuters, key=lambda item: item[1])
        out.append(
            (f"reuters: every method <= 2 % (worst: {worst[0]} {worst[1]:.2f} %)", worst[1] <= 2)
        )
    for dataset in DATASETS:
        found = groups.get((dataset, "uncalibrated"))
        if found:
            gap = np.mean([r["test_error"] for r in found]) - PAPER[dataset][1]
            out.append(
                (
                    f"{dataset}: test error {gap:+.2f} points from the paper's (target: within 5)",
                    abs(gap) <= 5,
                )
            )
    return out


def replace_between(text, marker, content):
    """`text` with the lines between `<!-- marker -->` and `<!-- /marker -->` replaced."""
    pattern = re.compile(rf"(<!-- {marker} -->\n).*?(<!-- /{marker} -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"no <!-- {marker} --> ... <!-- /{marker} --> in the guide")
    return pattern.sub(lambda m: m[1] + content + "\n" + m[2], text)


def targets_list(rows):
    """Markdown bullets: each of the issue's targets, met or not."""
    return "\n".join(
        f"- {'met' if held else '**not met**'}: {text}" for text, held in targets(rows)
    )


def guide_text(rows, text):
    text = replace_between(text, "TABLE1", table(rows))
    text = replace_between(text, "TABLE1_TARGETS", targets_list(rows))
    return replace_between(text, "TABLE1_MODEL", model_report(rows))


def figures(rows, cache, folder=FIGURES, dataset="20news", seed=0):
    """Reliability diagrams (uncalibrated, temperature scaling) of one network's test set
    and the risk-coverage curves of every data set (seed 0); PNG files in `folder`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import run

    from keras_normkit.calibration import fit_temperature, reliability_diagram

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cached = run.cached_logits(cache, dataset, seed)
    if cached is not None:
        arrays, _ = cached
        t = fit_temperature(arrays["val_logits"], arrays["val_labels"]).temperature
        fig, axes = plt.subplots(1, 2, figsize=(8, 4))
        reliability_diagram(
            run.softmax(arrays["test_logits"]),
            arrays["test_labels"],
            ax=axes[0],
            title=f"{DATASETS[dataset]}, uncalibrated",
        )
        reliability_diagram(
            run.softmax(arrays["test_logits"] / t),
            arrays["test_labels"],
            ax=axes[1],
            title=f"temperature scaling, T = {t:.2f}",
        )
        fig.tight_layout()
        fig.savefig(folder / "trust_reliability.png", dpi=80)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name in DATASETS:
        found = [
            r
            for r in rows
            if r["dataset"] == name and r["method"] == "temperature" and "reliability" in r
        ]
        if found:
            curve = found[0]["reliability"]
            ax.plot(curve["coverage"], curve["risk"], marker=".", label=DATASETS[name])
    ax.set_xlabel("coverage (most confident fraction kept)")
    ax.set_ylabel("error among the kept %")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "trust_risk_coverage.png", dpi=80)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=str(JSON))
    parser.add_argument("--write-guide", action="store_true")
    parser.add_argument("--figures", action="store_true")
    parser.add_argument("--cache", default=str(ROOT / "examples/calibration_benchmarks/cache"))
    args = parser.parse_args(argv)
    rows = load(args.json)
    print(table(rows), end="\n\n")
    print(model_report(rows), end="\n\n")
    for text, held in targets(rows):
        print(("met:     " if held else "NOT met: ") + text)
    if args.write_guide:
        GUIDE.write_text(guide_text(rows, GUIDE.read_text()))
        print(f"wrote the tables into {GUIDE.relative_to(ROOT)}")
    if args.figures:
        figures(rows, args.cache)
        print(f"wrote the figures into {FIGURES.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
