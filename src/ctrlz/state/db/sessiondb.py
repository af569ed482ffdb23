"""The session database: what happened in a workspace, one SQLite file (WAL) per store.

It keeps Capsem's two tables exactly as seed 000 gives them, so its per-snapshot change-count
query runs unchanged:

* ``fs_events``: every file created / modified / deleted (from the watcher) and every path a
  revert or rollback ``restored``, written as ``"path (from snap_…)"``;
* ``snapshot_events``: one row per snapshot, with the ``(start_fs_event_id, stop_fs_event_id]``
  range of file events it covers. ``stop`` is the newest event id when the snapshot is taken;
  ``start`` is the previous snapshot's ``stop``, except for manual snapshots, which always start
  at 0 (they are forks that carry the whole history). ``slot`` is the ring position for auto
  snapshots (so a reused slot shows only its newest row) and a unique number otherwise.

Beside them, ctrlz adds ``exec_events`` (Moat's ExecEvent, from the tracer), ``sessions`` (the
SessionMetadata fields, the exit code and the chain of Merkle roots) and ``session_snapshots``
(which snapshot row belongs to which session and store snapshot), and ``agent_snapshots`` (the
snapshots an agent took through MCP, which it may delete again), and ``denials`` (what a
sandboxed run's sandbox refused: writes from the tracer, ``kind`` ``fs``; connections from the
proxy, ``kind`` ``net``). A session's file events are
the id range recorded on its row. Readers never block: WAL, and short write transactions.
"""

from __future__ import annotations

import sqlite3
import time
from collections import namedtuple
from collections.abc import Iterable, Sequence
from pathlib import Path

from ... import jsontext
from ...errors import StoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS fs_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    action TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER
);
CREATE TABLE IF NOT EXISTS snapshot_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    slot INTEGER NOT NULL,
    origin TEXT NOT NULL,
    name TEXT,
    files_count INTEGER DEFAULT 0,
    start_fs_event_id INTEGER DEFAULT 0,
    stop_fs_event_id INTEGER DEFAULT 0
);
CREATE TABLE IF NOT EXISTS exec_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    pid INTEGER NOT NULL,
    ppid INTEGER,
    command TEXT NOT NULL,
    args TEXT NOT NULL,
    cwd TEXT,
    exit_code INTEGER,
    signal TEXT,
    duration REAL
);
CREATE INDEX IF NOT EXISTS exec_events_session ON exec_events(session_id);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    ended TEXT,
    label TEXT,
    command TEXT NOT NULL,
    tracked_paths TEXT NOT NULL,
    exit_code INTEGER,
    snapshot_count INTEGER NOT NULL DEFAULT 0,
    merkle_roots TEXT NOT NULL DEFAULT '[]',
    network_events TEXT NOT NULL DEFAULT '[]',
    traced INTEGER NOT NULL DEFAULT 0,
    trace_note TEXT,
    first_fs_event_id INTEGER NOT NULL DEFAULT 0,
    last_fs_event_id INTEGER
);
CREATE TABLE IF NOT EXISTS session_snapshots (
    snapshot_event_id INTEGER PRIMARY KEY,
    session_id TEXT,
    snapshot_id TEXT NOT NULL,
    merkle_root TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS denials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    pid INTEGER,
    exe TEXT,
    syscall TEXT,
    path TEXT NOT NULL,
    errno TEXT,
    kind TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS denials_session ON denials(session_id);
CREATE TABLE IF NOT EXISTS agent_snapshots (
    snapshot_id TEXT PRIMARY KEY,
    face TEXT NOT NULL,
    made_ns INTEGER NOT NULL
);
"""

#: Capsem's per-snapshot change-count query, exactly as seed 000 gives it.
CHANGE_COUNT_QUERY = """
SELECT
  (SELECT COUNT(*) FROM fs_events WHERE id > s.start_fs_event_id AND id <= s.stop_fs_event_id
     AND action = 'created') as created,
  (SELECT COUNT(*) FROM fs_events WHERE id > s.start_fs_event_id AND id <= s.stop_fs_event_id
     AND action = 'modified') as modified,
  (SELECT COUNT(*) FROM fs_events WHERE id > s.start_fs_event_id AND id <= s.stop_fs_event_id
     AND action = 'deleted') as deleted,
  (SELECT COUNT(*) FROM fs_events WHERE id > s.start_fs_event_id AND id <= s.stop_fs_event_id
     AND action = 'restored') as restored
FROM snapshot_events s
WHERE s.id IN (SELECT MAX(id) FROM snapshot_events GROUP BY slot)
"""


class SessionRow(namedtuple("SessionRow", (
        "id started ended label command tracked_paths exit_code snapshot_count merkle_roots "
        "traced trace_note first_fs_event_id last_fs_event_id"))):
    """One ``ctrlz run`` session as the database keeps it."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "started": self.started, "ended": self.ended,
                "label": self.label, "command": self.command,
                "tracked_paths": self.tracked_paths, "exit_code": self.exit_code,
                "snapshot_count": self.snapshot_count, "merkle_roots": self.merkle_roots,
                "traced": self.traced, "trace_note": self.trace_note}


_SESSION_COLUMNS = ("id, started, ended, label, command, tracked_paths, exit_code, "
                    "snapshot_count, merkle_roots, traced, trace_note, first_fs_event_id, "
                    "last_fs_event_id")


def _session(row: Sequence[Any]) -> SessionRow:
    (sid, started, ended, label, command, tracked, code, count, roots, traced, note, first,
     last) = row
    return SessionRow(sid, started, ended, label, jsontext.loads(command), jsontext.loads(tracked),
                      code, count, jsontext.loads(roots), bool(traced), note, first, last)


class SessionDB:
    """One connection to a store's ``session.db``. Cheap to open; every face may read it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.db = sqlite3.connect(path, isolation_level=None, timeout=30,
                                      check_same_thread=False)
            self.db.execute("PRAGMA busy_timeout = 30000")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            self.db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            self._open_frozen(exc)
        else:
            self._copy: str | None = None

    def _open_frozen(self, exc: sqlite3.DatabaseError) -> None:
        """On a full disk, read what is committed, as the catalog does there (see
        :mod:`ctrlz.state.db.frozen_catalog`): listing sessions must work then too; writes
        fail ("attempt to write a readonly database")."""
        from . import frozen_catalog

        try:
            self.db.close()
        except (AttributeError, sqlite3.Error):
            pass
        if not frozen_catalog.disk_full(exc, self.path):
            raise StoreError(f"cannot open the session database {self.path}: {exc}") from exc
        try:
            self.db, self._copy = frozen_catalog.open_frozen(self.path)
            self.db.execute("SELECT count(*) FROM sessions").fetchone()
        except (OSError, sqlite3.DatabaseError):
            raise StoreError(f"cannot open the session database {self.path}: {exc}") from exc

    def close(self) -> None:
        self.db.close()
        if self._copy is not None:
            import shutil

            shutil.rmtree(self._copy, ignore_errors=True)
            self._copy = None

    # -- file events -----------------------------------------------------------------------

    def add_fs_events(self, rows: Iterable[tuple[str, str, str, int | None]]) -> None:
        """(timestamp ISO, action, path, size) rows, in one transaction."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT INTO fs_events (timestamp, action, path, size) VALUES (?, ?, ?, ?)",
                rows)

    def max_fs_event_id(self) -> int:
        return self.db.execute("SELECT COALESCE(MAX(id), 0) FROM fs_events").fetchone()[0]

    def fs_events(self, first: int = 0, last: int | None = None) -> list[tuple[Any, ...]]:
        sql = "SELECT id, timestamp, action, path, size FROM fs_events WHERE id > ?"
        args: list[Any] = [first]
        if last is not None:
            sql += " AND id <= ?"
            args.append(last)
        return list(self.db.execute(sql + " ORDER BY id", args))

    # -- snapshot events ----------------------------------------------------------------------

    def add_snapshot_event(self, *, timestamp: str, slot: int, origin: str, name: str | None,
                           files_count: int, snapshot_id: str, merkle_root: str,
                           session_id: str | None) -> int:
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            stop = self.max_fs_event_id()
            if origin == "manual":
                start = 0
            else:
                row = self.db.execute("SELECT stop_fs_event_id FROM snapshot_events "
                                      "ORDER BY id DESC LIMIT 1").fetchone()
                start = row[0] if row else 0
            cur = self.db.execute(
                "INSERT INTO snapshot_events (timestamp, slot, origin, name, files_count, "
                "start_fs_event_id, stop_fs_event_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (timestamp, slot, origin, name, files_count, start, stop))
            event_id = cur.lastrowid
            assert event_id is not None
            self.db.execute("INSERT INTO session_snapshots VALUES (?, ?, ?, ?)",
                            (event_id, session_id, snapshot_id, merkle_root))
        return event_id

    def snapshot_events(self, session_id: str | None = None) -> list[tuple[Any, ...]]:
        sql = ("SELECT e.id, e.timestamp, e.slot, e.origin, e.name, e.files_count, "
               "e.start_fs_event_id, e.stop_fs_event_id, l.snapshot_id, l.merkle_root "
               "FROM snapshot_events e JOIN session_snapshots l ON l.snapshot_event_id = e.id")
        if session_id is not None:
            return list(self.db.execute(sql + " WHERE l.session_id = ? ORDER BY e.id",
                                        (session_id,)))
        return list(self.db.execute(sql + " ORDER BY e.id"))

    def next_auto_slot(self, auto_max: int) -> int:
        row = self.db.execute("SELECT COUNT(*) FROM snapshot_events WHERE origin = 'auto'")
        return row.fetchone()[0] % max(auto_max, 1)

    def change_counts(self) -> list[tuple[int, int, int, int]]:
        return list(self.db.execute(CHANGE_COUNT_QUERY))

    # -- snapshots an agent made ------------------------------------------------------------

    def mark_agent_made(self, snapshot_id: str, face: str) -> None:
        """Record that an agent, through ``face`` (``mcp``), took ``snapshot_id``: the only
        snapshots of a person's pools (manual) that an agent may later delete or fold
        (:func:`ctrlz.session.policy.check_deletable`). A snapshot with no row here is a
        person's, so a row lost or never written errs on the side of keeping it."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT OR REPLACE INTO agent_snapshots VALUES (?, ?, ?)",
                            (snapshot_id, face, time.time_ns()))

    def agent_made(self) -> set[str]:
        """The ids :meth:`mark_agent_made` recorded (some may since be removed); none from
        a database opened read-only from before the table existed (a full disk)."""
        try:
            return {r[0] for r in self.db.execute("SELECT snapshot_id FROM agent_snapshots")}
        except sqlite3.OperationalError:
            return set()

    # -- exec events ------------------------------------------------------------------------

    def add_exec_events(self, session_id: str, events: Iterable[dict[str, Any]]) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT INTO exec_events (session_id, timestamp, pid, ppid, command, args, cwd, "
                "exit_code, signal, duration) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(session_id, e["timestamp"], e["pid"], e.get("ppid"), e["command"],
                  jsontext.dumps(e.get("args", [])), e.get("cwd"), e.get("exit_code"),
                  e.get("signal"), e.get("duration")) for e in events])

    def exec_events(self, session_id: str) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT timestamp, pid, ppid, command, args, cwd, exit_code, signal, duration "
            "FROM exec_events WHERE session_id = ? ORDER BY timestamp, id", (session_id,))
        return [{"timestamp": r[0], "pid": r[1], "ppid": r[2], "command": r[3],
                 "args": jsontext.loads(r[4]), "cwd": r[5], "exit_code": r[6], "signal": r[7],
                 "duration": r[8]} for r in rows]

    # -- what a sandbox refused ----------------------------------------------------------

    def add_denials(self, session_id: str, denials: Iterable[dict[str, Any]]) -> None:
        """Rows in :meth:`denials`' form (``timestamp`` ISO, ``path``, ``kind`` ``fs`` or
        ``net``; ``pid``, ``exe``, ``syscall``, ``errno`` may be missing), one transaction.
        The table is made by :data:`SCHEMA`'s ``IF NOT EXISTS`` when an older database
        opens, so a store from before sandboxing gains it without a migration step."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT INTO denials (session_id, timestamp, pid, exe, syscall, path, errno, "
                "kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(session_id, d["timestamp"], d.get("pid"), d.get("exe"), d.get("syscall"),
                  d["path"], d.get("errno"), d["kind"]) for d in denials])

    def denials(self, session_id: str) -> list[dict[str, Any]]:
        """A session's refusals, oldest first; none from a database opened read-only from
        before the table existed (a full disk)."""
        try:
            rows = self.db.execute(
                "SELECT timestamp, pid, exe, syscall, path, errno, kind FROM denials "
                "WHERE session_id = ? ORDER BY timestamp, id", (session_id,))
        except sqlite3.OperationalError:
            return []
        return [{"timestamp": r[0], "pid": r[1], "exe": r[2], "syscall": r[3], "path": r[4],
                 "errno": r[5], "kind": r[6]} for r in rows]

    def add_network_events(self, session_id: str, decisions: list[dict[str, Any]]) -> None:
        """Append a sandboxed run's network decisions to its row's ``network_events``."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            row = self.db.execute("SELECT network_events FROM sessions WHERE id = ?",
                                  (session_id,)).fetchone()
            if row is None:
                return
            events = jsontext.loads(row[0] or "[]") + decisions
            self.db.execute("UPDATE sessions SET network_events = ? WHERE id = ?",
                            (jsontext.dumps(events), session_id))

    # -- sessions ---------------------------------------------------------------------------

    def start_session(self, session_id: str, started: str, label: str | None,
                      command: list[str], tracked_paths: list[str], traced: bool,
                      trace_note: str | None) -> None:
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(
                "INSERT INTO sessions (id, started, label, command, tracked_paths, traced, "
                "trace_note, first_fs_event_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, started, label, jsontext.dumps(command), jsontext.dumps(tracked_paths),
                 int(traced), trace_note, self.max_fs_event_id()))

    def add_merkle_root(self, session_id: str, root_hex: str) -> None:
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            row = self.db.execute("SELECT merkle_roots FROM sessions WHERE id = ?",
                                  (session_id,)).fetchone()
            roots = jsontext.loads(row[0]) if row else []
            roots.append(root_hex)
            self.db.execute("UPDATE sessions SET merkle_roots = ?, snapshot_count = ? "
                            "WHERE id = ?", (jsontext.dumps(roots), len(roots), session_id))

    def end_session(self, session_id: str, ended: str, exit_code: int | None) -> None:
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("UPDATE sessions SET ended = ?, exit_code = ?, last_fs_event_id = ? "
                            "WHERE id = ?", (ended, exit_code, self.max_fs_event_id(),
                                             session_id))

    def sessions(self) -> list[SessionRow]:
        return [_session(r) for r in self.db.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY started, rowid")]

    def session(self, session_id: str) -> SessionRow | None:
        row = self.db.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?",
                              (session_id,)).fetchone()
        return _session(row) if row else None
