"""Writing what happened into the session database: snapshots and restores.

Every snapshot gets a ``snapshot_events`` row (Capsem's slot semantics: auto snapshots share the
``auto_max`` ring slots, every other snapshot has a slot of its own), and every path a rollback,
revert, undo or redo put back gets a ``restored`` file event with its provenance,
``"src/app.py (from snap_…)"``.
"""

from __future__ import annotations

import time

from ..types import iso_utc, text_path

TYPE_CHECKING = False
if TYPE_CHECKING:  # a snapshot records its event here: it must not load the restore engine
    from ..engine.restore.restore import RestoreResult
    from ..state.db.sessiondb import SessionDB
    from ..types import Snapshot

_UNIQUE_SLOT_BASE = 1_000_000  # non-auto snapshots: slot = base + snapshot number


def record_snapshot(db: SessionDB, snap: Snapshot, *, auto_max: int,
                    session_id: str | None = None) -> int:
    if snap.type == "auto":
        slot = db.next_auto_slot(auto_max)
    else:
        slot = _UNIQUE_SLOT_BASE + (snap.number if snap.number is not None else 0)
    event_id = db.add_snapshot_event(
        timestamp=snap.created_at, slot=slot, origin=snap.type, name=snap.label,
        files_count=snap.files, snapshot_id=snap.id, merkle_root=snap.root.hex(),
        session_id=session_id)
    if session_id is not None:
        db.add_merkle_root(session_id, snap.root.hex())
    return event_id


def record_restored(db: SessionDB, result: RestoreResult) -> int:
    """One ``restored`` event per file or link the restore wrote or removed."""
    from ..engine.restore.actions import DIRMODE, MKDIR, RMDIR

    now = iso_utc(time.time_ns())
    rows = []
    for a in result.applied:
        if a.op in (MKDIR, RMDIR, DIRMODE):
            continue
        rel = text_path(a.path.partition(b"/")[2])
        size = a.entry.size if a.entry is not None else None
        rows.append((now, "restored", f"{rel} (from {result.target.id})", size))
    if rows:
        db.add_fs_events(rows)
    return len(rows)
