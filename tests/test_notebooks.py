"""Every notebook in notebooks/ still runs from top to bottom (slow)."""

import pathlib

import nbformat
import pytest

NOTEBOOK_DIR = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path):
    import sys

    sys.path.insert(0, str(path.parent))
    from build import execute

    nb = nbformat.read(path, as_version=4)
    execute(nb, path.parent)
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors


def test_notebooks_are_small_and_have_sources():
    for path in NOTEBOOKS:
        assert path.stat().st_size < 1_000_000, f"{path.name} is over 1 MB"
        assert (path.parent / "src" / f"{path.stem}.py").exists(), f"{path.name} has no source"


def test_notebook_results_do_not_depend_on_the_machine_speed():
    """A notebook's checked numbers come from the work done, never from a wall-clock cap.

    `fast_weights` once trained "1500 updates, at most 60 s" and asserted the accuracy
    reached: on a loaded CI machine the cap could stop it early, and where it passed, the
    result depended on the machine's speed. It now trains to a validation accuracy.
    """
    for source in sorted((NOTEBOOK_DIR / "src").glob("*.py")):
        assert "max_seconds" not in source.read_text(), f"{source.name} caps training by time"
