"""The catalog's schema: ordered migrations keyed by ``PRAGMA user_version``.

:class:`~ctrlz.state.db.catalog.Catalog` runs the ones a store lacks as it opens it; the count
of them is the schema version, so a store written by a newer ctrlz (more migrations than this
code knows) is refused rather than misread. Each migration runs inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable


def _script(db: sqlite3.Connection, sql: str) -> None:
    """Run several statements inside the caller's transaction (``executescript`` would commit)."""
    buffer = ""
    for piece in sql.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):  # a ';' inside a comment does not end it
            db.execute(buffer)
            buffer = ""


def _v1(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE packs (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,
                            size INTEGER NOT NULL);
        CREATE TABLE objects (
            oid BLOB PRIMARY KEY,
            pack INTEGER REFERENCES packs(id),  -- NULL: a loose object file
            offset INTEGER NOT NULL,
            length INTEGER NOT NULL,            -- stored (possibly compressed) length
            size INTEGER NOT NULL,              -- raw length
            codec INTEGER NOT NULL              -- 0 raw, 1 zstd, 2 clone, 3 group member
        ) WITHOUT ROWID;
        CREATE INDEX objects_pack ON objects(pack);
        CREATE TABLE snapshots (
            id TEXT PRIMARY KEY,
            number INTEGER UNIQUE,
            parent TEXT,
            type TEXT NOT NULL,
            label TEXT,
            pinned INTEGER NOT NULL DEFAULT 0,
            created_ns INTEGER NOT NULL,
            root BLOB NOT NULL,
            files INTEGER NOT NULL, dirs INTEGER NOT NULL, symlinks INTEGER NOT NULL,
            bytes INTEGER NOT NULL, added_bytes INTEGER NOT NULL, size_delta INTEGER NOT NULL,
            created INTEGER NOT NULL, modified INTEGER NOT NULL, deleted INTEGER NOT NULL,
            rules TEXT NOT NULL,
            skipped TEXT NOT NULL,
            roots TEXT NOT NULL
        );
        CREATE INDEX snapshots_created ON snapshots(created_ns);
        CREATE INDEX snapshots_label ON snapshots(label);
        """
    )


def _v2(db: sqlite3.Connection) -> None:
    """The operation log behind ``ctrlz undo`` / ``ctrlz redo`` (see ``ctrlz.oplog``)."""
    _script(
        db,
        """
        CREATE TABLE operations (
            seq INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,           -- rollback / revert
            target TEXT NOT NULL,         -- the snapshot id the operation restored
            paths TEXT NOT NULL,          -- JSON list of workspace-relative paths (hex); [] = all
            before TEXT,                  -- safety snapshot taken before the operation
            after TEXT,                   -- safety snapshot taken before its last undo
            undone INTEGER NOT NULL DEFAULT 0,
            created_ns INTEGER NOT NULL
        );
        """
    )


def _v3(db: sqlite3.Connection) -> None:
    """Pack ids are never reused. With a plain ``INTEGER PRIMARY KEY`` SQLite hands out
    ``max(id) + 1``, so after gc deletes the newest pack the next pack got its id, and a
    long-lived reader that had cached "pack 7 is this file" read the new pack's offsets out of
    the old file. ``AUTOINCREMENT`` keeps the highest id ever used in ``sqlite_sequence``.
    SQLite cannot add it to a table, so ``packs`` is rebuilt with every id kept (the ids are
    inserted explicitly, which sets the sequence to the highest of them)."""
    _script(
        db,
        """
        CREATE TABLE packs_v3 (id INTEGER PRIMARY KEY AUTOINCREMENT,
                               name TEXT UNIQUE NOT NULL, size INTEGER NOT NULL);
        INSERT INTO packs_v3 (id, name, size) SELECT id, name, size FROM packs ORDER BY id;
        DROP TABLE packs;
        ALTER TABLE packs_v3 RENAME TO packs;
        """
    )


def _v4(db: sqlite3.Connection) -> None:
    """Cut tables of large objects (:mod:`ctrlz.state.chunking`): where a big object's
    content-defined chunks sit, so a push names the chunks a remote has without reading
    them. A row goes with its object's row (:meth:`Catalog.delete_objects`)."""
    _script(db, "CREATE TABLE cuts (oid BLOB PRIMARY KEY, cuts BLOB NOT NULL) WITHOUT ROWID;")


def _v5(db: sqlite3.Connection) -> None:
    """What retention dropped (:meth:`Catalog.record_drops`): a snapshot that the pools or a
    prune removed is gone, and this says which, when and why (``ctrlz status``)."""
    _script(db, """
        CREATE TABLE drops (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL,             -- the snapshot dropped
            type TEXT NOT NULL,
            label TEXT,
            reason TEXT NOT NULL,         -- which rule dropped it
            dropped_ns INTEGER NOT NULL
        );
        """)


def _v6(db: sqlite3.Connection) -> None:
    """Clone ids that were in the store once (:meth:`Catalog.delete_objects` adds them): a
    clone is named by its blocks, and blocks that gc freed are given to new files, so a new
    clone could get the name of a deleted one, whose bytes an archive or a remote may still
    hold under it; an import or pull would then take the old bytes for the new object."""
    _script(db, "CREATE TABLE retired (oid BLOB PRIMARY KEY) WITHOUT ROWID;")


def _v7(db: sqlite3.Connection) -> None:
    """Grouped small objects (:mod:`ctrlz.state.store.groups`): packs may hold group records and
    the index codec 3. The version alone is what makes an older ctrlz, which knows neither,
    refuse the store ("written by a newer ctrlz") rather than misread it; ``meta`` says it
    too, for a person reading the catalog.

    And the index of objects by pack goes: the only question asked of it was "which objects
    are loose" (``pack IS NULL``), and it cost 44 bytes per object, 5 MB of a 100,000-file
    store; an index of the loose objects alone answers that."""
    _script(db, """
        INSERT OR REPLACE INTO meta (key, value) VALUES ('packs', 'groups');
        DROP INDEX IF EXISTS objects_pack;
        CREATE INDEX IF NOT EXISTS objects_loose ON objects(oid) WHERE pack IS NULL;
        """)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]
