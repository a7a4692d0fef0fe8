"""benchmarks/_results.py: a run's JSON as rows come, its Markdown, the README block.

Fake rows only: nothing is timed.
"""

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("_results", _ROOT / "benchmarks" / "_results.py")
results = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(results)

ENVIRON = {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "HOME": "/root"}
VERSIONS = {"keras": "3.0", "keras_normkit": "0.2", "tensorflow": "2.0", "python": "3.11"}
MACHINE = {"platform": "Linux", "processor": "x86_64", "cpus": 2}


def recorder(path, argv=("--rounds", "3", "--json", "out.json")):
    return results.Recorder("benchmarks/bench_x.py", list(argv), path, ENVIRON, VERSIONS, MACHINE)


def test_markers_follow_the_script_names():
    assert results.marker("benchmarks/bench_fast_weights.py") == "fast-weights-table"
    assert results.marker("benchmarks/bench_torch_recurrent.py") == "torch-recurrent-table"
    assert results.marker("benchmarks/accelerator.py") == "accelerator-table"


def test_the_json_is_written_after_every_row_with_its_command(tmp_path, capsys):
    path = tmp_path / "run.json"
    rec = recorder(path)
    rec.table("t", "Two columns", [("case", ""), ("ms", ".1f")])
    assert json.loads(path.read_text())["tables"]["t"]["rows"] == []
    rec.row("t", "a", 1.234)
    saved = json.loads(path.read_text())
    assert saved["tables"]["t"] == {
        "title": "Two columns",
        "columns": [["case", ""], ["ms", ".1f"]],
        "rows": [["a", 1.234]],  # as measured: formatted only in the Markdown
    }
    rec.row("t", "b", None)
    rec.note("target met")
    saved = json.loads(path.read_text())
    assert saved["schema"] == results.SCHEMA and saved["script"] == "benchmarks/bench_x.py"
    # The environment first (KERAS_BACKEND always), then the command line without --json.
    backend = saved["command"].split()[0]
    assert backend.startswith("KERAS_BACKEND=")
    assert saved["command"].split(" ", 1)[1] == (
        "PYTHONHASHSEED=0 OMP_NUM_THREADS=1 python benchmarks/bench_x.py --rounds 3"
    )
    assert saved["notes"] == ["target met"] and saved["versions"] == VERSIONS
    assert saved["started_utc"].endswith("Z")
    printed = capsys.readouterr().out
    assert "| case | ms |\n|---|---:|\n| a | 1.2 |\n| b | — |\ntarget met" in printed


def test_rows_must_fit_the_columns_and_tables_start_once(tmp_path):
    rec = recorder(None)
    rec.table("t", "T", [("a", ""), ("b", "")])
    with pytest.raises(ValueError, match="2 columns"):
        rec.row("t", 1)
    with pytest.raises(ValueError, match="twice"):
        rec.table("t", "T", [("a", "")])


def test_markdown_of_a_run(tmp_path):
    rec = recorder(None, argv=["--json=x.json", "--section", "grid"])
    rec.report["started_utc"] = "2026-12-08T09:10:11Z"
    rec.table("empty", "Not shown", [("a", "")])
    rec.table("t", "Times", [("case", ""), ("ratio", ".2f"), ("n", "")])
    rec.row("t", "x", 1.0 / 3, 7)
    rec.note("worst 0.33")
    text = results.markdown(rec.report, "benchmarks/results/x.json")
    assert text.splitlines() == [
        f"Run of 2026-12-08 09:10 UTC, `benchmarks/results/x.json`: `{rec.report['command']}` "
        "(2 CPUs, Linux; keras 3.0, keras_normkit 0.2, tensorflow 2.0, python 3.11).",
        "",
        "Times:",
        "",
        "| case | ratio | n |",
        "|---|---:|---|",
        "| x | 0.33 | 7 |",
        "",
        "- worst 0.33",
    ]
    assert rec.report["command"].endswith("python benchmarks/bench_x.py --section grid")
    assert results.RUN_LINE.findall(text) == ["benchmarks/results/x.json"]


def test_report_prints_and_writes_the_block(tmp_path, monkeypatch, capsys):
    run = tmp_path / "benchmarks" / "results" / "x_2026.json"
    run.parent.mkdir(parents=True)
    rec = recorder(run)
    rec.table("t", "T", [("a", "")])
    rec.row("t", 1)
    readme = tmp_path / "benchmarks" / "README.md"
    readme.write_text("# B\n\n<!-- x-table -->\nold\n<!-- /x-table -->\n")
    monkeypatch.setattr(results, "ROOT", tmp_path)
    monkeypatch.setattr(results, "README", readme)
    parser = argparse.ArgumentParser()
    results.add_arguments(parser)
    assert not results.reported(parser.parse_args([]), "benchmarks/bench_x.py")
    args = parser.parse_args(["--report", str(run), "--write-block"])
    assert results.reported(args, "benchmarks/bench_x.py")
    expected = results.markdown(json.loads(run.read_text()), "benchmarks/results/x_2026.json")
    assert readme.read_text() == f"# B\n\n<!-- x-table -->\n{expected}\n<!-- /x-table -->\n"
    assert expected in capsys.readouterr().out


def test_the_environment_prefix_and_its_parser():
    sys.path.insert(0, str(_ROOT / "examples"))
    import result_commands as rc

    environ = {"XLA_FLAGS": "--a=1 --b", "PYTHONHASHSEED": "0", "HOME": "/x"}
    prefix = rc.environment_prefix(environ, backend="jax")
    assert prefix == "KERAS_BACKEND=jax PYTHONHASHSEED=0 XLA_FLAGS='--a=1 --b'"
    command = rc.command("examples/x.py", ["--data", "a b"], environ, backend="jax")
    assert rc.environment_of(command) == {
        "KERAS_BACKEND": "jax",
        "PYTHONHASHSEED": "0",
        "XLA_FLAGS": "--a=1 --b",
    }
    assert command.endswith("python examples/x.py --data 'a b'")
    assert rc.variables_prefix({}) == "" and rc.environment_of("python x.py A=1") == {}
