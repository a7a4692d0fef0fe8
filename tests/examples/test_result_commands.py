"""Every results row re-runs from its own command: each `command` (and bAbI's `rerun`) in
the committed results files names the backend it ran on (`KERAS_BACKEND=...`).

The same row can give other numbers on another backend (an SNN row made on JAX gave 70.7 %
instead of 73.1 % when re-run, as recorded then, on the default TensorFlow), so a command
without its backend does not re-run its row. The scripts write the environment from
`examples/result_commands.py`; the exceptions below are files whose environment could not be
established afterwards, each with the reason.
"""

import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import result_commands  # noqa: E402

FILES = sorted(
    [
        *(ROOT / "notebooks" / "data").glob("*.json"),
        *(ROOT / "benchmarks" / "results").glob("*.json"),
    ]
)

# file -> why its commands do not name the backend
WITHOUT_BACKEND = {
    "notebooks/data/snn_activations.json": (
        "activations.py is not part of run_all.sh and sets no backend; nothing recorded which "
        "backend its two rows ran on"
    ),
    "notebooks/data/layer_normalization_lstm_seeds.json": (
        "one hand-written command for the file, with placeholders (SEED, FILE); the script "
        "defaults to TensorFlow, but nothing recorded whether the run overrode it"
    ),
    "benchmarks/results/accelerator_h200_2026-12-04.json": (
        "accelerator.py runs each backend of --backends in a process of its own, setting "
        "KERAS_BACKEND itself"
    ),
    "benchmarks/results/accelerator_h200_torch_jit_2026-12-04.json": "as the one above",
}
# Files whose rows record no command at all (written before rows recorded theirs; the
# notebooks that read them give the commands in their text).
WITHOUT_COMMANDS = {
    "notebooks/data/layer_normalization_curves.json",
    "notebooks/data/qrn_babi_1k.json",
    "notebooks/data/qrn_babi_curves.json",
}


def commands(value):
    """Every `command` and `rerun` string in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("command", "rerun") and isinstance(item, str):
                yield item
            else:
                yield from commands(item)
    elif isinstance(value, list):
        for item in value:
            yield from commands(item)


def relative(path):
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", FILES, ids=relative)
def test_every_command_names_its_backend(path):
    found = list(commands(json.loads(path.read_text())))
    if relative(path) in WITHOUT_COMMANDS:
        assert not found, f"{relative(path)} records commands now: take it off the list"
        return
    assert found, f"{relative(path)} records no command"
    for command in found:
        environment = result_commands.environment_of(command)
        if relative(path) in WITHOUT_BACKEND:
            assert "KERAS_BACKEND" not in environment, "take it off the list"
            continue
        assert environment.get("KERAS_BACKEND") in ("tensorflow", "jax", "torch"), command
        assert " python " in f" {command} ", command


def test_the_lists_name_existing_files():
    assert set(WITHOUT_BACKEND) | WITHOUT_COMMANDS <= {relative(p) for p in FILES}
    accelerator = [p for p in FILES if p.name.startswith("accelerator_")]
    for path in accelerator:
        (command,) = commands(json.loads(path.read_text()))
        assert "--backends " in command


def test_rows_made_by_run_all_name_its_environment():
    """The SNN benchmarks' long run (run_all.sh) exports the backend and the hash seed."""
    script = (ROOT / "examples" / "snn_benchmarks" / "run_all.sh").read_text()
    assert "KERAS_BACKEND=${KERAS_BACKEND:-jax} PYTHONHASHSEED=0" in script
    for name in ("snn_uci", "snn_htru2", "snn_tox21"):
        rows = json.loads((ROOT / "notebooks" / "data" / f"{name}.json").read_text())
        for row in rows:
            environment = result_commands.environment_of(row["command"])
            assert environment == {"KERAS_BACKEND": "jax", "PYTHONHASHSEED": "0"}, name
