"""Generated Markdown blocks: a table written once, from its results JSON, between
`<!-- MARKER -->` and `<!-- /MARKER -->` in a page (README, a guide), and read back by the
tests that check the page against the JSON.
"""

import pathlib


def _bounds(marker):
    return f"<!-- {marker} -->\n", f"<!-- /{marker} -->"


def read_block(path, marker):
    """The text between the markers of `path` (without its trailing newline)."""
    content = pathlib.Path(path).read_text()
    start, end = _bounds(marker)
    if content.count(start) != 1 or content.count(end) != 1:
        raise ValueError(f"{path} must hold {start.strip()} and {end} once each.")
    return content.split(start)[1].split(end, 1)[0].rstrip("\n")


def write_block(path, marker, text):
    """Replaces what lies between `<!-- marker -->` and `<!-- /marker -->` in the file
    `path` by `text` (the markers stay); the table is then written in one place, its JSON."""
    path = pathlib.Path(path)
    content = path.read_text()
    read_block(path, marker)  # both markers, once each
    start, end = _bounds(marker)
    head, rest = content.split(start)
    path.write_text(head + start + text.rstrip("\n") + "\n" + end + rest.split(end, 1)[1])
