"""The operation log behind undo and redo: a stack of in-place restores and a cursor.

This is the one undo stack of a store. The restore engine writes it (its last step records the
undo entry, also for a restore that failed or was interrupted); :mod:`ctrlz.session.undo`
decides what ``undo`` and ``redo`` mean. Every ``rollback``, ``revert``, ``rewind`` and tool-call
restore is recorded with the snapshot it restored, the paths it was
limited to, and the safety snapshot taken just before it (``before``). Like an editor's history:

* ``undo`` takes the newest operation that is not undone, restores its ``before`` snapshot over
  the same paths, and marks it undone (remembering the safety snapshot that undo took as
  ``after``, the exact state the operation had produced);
* ``redo`` takes the oldest undone operation and restores its ``after`` snapshot (or, failing
  that, its target) over the same paths;
* recording a new operation forgets every undone one (the redo part of the stack).

Undo and redo are restores too, so they take safety snapshots, but they never push entries of
their own. The log lives in the catalog (table ``operations``, schema version 2).
"""

from __future__ import annotations

import time
from collections import namedtuple

from ... import jsontext
from ...types import show_path
from .catalog import Catalog

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: how many operations the log keeps; older ones can no longer be undone
MAX_OPERATIONS = 50


class Operation(namedtuple("Operation", (
        "seq kind target paths before after undone created_ns explicit status session_id"),
        defaults=((), "done", None))):
    """One restore the undo stack knows: ``kind`` is rollback, revert, rewind, toolcall or
    turn-rollback; ``paths`` are workspace-relative (empty: the whole workspace);
    ``explicit``, the paths restored whatever the rules say (a tool call's paths);
    ``status``, "done", or "failed" / "interrupted" when the restore stopped half-way;
    ``session_id``, the agent session of a tool-call restore."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "target": self.target,
                "paths": [show_path(p) for p in self.paths], "before": self.before,
                "after": self.after, "undone": self.undone, "status": self.status}


_COLUMNS = "seq, kind, target, paths, before, after, undone, created_ns"


def _data(paths: str) -> dict[str, Any]:
    data = jsontext.loads(paths)
    return {"paths": data} if isinstance(data, list) else data  # the first format: a list


def _row(row: Any) -> Operation:
    seq, kind, target, paths, before, after, undone, created_ns = row
    data = _data(paths)
    return Operation(seq, kind, target, tuple(bytes.fromhex(p) for p in data["paths"]),
                     before, after, bool(undone), created_ns,
                     tuple(bytes.fromhex(p) for p in data.get("explicit", ())),
                     data.get("status", "done"), data.get("session_id"))


def encode_paths(paths: list[bytes], explicit: list[bytes] = (),  # type: ignore[assignment]
                 status: str = "done", session_id: str | None = None) -> str:
    """The ``paths`` column: JSON that also carries the explicit paths and the status (kept
    in one column so that stores written by earlier versions need no migration)."""
    data: dict[str, Any] = {"paths": [p.hex() for p in paths]}
    if explicit:
        data["explicit"] = [p.hex() for p in explicit]
    if status != "done":
        data["status"] = status
    if session_id is not None:
        data["session_id"] = session_id
    return jsontext.dumps(data)


class OpLog:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.db = catalog.db

    def record(self, kind: str, target: str, paths: list[bytes], before: str | None, *,
               explicit: list[bytes] = (), status: str = "done",  # type: ignore[assignment]
               session_id: str | None = None) -> None:
        """A new operation; the redo part of the stack is dropped."""
        with self.catalog.transaction():
            self.db.execute("DELETE FROM operations WHERE undone = 1")
            self.db.execute(
                "INSERT INTO operations (kind, target, paths, before, after, undone, created_ns) "
                "VALUES (?, ?, ?, ?, NULL, 0, ?)",
                (kind, target, encode_paths(paths, explicit, status, session_id), before,
                 time.time_ns()))
            self.db.execute(
                "DELETE FROM operations WHERE seq NOT IN "
                "(SELECT seq FROM operations ORDER BY seq DESC LIMIT ?)", (MAX_OPERATIONS,))

    def operations(self) -> list[Operation]:
        return [_row(r) for r in self.db.execute(
            f"SELECT {_COLUMNS} FROM operations ORDER BY seq")]

    def next_undo(self) -> Operation | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM operations WHERE undone = 0 "
                              "ORDER BY seq DESC LIMIT 1").fetchone()
        return _row(row) if row else None

    def next_redo(self) -> Operation | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM operations WHERE undone = 1 "
                              "ORDER BY seq LIMIT 1").fetchone()
        return _row(row) if row else None

    def mark_undone(self, seq: int, after: str | None) -> None:
        """``after``: the capture the undo took, the state the operation had produced; unless
        an earlier attempt at this undo stopped half-way, whose capture is that state."""
        with self.catalog.transaction():
            row = self.db.execute("SELECT paths FROM operations WHERE seq = ?",
                                  (seq,)).fetchone()
            data = _data(row[0]) if row else {}
            first = data.pop("undo_from", None)
            self.db.execute("UPDATE operations SET undone = 1, after = ?, paths = ? "
                            "WHERE seq = ?", (first or after, jsontext.dumps(data), seq))

    def note_undo_attempt(self, seq: int, safety: str | None) -> None:
        """An undo of ``seq`` stopped half-way; remember what it captured first."""
        self._note_attempt(seq, "undo_from", safety)

    def _note_attempt(self, seq: int, key: str, safety: str | None) -> None:
        with self.catalog.transaction():
            row = self.db.execute("SELECT paths FROM operations WHERE seq = ?",
                                  (seq,)).fetchone()
            if row is None or safety is None:
                return
            data = _data(row[0])
            data.setdefault(key, safety)
            self.db.execute("UPDATE operations SET paths = ? WHERE seq = ?",
                            (jsontext.dumps(data), seq))

    def get(self, seq: int) -> Operation | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM operations WHERE seq = ?",
                              (seq,)).fetchone()
        return _row(row) if row else None

    def mark_redone(self, seq: int, before: str | None) -> None:
        """``before``: the capture the redo took, the state just before it, which the next
        undo restores (with whatever the user changed after the undo: restoring the state
        before the first run of the operation dropped that); unless an earlier attempt at this
        redo stopped half-way, whose capture is that state."""
        with self.catalog.transaction():
            row = self.db.execute("SELECT paths, before FROM operations WHERE seq = ?",
                                  (seq,)).fetchone()
            data = _data(row[0]) if row else {}
            first = data.pop("redo_from", None)
            self.db.execute("UPDATE operations SET undone = 0, before = ?, paths = ? "
                            "WHERE seq = ?",
                            (first or before or (row[1] if row else None), jsontext.dumps(data),
                             seq))

    def note_redo_attempt(self, seq: int, safety: str | None) -> None:
        """A redo of ``seq`` stopped half-way; remember what it captured first."""
        self._note_attempt(seq, "redo_from", safety)

    def referenced(self) -> set[str]:
        """Snapshot ids undo or redo may still need, however deep in the stack."""
        ids: set[str] = set()
        for before, after, paths in self.db.execute(
                "SELECT before, after, paths FROM operations"):
            data = _data(paths)
            ids.update(x for x in (before, after, data.get("undo_from"), data.get("redo_from"))
                       if x)
        return ids

    def needed_next(self) -> set[str]:
        """Snapshot ids the next ``undo`` and the next ``redo`` need: the newest operation's
        safety snapshot (and the capture of an undo of it that stopped half-way), the oldest
        undone one's result (and its target, redo's fallback). The byte cap spares these and
        lets deeper history go oldest first, as an editor's bounded history does: keeping
        every entry of a 50-deep stack would make it drop a snapshot the user took a moment
        ago instead (see :func:`ctrlz.engine.retention.enforce_byte_cap`)."""
        ids: set[str] = set()
        undo = self.db.execute("SELECT before, paths FROM operations WHERE undone = 0 "
                               "ORDER BY seq DESC LIMIT 1").fetchone()
        if undo is not None:
            ids.update(x for x in (undo[0], _data(undo[1]).get("undo_from")) if x)
        redo = self.db.execute("SELECT after, target, paths FROM operations WHERE undone = 1 "
                               "ORDER BY seq LIMIT 1").fetchone()
        if redo is not None:  # (and the capture of a redo of it that stopped half-way)
            ids.update(x for x in (redo[0], redo[1], _data(redo[2]).get("redo_from")) if x)
        return ids
