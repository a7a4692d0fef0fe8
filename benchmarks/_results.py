"""A benchmark run recorded as JSON, and its tables as Markdown in `benchmarks/README.md`.

A script that records its runs builds its tables with a `Recorder` (which prints them as it
goes) and takes three options (`add_arguments`):

    --json PATH               write the run to PATH, again after every row (a stopped run
                              keeps the rows it finished)
    --report PATH [PATH ...]  print the Markdown of recorded runs; nothing is measured
    --write-block             with --report: write it into benchmarks/README.md, between
                              the script's markers `<!-- NAME-table -->` and
                              `<!-- /NAME-table -->` (`marker`)

The JSON: `schema`, `script`, `command` (the run's command line without `--json`, after the
environment that changes the timings, `examples/result_commands.py`), `started_utc`,
`versions`, `machine`, `tables` (`{name: {"title", "columns": [[name, format], ...],
"rows": [[value, ...], ...]}}`, the values as measured, formatted only in the Markdown) and
`notes` (what a script prints after its tables: the targets met, the worst case).

A README block holds, for every run it names, a line with the run's date, its JSON, its
command and machine, then the run's tables and notes (`markdown`).
`tests/benchmarks/test_readme_tables.py` checks every block against the JSONs it names, and
that the newest run of every command in `benchmarks/results/` is in its script's block.
"""

import datetime
import json
import os
import pathlib
import platform
import re
import shlex
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "benchmarks" / "README.md"
SCHEMA = 1
# The line that opens a run in a README block; group 1 is its JSON's path.
RUN_LINE = re.compile(r"^Run of [^`]*`(benchmarks/results/[^`]+\.json)`", re.M)

sys.path.insert(0, str(ROOT / "examples"))
from markdown_blocks import write_block  # noqa: E402
from result_commands import environment_prefix  # noqa: E402


def marker(script):
    """The README marker of a script's tables: `benchmarks/bench_fast_weights.py` ->
    `fast-weights-table`."""
    stem = pathlib.PurePath(script).stem.removeprefix("bench_")
    return stem.replace("_", "-") + "-table"


def _without_json(argv):
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == "--json":
            skip = True
        elif not word.startswith("--json="):
            out.append(word)
    return out


def _versions():
    import keras

    import keras_normkit

    versions = {"keras": keras.__version__, "keras_normkit": keras_normkit.__version__}
    backend = keras.backend.backend()
    module = sys.modules.get(backend) or __import__(backend)
    versions[backend] = getattr(module, "__version__", "?")
    versions["python"] = platform.python_version()
    return versions


class Recorder:
    """Collects a run's tables, prints them as Markdown as rows come, writes the JSON.

    Args:
        script: The script's path from the repository root, `benchmarks/bench_x.py`.
        argv: Its command-line arguments (`sys.argv[1:]`); `--json` is left out of the
            recorded command.
        path: Where to write the JSON (`None`: nowhere, the tables are only printed).
        environ, versions, machine: For tests; by default the process's own.
    """

    def __init__(self, script, argv, path=None, environ=None, versions=None, machine=None):
        self.path = None if path is None else pathlib.Path(path)
        words = [script, *(shlex.quote(str(word)) for word in _without_json(argv))]
        self.report = {
            "schema": SCHEMA,
            "script": script,
            "command": " ".join([environment_prefix(environ), "python", *words]),
            "started_utc": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            ),
            "versions": _versions() if versions is None else versions,
            "machine": machine
            or {
                "platform": platform.platform(),
                "processor": platform.processor(),
                "cpus": os.cpu_count(),
            },
            "tables": {},
            "notes": [],
        }

    def table(self, name, title, columns):
        """Starts table `name`: `columns` is `[(name, format), ...]`, a format spec for
        numbers (`".2f"`) or `""`."""
        if name in self.report["tables"]:
            raise ValueError(f"table {name!r} started twice")
        columns = [[str(c), str(f)] for c, f in columns]
        self.report["tables"][name] = {"title": title, "columns": columns, "rows": []}
        print(f"\n{title}\n\n" + "\n".join(_table_lines(columns, [])), flush=True)
        self.save()

    def row(self, name, *values):
        """Adds a row of `len(columns)` values (numbers unformatted; `None` for none)."""
        table = self.report["tables"][name]
        if len(values) != len(table["columns"]):
            raise ValueError(f"table {name!r} has {len(table['columns'])} columns")
        values = [_plain(v) for v in values]
        table["rows"].append(values)
        print(_table_lines(table["columns"], [values])[-1], flush=True)
        self.save()

    def note(self, text):
        """A line printed after the tables (a verdict, a worst case)."""
        self.report["notes"].append(str(text))
        print(text, flush=True)
        self.save()

    def save(self):
        if self.path is not None:
            self.path.write_text(json.dumps(self.report, indent=1, ensure_ascii=False) + "\n")


def _plain(value):
    """A JSON value: NumPy scalars as Python numbers."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def _cell(value, spec):
    if value is None:
        return "—"
    if spec and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return str(value)


def _table_lines(columns, rows):
    lines = ["| " + " | ".join(name for name, _ in columns) + " |"]
    lines.append("|" + "".join("---|" if not spec else "---:|" for _, spec in columns))
    for row in rows:
        cells = (_cell(value, spec) for value, (_, spec) in zip(row, columns, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(report, path):
    """The Markdown of a recorded run (`report`, read from `path`, relative to the root)."""
    date = report["started_utc"].replace("T", " ").removesuffix("Z")[:16]
    machine = report["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in report["versions"].items())
    lines = [
        f"Run of {date} UTC, `{path}`: `{report['command']}` "
        f"({machine.get('cpus', '?')} CPUs, {machine.get('platform', '?')}; {versions})."
    ]
    if report.get("converted_from"):
        lines[0] += f" {report['converted_from']}"
    for table in report["tables"].values():
        if table["rows"]:
            lines += ["", f"{table['title']}:", "", *_table_lines(table["columns"], table["rows"])]
    if report["notes"]:
        lines += [""] + [f"- {note}" for note in report["notes"]]
    return "\n".join(lines)


def block(paths):
    """The README block of the runs recorded in `paths` (relative to the repository root)."""
    runs = []
    for path in paths:
        path = pathlib.Path(path)
        path = path if path.is_absolute() else ROOT / path
        try:
            name = path.resolve().relative_to(ROOT.resolve()).as_posix()
        except ValueError:  # a run kept elsewhere: named as it was given
            name = str(path)
        runs.append(markdown(json.loads(path.read_text()), name))
    return "\n\n".join(runs)


def add_arguments(parser):
    """`--json`, `--report` and `--write-block` (see the module docstring)."""
    parser.add_argument("--json", default=None, help="write the run's results to this file")
    parser.add_argument(
        "--report", nargs="+", default=None, help="print the Markdown of recorded runs (JSON)"
    )
    parser.add_argument(
        "--write-block", action="store_true", help="with --report: into benchmarks/README.md"
    )


def reported(args, script):
    """With `--report`: prints (and with `--write-block` writes) the runs' Markdown and
    returns `True`; else `False`, and the script runs."""
    if not args.report:
        return False
    text = block(args.report)
    if args.write_block:
        write_block(README, marker(script), text)
    print(text)
    return True
