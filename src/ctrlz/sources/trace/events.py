"""The record an exec trace produces: one :class:`ExecEvent` per program a process ran.

Kept apart from the parser and the tracer because the session database and the CLI read and
write these records without ever running strace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

ExecCallback = Callable[["ExecEvent"], None]


@dataclass(frozen=True)
class ExecEvent:
    """One successful exec, and how it ended.

    ``timestamp`` is when the exec syscall was entered (epoch seconds). An event ends when
    its process exits (``exit_code`` or ``signal`` set) or when the same process execs
    again: then ``end`` is the time of the next exec and ``exit_code``/``signal`` stay None,
    because the process lived on under a new program. ``ppid`` is the process that created
    this one (0 when unknown); it does not follow re-parenting to init after the parent
    dies. ``cwd`` is None when it could not be tracked.
    """

    timestamp: float
    pid: int
    ppid: int
    command: str
    args: list[str]
    argv: list[str]
    cwd: str | None
    exit_code: int | None = None
    signal: str | None = None
    end: float | None = None
    duration: float | None = None

    @property
    def running(self) -> bool:
        return self.end is None

    def ended(self, end: float | None, exit_code: int | None = None,
              signal: str | None = None) -> ExecEvent:
        """A copy closed at ``end``; ``end`` None means the trace stopped first."""
        duration = None if end is None else max(0.0, end - self.timestamp)
        return dataclasses.replace(self, end=end, exit_code=exit_code, signal=signal,
                                   duration=duration)

    def to_json(self) -> dict[str, Any]:
        """Stable keys for logs and the CLI (``argv`` added so :meth:`from_json` is lossless)."""
        return {
            "timestamp": _iso(self.timestamp),
            "pid": self.pid,
            "ppid": self.ppid,
            "command": self.command,
            "args": list(self.args),
            "argv": list(self.argv),
            "cwd": self.cwd,
            "exit_code": self.exit_code,
            "duration": self.duration,
            "signal": self.signal,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExecEvent:
        ts = datetime.fromisoformat(data["timestamp"]).timestamp()
        args = list(data.get("args") or [])
        argv = list(data.get("argv") or [data["command"], *args])
        duration = data.get("duration")
        return cls(timestamp=ts, pid=int(data["pid"]), ppid=int(data["ppid"]),
                   command=data["command"], args=args, argv=argv, cwd=data.get("cwd"),
                   exit_code=data.get("exit_code"), signal=data.get("signal"),
                   end=None if duration is None else ts + duration, duration=duration)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds")
