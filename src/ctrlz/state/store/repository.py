"""A repository: one store directory holding a catalog, packs, loose objects and a lock.

Layout::

    <store>/catalog.db     SQLite (WAL): meta, object index, packs, snapshots
    <store>/packs/         append-only pack files of small objects
    <store>/objects/xx/…   large objects, one file each
    <store>/lock           the writer lock (flock)
    <store>/statcache      the stat cache of the newest snapshot (optional, rebuildable)
    <store>/toolcalls/     agent tool-call pre-images: a store of their own, with its own
                           budget (``ctrlz.toolcalls.store``); not counted in ``store_cap``

Directories are made durable when they are created: the store's own parents here, ``packs/``,
``objects/`` and ``objects/xx/`` by the object writer's commit (their parents are fsynced, once).

A workspace's repository lives under ``$CTRLZ_HOME``; a SnapshotManager's lives in its
``session_dir``. Either way the repository knows its roots (the tracked directories) and its
hash algorithm, both fixed at creation.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ... import jsontext
from ...errors import StoreError, WorkspaceError
from ..db import statcache
from ..db.catalog import Catalog
from ..fsio.atomic import fsync_dir
from ..hashing import ALGORITHMS, DEFAULT_ALGORITHM
from ..trees import Entry, decode_tree
from .lock import StoreLock
from .objects import ObjectStore
from .sweep import stray_files

FORMAT = "ctrlz-store 1"
TREE_DATA_MAX = 64 << 20  # encoded trees kept in memory (a 100,000-file tree: ~12 MB)


class Repository:
    def __init__(self, path: Path, catalog: Catalog) -> None:
        self.path = path
        self.catalog = catalog
        algorithm = catalog.get_meta("algorithm") or DEFAULT_ALGORITHM
        self.algorithm = algorithm
        self.objects = ObjectStore(path, catalog, algorithm)
        # a SnapshotManager's store promises SHA-256 content hashes and a Merkle root over
        # contents (seed 002): no clones, whose ids name blocks
        self.objects.clones_allowed = catalog.get_meta("kind") != "session"
        self.lock = StoreLock(path / "lock")
        self.roots: list[str] = jsontext.loads(catalog.get_meta("roots") or "[]")
        self._trees: dict[bytes, list[Entry]] = {}
        self._tree_data: dict[bytes, bytes] = {}
        self._tree_data_bytes = 0
        self._statcache_memo: tuple[tuple[int, int, int] | None, statcache.StatCache] | None = None
        self._statcache_pending = False
        self.defer_statcache_writes = False

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def exists(cls, path: Path) -> bool:
        return (path / "catalog.db").is_file()

    @classmethod
    def create(cls, path: Path, roots: list[str], algorithm: str = DEFAULT_ALGORITHM,
               kind: str = "workspace") -> Repository:
        if algorithm not in ALGORITHMS:
            raise StoreError(f"unknown hash algorithm {algorithm!r}; use one of "
                             f"{', '.join(ALGORITHMS)}")
        made = [d for d in (path, *path.parents) if not d.exists()]
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(f"cannot create the store at {path}: {exc.strerror}") from exc
        catalog = Catalog(path / "catalog.db")
        with catalog.transaction():
            fresh = catalog.get_meta("format") is None
            if fresh:
                catalog.set_meta("format", FORMAT)
                catalog.set_meta("algorithm", algorithm)
                catalog.set_meta("roots", jsontext.dumps(roots))
                catalog.set_meta("kind", kind)
                catalog.set_meta("created_ns", str(time.time_ns()))
                # makes this store's clone names its own (see ObjectStore.clone_name)
                catalog.set_meta("clone_salt", os.urandom(16).hex())
        if fresh:
            # SQLite fsyncs its files, not the directory entries naming them: make the new
            # catalog's name, and every directory made on the way to it, durable too
            for d in {path, *(m.parent for m in made)}:
                fsync_dir(d)
        return cls(path, catalog)

    @classmethod
    def open(cls, path: Path, *, readonly: bool = False) -> Repository:
        if not cls.exists(path):
            raise WorkspaceError(f"no ctrlz store at {path}; run `ctrlz init` first")
        if not os.access(path / "catalog.db", os.R_OK):
            raise StoreError(f"the store {path} is not readable; check its permissions")
        catalog = Catalog(path / "catalog.db", readonly=readonly)
        fmt = catalog.get_meta("format")
        if fmt != FORMAT:
            raise StoreError(f"{path} is not a ctrlz store (format {fmt!r})")
        return cls(path, catalog)

    def close(self) -> None:
        self.objects.close()
        self.catalog.close()

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- crash recovery ---------------------------------------------------------------------

    def recover(self, *, force: bool = False) -> list[Path]:
        """Remove what a crashed writer left behind. Call with the lock held.

        Only when the store's "writing" marker says a writer may have died (listing every
        pack and loose object grows with the history; see ``ObjectStore`` on strays), or when
        ``force``d (``ctrlz gc``). Called before the caller starts writing: a writer of its
        own that is still open would lose its files."""
        assert self.lock.held
        objects = self.objects
        if not (force or objects.may_have_strays()):
            return []
        strays = stray_files(objects)
        for p in strays:
            try:
                p.unlink()
            except OSError:
                pass
        objects.swept()
        return strays

    # -- trees -------------------------------------------------------------------------------

    def tree(self, oid: bytes) -> list[Entry]:
        entries = self._trees.get(oid)
        if entries is None:
            data = self._tree_data.get(oid)
            entries = decode_tree(data if data is not None else self.objects.read(oid))
            if len(self._trees) > 200_000:
                self._trees.clear()
            self._trees[oid] = entries
        return entries

    def tree_data(self, oid: bytes) -> bytes | None:
        """A tree's encoding if a snapshot of this process wrote it, or ``None``; never reads
        the store (a scan patches these bytes for directories listed from the stat cache)."""
        return self._tree_data.get(oid)

    def remember_tree_data(self, data: dict[bytes, bytes]) -> None:
        """Keep the encodings of the trees a committed snapshot just wrote: the next dirty
        scan patches them, and the next diff decodes them without reading the store.

        Encoded, not decoded: bytes are invisible to Python's cyclic garbage collector, while
        a decoded 100,000-file tree is 120,000 tracked ``Entry`` tuples that made every full
        collection in a session cost ~150 ms. Bounded by ``TREE_DATA_MAX`` bytes."""
        size = self._tree_data_bytes + sum(map(len, data.values()))
        if size > TREE_DATA_MAX:
            self._tree_data.clear()
            size = sum(map(len, data.values()))
        self._tree_data.update(data)
        self._tree_data_bytes = size

    # -- stat cache --------------------------------------------------------------------------

    @property
    def statcache_path(self) -> Path:
        return self.path / "statcache"

    def _statcache_stamp(self) -> tuple[int, int, int] | None:
        try:
            s = os.stat(self.statcache_path)
        except OSError:
            return None
        return (s.st_ino, s.st_size, s.st_mtime_ns)

    def load_statcache(self) -> statcache.StatCache:
        """The stat cache, from memory when this process wrote the file and nobody has
        replaced it since (a session snapshots many times; loading 100,000 entries each time
        would cost more than the snapshot)."""
        memo = self._statcache_memo
        stamp = self._statcache_stamp()
        if memo is not None and memo[0] == stamp:
            cache = memo[1]
        else:  # the stamp is taken first: a file replaced meanwhile is loaded again next time
            cache = statcache.load(self.statcache_path, self.algorithm)
            if stamp is not None and not self._statcache_pending:
                self._statcache_memo = (stamp, cache)
        if cache.snapshot_id is None or self.catalog.snapshot(cache.snapshot_id) is None:
            return statcache.StatCache(algorithm=self.algorithm)
        return cache

    def save_statcache(self, cache: statcache.StatCache) -> None:
        """Replace the cache. With ``defer_statcache_writes`` (a session, which snapshots every
        few seconds) the file is written only by :meth:`flush_statcache`: a stale file is still
        correct for other processes, only slower, since it names a snapshot whose objects
        exist."""
        if self.defer_statcache_writes:
            self._statcache_memo = (self._statcache_stamp(), cache)
            self._statcache_pending = True
            return
        try:
            statcache.save(self.statcache_path, cache)
        except (OSError, StoreError):
            # a full disk, say, after the snapshot committed: the cache only saves time, so
            # its failure must not fail the snapshot. The file left names an older snapshot,
            # still correct to trust; this process keeps the new one in memory
            pass
        self._statcache_memo = (self._statcache_stamp(), cache)
        self._statcache_pending = False

    def flush_statcache(self) -> None:
        if self._statcache_pending and self._statcache_memo is not None:
            self.defer_statcache_writes = False
            self.save_statcache(self._statcache_memo[1])
