"""The tables and plots of `notebooks/data/normalizer_free.json`, written into the guide page
`docs/guides/training_without_batch_norm.md` (between its `<!-- NF_... -->` markers).

    python examples/normalizer_free/report.py            # print the tables
    python examples/normalizer_free/report.py --write    # update the guide page and its plots
    python examples/normalizer_free/report.py --check    # exit 1 if the page is out of date

The targets (issue 51): the NF-ResNet's average channel variance within 10 % of the analytic
`1 + k alpha^2` at every block and its average squared channel mean below 0.1; the plain
net's squared mean growing by orders of magnitude; the NF-ResNet's test accuracy within 1
point of the batch-norm ResNet's at batch 32 (mean of 3 seeds); at a learning rate where the
NF-ResNet diverges without adaptive gradient clipping, it trains with it.
"""

import argparse
import json
import math
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
JSON = ROOT / "notebooks" / "data" / "normalizer_free.json"
PAGE = ROOT / "docs" / "guides" / "training_without_batch_norm.md"
FIGURE = ROOT / "docs" / "guides" / "img" / "normalizer_free_signal.png"
NAMES = {
    "bn_resnet": "BN-ResNet",
    "nf_resnet": "NF-ResNet (scaled WS)",
    "plain_resnet": "neither (plain convs)",
}
#: A run "trains" when its test accuracy is at least this; it "diverges" when its loss became
#: non-finite or it ended below `CHANCE_LEVEL` (10 classes: chance is about 10 %).
TRAINS = 50.0
CHANCE_LEVEL = 20.0
VARIANCE_TOLERANCE = 0.10
SQUARED_MEAN_BOUND = 0.1
ACCURACY_GAP = 1.0


def load(path=JSON):
    path = pathlib.Path(path)
    return json.loads(path.read_text()) if path.exists() else []


def _rows(rows, experiment):
    return [row for row in rows if row.get("experiment") == experiment]


def _fmt(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


# --------------------------------------------------------------------------- signal


def signal_table(rows):
    """Per block: each net's average squared channel mean and average channel variance."""
    rows = _rows(rows, "signal")
    if not rows:
        return "No signal-propagation rows yet.\n"
    by = {(r["model"], r["block"]): r for r in rows}
    blocks = sorted({r["block"] for r in rows})
    lines = [
        "| block | stage | NF: variance | NF: analytic `1 + k α²` | NF: squared mean "
        "| neither: variance | neither: squared mean | BN: variance | BN: squared mean |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for b in blocks:
        nf, plain, bn = (by.get((m, b)) for m in ("nf_resnet", "plain_resnet", "bn_resnet"))
        stage = (nf or plain or bn)["stage"]
        cells = [
            _fmt(nf and nf["variance"]),
            _fmt(nf and nf["expected_variance"], 2),
            _fmt(nf and nf["squared_mean"], 4),
            _fmt(plain and plain["variance"]),
            _fmt(plain and plain["squared_mean"], 4),
            _fmt(bn and bn["variance"]),
            _fmt(bn and bn["squared_mean"], 3),
        ]
        lines.append(f"| {b + 1} | {stage + 1} | " + " | ".join(cells) + " |")
    first = rows[0]
    lines.append("")
    lines.append(
        f"Averages over {first['initializations']} initializations; re-run: `{first['command']}`."
    )
    return "\n".join(lines) + "\n"


def signal_targets(rows):
    rows = _rows(rows, "signal")
    nf = [r for r in rows if r["model"] == "nf_resnet"]
    plain = [r for r in rows if r["model"] == "plain_resnet"]
    if not nf or not plain:
        return "Signal-propagation targets: not measured yet.\n"
    deviation = max(abs(r["variance"] / r["expected_variance"] - 1.0) for r in nf)
    worst = max(nf, key=lambda r: abs(r["variance"] / r["expected_variance"] - 1.0))
    squared = max(r["squared_mean"] for r in nf)
    plain = sorted(plain, key=lambda r: r["block"])
    growth = plain[-1]["squared_mean"] / plain[0]["squared_mean"]
    spread = max(
        max(abs(lo / r["expected_variance"] - 1), abs(hi / r["expected_variance"] - 1))
        for r in nf
        for lo, hi in [r["variance_range"]]
    )

    def verdict(ok):
        return "**met**" if ok else "**not met**"

    return (
        f"- NF-ResNet variance within {VARIANCE_TOLERANCE:.0%} of `1 + k α²` at every block: "
        f"{verdict(deviation <= VARIANCE_TOLERANCE)} (largest deviation {deviation:.1%}, "
        f"block {worst['block'] + 1}; single initializations deviate by up to {spread:.1%}).\n"
        f"- NF-ResNet average squared channel mean below {SQUARED_MEAN_BOUND}: "
        f"{verdict(squared < SQUARED_MEAN_BOUND)} (largest {squared:.3f}).\n"
        f"- Without weight standardization the squared channel mean grows "
        f"{growth:.0f}-fold over the {len(plain)} blocks ({math.log10(growth):.1f} orders of "
        f"magnitude: {plain[0]['squared_mean']:.3g} to {plain[-1]['squared_mean']:.3g}).\n"
    )


def plot(rows, path=FIGURE):
    """The signal-propagation plots: squared channel mean and variance per block."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _rows(rows, "signal")
    if not rows:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for model, style in (("bn_resnet", "C0-"), ("nf_resnet", "C1-"), ("plain_resnet", "C2-")):
        data = sorted((r for r in rows if r["model"] == model), key=lambda r: r["block"])
        blocks = [r["block"] + 1 for r in data]
        axes[0].plot(blocks, [r["squared_mean"] for r in data], style, label=NAMES[model])
        axes[1].plot(blocks, [r["variance"] for r in data], style, label=NAMES[model])
        if model == "nf_resnet":
            axes[1].plot(
                blocks, [r["expected_variance"] for r in data], "k:", label="analytic 1 + kα²"
            )
    axes[0].set_yscale("log")
    axes[0].set_title("average squared channel mean")
    axes[1].set_title("average channel variance")
    for ax in axes:
        ax.set_xlabel("residual block")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


# --------------------------------------------------------------------------- training


def _status(row):
    if row["diverged"] or row["test_accuracy"] is None:
        return "diverged"
    if row["test_accuracy"] < CHANCE_LEVEL:
        return "diverged"
    return "trained" if row["test_accuracy"] >= TRAINS else "poor"


def _label(row):
    agc = f" + AGC {row['agc']:g}" if row.get("agc") else ""
    return f"{NAMES[row['model']]}{agc}"


def training_table(rows):
    """Test accuracy by model, batch size and learning rate: mean ± sd over seeds."""
    rows = _rows(rows, "train")
    if not rows:
        return "No training rows yet.\n"
    groups = {}
    for row in rows:
        key = (row["batch_size"], row["learning_rate"], row["model"], row.get("agc"))
        groups.setdefault(key, []).append(row)
    lines = [
        "| batch | peak rate | model | seeds | test accuracy (%) | per seed | status |",
        "| ---: | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for key in sorted(groups, key=lambda k: (-k[0], k[1], k[2], k[3] or 0)):
        group = sorted(groups[key], key=lambda r: r["seed"])
        accuracies = [r["test_accuracy"] for r in group if r["test_accuracy"] is not None]
        mean = np.mean(accuracies) if accuracies else None
        sd = np.std(accuracies, ddof=1) if len(accuracies) > 1 else None
        summary = "–" if mean is None else f"{mean:.2f}" + (f" ± {sd:.2f}" if sd else "")
        per_seed = ", ".join(_fmt(r["test_accuracy"], 2) for r in group)
        statuses = sorted({_status(r) for r in group})
        lines.append(
            f"| {key[0]} | {key[1]:g} | {_label(group[0])} | {len(group)} | {summary} | "
            f"{per_seed} | {', '.join(statuses)} |"
        )
    epochs = sorted({r["epochs"] for r in rows})
    lines.append("")
    lines.append(
        f"Mean ± standard deviation over seeds; {', '.join(map(str, epochs))} epochs on the "
        "8,000 training images, accuracy on the 2,000 test images; one row per run, with its "
        "command, in `notebooks/data/normalizer_free.json`."
    )
    return "\n".join(lines) + "\n"


def _mean_accuracy(rows, model, batch_size, learning_rate=None, agc="any"):
    found = [
        r
        for r in rows
        if r["model"] == model
        and r["batch_size"] == batch_size
        and (learning_rate is None or r["learning_rate"] == learning_rate)
        and (agc == "any" or r.get("agc") == agc)
        and r["test_accuracy"] is not None
    ]
    return (np.mean([r["test_accuracy"] for r in found]), len(found)) if found else (None, 0)


def training_targets(rows):
    rows = _rows(rows, "train")
    if not rows:
        return "Training targets: not measured yet.\n"
    out = []
    bn, n_bn = _mean_accuracy(rows, "bn_resnet", 32, 0.1)
    nf_rows = [r for r in rows if r["model"] == "nf_resnet" and r["batch_size"] == 32]
    nf_rows = [r for r in nf_rows if r["learning_rate"] == 0.1]
    nf, n_nf = _mean_accuracy(nf_rows, "nf_resnet", 32)
    if bn is not None and nf is not None:
        ok = nf >= bn - ACCURACY_GAP
        out.append(
            f"- Batch 32: NF-ResNet {nf:.2f} % ({n_nf} seeds) vs BN-ResNet {bn:.2f} % "
            f"({n_bn} seeds), within {ACCURACY_GAP:g} point: "
            f"{'**met**' if ok and min(n_nf, n_bn) >= 3 else '**not met**' if not ok else 'so far'}"
            f" (difference {nf - bn:+.2f})."
        )
    for rate in sorted({r["learning_rate"] for r in rows if r["batch_size"] == 4}):
        small = {m: _mean_accuracy(rows, m, 4, rate) for m in ("nf_resnet", "bn_resnet")}
        parts = [
            f"{NAMES[m].split(' ')[0]} {value:.2f} % ({n} seeds)"
            for m, (value, n) in small.items()
            if value is not None
        ]
        if parts:
            out.append(f"- Batch 4, peak rate {rate:g}: {', '.join(parts)}.")
    by_rate = {}
    for r in rows:
        if r["model"] == "nf_resnet" and r["batch_size"] == 32:
            by_rate.setdefault(r["learning_rate"], {}).setdefault(bool(r.get("agc")), []).append(r)
    for rate, runs in sorted(by_rate.items()):
        if True not in runs or False not in runs:
            continue
        without, with_agc = runs[False], runs[True]
        accuracy = ", ".join(_fmt(r["test_accuracy"], 2) for r in with_agc)
        if all(_status(r) == "diverged" for r in without):
            losses = [v for r in without for v in r["train_loss"] if v is not None]
            finite = [v for v in losses if math.isfinite(v)]
            blown = f" (its training loss reached {max(finite):.3g})" if finite else ""
            ok = all(_status(r) == "trained" for r in with_agc)
            out.append(
                f"- Peak rate {rate:g}: without AGC the NF-ResNet diverges{blown}; with AGC "
                f"it reaches {accuracy} %: {'**met**' if ok else '**not met**'}."
            )
        else:
            plain = ", ".join(_fmt(r["test_accuracy"], 2) for r in without)
            out.append(
                f"- Peak rate {rate:g}: the NF-ResNet trains without AGC ({plain} %) and with "
                f"it ({accuracy} %)."
            )
    return "\n".join(out) + "\n" if out else "Training targets: not measured yet.\n"


# --------------------------------------------------------------------------- page


def sections(rows=None):
    rows = load() if rows is None else rows
    return {
        "NF_SIGNAL_TARGETS": signal_targets(rows),
        "NF_SIGNAL": signal_table(rows),
        "NF_TRAINING": training_table(rows),
        "NF_TRAINING_TARGETS": training_targets(rows),
    }


def render(page, generated):
    """`page` with the text between `<!-- NAME -->` and `<!-- /NAME -->` replaced."""
    for marker, text in generated.items():
        start, end = f"<!-- {marker} -->\n", f"<!-- /{marker} -->"
        if page.count(start) != 1 or page.count(end) != 1:
            raise ValueError(f"the page must hold {start.strip()} and {end} once each")
        head, rest = page.split(start)
        _, tail = rest.split(end, 1)
        page = head + start + "\n" + text.rstrip("\n") + "\n\n" + end + tail
    return page


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
                print(f"{PAGE} is out of date: run examples/normalizer_free/report.py --write")
                return 1
            return 0
        PAGE.write_text(new)
        plot(load())
        return 0
    for marker, text in generated.items():
        print(f"## {marker}\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
