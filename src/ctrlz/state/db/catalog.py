"""The catalog: one SQLite database (WAL) per store that indexes objects and records snapshots.

SQLite is the commit point of every write. Pack bytes and loose objects are fsynced first; only
then does one transaction add their index rows together with the snapshot that references them.
A crash before the commit leaves unreferenced bytes (reclaimed by gc), never a snapshot that points
at missing data. WAL mode lets readers list and diff while a writer works.

Schema changes are ordered migrations keyed by ``PRAGMA user_version`` (:mod:`.migrations`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence

from ... import jsontext
from ...errors import StoreError
from .migrations import MIGRATIONS
from .transaction import Transaction

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from ...types import Snapshot

ObjectRow = tuple[bytes, int | None, int, int, int, int]  # oid, pack, offset, length, size, codec

#: the codec of a clone (``packs.CLONE``; not imported: packs imports this module)
_CLONE = 2

#: how long a statement waits for another process's lock
BUSY_MS = 30_000

#: a write-ahead log past this many bytes at the end of a write operation is checkpointed
#: into the catalog and truncated (:meth:`Catalog.trim_wal`). SQLite never shrinks its WAL by
#: itself: after three snapshots of git's source it held 0.21 MB beside a catalog of 0.32 MB
#: (1.3% of what git stores for them); below this, a checkpoint's extra fsync per snapshot
#: would buy almost nothing
WAL_KEEP = 64 << 10

#: how many drops the catalog remembers (the oldest are forgotten first)
DROPS_KEPT = 500

_SNAPSHOT_COLUMNS = (
    "id, number, parent, type, label, pinned, created_ns, root, files, dirs, symlinks, bytes, "
    "added_bytes, size_delta, created, modified, deleted, rules, skipped, roots"
)


def _first(row: Sequence[Any]) -> Any:
    return row[0]


def _row_to_snapshot(row: Sequence[Any]) -> Snapshot:
    # imported here: ctrlz.types builds dataclasses, which an agent hook (tool-call store
    # only, never a workspace snapshot row) should not pay for at start-up
    from ...types import Skipped, Snapshot

    (sid, number, parent, typ, label, pinned, created_ns, root, files, dirs, symlinks, nbytes,
     added, delta, created, modified, deleted, rules, skipped, roots) = row
    return Snapshot(
        id=sid, number=number, parent=parent, type=typ, label=label, pinned=bool(pinned),
        created_ns=created_ns, root=bytes(root), files=files, dirs=dirs, symlinks=symlinks,
        bytes=nbytes, added_bytes=added, size_delta=delta, created=created, modified=modified,
        deleted=deleted, rules=jsontext.loads(rules),
        skipped=tuple(Skipped(bytes.fromhex(p), r) for p, r in jsontext.loads(skipped)),
        roots=tuple(jsontext.loads(roots)),
    )


class Catalog:
    #: whether the process trims the WAL itself once it has answered (the daemon: see
    #: :meth:`trim_wal`), rather than at the end of each write operation
    trim_wal_later = False

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False) -> None:
        self.path = path
        #: run with True once the current transaction has committed, with False if it did not
        self._on_end: list[Callable[[bool], None]] = []
        #: why this catalog refuses writes: opened frozen on a full disk (see frozen_catalog)
        self.frozen: str | None = None
        self._frozen_copy: str | None = None
        try:
            self._open(path, readonly)
        except sqlite3.DatabaseError as exc:
            from . import frozen_catalog

            if not frozen_catalog.disk_full(exc, path):
                raise StoreError(f"cannot open the catalog {path}: {exc}") from exc
            try:
                self.db.close()
            except (AttributeError, sqlite3.Error):
                pass
            try:
                self.db, self._frozen_copy = frozen_catalog.open_frozen(path)
                self._schema_version()
            except (OSError, sqlite3.DatabaseError):
                raise StoreError(f"cannot open the catalog {path}: {exc}") from exc
            self.frozen = (f"the store's disk is full ({os.path.dirname(os.fspath(path))}); "
                           "free some space or move CTRLZ_HOME, then try again")

    def _open(self, path: str | os.PathLike[str], readonly: bool) -> None:
        """Connect, in WAL mode and migrated unless ``readonly``."""
        if readonly:
            uri = f"file:{path}?mode=ro"
            self.db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30,
                                      check_same_thread=False)
            # refused here too: a store of a newer schema may hold what this code would
            # misread (a writable open refuses it as it migrates)
            self._schema_version()
        else:
            self.db = sqlite3.connect(path, isolation_level=None, timeout=30,
                                      check_same_thread=False)
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
        if not readonly:
            _retry_locked(lambda: self.db.execute("PRAGMA journal_mode = WAL"))
            self.db.execute("PRAGMA synchronous = FULL")
            _retry_locked(self._migrate)
        # the first read makes SQLite open the WAL's shared-memory index (which a full
        # disk refuses): here, so that the fallback above can take over
        self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()

    def close(self) -> None:
        self.db.close()
        if self._frozen_copy is not None:
            import shutil

            shutil.rmtree(self._frozen_copy, ignore_errors=True)
            self._frozen_copy = None

    def trim_wal(self) -> None:
        """Copy the WAL into the catalog and truncate it, once it holds over :data:`WAL_KEEP`
        bytes, so that what lies on disk between operations is the catalog and not a journal's
        copy of it as well. SQLite removes its WAL only when the last connection closes, and
        the daemon's stays open. Called at the end of each write operation, outside its
        transaction; the daemon calls it once it has answered (:attr:`trim_wal_later`: a
        checkpoint's fsync costs a few ms). SQLite's own checkpoint (TRUNCATE) fsyncs the
        catalog before it cuts the log, so nothing committed depends on this succeeding. It
        waits for nobody: while another process reads or writes, the log stays as it is and a
        later operation trims it."""
        if self.frozen is not None:
            return
        try:
            if os.stat(f"{os.fspath(self.path)}-wal").st_size <= WAL_KEEP:
                return
        except FileNotFoundError:
            return
        self.db.execute("PRAGMA busy_timeout = 0")
        try:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error:
            # busy, a full disk the catalog cannot grow on, or an I/O error: the log stays
            # whole and valid, and a later operation trims it. The operation before this
            # committed, so it is not reported failed for a journal it could not shorten (a
            # user told a finished restore failed would run it again); a disk that fails
            # reads or writes fails the next operation's own work, loudly.
            pass
        finally:
            self.db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")

    def _migrate(self) -> None:
        """Bring the schema up to date. Two processes may open a new store at the same moment
        (an agent starts two hooks at once): the version is read again under the write lock,
        so only one of them migrates and the other finds the work done."""
        if self._schema_version() == len(MIGRATIONS):
            return
        with self.transaction():
            for index in range(self._schema_version(), len(MIGRATIONS)):
                MIGRATIONS[index](self.db)
                self.db.execute(f"PRAGMA user_version = {index + 1}")

    def _schema_version(self) -> int:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise StoreError(
                f"the store {os.path.dirname(self.path)} was written by a newer ctrlz "
                f"(schema {version}); upgrade ctrlz"
            )
        return version

    # -- transactions -------------------------------------------------------------------------

    def transaction(self) -> Transaction:
        if self.frozen is not None:
            from ...errors import StoreFull

            raise StoreFull(self.frozen)
        return Transaction(self.db, self._on_end)

    def on_end(self, fn: Callable[[bool], None]) -> None:
        """Call ``fn(committed)`` when the transaction in progress ends: for what may only
        happen once its rows are durable (forgetting that a writer's files might be strays),
        and its opposite when it rolls back."""
        self._on_end.append(fn)

    # -- meta -------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- objects ----------------------------------------------------------------------------

    def all_oids(self) -> set[bytes]:
        return {bytes(r[0]) for r in self.db.execute("SELECT oid FROM objects")}

    def holds_more_objects_than(self, n: int) -> bool:
        """Whether the store has more than ``n`` objects, at a cost bounded by ``n``."""
        return self.db.execute("SELECT 1 FROM objects LIMIT 1 OFFSET ?", (n,)).fetchone() \
            is not None

    def lookup(self, oid: bytes) -> ObjectRow | None:
        row = self.db.execute(
            "SELECT oid, pack, offset, length, size, codec FROM objects WHERE oid = ?", (oid,)
        ).fetchone()
        return (bytes(row[0]), *row[1:]) if row else None

    def add_objects(self, rows: Iterable[ObjectRow]) -> None:
        """Inserted in id order: object ids are random, and a B-tree takes them in order
        about three times faster (117,000 rows, a first snapshot of 100,000 small files:
        1.1 s -> 0.4 s, committing included)."""
        self.db.executemany(
            "INSERT OR IGNORE INTO objects (oid, pack, offset, length, size, codec) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            sorted(rows, key=_first),
        )

    def object_rows(self) -> list[ObjectRow]:
        return [(bytes(r[0]), *r[1:]) for r in self.db.execute(
            "SELECT oid, pack, offset, length, size, codec FROM objects ORDER BY pack, offset")]

    def delete_objects(self, oids: Iterable[bytes]) -> None:
        """Delete object rows; a clone's id is remembered as retired (:meth:`is_retired`)."""
        oids = list(oids)
        self.db.executemany(
            "INSERT OR IGNORE INTO retired (oid) SELECT oid FROM objects WHERE oid = ? "
            f"AND codec = {_CLONE}", ((o,) for o in oids))
        self.db.executemany("DELETE FROM objects WHERE oid = ?", ((o,) for o in oids))
        self.db.executemany("DELETE FROM cuts WHERE oid = ?", ((o,) for o in oids))

    def set_stored_length(self, oid: bytes, length: int) -> None:
        """A loose object's file was rewritten (compressed again by gc): its new length."""
        self.db.execute("UPDATE objects SET length = ? WHERE oid = ?", (length, oid))

    def is_retired(self, oid: bytes) -> bool:
        """Was ``oid`` a clone this store deleted? Its name is never given out again."""
        try:
            row = self.db.execute("SELECT 1 FROM retired WHERE oid = ?", (oid,)).fetchone()
        except sqlite3.OperationalError:  # a read-only catalog of an older schema
            return False
        return row is not None

    def add_cuts(self, rows: Iterable[tuple[bytes, bytes]]) -> None:
        """(oid, cut table) of objects added in this transaction."""
        self.db.executemany("INSERT OR REPLACE INTO cuts (oid, cuts) VALUES (?, ?)", rows)

    def cuts(self, oid: bytes) -> bytes | None:
        """The cut table of ``oid``, if it has one (a read-only catalog of an older schema
        has no table at all: nothing is cut there)."""
        try:
            row = self.db.execute("SELECT cuts FROM cuts WHERE oid = ?", (oid,)).fetchone()
        except sqlite3.OperationalError:
            return None
        return bytes(row[0]) if row else None

    def add_pack(self, name: str, size: int) -> int:
        cur = self.db.execute("INSERT INTO packs (name, size) VALUES (?, ?)", (name, size))
        assert cur.lastrowid is not None
        return cur.lastrowid

    def packs(self) -> dict[int, tuple[str, int]]:
        return {r[0]: (r[1], r[2]) for r in self.db.execute("SELECT id, name, size FROM packs")}

    def delete_pack(self, pack_id: int) -> None:
        self.db.execute("DELETE FROM packs WHERE id = ?", (pack_id,))

    def object_count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM objects").fetchone()[0]

    def stored_bytes(self) -> tuple[int, int]:
        """(logical bytes of all objects, stored bytes of all objects)."""
        row = self.db.execute("SELECT COALESCE(SUM(size),0), COALESCE(SUM(length),0) "
                              "FROM objects").fetchone()
        return row[0], row[1]

    def packed_bytes(self) -> int:
        """Bytes of the pack files and loose objects, as recorded when they were committed:
        what the store's objects take on disk, read without listing the store (packs are
        few; loose objects are found through the ``objects_loose`` index)."""
        packs = self.db.execute("SELECT COALESCE(SUM(size), 0) FROM packs").fetchone()[0]
        loose = self.db.execute("SELECT COALESCE(SUM(length), 0) FROM objects "
                                "WHERE pack IS NULL").fetchone()[0]
        return packs + loose

    # -- snapshots --------------------------------------------------------------------------

    def next_number(self) -> int:
        row = self.db.execute("SELECT MAX(number) FROM snapshots").fetchone()
        seen = self.get_meta("max_number")
        highest = max(row[0] if row[0] is not None else -1, int(seen) if seen else -1)
        return highest + 1

    def add_snapshot(self, s: Snapshot) -> None:
        self.db.execute(
            f"INSERT INTO snapshots ({_SNAPSHOT_COLUMNS}) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (s.id, s.number, s.parent, s.type, s.label, int(s.pinned), s.created_ns, s.root,
             s.files, s.dirs, s.symlinks, s.bytes, s.added_bytes, s.size_delta, s.created,
             s.modified, s.deleted, jsontext.dumps(dict(s.rules), sort_keys=True),
             jsontext.dumps([[k.path.hex(), k.reason] for k in s.skipped]),
             jsontext.dumps(list(s.roots))),
        )
        if s.number is not None:
            # numbers are never reused, even after the newest snapshot is removed
            self.set_meta("max_number", str(max(s.number, self.next_number() - 1)))

    def snapshots(self, types: Sequence[str] | None = None) -> list[Snapshot]:
        """All snapshots (or those of ``types``), oldest first."""
        where, args = "", ()
        if types is not None:
            where = f"WHERE type IN ({', '.join('?' * len(types))}) "
            args = tuple(types)
        return [_row_to_snapshot(r) for r in self.db.execute(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM snapshots {where}ORDER BY created_ns, rowid",
            args)]

    def oldest(self, limit: int, types: Sequence[str] = (),
               but: Sequence[str] = ()) -> list[Snapshot]:
        """The ``limit`` oldest snapshots not of the types ``but``, together with every
        snapshot of ``types``, oldest first (by the order of :meth:`snapshots`): what the pools
        read when ``max_count`` is exceeded, instead of the whole list (see
        ``engine.retention.plan_pools_for``)."""
        skip = f"WHERE type NOT IN ({', '.join('?' * len(but))}) " if but else ""
        also = f" OR type IN ({', '.join('?' * len(types))})" if types else ""
        return [_row_to_snapshot(r) for r in self.db.execute(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM snapshots WHERE rowid IN (SELECT rowid FROM "
            f"snapshots {skip}ORDER BY created_ns, rowid LIMIT ?){also} "
            "ORDER BY created_ns, rowid", (*but, limit, *types))]

    def summaries(self) -> list[tuple[Any, ...]]:
        """Every snapshot, oldest first, as ``(id, type, label, pinned, created_ns, files,
        bytes, added_bytes, created, modified, deleted)``: what a timeline of thousands of
        snapshots, or a look for what changed, needs, without decoding each one's rules and
        skipped paths (most of :meth:`snapshots`' cost)."""
        return self.db.execute(
            "SELECT id, type, label, pinned, created_ns, files, bytes, added_bytes, created, "
            "modified, deleted FROM snapshots ORDER BY created_ns, rowid").fetchall()

    def snapshots_before(self, limit: int, before: str | None = None) -> list[Snapshot] | None:
        """Up to ``limit`` snapshots, newest first, older than snapshot ``before`` (by the
        order of :meth:`snapshots`; from the newest when None): one page of a long list.
        None when ``before`` names no snapshot."""
        where, args = "", ()
        if before is not None:
            found = self.db.execute("SELECT created_ns, rowid FROM snapshots WHERE id = ?",
                                    (before,)).fetchone()
            if found is None:
                return None
            where, args = "WHERE (created_ns, rowid) < (?, ?) ", tuple(found)
        return [_row_to_snapshot(r) for r in self.db.execute(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM snapshots {where}"
            "ORDER BY created_ns DESC, rowid DESC LIMIT ?", (*args, limit))]

    def latest(self) -> Snapshot | None:
        """The newest snapshot, by the order of :meth:`snapshots`, without reading the rest."""
        row = self.db.execute(f"SELECT {_SNAPSHOT_COLUMNS} FROM snapshots "
                              "ORDER BY created_ns DESC, rowid DESC LIMIT 1").fetchone()
        return _row_to_snapshot(row) if row else None

    def type_counts(self) -> dict[str, int]:
        """How many snapshots of each type: what the pools need to know whether anything
        must go, without decoding every snapshot."""
        return dict(self.db.execute("SELECT type, COUNT(*) FROM snapshots GROUP BY type"))

    def snapshot(self, snapshot_id: str) -> Snapshot | None:
        row = self.db.execute(f"SELECT {_SNAPSHOT_COLUMNS} FROM snapshots WHERE id = ?",
                              (snapshot_id,)).fetchone()
        return _row_to_snapshot(row) if row else None

    def delete_snapshot(self, snapshot_id: str) -> None:
        self.db.execute("DELETE FROM snapshots WHERE id = ?", (snapshot_id,))

    def record_drops(self, drops: Sequence[tuple[str, str, str | None, str]],
                     now_ns: int) -> None:
        """Remember ``(id, type, label, reason)`` of snapshots retention dropped, in the
        caller's transaction (the one that deletes them); the newest ``DROPS_KEPT`` stay."""
        if not drops:
            return
        self.db.executemany("INSERT INTO drops (id, type, label, reason, dropped_ns) "
                            "VALUES (?, ?, ?, ?, ?)", [(*d, now_ns) for d in drops])
        self.db.execute("DELETE FROM drops WHERE seq <= (SELECT MAX(seq) FROM drops) - ?",
                        (DROPS_KEPT,))

    def drops(self, since_ns: int = 0, limit: int = DROPS_KEPT) -> list[dict[str, Any]]:
        """The snapshots retention dropped since ``since_ns``, newest first."""
        rows = self.db.execute("SELECT id, type, label, reason, dropped_ns FROM drops "
                               "WHERE dropped_ns >= ? ORDER BY seq DESC LIMIT ?",
                               (since_ns, limit))
        return [{"id": i, "type": t, "label": lab, "reason": r, "dropped_ns": ns}
                for i, t, lab, r, ns in rows]

    def update_snapshot(self, snapshot_id: str, **fields: Any) -> None:
        allowed = {"pinned", "label", "type"}
        if not fields or set(fields) - allowed:
            raise ValueError(f"cannot update {sorted(set(fields) - allowed)}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"UPDATE snapshots SET {sets} WHERE id = ?",
                        (*fields.values(), snapshot_id))


def _retry_locked(step: Callable[[], object], deadline_s: float = 30.0) -> None:
    """Run ``step``, retrying while SQLite says the database is locked. The busy timeout covers
    ordinary waits, but not every one: switching a new database to WAL, or a transaction that
    found another writer's schema change, fails at once with "database is locked"."""
    import time

    end = time.monotonic() + deadline_s
    pause = 0.005
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > end:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
