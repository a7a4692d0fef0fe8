"""Generated Markdown blocks: a table written once, from its results JSON, between
`<!-- MARKER -->` and `<!-- /MARKER -->` in a page (README, a guide), and read back by the
tests that check the page against the JSON.
"""

import pathlib


def _split(path, marker):
    """`(head, body, tail)` of the file `path` around its marker block, markers included in
    head and tail; a `ValueError` unless each marker is there exactly once."""
    content = pathlib.Path(path).read_text()
    start, end = f"<!-- {marker} -->\n", f"<!-- /{marker} -->"
    if content.count(start) != 1 or content.count(end) != 1:
        raise ValueError(f"{path} must hold {start.strip()} and {end} once each.")
    head, rest = content.split(start)
    body, tail = rest.split(end, 1)
    return head + start, body, end + tail


def read_block(path, marker):
    """The text between the markers of `path` (without its trailing newline)."""
    return _split(path, marker)[1].rstrip("\n")


def write_block(path, marker, text):
    """Replaces what lies between `<!-- marker -->` and `<!-- /marker -->` in the file
    `path` by `text` (the markers stay); the table is then written in one place, its JSON."""
    head, _, tail = _split(path, marker)
    pathlib.Path(path).write_text(head + text.rstrip("\n") + "\n" + tail)
