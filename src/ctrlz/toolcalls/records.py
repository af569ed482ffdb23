"""Rows of the tc_* tables: sessions, tool-call snapshots, their entries, the redo stack.

Pure SQL over :class:`~ctrlz.toolcalls.store.ToolcallStore`; callers hold the store lock and the
transaction. Paths are workspace-relative bytes.
"""

from __future__ import annotations

import os
import sqlite3
import time

from .. import jsontext
from ..state.store.toolcall_store import (  # noqa: F401 (re-exported)
    DEFAULT_PREIMAGE_CAP,
    PREIMAGE_CAP_KEY,
    preimage_cap,
)
from .images import Image

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_BYTE_CAP = 1 << 30  # per session (tc_sessions.byte_cap)


class _Row:
    """Value equality and a readable repr for the row classes below, which are plain classes
    rather than dataclasses: agent hooks import this module, and ``dataclasses`` (plus building
    each class) costs every hook milliseconds of start-up."""

    __slots__ = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={v!r}" for n, v in zip(self.__slots__, self._values(), strict=True))
        return f"{type(self).__name__}({inner})"


class SnapRow(_Row):
    __slots__ = ("seq", "session_id", "snapshot_id", "turn", "taken_ns", "kind", "tool",
                 "detail", "args_key", "ws_snapshot", "open", "rolled_back", "byte_count",
                 "paths")

    def __init__(self, seq: int, session_id: str, snapshot_id: str, turn: int, taken_ns: int,
                 kind: str, tool: str | None, detail: str | None, args_key: str | None,
                 ws_snapshot: str | None, open: bool, rolled_back: bool, byte_count: int,
                 paths: list[bytes] | None = None) -> None:
        self.seq = seq
        self.session_id = session_id
        self.snapshot_id = snapshot_id
        self.turn = turn
        self.taken_ns = taken_ns
        self.kind = kind
        self.tool = tool
        self.detail = detail
        self.args_key = args_key
        self.ws_snapshot = ws_snapshot
        self.open = open
        self.rolled_back = rolled_back
        self.byte_count = byte_count
        self.paths: list[bytes] = [] if paths is None else paths

    def to_json(self) -> dict[str, Any]:
        from ..types import iso_utc  # not at import time: ctrlz.types builds dataclasses

        return {"snapshot_id": self.snapshot_id, "scope_id": self.snapshot_id,
                "turn": self.turn, "taken_at_ms": self.taken_ns // 1_000_000,
                "taken_at": iso_utc(self.taken_ns), "kind": self.kind, "tool": self.tool,
                "command": self.detail, "workspace_snapshot": self.ws_snapshot,
                "captured_paths": [os.fsdecode(p) for p in self.paths],  # types.show_path
                "byte_count": self.byte_count, "open": self.open,
                "rolled_back": self.rolled_back}


class EntryRow(_Row):
    __slots__ = ("path", "pre", "post")

    def __init__(self, path: bytes, pre: Image, post: Image | None) -> None:
        self.path = path
        self.pre = pre
        self.post = post


_SNAP_COLS = ("seq, session_id, snapshot_id, turn, taken_ns, kind, tool, detail, args_key, "
              "ws_snapshot, open, rolled_back, byte_count")


def _snap(db: sqlite3.Connection, row: Any) -> SnapRow:
    s = SnapRow(*row[:10], bool(row[10]), bool(row[11]), row[12])
    s.paths = [bytes(r[0]) for r in db.execute(
        "SELECT path FROM tc_entries WHERE seq = ? ORDER BY path", (s.seq,))]
    return s


def ensure_session(db: sqlite3.Connection, session_id: str, agent: str | None = None) -> int:
    """Create the session if new; returns its current turn."""
    now = time.time_ns()
    db.execute("INSERT OR IGNORE INTO tc_sessions (session_id, agent, created_ns, last_ns) "
               "VALUES (?, ?, ?, ?)", (session_id, agent, now, now))
    db.execute("UPDATE tc_sessions SET last_ns = ?, agent = COALESCE(agent, ?) "
               "WHERE session_id = ?", (now, agent, session_id))
    return db.execute("SELECT turn FROM tc_sessions WHERE session_id = ?",
                      (session_id,)).fetchone()[0]


def session_exists(db: sqlite3.Connection, session_id: str) -> bool:
    return db.execute("SELECT 1 FROM tc_sessions WHERE session_id = ?",
                      (session_id,)).fetchone() is not None


def sessions(db: sqlite3.Connection) -> list[tuple[str, str | None, int, int, int]]:
    """(session_id, agent, turn, created_ns, last_ns), newest activity last."""
    return list(db.execute("SELECT session_id, agent, turn, created_ns, last_ns FROM "
                           "tc_sessions ORDER BY last_ns, rowid"))


def bump_turn(db: sqlite3.Connection, session_id: str) -> int:
    db.execute("UPDATE tc_sessions SET turn = turn + 1 WHERE session_id = ?", (session_id,))
    return db.execute("SELECT turn FROM tc_sessions WHERE session_id = ?",
                      (session_id,)).fetchone()[0]


def turn_key(db: sqlite3.Connection, session_id: str) -> str | None:
    row = db.execute("SELECT turn_key FROM tc_sessions WHERE session_id = ?",
                     (session_id,)).fetchone()
    return row[0] if row else None


def set_turn_key(db: sqlite3.Connection, session_id: str, key: str | None) -> None:
    db.execute("UPDATE tc_sessions SET turn_key = ? WHERE session_id = ?", (key, session_id))


def byte_cap(db: sqlite3.Connection, session_id: str) -> int:
    row = db.execute("SELECT byte_cap FROM tc_sessions WHERE session_id = ?",
                     (session_id,)).fetchone()
    return row[0] if row and row[0] else DEFAULT_BYTE_CAP


def set_byte_cap(db: sqlite3.Connection, session_id: str, cap: int) -> None:
    db.execute("UPDATE tc_sessions SET byte_cap = ? WHERE session_id = ?",
               (max(1, cap), session_id))


def total_bytes(db: sqlite3.Connection) -> int:
    """Bytes of pre-images held, all sessions together (what ``preimage_cap`` bounds)."""
    return db.execute("SELECT COALESCE(SUM(byte_count), 0) FROM tc_snapshots").fetchone()[0]


def find(db: sqlite3.Connection, session_id: str, snapshot_id: str) -> SnapRow | None:
    row = db.execute(f"SELECT {_SNAP_COLS} FROM tc_snapshots WHERE session_id = ? AND "
                     "snapshot_id = ?", (session_id, snapshot_id)).fetchone()
    return _snap(db, row) if row else None


def by_seq(db: sqlite3.Connection, seq: int) -> SnapRow | None:
    row = db.execute(f"SELECT {_SNAP_COLS} FROM tc_snapshots WHERE seq = ?", (seq,)).fetchone()
    return _snap(db, row) if row else None


def workspace_snapshot_refs(db: sqlite3.Connection) -> dict[str, tuple[str, str]]:
    """Each workspace snapshot a recorded tool call or turn starts from (a shell call's, or the
    start of an ACP turn), with the (session, tool call) that names it first: what ``ctrlz
    rewind`` to that call restores, so what no agent may delete
    (:func:`ctrlz.session.policy.check_deletable`). Rolled-back calls count: ``ctrlz undo``
    of the rollback brings them back into the timeline."""
    refs: dict[str, tuple[str, str]] = {}
    for ws_snapshot, session_id, call in db.execute(
            "SELECT ws_snapshot, session_id, snapshot_id FROM tc_snapshots "
            "WHERE ws_snapshot IS NOT NULL ORDER BY seq"):
        refs.setdefault(ws_snapshot, (session_id, call))
    return refs


def snapshots(db: sqlite3.Connection, session_id: str, kinds: tuple[str, ...] = (
        "files", "bash"), include_rolled_back: bool = True) -> list[SnapRow]:
    """The session's snapshots in capture order."""
    rows = db.execute(f"SELECT {_SNAP_COLS} FROM tc_snapshots WHERE session_id = ? "
                      f"AND kind IN ({','.join('?' * len(kinds))}) ORDER BY seq",
                      (session_id, *kinds)).fetchall()
    out = [_snap(db, r) for r in rows]
    return out if include_rolled_back else [s for s in out if not s.rolled_back]


def add_snapshot(db: sqlite3.Connection, session_id: str, snapshot_id: str, turn: int,
                 kind: str, *, tool: str | None = None, detail: str | None = None,
                 args_key: str | None = None, ws_snapshot: str | None = None,
                 open: bool = False, taken_ns: int | None = None) -> SnapRow:
    db.execute("INSERT INTO tc_snapshots (session_id, snapshot_id, turn, taken_ns, kind, tool, "
               "detail, args_key, ws_snapshot, open) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (session_id, snapshot_id, turn, taken_ns or time.time_ns(), kind, tool, detail,
                args_key, ws_snapshot, int(open)))
    found = find(db, session_id, snapshot_id)
    assert found is not None
    return found


def close_open(db: sqlite3.Connection, session_id: str, except_seq: int | None = None) -> None:
    db.execute("UPDATE tc_snapshots SET open = 0 WHERE session_id = ? AND seq IS NOT ?",
               (session_id, except_seq))


def entries(db: sqlite3.Connection, seq: int) -> list[EntryRow]:
    out = []
    for path, kind, oid, size, mode, pkind, poid in db.execute(
            "SELECT path, kind, oid, size, mode, post_kind, post_oid FROM tc_entries "
            "WHERE seq = ? ORDER BY path", (seq,)):
        post = Image(pkind, bytes(poid) if poid else None) if pkind else None
        out.append(EntryRow(bytes(path), Image(kind, bytes(oid) if oid else None, size or 0,
                                               mode), post))
    return out


def has_entry(db: sqlite3.Connection, seq: int, path: bytes) -> bool:
    return db.execute("SELECT 1 FROM tc_entries WHERE seq = ? AND path = ?",
                      (seq, path)).fetchone() is not None


def add_entry(db: sqlite3.Connection, seq: int, path: bytes, image: Image) -> bool:
    """First capture wins; returns whether this one was new."""
    cur = db.execute("INSERT OR IGNORE INTO tc_entries (seq, path, kind, oid, size, mode) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     (seq, path, image.kind, image.oid, image.size, image.mode))
    if cur.rowcount:
        db.execute("UPDATE tc_snapshots SET byte_count = byte_count + ? WHERE seq = ?",
                   (image.size if image.kind == "file" else 0, seq))
    return bool(cur.rowcount)


def set_post(db: sqlite3.Connection, seq: int, path: bytes, image: Image) -> None:
    db.execute("UPDATE tc_entries SET post_kind = ?, post_oid = ? WHERE seq = ? AND path = ?",
               (image.kind, image.oid, seq, path))


def next_pre(db: sqlite3.Connection, session_id: str, seq: int, path: bytes) -> Image | None:
    """The pre-image a later tool call of the session captured for ``path``, if any."""
    row = db.execute(
        "SELECT e.kind, e.oid FROM tc_entries e JOIN tc_snapshots s ON s.seq = e.seq "
        "WHERE s.session_id = ? AND s.seq > ? AND e.path = ? AND s.kind = 'files' "
        "AND s.rolled_back = 0 ORDER BY s.seq LIMIT 1", (session_id, seq, path)).fetchone()
    return Image(row[0], bytes(row[1]) if row[1] else None) if row else None


def others_after(db: sqlite3.Connection, session_id: str, seq: int
                 ) -> dict[bytes, tuple[int, str, str]]:
    """Per path a file tool call of another session captured after ``seq`` (and that is not
    rolled back): (seq, session_id, snapshot_id) of the newest such call. Sessions share one
    workspace and one capture order (``seq``), so this is the other agents' work that a
    restore of this session's calls would take away."""
    rows = db.execute(
        "SELECT e.path, s.seq, s.session_id, s.snapshot_id FROM tc_snapshots s "
        "JOIN tc_entries e ON e.seq = s.seq WHERE s.seq > ? AND s.session_id != ? "
        "AND s.kind = 'files' AND s.rolled_back = 0 ORDER BY s.seq", (seq, session_id))
    return {bytes(path): (at, sid, snap) for path, at, sid, snap in rows}


def delete_snapshot(db: sqlite3.Connection, seq: int) -> None:
    db.execute("DELETE FROM tc_entries WHERE seq = ?", (seq,))
    db.execute("DELETE FROM tc_snapshots WHERE seq = ?", (seq,))


def set_rolled_back(db: sqlite3.Connection, seqs: list[int], value: bool) -> None:
    db.executemany("UPDATE tc_snapshots SET rolled_back = ? WHERE seq = ?",
                   [(int(value), s) for s in seqs])


def push_redo(db: sqlite3.Connection, session_id: str, turn: int, rolled: list[int],
              redo_seq: int) -> None:
    db.execute("INSERT INTO tc_redo (session_id, turn, rolled_back, redo_seq) VALUES "
               "(?, ?, ?, ?)", (session_id, turn, jsontext.dumps(rolled), redo_seq))


def top_redo(db: sqlite3.Connection, session_id: str) -> tuple[int, int, list[int], int] | None:
    row = db.execute("SELECT pos, turn, rolled_back, redo_seq FROM tc_redo WHERE session_id = ? "
                     "ORDER BY pos DESC LIMIT 1", (session_id,)).fetchone()
    return (row[0], row[1], jsontext.loads(row[2]), row[3]) if row else None


def pop_redo(db: sqlite3.Connection, pos: int) -> None:
    db.execute("DELETE FROM tc_redo WHERE pos = ?", (pos,))


def clear_redo(db: sqlite3.Connection, session_id: str) -> None:
    """Any other change to the workspace: the redo stack and the undone turns' images go."""
    for _pos, _turn, rolled, redo_seq in db.execute(
            "SELECT pos, turn, rolled_back, redo_seq FROM tc_redo WHERE session_id = ?",
            (session_id,)).fetchall():
        delete_snapshot(db, redo_seq)
        for seq in jsontext.loads(rolled):
            delete_snapshot(db, seq)
    db.execute("DELETE FROM tc_redo WHERE session_id = ?", (session_id,))


def enforce_cap(db: sqlite3.Connection, session_id: str, protected: int | None) -> list[str]:
    """Evict the oldest snapshots while the session is over its byte cap, then the oldest of
    any session while all of them together are over the store's ``preimage_cap``; never
    ``protected`` (the capture under way) nor an open scope (an agent still capturing into it).
    Returns the evicted ids. Workspace snapshots are not touched: this budget is separate."""
    evicted = _evict(db, byte_cap(db, session_id), protected, session_id)
    cap = preimage_cap(db)
    if total_bytes(db) > cap:  # one aggregate query on the hook path; rows only when over
        evicted += _evict(db, cap, protected, None)
    return evicted


def _evict(db: sqlite3.Connection, cap: int, protected: int | None,
           session_id: str | None) -> list[str]:
    """Delete the oldest snapshots (of ``session_id``, or of every session) until their bytes
    fit ``cap``. Across sessions only snapshots that hold bytes go: another session's shell
    calls (whose pre-images are workspace snapshots) free nothing here."""
    columns = "seq, snapshot_id, byte_count, open, session_id, turn"
    if session_id is None:
        rows = db.execute(f"SELECT {columns} FROM tc_snapshots ORDER BY seq").fetchall()
    else:
        rows = db.execute(f"SELECT {columns} FROM tc_snapshots WHERE session_id = ? "
                          "ORDER BY seq", (session_id,)).fetchall()
    total = sum(r[2] for r in rows)
    evicted = []
    for seq, sid, count, is_open, owner, turn in rows:
        if total <= cap:
            break
        if seq == protected or is_open or (session_id is None and not count):
            continue
        delete_snapshot(db, seq)
        # remembered, so that a rewind that would need it refuses rather than undo the
        # rest and report success (see evicted_since)
        db.execute("INSERT OR REPLACE INTO tc_evicted (session_id, seq, snapshot_id, turn) "
                   "VALUES (?, ?, ?, ?)", (owner, seq, sid, turn))
        total -= count
        evicted.append(sid)
    return evicted


def evicted_since(db: sqlite3.Connection, session_id: str, *, seq: int | None = None,
                  turn: int | None = None, snapshot_id: str | None = None
                  ) -> list[tuple[str, int]]:
    """(id, turn) of the session's evicted captures a rewind to tool call ``seq`` (or
    ``snapshot_id``, itself evicted), or to turn ``turn``, would need: those taken after it."""
    rows = db.execute("SELECT seq, snapshot_id, turn FROM tc_evicted WHERE session_id = ? "
                      "ORDER BY seq", (session_id,)).fetchall()
    if snapshot_id is not None:
        seq = next((s for s, sid, _ in rows if sid == snapshot_id), None)
        if seq is None:
            return []
        return [(sid, t) for s, sid, t in rows if s >= seq]
    if turn is not None:
        return [(sid, t) for _, sid, t in rows if t >= turn]
    return [(sid, t) for s, sid, t in rows if seq is not None and s > seq]


def drop_session(db: sqlite3.Connection, session_id: str) -> int:
    seqs = [r[0] for r in db.execute("SELECT seq FROM tc_snapshots WHERE session_id = ?",
                                     (session_id,))]
    for seq in seqs:
        delete_snapshot(db, seq)
    db.execute("DELETE FROM tc_redo WHERE session_id = ?", (session_id,))
    db.execute("DELETE FROM tc_evicted WHERE session_id = ?", (session_id,))
    db.execute("DELETE FROM tc_sessions WHERE session_id = ?", (session_id,))
    return len(seqs)
