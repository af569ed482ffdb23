"""Turn rollback and redo over tool-call pre-images (harn's ``session/rollback`` / ``redo``).

``rollback(session, turn)`` first captures a *redo* snapshot of the current state of every path
the turns touched, then restores the file tool calls of that turn and every later one in reverse
order, marks them rolled back and pushes a redo entry. ``redo(session)`` pops that entry and puts
the redo images back. Any other change (a new capture, a restore, a new turn, a rewind) clears
the redo stack and forgets the undone tool calls, as harn does. Shell commands have no per-path
pre-images; a rollback reports them, and ``ctrlz rewind`` is what undoes them.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import UsageError
from ..types import show_path
from . import records
from .core import WorkspaceLike, capture_into, check_id, opened, record_post, restore_entries


def rollback(session_id: str, turn: int, *, force: bool = False,
             workspace: WorkspaceLike = None) -> dict[str, Any]:
    """Undo turn ``turn`` and every later turn of the session."""
    check_id("session_id", session_id)
    with opened(workspace) as place, place.store.lock:
        snaps = [s for s in records.snapshots(place.db, session_id, include_rolled_back=False)
                 if s.turn >= turn]
        if not snaps:
            raise UsageError(f"session {session_id} has no tool calls in turn {turn} or later")
        files = [s for s in snaps if s.kind == "files"]
        paths = list(dict.fromkeys(p for s in files for p in s.paths))
        with place.store.catalog.transaction():
            redo = records.add_snapshot(place.db, session_id, f"redo-{turn}-{time.time_ns()}",
                                        turn, "redo")
        capture_into(place, redo, paths, invalidate=False)
        restores = [restore_entries(place, s, None, force) for s in reversed(files)]
        redo = records.by_seq(place.db, redo.seq) or redo
        record_post(place, redo)
        with place.store.catalog.transaction():
            records.set_rolled_back(place.db, [s.seq for s in snaps], True)
            records.push_redo(place.db, session_id, turn, [s.seq for s in snaps], redo.seq)
        return {"status": "rolled_back", "turn": turn,
                "fs_snapshot_ids": [s.snapshot_id for s in snaps],
                "redo_fs_snapshot_ids": [redo.snapshot_id],
                "fs_restores": restores,
                "not_restored_shell_commands": [
                    {"snapshot_id": s.snapshot_id, "command": s.detail,
                     "workspace_snapshot": s.ws_snapshot} for s in snaps if s.kind == "bash"],
                "paths": [show_path(p) for p in paths]}


def redo(session_id: str, *, force: bool = False,
         workspace: WorkspaceLike = None) -> dict[str, Any]:
    """Re-apply the newest rollback's redo images."""
    check_id("session_id", session_id)
    with opened(workspace) as place, place.store.lock:
        top = records.top_redo(place.db, session_id)
        if top is None:
            raise UsageError(f"nothing to redo in session {session_id}")
        pos, turn, rolled, redo_seq = top
        snap = records.by_seq(place.db, redo_seq)
        restore = restore_entries(place, snap, None, force) if snap else {
            "restored_paths": [], "skipped_paths_with_reasons": []}
        with place.store.catalog.transaction():
            records.set_rolled_back(place.db, rolled, False)
            records.pop_redo(place.db, pos)
            records.delete_snapshot(place.db, redo_seq)
        place.store.compact()
        return {"status": "redone", "turn": turn,
                "fs_snapshot_ids": [s.snapshot_id for seq in rolled
                                    if (s := records.by_seq(place.db, seq))],
                "fs_restores": [restore]}
