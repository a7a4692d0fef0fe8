"""Griffe extension: the `>>>` examples of keras_normkit's docstrings render as code.

The docstrings write their examples flush with the text (the convention of the project):

    Example:

    >>> import keras_normkit
    >>> ...

The Google parser reads a section's content only when it is indented under its title, so
here the lines that follow `Example:` / `Examples:` are indented, up to the first
paragraph that is not an example (such as `Reference: ...`). The parser then makes an
Examples section of them, with every `>>>` block as a Python console code block. Any other
`>>>` block is fenced as `pycon`, so it never renders as nested block quotes. The entries
of a layer's `Call arguments:` section become a list.
The docstrings themselves (and so the doctests) are not changed.
"""

import importlib
import inspect

import griffe

_TITLES = ("Example:", "Examples:")


def _is_example(line):
    return line.startswith(">>>")


def _indent_examples(lines):
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.strip() not in _TITLES or line != line.lstrip():
            out.append(line)
            continue
        out.append("Examples:")  # the parser's title for it (`Example:` is an admonition)
        # The section: blank lines and example blocks (a `>>>` line and the non-blank
        # lines under it: continuations and expected output).
        j = i
        while j < len(lines):
            if not lines[j].strip():
                j += 1
                continue
            if not _is_example(lines[j]):
                break
            while j < len(lines) and lines[j].strip():
                j += 1
        end = j
        while end > i and not lines[end - 1].strip():
            end -= 1
        while i < end and not lines[i].strip():  # the content starts below the title
            i += 1
        out.extend(f"    {text}" if text.strip() else "" for text in lines[i:end])
        out.extend(lines[end:j])
        i = j
    return out


def _fence_examples(lines):
    out, i, fenced = [], 0, False
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or not _is_example(line):
            out.append(line)
            i += 1
            continue
        out.append("```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append("```")
    return out


def _list_call_arguments(lines):
    """`Call arguments:` entries (`name: text`) as a list, so each one renders on its own."""
    out, in_section = [], False
    for line in lines:
        if line.strip() == "Call arguments:" and line == line.lstrip():
            in_section = True
        elif in_section and line.startswith("    ") and not line.startswith("     "):
            name, sep, text = line.strip().partition(":")
            if sep and name.isidentifier():
                line = f"    - `{name}`:{text}"
        elif in_section and line.strip() and not line.startswith("    "):
            in_section = False
        out.append(line)
    return out


def rewrite(text):
    """The docstring `text` with its flush examples indented under their section title."""
    lines = _list_call_arguments(text.splitlines())
    return "\n".join(_fence_examples(_indent_examples(lines)))


def _runtime_docstring(obj):
    """The `__doc__` of the imported class, for one that assigns it (`__doc__ = f"..."`)."""
    module_path, _, name = obj.path.rpartition(".")
    value = getattr(importlib.import_module(module_path), name).__doc__
    return inspect.cleandoc(value) if value else None


class FlushExamples(griffe.Extension):
    """Applies `rewrite` to every docstring (keras_normkit's, and Keras's for `L1`, ...).

    A keras_normkit class whose docstring is built at import time (`__doc__ = f"..."`, the
    calibration wrappers share their `Args:`) has no docstring for static analysis: it gets
    the one Python computes.
    """

    def on_object(self, *, obj, loader, **kwargs):
        if (
            obj.is_class
            and obj.docstring is None
            and "__doc__" in obj.members
            and obj.path.startswith("keras_normkit.")
        ):
            value = _runtime_docstring(obj)
            if value:
                obj.docstring = griffe.Docstring(
                    value,
                    lineno=obj.lineno,
                    parent=obj,
                    parser=loader.docstring_parser,
                    parser_options=loader.docstring_options,
                )
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = rewrite(obj.docstring.value)
