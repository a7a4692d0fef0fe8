"""The tables of the SNN benchmarks, generated from the results JSON files, and the guide page
`docs/guides/snn_benchmarks.md` they are written into (between `<!-- SNN_... -->` markers).

    python examples/snn_benchmarks/snn_report.py            # print the tables
    python examples/snn_benchmarks/snn_report.py --write    # update the guide page (and its plot)
    python examples/snn_benchmarks/snn_report.py --check    # exit 1 if the page is out of date

The paper's per-data-set accuracies (its Table S8) are not in the data folder and were not
found in a public transcription we could cite, so the UCI table shows ours only and compares
average ranks with the paper's averages (quoted in the project's notes on the paper).
"""

import argparse
import json
import pathlib
import re
import sys

import numpy as np
from scipy.stats import rankdata

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "notebooks" / "data"
PAGE = ROOT / "docs" / "guides" / "snn_benchmarks.md"
PLOT = ROOT / "docs" / "guides" / "snn_benchmarks_ranks.png"
METHODS = ("snn", "msra", "batchnorm", "layernorm", "weightnorm", "highway", "resnet")
NAMES = {
    "snn": "SNN",
    "msra": "MSRAinit",
    "batchnorm": "BatchNorm",
    "layernorm": "LayerNorm",
    "weightnorm": "WeightNorm",
    "highway": "Highway",
    "resnet": "ResNet",
}
#: Average rank minus 4 of the 7 FNN methods, from the paper's Table S8 (as publicly
#: transcribed): on all 120 sets and on the 46 sets with >= 1000 examples.
PAPER_RANKS = {
    "all": {"snn": -0.76, "msra": -0.23, "layernorm": -0.17, "highway": 0.00, "resnet": 0.24,
            "weightnorm": 0.40, "batchnorm": 0.53},
    "large": {"snn": -0.98, "layernorm": -0.33, "msra": -0.09, "resnet": 0.20, "highway": 0.24,
              "weightnorm": 0.37, "batchnorm": 0.59},
}  # fmt: skip
#: Tox21 mean AUC (%) of the paper's Table 2 by depth (BatchNorm and LayerNorm: the ends only).
PAPER_TOX21 = {
    "snn": {2: 83.7, 4: 84.2, 8: 84.5, 16: 83.5, 32: 82.5},
    "batchnorm": {2: 80.0, 32: 76.0},
    "layernorm": {2: 84.3, 32: 78.8},
}
#: What the full runs plan (the targets of the tables' "done" counts).
PLANNED = {"uci_large": 42 * 7, "htru2": 10 * 7, "tox21": 3 * 5 * 5}


def load(name):
    path = DATA / name
    return json.loads(path.read_text()) if path.exists() else []


def average_ranks(rows, min_examples=0):
    """{method: average rank - 4} over the data sets where all 7 methods are done, and n sets.

    Per data set the 7 test accuracies are ranked, 1 the best, ties getting their average rank.
    """
    by_set = {}
    for r in rows:
        if r["n_examples"] >= min_examples:
            by_set.setdefault(r["dataset"], {})[r["method"]] = r["test"]
    complete = [s for s, m in sorted(by_set.items()) if set(m) >= set(METHODS)]
    if not complete:
        return {}, 0
    ranks = np.array([rankdata([-by_set[s][m] for m in METHODS]) for s in complete])
    middle = (len(METHODS) + 1) / 2
    return {m: float(ranks[:, i].mean() - middle) for i, m in enumerate(METHODS)}, len(complete)


def uci_tables(rows):
    large = [r for r in rows if r["n_examples"] >= 1000]
    sets = sorted({r["dataset"] for r in rows}, key=lambda s: (-_n(rows, s), s))
    lines = [
        f"Rows done: {len(large)} of {PLANNED['uci_large']} on the 42 complete sets with "
        f">= 1000 examples, {len(rows) - len(large)} on smaller sets.",
        "",
    ]
    if rows:
        lines += _uci_budget(rows)
        header = "| data set | examples | " + " | ".join(NAMES[m] for m in METHODS) + " |"
        lines += [header, "|" + "---|" * (len(METHODS) + 2)]
        for s in sets:
            accs = {r["method"]: r for r in rows if r["dataset"] == s}
            best = max(r["test"] for r in accs.values())
            cells = [
                _bold(f"{100 * accs[m]['test']:.1f} ({accs[m]['layers']})", accs[m]["test"] == best)
                if m in accs
                else "–"
                for m in METHODS
            ]
            lines.append(f"| {s} | {_n(rows, s)} | " + " | ".join(cells) + " |")
        lines += ["", "Test accuracy (%) and, in brackets, the depth chosen on validation.", ""]
    for label, key, min_examples in (
        (">= 1000 examples", "large", 1000),
        ("all sets", "all", 0),
    ):
        ours, n = average_ranks(rows, min_examples)
        lines += [
            f"Average rank - 4 ({label}; ours on {n} sets with all 7 methods done, "
            f"the paper's on {46 if key == 'large' else 120}):",
            "",
        ]
        lines += ["| method | ours | paper |", "|---|---|---|"]
        for m in sorted(METHODS, key=lambda m: PAPER_RANKS[key][m]):
            lines.append(
                f"| {NAMES[m]} | {ours[m]:+.2f} | {PAPER_RANKS[key][m]:+.2f} |"
                if ours
                else f"| {NAMES[m]} | – | {PAPER_RANKS[key][m]:+.2f} |"
            )
        lines.append("")
    ours, n = average_ranks(rows, 1000)
    if ours:
        best = min(ours, key=ours.get)
        lines.append(
            f"Target (SNN the lowest average rank on the >= 1000 sets): "
            f"{'met' if best == 'snn' else 'not met'} on {n} sets "
            f"(lowest: {NAMES[best]}, {ours[best]:+.2f})."
        )
    else:
        lines.append("Target (SNN the lowest average rank on the >= 1000 sets): no set done yet.")
    return "\n".join(lines).rstrip() + "\n"


def _n(rows, dataset):
    return next(r["n_examples"] for r in rows if r["dataset"] == dataset)


def _bold(text, bold):
    return f"**{text}**" if bold else text


def _uci_budget(rows):
    r = rows[0]
    grids = {tuple(sorted(x["validation_by_config"])) for x in rows}
    return [
        f"Budget: {r['optimizer']}, grid {', '.join(sorted(grids.pop(), key=_depth))}"
        + (" (and other grids on some rows)" if grids else "")
        + ", the same for every method.",
        "",
    ]


def _depth(key):
    return int(key.split("x")[0])


def htru2_table(rows):
    lines = [f"Rows done: {len(rows)} of {PLANNED['htru2']} (10 folds x 7 methods).", ""]
    if not rows:
        return "\n".join(lines) + "No fold done yet.\n"
    lines += _uci_budget(rows)
    lines += [
        "| method | folds done | AUC mean | AUC std (folds) | depths chosen |",
        "|---|---|---|---|---|",
    ]
    for m in METHODS:
        aucs = [r["test"] for r in rows if r["method"] == m]
        depths = sorted({r["layers"] for r in rows if r["method"] == m})
        if aucs:
            std = float(np.std(aucs, ddof=1)) if len(aucs) > 1 else 0.0
            std_text = f"{std:.4f}" if len(aucs) > 1 else "–"
            lines.append(
                f"| {NAMES[m]} | {len(aucs)} | {np.mean(aucs):.4f} | {std_text} | "
                f"{', '.join(map(str, depths))} |"
            )
    lines.append("")
    by_fold = {}
    for r in rows:
        by_fold.setdefault(r["fold"], {})[r["method"]] = r["test"]
    folds = sorted(f for f, m in by_fold.items() if set(m) >= set(METHODS))
    if not folds:
        lines.append(
            "Target (SNN AUC >= 0.975, within its fold std of every method): no fold has all "
            "7 methods yet."
        )
        return "\n".join(lines) + "\n"
    auc = {m: np.array([by_fold[f][m] for f in folds]) for m in METHODS}
    mean = float(auc["snn"].mean())
    std = float(auc["snn"].std(ddof=1)) if len(folds) > 1 else 0.0
    best = max((m for m in METHODS if m != "snn"), key=lambda m: auc[m].mean())
    ok = mean >= 0.975 and mean >= auc[best].mean() - std
    lines.append(
        f"Target (SNN AUC >= 0.975, within its fold std of every method), on the "
        f"{len(folds)} folds with all 7 methods done: {'met' if ok else 'not met'} "
        f"(SNN {mean:.4f} ± {std:.4f}; best other {NAMES[best]} {auc[best].mean():.4f})."
    )
    return "\n".join(lines) + "\n"


def tox21_table(rows):
    lines = [
        f"Rows done: {len(rows)} of {PLANNED['tox21']} (3 methods x 5 depths x 5 repetitions).",
        "",
    ]
    if not rows:
        return "\n".join(lines) + "No run done yet.\n"
    depths = sorted({r["layers"] for r in rows})
    lines += [
        "| method | " + " | ".join(f"{d} layers" for d in depths) + " |",
        "|---|" + "---|" * len(depths),
    ]
    for m in ("snn", "batchnorm", "layernorm"):
        cells = []
        for d in depths:
            aucs = [r["test"] for r in rows if r["method"] == m and r["layers"] == d]
            paper = PAPER_TOX21[m].get(d)
            ours = f"{100 * np.mean(aucs):.1f} (n={len(aucs)})" if aucs else "–"
            cells.append(ours + (f" / paper {paper:.1f}" if paper else ""))
        lines.append(f"| {NAMES[m]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Mean test AUC (%) over the 12 assays and the repetitions done (n); the paper's "
        "on its DeepTox features and the challenge's test set.",
    ]
    verdict = tox21_shape(rows)
    if verdict:
        lines += ["", verdict]
    return "\n".join(lines) + "\n"


def tox21_shape(rows, up_to=16):
    """The issue's target, the paper's shape: SNN within 1 point of its best mean AUC at every
    depth up to `up_to` layers, while BatchNorm's falls with depth (once every row is done)."""
    if len(rows) < PLANNED["tox21"]:
        return ""
    mean = {
        (m, d): 100 * np.mean([r["test"] for r in rows if r["method"] == m and r["layers"] == d])
        for m in ("snn", "batchnorm", "layernorm")
        for d in sorted({r["layers"] for r in rows})
    }
    depths = sorted({d for _, d in mean if d <= up_to})
    snn = [mean["snn", d] for d in depths]
    best = max(snn)
    gap = best - min(snn)
    bn = [mean["batchnorm", d] for d in depths]
    deepest = max(d for _, d in mean)
    falls = bn[-1] < max(bn)
    ok = gap <= 1.0 and falls
    return (
        f"Target (the paper's shape up to {up_to} layers): {'met' if ok else 'not met'}. "
        f"SNN's mean AUC stays within {gap:.2f} points of its best ({best:.2f} at "
        f"{depths[snn.index(best)]} layers) from {depths[0]} to {up_to} layers; BatchNorm's "
        f"falls from {max(bn):.2f} ({depths[bn.index(max(bn))]} layers) to {bn[-1]:.2f} at "
        f"{up_to}. At {deepest} layers every method falls (SNN {mean['snn', deepest]:.1f}, "
        f"BatchNorm {mean['batchnorm', deepest]:.1f}, LayerNorm "
        f"{mean['layernorm', deepest]:.1f}), where the paper's SNN keeps "
        f"{PAPER_TOX21['snn'][deepest]:.1f}."
    )


def activation_table(runs):
    if not runs:
        return "No run yet.\n"
    lines = []
    for run in runs:
        last = len(run["epochs"]) - 1
        lines += [
            f"{run['dataset']} ({run['n_examples']} examples), SNN of {run['layers']} layers x "
            f"{run['units']} units, {run['optimizer']} {run['lr']:g}, probe of {run['probe']} "
            f"training inputs; test accuracy {100 * run['test']:.1f} % after "
            f"{run['epochs'][-1]} epochs.",
            "",
            "| layer | mean, before training | variance, before | mean, after "
            f"{run['epochs'][-1]} epochs | variance, after |",
            "|---|---|---|---|---|",
        ]
        for i in range(run["layers"]):
            lines.append(
                f"| {i + 1} | {run['mean'][0][i]:+.3f} | {run['variance'][0][i]:.3f} | "
                f"{run['mean'][last][i]:+.3f} | {run['variance'][last][i]:.3f} |"
            )
        lines.append("")
    return "\n".join(lines)


def sections():
    """{marker: generated Markdown} for every generated part of the guide page."""
    return {
        "SNN_UCI": uci_tables(load("snn_uci.json")),
        "SNN_HTRU2": htru2_table(load("snn_htru2.json")),
        "SNN_TOX21": tox21_table(load("snn_tox21.json")),
        "SNN_ACTIVATIONS": activation_table(load("snn_activations.json")),
    }


def render(page, generated):
    """`page` with each `<!-- M -->...<!-- /M -->` block replaced by `generated[M]`."""
    for marker, text in generated.items():
        pattern = re.compile(rf"(<!-- {marker} -->\n).*?(<!-- /{marker} -->)", re.S)
        if not pattern.search(page):
            raise ValueError(f"the page has no <!-- {marker} --> ... <!-- /{marker} --> block")
        page = pattern.sub(lambda m, t=text: m.group(1) + "\n" + t + "\n" + m.group(2), page)
    return page


def plot(rows, path):
    """The average rank - 4 per method, ours beside the paper's (>= 1000 examples)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ours, n = average_ranks(rows, 1000)
    order = sorted(METHODS, key=lambda m: PAPER_RANKS["large"][m])
    fig, ax = plt.subplots(figsize=(6, 3), dpi=100)
    y = np.arange(len(order))
    ax.barh(y + 0.2, [PAPER_RANKS["large"][m] for m in order], 0.4, label="paper (46 sets)")
    if ours:
        ax.barh(y - 0.2, [ours[m] for m in order], 0.4, label=f"ours ({n} sets)")
    ax.set_yticks(y, [NAMES[m] for m in order])
    ax.invert_yaxis()
    ax.axvline(0, color="k", lw=0.5)
    ax.set_xlabel("average rank - 4 (lower is better)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="update the guide page and plot")
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args(argv)
    generated = sections()
    if args.write or args.check:
        page = PAGE.read_text()
        new = render(page, generated)
        if args.check:
            if new != page:
                print(f"{PAGE} is out of date: run snn_report.py --write")
                return 1
            return 0
        PAGE.write_text(new)
        plot(load("snn_uci.json"), PLOT)
        return 0
    for marker, text in generated.items():
        print(f"## {marker}\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
