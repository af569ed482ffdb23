"""How a path is written in one line of a human message: the one quoting every face and every
error message uses. Its own module, importing only ``os``: the CLI's fast path (a snapshot the
daemon serves) renders paths without loading :mod:`ctrlz.types` and its named tuples."""

from __future__ import annotations

import os

_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", '"': '\\"', "\\": "\\\\",
            "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def quote_text(text: str) -> str:
    """A path for one line of a human message: as it is, unless a control character (a
    newline, a tab...) would make the line ambiguous, or it starts with a quote; then quoted
    as git and ``ls -b`` quote it (``"a\\nb"``). Other bytes stay as they are (the CLI escapes
    undecodable ones on stderr); ``--json`` carries every path exactly. The one quoting every
    face and every error message uses, so a name cannot forge a line of output."""
    if not text.startswith('"') and all(" " <= c != "\x7f" for c in text):
        return text
    return '"' + "".join(_ESCAPES.get(c) or (f"\\{ord(c):03o}" if c < " " or c == "\x7f"
                                             else c) for c in text) + '"'


def quote_path(path: bytes) -> str:
    """:func:`quote_text` of a path as bytes (workspace-relative, or absolute)."""
    return quote_text(os.fsdecode(path))
