"""MkDocs hook: the notebooks of `notebooks/*.ipynb` become static files of the site.

They live outside `docs/` (next to their sources in `notebooks/src/`), so `notebooks.md`
could not link to them otherwise. Each one is served at `notebooks/NAME.ipynb`, and a
link to it is checked like any other link (a missing notebook fails `mkdocs build --strict`).
"""

import pathlib

from mkdocs.structure.files import File

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"


def on_files(files, config):
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        files.append(
            File.generated(config, f"notebooks/{notebook.name}", abs_src_path=str(notebook))
        )
    return files
