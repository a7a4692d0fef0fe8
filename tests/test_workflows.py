"""The contributor's tooling agrees with itself: the GitHub workflow, `.ci/run`, the Makefile
and the pre-commit pin."""

import configparser
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


def makefile_targets():
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w.-]*):(?!=)", text, flags=re.MULTILINE))


def matrix_values(matrix, key):
    """The values `${{ matrix.KEY }}` takes: the list `matrix[KEY]` and the `include` entries."""
    values = list(matrix.get(key, []))
    values += [entry[key] for entry in matrix.get("include", []) if key in entry]
    assert values, f"the workflow uses matrix.{key}, which its matrix does not define"
    return values


def workflow_make_targets():
    """Every `make TARGET` a job runs, with `${{ matrix.KEY }}` expanded."""
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    targets = set()
    for job in jobs.values():
        matrix = job.get("strategy", {}).get("matrix", {})
        for step in job["steps"]:
            for line in step.get("run", "").splitlines():
                for word in re.findall(r"\bmake\s+(\$\{\{[^}]*\}\}|\S+)", line):
                    key = re.fullmatch(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", word)
                    targets.update(matrix_values(matrix, key[1]) if key else [word])
    return targets


def ci_run_make_targets():
    return set(re.findall(r"\bmake\s+([a-z][\w-]*)", (ROOT / ".ci" / "run").read_text()))


def test_every_make_target_of_the_workflow_exists():
    targets = workflow_make_targets()
    assert targets, "the workflow runs no make target"
    assert targets <= makefile_targets(), targets - makefile_targets()


def test_workflow_runs_what_ci_runs():
    # One job per backend and the newest Keras, like .ci/run's steps.
    assert {"test", "test-jax", "test-torch", "test-keras-nightly"} <= workflow_make_targets()
    assert ci_run_make_targets() <= workflow_make_targets(), (
        ci_run_make_targets() - workflow_make_targets()
    )


def test_the_parser_sees_a_missing_target():
    assert "no-such-target" not in makefile_targets()
    assert {"test", "test-slow", "docs", "lint"} <= makefile_targets()


def test_pre_commit_pins_the_ruff_of_the_dev_extra():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    dev = config["options.extras_require"]["dev"].split()
    (pin,) = [line for line in dev if line.startswith("ruff")]
    assert pin.startswith("ruff=="), f"the dev extra must pin ruff exactly: {pin}"
    hooks = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
    (ruff,) = [repo for repo in hooks if repo["repo"].endswith("/ruff-pre-commit")]
    assert ruff["rev"] == "v" + pin.removeprefix("ruff=="), (ruff["rev"], pin)
    assert {hook["id"] for hook in ruff["hooks"]} == {"ruff-check", "ruff-format"}
