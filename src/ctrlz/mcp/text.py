"""Text on the wire: pagination by characters, and strings safe to send as UTF-8.

Pagination slices ``str`` (code points), never bytes, so a page never splits a character.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError

DEFAULT_MAX_LENGTH = 5000


@dataclass(frozen=True)
class Page:
    """A window ``[start_index, end_index)`` of a text, in characters (code points)."""

    text: str
    start_index: int
    end_index: int
    total_length: int

    @property
    def next_start_index(self) -> int | None:
        return self.end_index if self.end_index < self.total_length else None

    @property
    def complete(self) -> bool:
        return self.start_index == 0 and self.end_index >= self.total_length

    def render(self) -> str:
        """The page, prefixed (like Capsem) with where it lies when it is not the whole text."""
        if self.complete:
            return self.text
        if self.start_index >= self.total_length:
            return (f"Content length: {self.total_length}\n"
                    f"start_index={self.start_index} is past the end; there is nothing more.\n")
        head = (f"Content length: {self.total_length}\n"
                f"Showing: {self.start_index}..{self.end_index}\n")
        if self.next_start_index is not None:
            head += f"Use start_index={self.next_start_index} to continue.\n"
        return head + "\n" + self.text

    def to_json(self) -> dict[str, Any]:
        return {"start_index": self.start_index, "end_index": self.end_index,
                "total_length": self.total_length, "next_start_index": self.next_start_index}


def paginate(text: str, start_index: int = 0, max_length: int = DEFAULT_MAX_LENGTH) -> Page:
    """Characters ``start_index`` to ``start_index + max_length`` of ``text``."""
    if start_index < 0:
        raise UsageError("start_index must be 0 or more")
    if max_length < 1:
        raise UsageError("max_length must be 1 or more")
    total = len(text)
    end = min(start_index + max_length, total) if start_index < total else start_index
    return Page(text[start_index:end], start_index, end, total)


def clean(text: str) -> str:
    """Text safe to put on the wire: undecodable path bytes (surrogate escapes) as ``\\xNN``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def to_json_text(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)
