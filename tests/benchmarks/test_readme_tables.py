"""benchmarks/README.md, DECISIONS.md and results/: tables generated, decisions linked, records dated.

* every script has its table block in the README, and a block holds exactly the Markdown of
  the recorded runs it names (`_results.markdown`), whose newest run of every command is
  there (the accelerator and PyTorch blocks are checked by their scripts' own tests);
* every `DECISIONS.md#anchor` the code, guides and benchmarks link exists, and every entry
  names its measurement's record in `results/`;
* every dated record says it is never edited, and the README names no design of the past.
"""

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
_DIR = _ROOT / "benchmarks"
_spec = importlib.util.spec_from_file_location("_results", _DIR / "_results.py")
results = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(results)
sys.path.insert(0, str(_ROOT / "examples"))
from markdown_blocks import read_block  # noqa: E402

README = _DIR / "README.md"
DECISIONS = _DIR / "DECISIONS.md"
# Blocks whose scripts write their own table (checked by test_accelerator.py and
# test_bench_torch_recurrent.py).
OWN_TABLES = {"accelerator-table", "torch-recurrent-table"}
ANCHOR = re.compile(r'<a id="([a-z0-9-]+)"></a>')


def scripts():
    return sorted(p for p in _DIR.glob("*.py") if not p.name.startswith("_"))


def recorded_runs():
    """`{path from the root: report}` of every run recorded through `_results`."""
    runs = {}
    for path in sorted((_DIR / "results").glob("*.json")):
        report = json.loads(path.read_text())
        if "tables" in report:
            runs[path.relative_to(_ROOT).as_posix()] = report
    return runs


@pytest.mark.parametrize("script", scripts(), ids=lambda p: p.name)
def test_every_script_has_its_block(script):
    read_block(README, results.marker(script.name))  # there once, or a ValueError


@pytest.mark.parametrize(
    "script",
    [s for s in scripts() if results.marker(s.name) not in OWN_TABLES],
    ids=lambda p: p.name,
)
def test_a_block_is_the_markdown_of_the_runs_it_names(script):
    text = read_block(README, results.marker(script.name))
    named = results.RUN_LINE.findall(text)
    assert text == results.block(named)
    runs = recorded_runs()
    for path in named:
        assert runs[path]["script"] == f"benchmarks/{script.name}"
    # The newest run of each command of this script is in its block.
    newest = {}
    for path, report in sorted(runs.items(), key=lambda item: item[1]["started_utc"]):
        if report["script"] == f"benchmarks/{script.name}":
            newest[report["command"]] = path
    assert set(newest.values()) <= set(named)


def test_recorded_runs_are_generated_in_the_readme():
    runs = recorded_runs()
    assert "benchmarks/results/recurrent_cases_2026-12-06.json" in runs
    for path, report in runs.items():
        assert report["schema"] == results.SCHEMA
        assert report["command"].startswith("KERAS_BACKEND="), path
        for table in report["tables"].values():
            assert all(len(row) == len(table["columns"]) for row in table["rows"]), path


def test_the_converted_run_is_the_table_it_printed():
    """The 2026-12-06 run, recorded as printed Markdown, converted to JSON: the same rows."""
    printed = (_DIR / "results" / "recurrent_cases_2026-12-06.md").read_text()
    generated = read_block(README, "recurrent-cases-table")
    rows = [line for line in printed.splitlines() if line.startswith("| fast_weights")]
    rows += [line for line in printed.splitlines() if line.startswith("| layer_norm_lstm")]
    assert len(rows) == 12 * 4 + 2 + 16
    assert set(rows) <= set(generated.splitlines())


def decision_anchors():
    return set(ANCHOR.findall(DECISIONS.read_text()))


def test_decisions_have_the_rules_the_code_follows():
    assert decision_anchors() >= {
        "fast-weights-auto-form",
        "fast-weights-chunk",
        "fast-weights-memory-loops",
        "tensorflow-xla-clusters",
        "layer-norm-gradient",
        "recurrent-speed-bounds",
        "first-epoch-bound",
        "torch-native-loops",
        "torch-fast-weights-cpu",
    }
    # Each entry states its rule, and names its measurement's record (or says it is to come).
    text = DECISIONS.read_text()
    entries = re.split(r"\n## ", text)[1:]
    assert len(entries) == len(decision_anchors())
    for entry in entries:
        assert "**Rule**" in entry, entry[:80]
        assert "results/" in entry or "to be written" in entry, entry[:80]


def test_every_decision_link_resolves():
    anchors = decision_anchors()
    pattern = re.compile(r"DECISIONS\.md#([a-z0-9-]+)")
    linked = set()
    folders = ["keras_normkit", "docs", "benchmarks", "examples", "notebooks/src"]
    for folder in folders:
        for path in (_ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md") and path.is_file():
                for anchor in pattern.findall(path.read_text()):
                    assert anchor in anchors, f"{path.relative_to(_ROOT)}: #{anchor}"
                    linked.add(anchor)
    for anchor in re.findall(r"\]\(#([a-z0-9-]+)\)", DECISIONS.read_text()):
        assert anchor in anchors, anchor
    assert {"fast-weights-auto-form", "fast-weights-chunk", "layer-norm-gradient"} <= linked


def test_the_records_are_dated_and_linked():
    readme = README.read_text()
    dated = sorted((_DIR / "results").glob("2026-*.md"))
    assert len(dated) >= 20
    for path in dated:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d-[a-z0-9-]+\.md", path.name), path.name
        head = path.read_text()[:600]
        assert "never edited afterwards" in head, path.name
        assert f"(results/{path.name})" in readme, f"the README does not list {path.name}"
    for link in re.findall(r"\(results/([^)#]+)\)", readme + DECISIONS.read_text()):
        assert (_DIR / "results" / link).exists(), link


def test_the_readme_names_no_design_of_the_past():
    readme = README.read_text()
    for word in ("ChunkedLoop", "not kept", "Current code", "current code"):
        assert word not in readme, word
