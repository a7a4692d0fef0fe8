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


RELEASE = ROOT / ".github" / "workflows" / "release.yml"


def test_the_release_workflow_builds_checks_and_publishes_on_a_version_tag():
    workflow = yaml.safe_load(RELEASE.read_text())
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as True
    assert trigger == {"push": {"tags": ["v*"]}}, trigger
    assert workflow["permissions"] == {"contents": "read"}
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    runs = [step.get("run", "") for step in build["steps"]]
    # The same build and checks as CI (`make dist` runs twine check --strict), the tag checked
    # against the one version file, the wheel smoke-tested outside the checkout.
    assert "make dist" in runs and "dist" in makefile_targets()
    assert "twine check --strict" in (ROOT / "Makefile").read_text()
    assert any("keras_normkit/version.py" in run and "GITHUB_REF_NAME" in run for run in runs)
    assert any(run.startswith("bash .ci/smoke_wheel.sh dist") for run in runs)
    # Trusted publishing: OIDC token for the publish job only, no stored password or token.
    assert publish["needs"] == "build"
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    action = [
        step for step in publish["steps"] if "pypa/gh-action-pypi-publish" in step.get("uses", "")
    ]
    assert len(action) == 1 and "with" not in action[0], "publish by OIDC, without a password"
    assert "secrets." not in RELEASE.read_text()


def test_the_release_tag_check_accepts_only_the_package_version(tmp_path):
    """The tag-check step, run as the workflow runs it, passes on v<version> and fails else."""
    import os
    import subprocess
    import sys

    step = next(
        s["run"]
        for s in yaml.safe_load(RELEASE.read_text())["jobs"]["build"]["steps"]
        if "GITHUB_REF_NAME" in s.get("run", "")
    )
    version = re.search(
        r'__version__ = "([^"]+)"', (ROOT / "keras_normkit" / "version.py").read_text()
    )[1]
    for tag, ok in ((f"v{version}", True), (f"v{version}.post9", False), (version, False)):
        result = subprocess.run(
            ["bash", "-c", step],
            cwd=ROOT,
            env={
                "GITHUB_REF_NAME": tag,
                "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin",
            },
            capture_output=True,
            text=True,
        )
        assert (result.returncode == 0) == ok, (tag, result.stdout, result.stderr)


def test_backend_extras_state_minimums_and_ci_pins_its_own_torch_build():
    """A user with any recent PyTorch (CPU or CUDA) can install us: the backend extras give
    only minimum versions; CI's CPU build of torch is pinned in .ci/constraints.txt, which the
    Makefile's installs and the wheel smoke test pass to pip."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    extras = config["options.extras_require"]
    for backend in ("tensorflow", "jax", "torch"):
        requirements = [line for line in extras[backend].splitlines() if line.strip()]
        assert requirements and all(">=" in r and "==" not in r for r in requirements), (
            backend,
            requirements,
        )
    assert re.search(r"^torch==\S+$", (ROOT / ".ci/constraints.txt").read_text(), re.MULTILINE)
    makefile = (ROOT / "Makefile").read_text()
    assert "CONSTRAINTS := -c .ci/constraints.txt" in makefile
    assert "PIP_ARGS ?= $(CONSTRAINTS)" in makefile
    assert ".ci/constraints.txt" in (ROOT / ".ci/smoke_wheel.sh").read_text()
    metadata = config["metadata"]
    urls = dict(line.split(" = ", 1) for line in metadata["project_urls"].strip().splitlines())
    assert {"Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert "License :: OSI Approved :: Apache Software License" in metadata["classifiers"]
