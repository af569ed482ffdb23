"""The shared vocabulary: plain records that cross layers. No I/O happens here.

Records are immutable, with one ``to_json()`` each, so every face (CLI ``--json``, MCP, hooks)
serialises them the same way, with stable keys. They are ``collections`` named tuples, not
dataclasses: every ctrlz process (``ctrlz list``, a snapshot handed to the daemon) builds them,
and the ``dataclasses`` module (with ``inspect``, ``ast`` and ``dis`` behind it) and ``typing``
would cost each one a fifth of its start-up.
"""

from __future__ import annotations

import os
from collections import namedtuple
from types import MappingProxyType

from .quoting import quote_path, quote_text  # noqa: F401 - the engine's messages use them

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Self

SNAPSHOT_TYPES = ("pre-run", "post-run", "auto", "manual", "git", "build", "idle", "tool", "safety")


def iso_utc(ns: int) -> str:
    """ISO 8601 UTC with millisecond precision (truncated, as the nanoseconds say) and a
    trailing Z. ``time``, not ``datetime``: every snapshot's JSON has one, and ``datetime``
    is ~1 ms of the start-up of a command the daemon serves."""
    import time

    seconds, rest = divmod(int(ns), 10**9)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest // 10**6:03d}Z"


def show_path(path: bytes) -> str:
    """A workspace-relative path as text; undecodable bytes survive as surrogate escapes."""
    return os.fsdecode(path)


def text_path(path: bytes) -> str:
    """A path for storage as text (SQLite, JSON lines): undecodable bytes become ``\\xNN``."""
    return path.decode("utf-8", "backslashreplace")


def signal_name(signum: int) -> str:
    """``SIGKILL`` for 9: how a command killed by a signal is shown (a session's status, its
    post-run label); ``signal N`` for a number Python has no name for."""
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters for one line of output or a label, with ``...``
    when something was cut, so a shortened command never reads as the whole one."""
    return text if len(text) <= limit else text[:max(limit - 3, 0)] + "..."


class Skipped(namedtuple("Skipped", "path reason")):
    """A path a scan saw but did not capture, and why. Restores never touch these."""

    __slots__ = ()
    path: bytes
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"path": show_path(self.path), "reason": self.reason}


_SNAPSHOT_FIELDS = ("id number parent type label pinned created_ns root files dirs symlinks bytes "
                    "added_bytes size_delta created modified deleted rules skipped roots")


class Snapshot(namedtuple("Snapshot", _SNAPSHOT_FIELDS,
                          defaults=(0, 0, 0, MappingProxyType({}), (), ()))):
    """One snapshot's record, as the catalog keeps it. Change one with :meth:`replace`."""

    __slots__ = ()
    id: str
    number: int | None
    parent: str | None
    type: str
    label: str | None
    pinned: bool
    created_ns: int
    root: bytes  # Merkle root: id of the top tree
    files: int
    dirs: int
    symlinks: int
    bytes: int  # logical bytes of all captured files
    added_bytes: int  # bytes of new objects this snapshot put in the store (before compression)
    size_delta: int  # bytes minus the parent's bytes
    # the rest have defaults: 0, 0, 0, an empty read-only mapping, (), ()
    created: int  # paths created / modified / deleted relative to the parent
    modified: int
    deleted: int
    rules: dict[str, Any]
    skipped: tuple[Skipped, ...]
    roots: tuple[str, ...]

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (``dataclasses.replace`` for this record)."""
        return self._replace(**changes)

    @property
    def created_at(self) -> str:
        return iso_utc(self.created_ns)

    @property
    def short_id(self) -> str:
        return self.id

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "number": self.number,
            "type": self.type,
            "label": self.label,
            "created_at": self.created_at,
            "pinned": self.pinned,
            "files": self.files,
            "dirs": self.dirs,
            "symlinks": self.symlinks,
            "bytes": self.bytes,
            "added_bytes": self.added_bytes,
            "size_delta": self.size_delta,
            "changes": {"created": self.created, "modified": self.modified,
                        "deleted": self.deleted},
            "root": self.root.hex(),
            "parent": self.parent,
            "skipped": [s.to_json() for s in self.shown_skipped()],
        }

    def shown_skipped(self) -> list[Skipped]:
        """The skipped paths as a user names them: workspace-relative in a snapshot of one
        root (the record keeps each path under its root's index, ``0/``), and with that index
        where a snapshot has several roots (the SnapshotManager's), whose paths it tells
        apart."""
        if len(self.roots) > 1:
            return list(self.skipped)
        return [Skipped(k.path.partition(b"/")[2], k.reason) for k in self.skipped]
