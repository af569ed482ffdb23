"""Where tool-call state lives: ``<workspace store>/toolcalls/``, never in the workspace.

Layout::

    <store>/toolcalls/catalog.db   SQLite (WAL): the object index of the pre-image bodies, plus
                                   the tc_* tables (sessions, snapshots, entries, redo stack)
    <store>/toolcalls/packs/       pack files of pre-image bodies (content-addressed, deduplicated)
    <store>/toolcalls/objects/     large pre-image bodies, one file each
    <store>/toolcalls/lock         writer lock (flock): hooks of one agent run in parallel
    <store>/toolcalls/inbox/       captures hooks left without opening the catalog, indexed
                                   by the next opener (:mod:`ctrlz.state.db.inbox`)

Why a store of its own rather than the workspace's object store: the engine's garbage collector
keeps only objects reachable from workspace snapshots, and retention runs it whenever a snapshot is
dropped, so a pre-image body put there would vanish at the next prune. Here the bodies live in the
same kind of store (same ``ObjectStore``/``ObjectWriter``, same hash algorithm, verified on read,
deduplicated across every tool call of every session), and :meth:`ToolcallStore.compact` collects
exactly the bodies no entry references.

Budgets. Pre-image bodies never count against the workspace's ``store_cap`` (so a flood of tool
calls cannot make retention drop the user's manual snapshots); they have two budgets of their own,
both in logical bytes of captured files (``tc_snapshots.byte_count``, an upper bound of what the
deduplicated, compressed bodies take): a per-session ``byte_cap`` (``tc_sessions.byte_cap``,
default 1 GiB) and the store-wide ``preimage_cap`` over every session (``meta.preimage_cap`` of
this store's catalog, default 1 GiB). Every capture evicts the oldest tool-call snapshots until
both hold (see ``ctrlz.toolcalls.records.enforce_cap``), then :meth:`ToolcallStore.compact`
reclaims their bodies. The store-wide value comes from the ``preimage_cap`` setting; a hook cannot
afford to load the configuration, so ``ctrlz`` writes the setting into this catalog
(:func:`sync_preimage_cap`) and the hook reads one row.

This module is the storage (schema, bodies, lock, budget value) and belongs to the state layer;
what the rows mean is :mod:`ctrlz.toolcalls.records`'s. Opening this store is deliberately cheap
(sqlite3, the object store, hashing; no scanner, no config, no engine), so a file-tool hook stays
well under 100 ms.
"""

from __future__ import annotations

import os
import sqlite3

from ..db.catalog import Catalog
from ..fsio.atomic import fsync_dir
from .lock import StoreLock
from .objects import ObjectStore
from .sweep import sweep

TYPE_CHECKING = False

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS tc_sessions (
    session_id TEXT PRIMARY KEY,
    agent TEXT,
    byte_cap INTEGER,
    turn INTEGER NOT NULL DEFAULT 0,
    created_ns INTEGER NOT NULL,
    last_ns INTEGER NOT NULL,
    turn_key TEXT                    -- the agent's id of the current turn, or an UNTIL_STOP state
);
CREATE TABLE IF NOT EXISTS tc_snapshots (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    snapshot_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    taken_ns INTEGER NOT NULL,
    kind TEXT NOT NULL,              -- files | bash | redo
    tool TEXT,                       -- the agent's tool name
    detail TEXT,                     -- the shell command, for bash
    args_key TEXT,                   -- hash of the tool arguments (Gemini has no tool-call id)
    ws_snapshot TEXT,                -- bash: the workspace `tool` snapshot taken just before it
    open INTEGER NOT NULL DEFAULT 0, -- a lazy scope still capturing
    rolled_back INTEGER NOT NULL DEFAULT 0,
    byte_count INTEGER NOT NULL DEFAULT 0,
    UNIQUE (session_id, snapshot_id)
);
CREATE INDEX IF NOT EXISTS tc_snapshots_session ON tc_snapshots (session_id, seq);
CREATE TABLE IF NOT EXISTS tc_entries (
    seq INTEGER NOT NULL,            -- tc_snapshots.seq
    path BLOB NOT NULL,              -- workspace-relative, filesystem bytes
    kind TEXT NOT NULL,              -- file | symlink | absent | dir
    oid BLOB, size INTEGER, mode INTEGER,
    post_kind TEXT, post_oid BLOB,   -- what the tool call left there, when known
    PRIMARY KEY (seq, path)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tc_redo (
    pos INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    rolled_back TEXT NOT NULL,       -- JSON list of tc_snapshots.seq
    redo_seq INTEGER NOT NULL        -- the redo snapshot's tc_snapshots.seq
);
CREATE TABLE IF NOT EXISTS tc_inbox (
    name TEXT PRIMARY KEY            -- an inbox record indexed, until its file is gone
);
CREATE TABLE IF NOT EXISTS tc_evicted (  -- captures a budget evicted: a rewind past one refuses
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,            -- its tc_snapshots.seq
    snapshot_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""


DEFAULT_PREIMAGE_CAP = 1 << 30  # all sessions of the store together (the preimage_cap setting)
PREIMAGE_CAP_KEY = "preimage_cap"  # its key in the tool-call catalog's meta table


def preimage_cap(db: sqlite3.Connection) -> int:
    """The store-wide budget, as ``ctrlz`` last wrote it (see :func:`sync_preimage_cap`)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (PREIMAGE_CAP_KEY,)).fetchone()
    try:
        return max(1, int(row[0])) if row else DEFAULT_PREIMAGE_CAP
    except ValueError:
        return DEFAULT_PREIMAGE_CAP


class ToolcallStore:
    """The tool-call part of one workspace store: bodies plus the tc_* tables.

    Paths are kept as strings (``path`` gives a ``Path`` on demand), so that opening it from a
    hook does not import ``pathlib``."""

    def __init__(self, store: str | os.PathLike[str]) -> None:
        self.dir = os.path.join(os.fspath(store), "toolcalls")
        try:
            os.mkdir(self.dir, 0o700)
        except FileExistsError:
            if not os.path.isdir(self.dir):
                raise
        else:
            fsync_dir(os.fspath(store))  # the new directory's entry, before anything lands in it
        self.catalog = Catalog(os.path.join(self.dir, "catalog.db"))
        algorithm = self.catalog.get_meta("algorithm")
        if algorithm is None or not _current(self.catalog.db):
            # a new store, or one from before turn keys or evictions were kept; another hook
            # may be doing the same right now, so every step is checked again under the lock
            main = _main_algorithm(os.fspath(store)) if algorithm is None else algorithm
            with self.catalog.transaction():
                algorithm = self.catalog.get_meta("algorithm")
                if algorithm is None:
                    algorithm = main
                    self.catalog.set_meta("algorithm", algorithm)
                _create_schema(self.catalog.db)
        self.objects = ObjectStore(self.dir, self.catalog, algorithm)
        self.lock = StoreLock(os.path.join(self.dir, "lock"))

    @property
    def path(self) -> Path:
        from pathlib import Path

        return Path(self.dir)

    @property
    def db(self) -> sqlite3.Connection:
        return self.catalog.db

    def close(self) -> None:
        self.objects.close()
        self.catalog.close()

    def __enter__(self) -> ToolcallStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def compact(self) -> int:
        """Forget bodies no entry references and reclaim their bytes; returns how many.

        The workspace gc's sweep (:func:`ctrlz.state.store.sweep.sweep`): a pack holding a dead body
        is rewritten with only its live ones, so the bytes on disk follow the budgets even when
        a body captured by an evicted tool call shares its pack with one a later call still
        references."""
        with self.lock:
            live = {bytes(r[0]) for r in self.db.execute(
                "SELECT oid FROM tc_entries WHERE oid IS NOT NULL")}
            return sweep(self.objects, live).removed_objects

    @property
    def preimage_cap(self) -> int:
        """The store-wide pre-image budget in bytes (see the module docstring)."""
        return preimage_cap(self.db)

    def set_preimage_cap(self, cap: int) -> bool:
        """Record the store-wide budget; returns whether it changed. It takes effect at the next
        capture, which holds this store's lock; this method does not take it, so ``ctrlz``
        may call it while a rewind holds that lock in the same process."""
        cap = max(1, int(cap))
        if preimage_cap(self.db) == cap and self.catalog.get_meta(
                PREIMAGE_CAP_KEY) is not None:
            return False
        with self.catalog.transaction():
            self.catalog.set_meta(PREIMAGE_CAP_KEY, str(cap))
        return True


def sync_preimage_cap(store: str | os.PathLike[str], cap: int) -> bool:
    """Write the ``preimage_cap`` setting where the hooks read it; returns whether it changed.

    Cheap enough to call after every workspace snapshot: a store whose agents never captured a
    pre-image and a cap left at the default cost one ``stat``; otherwise one catalog open and
    one row read, and a write only when the value changed."""
    catalog = os.path.join(os.fspath(store), "toolcalls", "catalog.db")
    if cap == DEFAULT_PREIMAGE_CAP and not os.path.exists(catalog):
        return False
    with ToolcallStore(store) as tc:
        return tc.set_preimage_cap(cap)


def _create_schema(db: sqlite3.Connection) -> None:
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    if not _has_turn_key(db):  # a store made before agents' turn ids were kept
        db.execute("ALTER TABLE tc_sessions ADD COLUMN turn_key TEXT")


def _current(db: sqlite3.Connection) -> bool:
    """Does the schema have its newest table? (:func:`_create_schema` makes every table and
    column at once, so the newest one stands for all.) One lookup, on every hook's open."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                      "name = 'tc_evicted'").fetchone() is not None


def _has_turn_key(db: sqlite3.Connection) -> bool:
    return "turn_key" in {row[1] for row in db.execute("PRAGMA table_info(tc_sessions)")}


def _main_algorithm(store: str) -> str:
    """The workspace store's hash algorithm, so ids mean the same thing in both stores."""
    try:
        db = sqlite3.connect(f"file:{os.path.join(store, 'catalog.db')}?mode=ro", uri=True,
                             timeout=30)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'algorithm'").fetchone()
        finally:
            db.close()
        return row[0] if row else "blake3"
    except sqlite3.DatabaseError:
        return "blake3"
