"""Turn rollback and redo over tool-call pre-images (harn's ``session/rollback`` / ``redo``).

``rollback(session, turn)`` puts back, through the restore engine, the pre-images of the file
tool calls of that turn and every later one (the engine captures the current state first and
records the rollback on the store's undo stack), marks them rolled back and pushes a redo
marker. ``redo(session)`` is the undo of that rollback, as long as it is still the newest entry
of the undo stack. Any other change (a new capture, a restore, a new turn, a rewind) clears the
redo marker and forgets the undone tool calls, as harn does. Shell commands have no per-path
pre-images; a rollback reports them, and ``ctrlz rewind`` is what undoes them.
"""

from __future__ import annotations

import time
from typing import Any

from ...errors import UsageError
from ...types import show_path
from .. import records
from ..core import WorkspaceLike, check_id, opened, opened_workspace


def rollback(session_id: str, turn: int, *, force: bool = False,
             workspace: WorkspaceLike = None) -> dict[str, Any]:
    """Undo turn ``turn`` and every later turn of the session: their file tool calls' pre-images
    go back through the restore engine, which records the operation on the undo stack."""
    from .restore import restore_tool_calls

    check_id("session_id", session_id)
    with opened_workspace(workspace) as ws, ws.repo.lock, opened(ws) as place, \
            place.store.lock:
        snaps = [s for s in records.snapshots(place.db, session_id, include_rolled_back=False)
                 if s.turn >= turn]
        if not snaps:
            raise UsageError(f"session {session_id} has no tool calls in turn {turn} or later")
        gone = records.evicted_since(place.db, session_id, turn=turn)
        if gone:  # their files cannot be put back: never roll back the rest and say done
            raise UsageError(f"cannot roll back turn {turn}: the captures of {len(gone)} tool "
                             f"call(s) in it or later ({gone[0][0]}, ...) were evicted by the "
                             "pre-image budget (preimage_cap)")
        files = [s for s in snaps if s.kind == "files"]
        previous = ws.oplog.next_undo()
        outcome = restore_tool_calls(ws, place, session_id, files, force=force,
                                     kind="turn-rollback", label=f"turn {turn}")
        op = ws.oplog.next_undo()
        if op is not None and previous is not None and op.seq == previous.seq:
            op = None  # nothing was put back, so nothing was recorded
        keep = _holding_only_copies(place, files, set(outcome.skipped))
        rolled = [s.seq for s in snaps if s.seq not in keep]
        with place.store.catalog.transaction():
            records.clear_redo(place.db, session_id)
            records.set_rolled_back(place.db, rolled, True)
            if op is not None:
                marker = records.add_snapshot(place.db, session_id,
                                              f"redo-{turn}-{time.time_ns()}", turn, "redo",
                                              detail=_op_key(op))
                records.push_redo(place.db, session_id, turn, rolled, marker.seq)
        safety = outcome.result.safety
        return {"status": "rolled_back", "turn": turn,
                "fs_snapshot_ids": [s.snapshot_id for s in snaps],
                "redo_fs_snapshot_ids": [safety.id] if safety else [],
                "fs_restores": [outcome.per_call(s, records.entries(place.db, s.seq))
                                for s in reversed(files)],
                "not_restored_shell_commands": [
                    {"snapshot_id": s.snapshot_id, "command": s.detail,
                     "workspace_snapshot": s.ws_snapshot} for s in snaps if s.kind == "bash"],
                "paths": [show_path(p) for p in dict.fromkeys(
                    p for s in files for p in s.paths)]}


def _op_key(op: Any) -> str:
    """Names one entry of the undo stack for good: its seq alone may be reused once the entry
    is dropped, so a stale marker could otherwise name a later, unrelated restore."""
    return f"{op.seq}:{op.created_ns}:{op.kind}"


def _holding_only_copies(place: Any, files: list[records.SnapRow],
                         skipped: set[bytes]) -> set[int]:
    """The tool calls a turn rollback must not let the session forget, because one of their
    pre-images may be the only copy of some bytes: a path the rollback left alone (edited by
    hand since), or a pre-image that is not what the previous tool call left at that path (an
    edit by hand between two tool calls: the rollback puts back the earliest pre-image, so this
    one is in no snapshot)."""
    keep: set[int] = set()
    left: dict[bytes, Any] = {}  # path -> what the previous tool call left there (or None)
    for snap in files:
        for e in records.entries(place.db, snap.seq):
            seen = left.get(e.path, e.pre)  # None: the previous call left no record
            if e.path in skipped or seen is None or seen.key != e.pre.key:
                keep.add(snap.seq)
            left[e.path] = e.post
    return keep


def redo(session_id: str, *, force: bool = False,
         workspace: WorkspaceLike = None) -> dict[str, Any]:
    """Re-apply the newest turn rollback of the session: ``ctrlz undo`` of that rollback, as
    long as nothing else was restored since (the undo stack is the store's, shared by every
    agent and command)."""
    from ...session import restores

    check_id("session_id", session_id)
    with opened_workspace(workspace) as ws, ws.repo.lock, opened(ws) as place, \
            place.store.lock:
        top = records.top_redo(place.db, session_id)
        if top is None:
            raise UsageError(f"nothing to redo in session {session_id}")
        pos, turn, rolled, marker_seq = top
        marker = records.by_seq(place.db, marker_seq)
        op = ws.oplog.next_undo()
        if marker is None or op is None or marker.detail != _op_key(op):
            with place.store.catalog.transaction():
                records.clear_redo(place.db, session_id)
            raise UsageError(f"nothing to redo in session {session_id}: the workspace was "
                             "restored since; `ctrlz undo` and `ctrlz rewind` still work")
        undone = restores.undo(ws)
        with place.store.catalog.transaction():
            records.set_rolled_back(place.db, rolled, False)
            records.pop_redo(place.db, pos)
            records.delete_snapshot(place.db, marker_seq)
        restored = sorted({show_path(a.path.partition(b"/")[2])
                           for a in undone.restore.applied if a.entry is None
                           or a.entry.kind != "d"})
        return {"status": "redone", "turn": turn,
                "fs_snapshot_ids": [s.snapshot_id for seq in rolled
                                    if (s := records.by_seq(place.db, seq))],
                "fs_restores": [{"restored_paths": restored,
                                 "skipped_paths_with_reasons": []}]}
