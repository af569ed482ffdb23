"""How far the long operation this process is running has got: a first snapshot, a restore,
gc, verify.

The engine counts into the installed :class:`Meter` (plain attribute increments, only where a
file or object is settled, never per ``lstat``), and whoever installed it reads the counters
from another thread to draw a progress bar (``ctrlz``'s CLI, on a terminal). Nothing is
installed by default: the library, the daemon, hooks and the MCP server pay one ``None`` check
per directory or file. Reads race with the writes; for a progress bar that is fine.
"""

from __future__ import annotations


class Meter:
    """Counters of one operation: what is settled (``files``, ``bytes``) out of what is known
    so far (``files_total``, ``bytes_total``; a scan discovers its totals as it walks)."""

    __slots__ = ("bytes", "bytes_total", "files", "files_total", "phase", "unit")

    def __init__(self) -> None:
        self.start("Working")

    def start(self, phase: str, files_total: int = 0, bytes_total: int = 0,
              unit: str = "files") -> None:
        """Begin a phase (a restore is a snapshot, then the restore proper); ``unit`` names
        what ``files`` counts (gc marks trees, verify checks objects)."""
        self.phase, self.unit = phase, unit
        self.files = self.bytes = 0
        self.files_total, self.bytes_total = files_total, bytes_total


_current: Meter | None = None


def current() -> Meter | None:
    return _current


def install(meter: Meter | None) -> None:
    global _current
    _current = meter
