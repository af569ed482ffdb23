"""Results of the workspace-level operations that have no engine record of their own:
``status``, ``history``, ``undo``/``redo``. Plain dataclasses with one ``to_json()`` each."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..engine.restore.restore import RestoreResult
from ..state.db.oplog import Operation
from ..types import Skipped, Snapshot, iso_utc, show_path

KINDS = {"f": "file", "l": "symlink", "d": "dir"}
#: how many of the last day's drops a status reads (that many is said "or more")
DROPS_SHOWN = 100


def counted(items: list[Any]) -> str:
    """How many ``items`` there are, when a list read at most ``DROPS_SHOWN`` of them."""
    return f"{len(items)} or more" if len(items) >= DROPS_SHOWN else str(len(items))


@dataclass(frozen=True)
class Version:
    """One content of a path, and the snapshots (oldest first) that hold it."""

    kind: str | None  # file / symlink / dir, or None: the path was absent
    oid: str | None
    size: int | None
    mode: int | None
    snapshots: tuple[Snapshot, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind or "absent", "oid": self.oid, "size": self.size,
                "mode": f"{self.mode:o}" if self.mode is not None else None,
                "first": self.snapshots[0].id, "last": self.snapshots[-1].id,
                "first_created_at": self.snapshots[0].created_at,
                "snapshots": [s.id for s in self.snapshots]}


@dataclass(frozen=True)
class History:
    path: bytes
    versions: list[Version]

    def to_json(self) -> dict[str, Any]:
        return {"type": "history", "path": show_path(self.path),
                "versions": [v.to_json() for v in self.versions]}


@dataclass
class Status:
    root: str
    store: str
    rules: dict[str, Any]
    snapshots: int
    by_type: dict[str, int]
    last: Snapshot | None
    age_seconds: float | None
    store_bytes: int
    store_cap: int
    skipped: list[Skipped] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    can_undo: bool = False
    can_redo: bool = False
    #: the workspace daemon: ``running`` and a recent start failure (``last_failure``)
    daemon: dict[str, Any] = field(default_factory=lambda: {"running": False,
                                                            "last_failure": None})
    #: snapshots retention dropped in the last day, newest first (``Catalog.drops``)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    #: the agent hooks that failed in the last day (``hook_log.hook_failures``), or None
    hooks: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "status",
            "workspace": self.root,
            "store": self.store,
            "excluded": self.rules,
            "snapshots": self.snapshots,
            "by_type": self.by_type,
            "last": self.last.to_json() if self.last else None,
            "last_created_at": self.last.created_at if self.last else None,
            "age_seconds": self.age_seconds,
            "store_bytes": self.store_bytes,
            "store_cap": self.store_cap,
            "skipped": [s.to_json() for s in self.skipped],
            "problems": self.problems,
            "can_undo": self.can_undo,
            "can_redo": self.can_redo,
            "daemon": self.daemon,
            "dropped": [{k: v for k, v in d.items() if k != "dropped_ns"}
                        | {"dropped_at": iso_utc(d["dropped_ns"])} for d in self.dropped],
            "hooks": self.hooks,
        }


@dataclass
class UndoResult:
    action: str  # undo / redo
    operation: Operation
    restore: RestoreResult

    def to_json(self) -> dict[str, Any]:
        return {"type": self.action, "operation": self.operation.to_json(),
                "restore": {"type": "restore", **self.restore.to_json()}}
