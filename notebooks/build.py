"""Build an executed notebook from its percent-format source.

Each notebook is written as `notebooks/src/NAME.py` (cells separated by `# %%`, markdown
cells by `# %% [markdown]` with every line commented), reviewed as plain Python, and built
into `notebooks/NAME.ipynb` with its outputs (so plots show on GitHub):

    .venv/bin/python notebooks/build.py notebooks/src/NAME.py [more sources...]

`tests/test_notebooks.py` (slow) re-executes every committed `.ipynb`.
"""

import argparse
import os
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent
MAX_BYTES = 1_000_000


def parse_percent_script(text):
    """Split a percent-format script into nbformat cells."""
    cells, kind, lines = [], None, []

    def flush():
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(
                line[2:] if line.startswith("# ") else line.lstrip("#")
                for line in body.splitlines()
            )
            cells.append(nbformat.v4.new_markdown_cell(body))
        elif kind == "code" and body.strip():
            cells.append(nbformat.v4.new_code_cell(body))

    for line in text.splitlines():
        if line.startswith("# %%"):
            flush()
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def execute(nb, cwd, timeout=600):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    )
    client.execute()
    return nb


NOISE = ("absl::InitializeLog", "cudart_stub.cc", "cpu_feature_guard", "oneDNN custom operations")


def strip_log_noise(nb):
    """Drop TensorFlow's C++ start-up log lines (printed before any Python can silence them)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                lines = [
                    line
                    for line in output["text"].splitlines(keepends=True)
                    if not any(marker in line for marker in NOISE)
                ]
                if not "".join(lines).strip():
                    continue
                output["text"] = "".join(lines)
            kept.append(output)
        cell["outputs"] = kept
    return nb


def build(source):
    source = pathlib.Path(source)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = parse_percent_script(source.read_text())
    start = time.time()
    strip_log_noise(execute(nb, HERE))
    target = HERE / (source.stem + ".ipynb")
    nbformat.write(nb, target)
    size = target.stat().st_size
    print(f"{target.name}: executed in {time.time() - start:.0f} s, {size / 1e3:.0f} kB")
    if size > MAX_BYTES:
        print(f"warning: {target.name} is over {MAX_BYTES} bytes", file=sys.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sources", nargs="+")
    for src in parser.parse_args().sources:
        build(src)
