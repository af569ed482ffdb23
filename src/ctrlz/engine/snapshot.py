"""Taking snapshots, and scanning the working tree without storing it.

A snapshot scans every tracked root into tree objects, joins the roots under one top tree
(entry ``"0"``, ``"1"``, … per root, so one id commits to the whole state), fsyncs new pack bytes
and loose objects, and then records the snapshot in one catalog transaction. Only that commit
makes it visible; a crash anywhere before it leaves the previous snapshots exactly as they were.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ..errors import UsageError, exhausted
from ..paths import where
from ..state import failpoints, meter
from ..state.db.statcache import StatCache
from ..state.ignore.exclude import Matcher, Rules
from ..state.scan import HashSink, Limits, Scanner, ScanResult, ScanStats, Sink, StoreSink, btrfs
from ..state.scan.blind import mount_points
from ..state.store.objects import LOOSE_MIN, ObjectWriter
from ..state.store.repository import Repository
from ..state.trees import DIR, Entry, decode_tree, encode_tree
from ..types import SNAPSHOT_TYPES, Skipped, Snapshot
from .diff import TreeReader, count_changes, diff_trees
from .restore import journal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
#: Threads that read, hash, compress and fsync large files. More than the cores: each spends
#: much of a 100 MB file waiting for its fsync, and another's hashing and compressing fills
#: that wait. On 2 cores, 20 files of 2 GB took 0.87x the wall time with 4 threads as with 2,
#: and 0.91x again with 6 as with 4 (paired runs, same CPU time); 8 gained nothing. Each
#: thread holds ~17 MiB at most (a 4 MiB read, its compressed copy, and the two 2 MiB stages
#: of the object it writes past the page cache, see :mod:`ctrlz.state.fsio.direct_io`).
WORKERS = min(8, max(4, 3 * (os.cpu_count() or 2)))

#: what a file watcher in another process reports before a scan: the directories of each
#: root that changed since the stat cache was written, or None (scan fully)
DirtySource = Callable[[], "Sequence[set[bytes] | None] | None"]
#: what a file was when a snapshot read it by name: its stat key and its content id
StatKey = tuple[tuple[int, int, int, int, int], bytes]


_gc_lock = _thread.allocate_lock()  # not threading's: every snapshot would import it
_gc_depth = 0
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off Python's cyclic garbage collector while a snapshot runs.

    A process that keeps a 100,000-entry stat cache and tree cache in memory (a session)
    pays for them in every full collection: measured on the 100,000-file tree, one
    collection took ~150 ms, and the allocations of every fifth dirty-set snapshot
    triggered one, tripling that snapshot's time. A scan creates no reference cycles (its
    garbage is freed by reference counting), so pausing the collector loses nothing; the
    collection simply runs later, outside the snapshot. Nested and concurrent snapshots
    (other repositories, other threads) share one count, so the collector is re-enabled
    exactly once, by the last one out, and only if it was enabled before.
    """
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()


@contextlib.contextmanager
def writing(repo: Repository) -> Iterator[None]:
    """One write operation's hold on the store (a snapshot; a restore with its safety
    snapshot; an undo with the log entry it reads): the writer lock, and the clean-up of
    what a crashed writer left, before anything is written: an interrupted restore's
    bookkeeping (:func:`journal.recover`, one stat when there is none) and the stray files of
    a writer that died (:meth:`Repository.recover`, one stat when there are none).

    The operation's owner enters it once; :func:`take_snapshot` and
    :func:`~ctrlz.engine.restore.restore.restore_in_place` run inside it and take neither the lock
    nor the clean-up again. The garbage collector waits meanwhile (:func:`gc_paused`). An
    operation that ends without an error leaves the catalog's write-ahead log trimmed
    (:meth:`~ctrlz.state.db.catalog.Catalog.trim_wal`), unless the process does it later."""
    with gc_paused(), repo.lock:
        journal.recover(repo)
        repo.recover()
        yield
        if not repo.catalog.trim_wal_later:  # committed: its log need not stay on disk
            repo.catalog.trim_wal()


def new_snapshot_id() -> str:
    """``snap_`` and eight random letters or digits, uniform (bytes of 252 and up, which
    would favour the first characters, are drawn again)."""
    chars: list[str] = []
    while len(chars) < 8:
        chars += [_ALPHABET[b % 36] for b in os.urandom(12) if b < 252]
    return "snap_" + "".join(chars[:8])


class _Pool:
    """The scan's reader threads, started by the first file big enough to need them: a
    snapshot that reads nothing (most are) pays neither the threads nor the import."""

    def __init__(self) -> None:
        self._pool: Any = None

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Any:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="ctrlz-read")
        return self._pool.submit(fn, *args)

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def root_name(index: int) -> bytes:
    return str(index).encode()


def disk_ignore_reader(root: Path):  # type: ignore[no-untyped-def]
    """Reads ``.gitignore`` files from the working tree, never through a symlink."""
    base = os.fsencode(root)

    def read(rel: bytes) -> bytes | None:
        try:
            fd = os.open(base + b"/" + rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            # a missing or unreadable ignore file has no rules; one this process could not
            # open for want of descriptors does, and guessing none would change the answers
            if (err := exhausted(exc, f"reading {os.fsdecode(base + b'/' + rel)}")) is not None:
                raise err from exc
            return None
        try:
            if not os.path.stat.S_ISREG(os.fstat(fd).st_mode):  # type: ignore[attr-defined]
                return None
            return os.read(fd, 1 << 20)
        finally:
            os.close(fd)

    return read


def internal_dirs(root: Path, store: Path) -> frozenset[bytes]:
    """The store's path relative to ``root`` when it lies inside (SnapshotManager sessions may
    do that): it is never captured."""
    found = where(os.fsencode(store.resolve()), os.fsencode(root.resolve()), allow_root=False)
    return frozenset({found.rel}) if found.inside else frozenset()


class WorkingState:
    """The working tree as a (possibly unstored) top tree, from one scan: ``trees``, every
    tree the scan built, decoded; ``patched``, the trees the scan patched from the stat cache,
    encoded (decoded on demand by :func:`overlay_reader`: a dirty snapshot patches the trees
    of every unchanged ancestor)."""

    __slots__ = ("root", "stats", "skipped", "scans", "trees", "patched")

    def __init__(self, root: bytes, stats: ScanStats, skipped: list[Skipped],
                 scans: list[ScanResult], trees: dict[bytes, list[Entry]],
                 patched: dict[bytes, bytes] | None = None) -> None:
        self.root = root
        self.stats = stats
        self.skipped = skipped
        self.scans = scans
        self.trees = trees
        self.patched = patched if patched is not None else {}


class Taken:
    """What :func:`take_snapshot` captured, for the caller that goes on with it (a restore
    plans against its safety snapshot): the committed ``snapshot``, the scan's ``stats``,
    ``trees``, every tree the scan built, decoded (a plan reads the captured side of every
    changed directory through :func:`overlay_reader`; the repository's cache keeps only
    their encodings); and what the scan saw at each path, so that a restore's apply step can
    trust a file it captured by its stat instead of reading it again: ``cache``, the stat
    cache it wrote, and ``keys``, the stat key and content id of each path grafted by name
    (``include``)."""

    __slots__ = ("snapshot", "stats", "trees", "cache", "keys")

    def __init__(self, snapshot: Snapshot, stats: ScanStats, trees: dict[bytes, list[Entry]],
                 cache: StatCache, keys: dict[bytes, StatKey]) -> None:
        self.snapshot = snapshot
        self.stats = stats
        self.trees = trees
        self.cache = cache
        self.keys = keys


def _scan_all(repo: Repository, roots: Sequence[Path], rules: Sequence[Rules], sink: Sink,
              limits: Limits, cache: StatCache, scan_ns: int,
              dirty: Sequence[set[bytes] | None] | None = None,
              sources: Sequence[Path] | None = None) -> WorkingState:
    """``sources``: where each root is read from, when not from itself (the btrfs
    backend's frozen copies, :mod:`ctrlz.state.scan.btrfs`)."""
    budget = [0]
    stats = ScanStats()
    skipped: list[Skipped] = []
    scans: list[ScanResult] = []
    top: list[Entry] = []
    trees: dict[bytes, list[Entry]] = {}
    patched: dict[bytes, bytes] = {}
    cached_snap = repo.catalog.snapshot(cache.snapshot_id) if cache.snapshot_id else None
    with _Pool() as pool:
        for index, (root, rule) in enumerate(zip(roots, rules, strict=True)):
            if not root.is_dir() or root.is_symlink():
                raise UsageError(f"tracked path {root} is not a directory")
            source = sources[index] if sources is not None else root
            matcher = Matcher(rule, disk_ignore_reader(source), internal_dirs(root, repo.path))
            prefix = root_name(index) + b"/"
            previous = [Skipped(k.path[len(prefix):], k.reason) for k in
                        (cached_snap.skipped if cached_snap else ()) if k.path.startswith(prefix)]
            root_dirty = dirty[index] if dirty is not None else None
            scanner = Scanner(source, matcher, sink, pool, limits, cache.root(index),
                              scan_ns, budget, dirty=root_dirty,
                              previous_skipped=previous, tree_cache=repo.tree_data,
                              linked=cache.linked_in(index), stamps=cache.stamps_in(index),
                              mounts=None if root_dirty is None else
                              mount_points(os.fsencode(source.resolve())))
            result = scanner.scan()
            scans.append(result)
            trees.update(scanner.built_trees)
            patched.update(scanner.patched_trees)
            top.append(Entry(root_name(index), DIR, result.mode, 0, 0, result.oid))
            for field in ScanStats.__slots__:
                setattr(stats, field, getattr(stats, field) + getattr(result.stats, field))
            skipped += [Skipped(prefix + s.path, s.reason) for s in result.skipped]
    top.sort(key=lambda e: e.name)
    top_oid = sink.put(encode_tree(top))
    trees[top_oid] = top
    return WorkingState(top_oid, stats, skipped, scans, trees, patched)


def take_snapshot(
    repo: Repository,
    roots: Sequence[Path],
    rules: Sequence[Rules],
    *,
    type: str = "manual",
    label: str | None = None,
    pinned: bool = False,
    limits: Limits | None = None,
    numbered: bool = True,
    parent: Snapshot | None = None,
    dirty: Sequence[set[bytes] | None] | None = None,
    include: Sequence[bytes] = (),
    dirty_source: DirtySource | None = None,
) -> Taken:
    """Scan and store the roots; returns the committed snapshot, the scan's statistics, and
    what a caller going on with it needs (:class:`Taken`). Call it inside :func:`writing`,
    whose lock it commits under and whose recovery it relies on.

    ``parent`` is the snapshot changes are counted against (default: the newest one).
    ``dirty`` (one set per root, from a file watcher) names the directories that changed
    since the stat cache was written; the others are reused without being listed.
    ``include`` names virtual paths (files or links) to capture even where the rules exclude
    them: a restore's capture step passes the paths it was asked to touch by name (their
    stat keys come back in ``Taken.keys``). ``dirty_source``, when no ``dirty`` is given, is
    asked for it now, the lock held, before the stat cache is read (a file watcher in
    another process, which may write that cache first); it returns None when it cannot
    vouch for the cache, and the scan is then a full one.
    """
    if type not in SNAPSHOT_TYPES:
        raise UsageError(f"unknown snapshot type {type!r}; use one of {', '.join(SNAPSHOT_TYPES)}")
    assert repo.lock.held, "take_snapshot runs inside writing(repo)"
    limits = limits or Limits()
    progress = meter.current()
    if progress is not None:
        progress.start("Snapshot")
    if dirty is None and dirty_source is not None:
        dirty = dirty_source()
    cache = repo.load_statcache()
    writer = repo.objects.writer()
    scan_ns = time.time_ns()
    sink = StoreSink(writer)
    keys: dict[bytes, StatKey] = {}
    frozen = btrfs.freeze(repo, roots)  # None unless the store uses the btrfs backend
    try:
        try:
            state = _scan_all(repo, roots, rules, sink, limits, cache, scan_ns, dirty,
                              frozen.sources if frozen is not None else None)
            if include:
                keys = _include(repo, roots, writer, sink, state, include)
        finally:
            if frozen is not None:
                frozen.release()
        if parent is None:
            parent = repo.catalog.latest()
        if parent is None:  # everything is new; no need to walk the trees
            created, modified, deleted = state.stats.files + state.stats.symlinks, 0, 0
        else:
            counted = changes_from_scan(repo, parent, cache, state)
            created, modified, deleted = counted if counted is not None else count_changes(
                diff_trees(repo.tree, parent.root,
                           overlay_reader(repo, state.trees, state.patched), state.root))
        catalog = repo.catalog
        snapshot_id = new_snapshot_id()
        while catalog.snapshot(snapshot_id) is not None:
            snapshot_id = new_snapshot_id()
        failpoints.hit("before-commit")
        with catalog.transaction():
            writer.commit(catalog)
            snap = Snapshot(
                id=snapshot_id,
                number=catalog.next_number() if numbered else None,
                parent=parent.id if parent else None,
                type=type,
                label=label,
                pinned=pinned,
                created_ns=scan_ns,
                root=state.root,
                files=state.stats.files,
                dirs=state.stats.dirs,
                symlinks=state.stats.symlinks,
                bytes=state.stats.bytes,
                added_bytes=writer.added_bytes,
                size_delta=state.stats.bytes - (parent.bytes if parent else 0),
                created=created,
                modified=modified,
                deleted=deleted,
                rules={"roots": [r.to_json() for r in rules]},
                skipped=tuple(state.skipped),
                roots=tuple(str(r) for r in roots),
            )
            catalog.add_snapshot(snap)
    except BaseException:
        # whatever failed (the scan, counting the changes, the commit: a full disk as the
        # queue behind the walk is written out), the writer lets go of its open pack: in
        # a long-lived process its descriptor kept a deleted pack's blocks, and the disk
        # full, after the next recovery swept the file
        writer.abort()
        raise
    failpoints.hit("after-commit")
    repo.remember_tree_data({oid: sink.blobs[oid] for oid in state.trees} | state.patched)
    written = StatCache(snapshot_id, scan_ns, repo.algorithm, [s.cache for s in state.scans],
                        [s.linked for s in state.scans], [s.stamps for s in state.scans])
    repo.save_statcache(written)
    return Taken(snap, state.stats, state.trees, written, keys)


def _include(repo: Repository, roots: Sequence[Path], writer: ObjectWriter, sink: StoreSink,
             state: WorkingState, include: Sequence[bytes]) -> dict[bytes, StatKey]:
    """Graft the ``include`` paths, read from disk whatever the rules say, into the scanned
    top tree (see :mod:`ctrlz.engine.graft`, loaded only here: a plain snapshot, in every
    cold process, needs neither it nor the directory handles it brings); returns what each
    was when it was read (:attr:`Taken.keys`)."""
    from .graft import DiskCapture, graft

    def store_file(fd: int, size: int) -> bytes:
        if size >= LOOSE_MIN:
            oid, tmp, raw, stored, codec = writer.ingest_large(fd)
            writer.adopt_large(oid, tmp, raw, stored, codec)
            return oid
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return writer.put(b"".join(chunks))

    disk = DiskCapture([os.fsencode(r) for r in roots], store_file, writer.put)
    try:
        changes = {}
        for vpath in dict.fromkeys(include):
            entry = disk.entry(vpath)
            if entry is not None:
                changes[vpath] = entry
        if changes:
            read = overlay_reader(repo, state.trees, state.patched)

            def put_tree(data: bytes) -> bytes:
                oid = sink.put(data)
                state.trees[oid] = decode_tree(data)  # the diff below reads them uncommitted
                return oid

            state.root = graft(read, put_tree, state.root, changes, disk.dir_mode)
            for e in changes.values():
                state.stats.files += e.kind == "f"
                state.stats.symlinks += e.kind == "l"
        return disk.keys
    finally:
        disk.close()


def changes_from_scan(repo: Repository, parent: Snapshot, cache: StatCache,
                      state: WorkingState) -> tuple[int, int, int] | None:
    """(created, modified, deleted) against ``parent`` as the scan counted them, when the
    stat cache it compared with describes ``parent``'s tree; ``None`` when it does not (the
    caller diffs the trees instead).

    The scan counts per rebuilt directory against the cached listing, so the cost follows
    the change; a Merkle diff would read and compare every rebuilt directory of both sides
    again (and, in a fresh process, read the parent's trees back from the store). Matching
    the cache's root trees with the parent's top tree is what makes the counts the parent's:
    the cache's listings are those of the trees it names.
    """
    if cache.snapshot_id != parent.id:
        return None
    # the same id is the same tree: a no-change scan just built the parent's top tree, so it
    # is read from memory, not decompressed from the store (which would load zstd)
    top = {e.name: e.oid for e in overlay_reader(repo, state.trees, state.patched)(parent.root)}
    if len(top) != len(state.scans):
        return None
    created = modified = deleted = 0
    for index, result in enumerate(state.scans):
        cached_root = cache.root(index).get(b"")
        if (result.changes is None or cached_root is None
                or top.get(root_name(index)) != cached_root[0]):
            return None
        created += result.changes[0]
        modified += result.changes[1]
        deleted += result.changes[2]
    return created, modified, deleted


def overlay_reader(repo: Repository, trees: dict[bytes, list[Entry]],
                   patched: dict[bytes, bytes] | None = None) -> TreeReader:
    """Reads trees from ``trees`` and ``patched`` (just scanned: not yet committed, or never
    stored) before the store."""

    def read(oid: bytes) -> list[Entry]:
        entries = trees.get(oid)
        if entries is not None:
            return entries
        data = patched.get(oid) if patched else None
        return decode_tree(data) if data is not None else repo.tree(oid)

    return read


def scan_working(repo: Repository, roots: Sequence[Path], rules: Sequence[Rules],
                 limits: Limits | None = None, *, as_capture: bool = False) -> WorkingState:
    """Scan the working tree without writing to the store or taking the lock; its trees are
    in ``WorkingState.trees`` (read them with :func:`overlay_reader`). ``max_bytes`` does not
    apply: it bounds what a snapshot stores, and a scan that stores nothing must not leave a
    file out (a diff would call it deleted). ``as_capture``: it does apply, as to the capture
    a restore takes first, so that a dry run leaves alone what the restore will leave alone
    (a path the capture leaves out is not the restore's to touch)."""
    sink = HashSink(repo.objects.digest, repo.objects.new_hasher, repo.objects.known_clone)
    limits = limits or Limits()
    if not as_capture:
        limits = limits._replace(max_bytes=1 << 62, refuse_over_max_bytes=False)
    return _scan_all(repo, roots, rules, sink, limits, repo.load_statcache(), time.time_ns())
