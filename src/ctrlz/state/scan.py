"""The scanner: walk one tracked root with lstat only and turn it into tree objects.

The walk never follows a symlink: links are captured as links (their target is the blob), and a
directory is entered through ``os.scandir`` on a path whose every component was seen as a real
directory. FIFOs, sockets and devices are skipped and reported, as are files that cannot be read,
files over the new-file size limit, and files that keep changing while they are read. Nothing
skipped is ever deleted or overwritten by a restore, because the snapshot records it.

Cost follows change, not size: a file whose stat matches the stat cache (and is not racily
clean) is not read, and a directory whose listing and children all match keeps its tree id
without re-encoding. Small files that must be read are read by the walking thread itself;
large ones go to a small thread pool (read, hash and compress release the GIL) while the walk
goes on. The main thread alone appends to the pack.
"""

from __future__ import annotations

import os
import stat as st
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import LimitExceeded, WorkspaceError
from ..types import Skipped
from .exclude import _TEMP, GITIGNORE, DirRules, Matcher
from .objects import LOOSE_MIN, ObjectWriter, encode_small
from .statcache import RACY_WINDOW_NS, DirCache
from .trees import DIR, FILE, HEADER, SYMLINK, Entry, encode_tree

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MAX_INFLIGHT = 256
_READ_ATTEMPTS = 3
_STREAM = 1 << 20


@dataclass(frozen=True)
class Limits:
    max_entries: int = 300_000
    max_bytes: int = 2 << 30
    max_file_size: int = 256 << 20  # new files above this are skipped and reported


class Sink(Protocol):
    """Where scanned content goes: into the store, or only through the hash (a dry scan)."""

    def put(self, data: bytes) -> bytes: ...

    def read_file(self, fd: int, size: int) -> tuple[bytes, Any]: ...

    def accept(self, oid: bytes, payload: Any) -> None: ...

    def discard(self, payload: Any) -> None: ...


class StoreSink:
    """Writes new content into the store through an :class:`ObjectWriter`."""

    def __init__(self, writer: ObjectWriter) -> None:
        self.writer = writer
        self.digest = writer.store.digest
        self.blobs: dict[bytes, bytes] = {}  # trees and link targets put by this scan

    def put(self, data: bytes) -> bytes:
        """Trees and link targets: mostly new, so encoded straight away; ``put_encoded``
        skips what the store holds (``writer.put`` would ask the index twice)."""
        oid = self.digest(data)
        codec, stored = encode_small(data)
        self.writer.put_encoded(oid, len(data), codec, stored)
        self.blobs[oid] = data
        return oid

    def read_file(self, fd: int, size: int) -> tuple[bytes, Any]:
        if size >= LOOSE_MIN:
            oid, tmp, raw, stored, codec = self.writer.ingest_large(fd)
            return oid, ("large", tmp, raw, stored, codec)
        data = _read_all(fd, size)
        oid = self.digest(data)
        if self.writer.contains(oid):
            return oid, None
        codec, stored = encode_small(data)
        return oid, ("small", len(data), codec, stored)

    def accept(self, oid: bytes, payload: Any) -> None:
        if payload is None:
            return
        if payload[0] == "small":  # read_file asked the index already
            self.writer.put_encoded(oid, payload[1], payload[2], payload[3], checked=True)
        else:
            self.writer.adopt_large(oid, *payload[1:])

    def discard(self, payload: Any) -> None:
        if payload is not None and payload[0] == "large":
            try:
                os.unlink(payload[1])
            except OSError:
                pass


class HashSink:
    """Computes ids without storing anything: diff against the working tree."""

    def __init__(self, digest: Callable[[bytes], bytes], new_hasher: Callable[[], Any]) -> None:
        self.digest = digest
        self.new_hasher = new_hasher

    def put(self, data: bytes) -> bytes:
        return self.digest(data)

    def read_file(self, fd: int, size: int) -> tuple[bytes, Any]:
        if size < LOOSE_MIN:
            return self.digest(_read_all(fd, size)), None
        h = self.new_hasher()
        while chunk := os.read(fd, 4 << 20):
            h.update(chunk)
        return h.digest(), None

    def accept(self, oid: bytes, payload: Any) -> None:
        pass

    def discard(self, payload: Any) -> None:
        pass


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    want = max(size, 1) + 1  # one extra byte tells us the file grew
    while True:
        chunk = os.read(fd, max(want, _STREAM))
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


@dataclass
class ScanStats:
    files: int = 0
    dirs: int = 0
    symlinks: int = 0
    bytes: int = 0
    hashed: int = 0  # files actually read
    reused_trees: int = 0


Changes = tuple[int, int, int]  # (created, modified, deleted) files and symlinks
_NO_CHANGES: Changes = (0, 0, 0)


@dataclass
class ScanResult:
    oid: bytes  # tree id of the root directory
    mode: int
    stats: ScanStats
    skipped: list[Skipped]
    cache: dict[bytes, DirCache]
    #: files and symlinks created, modified and deleted since the tree the stat cache
    #: describes, counted as :func:`~ctrlz.engine.diff.count_changes` would; ``None`` when
    #: the cache could not tell (no cache for the root, or a directory missing from it)
    changes: Changes | None = None


# entry slots: [name, kind, permission bits, size, mtime_ns, stat key, oid]
_NAME, _KIND, _PERM, _SIZE, _MTIME, _KEY, _OID = range(7)
_IFMT, _IFDIR, _IFREG, _IFLNK = 0o170000, 0o040000, 0o100000, 0o120000
_BATCH_FILES = 8
_BATCH_BYTES = 16 << 20
_INLINE_MAX = 1 << 20  # files below this are read by the walking thread itself


class _Dir:
    __slots__ = ("rel", "path", "rules", "entries", "cached", "dirty", "slot", "mode",
                 "unreadable", "from_cache", "base", "at")

    def __init__(self, rel: bytes, path: bytes, rules: DirRules, cached: DirCache | None,
                 slot: tuple[_Dir, list[Any]] | None, mode: int) -> None:
        self.rel = rel
        self.path = path
        self.rules = rules
        self.entries: list[list[Any]] = []
        self.cached = cached
        self.dirty = cached is None  # set as soon as anything differs from the cache
        self.slot = slot  # (parent node, parent's entry for us)
        self.mode = mode
        self.unreadable = False
        self.from_cache = False  # listed from the stat cache, not from the disk
        #: the cached tree's encoding, when listed from the cache by patching it: ``entries``
        #: then holds only the subdirectories entered
        self.base: bytes | None = None
        self.at: list[int] = []  # where each entered subdirectory's record starts in ``base``


@dataclass
class Scanner:
    """Scans one root. Create one per root per snapshot."""

    root: Path
    matcher: Matcher
    sink: Sink
    pool: ThreadPoolExecutor
    limits: Limits = field(default_factory=Limits)
    cache: dict[bytes, DirCache] = field(default_factory=dict)
    #: when this scan started; entries whose mtime or ctime are this recent are cached as
    #: racily clean (not trusted next time)
    scan_ns: int = 0
    entry_budget: list[int] = field(default_factory=lambda: [0])  # shared across roots
    #: directories a watcher saw change since the cache was written; ``None``: unknown, list
    #: everything. Any other directory with a cache entry is reused without being listed.
    dirty: set[bytes] | None = None
    #: what the cache's snapshot skipped, carried over for directories reused unlisted
    previous_skipped: list[Skipped] = field(default_factory=list)
    #: the encoding of a cached tree id when it is at hand in memory (else ``None``): lets
    #: a directory listed from the cache be patched instead of rebuilt entry by entry
    tree_cache: Callable[[bytes], bytes | None] | None = None

    def __post_init__(self) -> None:
        self.stats = ScanStats()
        self.skipped: list[Skipped] = []
        self._pending: deque[tuple[list[tuple[_Dir, list[Any]]], Future[Any]]] = deque()
        self._batch: list[tuple[_Dir, list[Any], bytes, int]] = []
        self._batch_bytes = 0
        self._root_bytes = os.fsencode(self.root)
        self._reused = False  # whether any subtree was reused without being listed
        self._needed: set[bytes] | None = None
        #: per finished directory whose old listing the cache holds: its subtree's changes
        #: against that listing (a parent adds those of the children whose tree id changed)
        self._changes: dict[bytes, Changes] = {}
        #: the new cache starts as a copy of the old one (see :meth:`scan`)
        self._copied = False
        #: every tree this scan encoded, decoded form (diffs and the repository's tree cache
        #: use them instead of reading the store back), except those it patched:
        self.built_trees: dict[bytes, list[Entry]] = {}
        #: the trees this scan patched (:meth:`_finish_patched`), encoded
        self.patched_trees: dict[bytes, bytes] = {}
        self._cutoff = self.scan_ns - RACY_WINDOW_NS
        #: per needed directory, the names of its needed subdirectories
        self._needed_children: dict[bytes, list[bytes]] = {}
        if self.dirty is not None:
            needed = set()
            for d in self.dirty:
                while d not in needed:
                    needed.add(d)
                    if not d:
                        break
                    parent, _, name = d.rpartition(b"/")
                    self._needed_children.setdefault(parent, []).append(name)
                    d = parent
            self._needed = needed

    # -- walking -----------------------------------------------------------------------------

    def scan(self) -> ScanResult:
        root_mode = os.lstat(self._root_bytes).st_mode
        top = _Dir(b"", self._root_bytes, self.matcher.root_rules, self.cache.get(b""), None,
                   root_mode & 0o7777)
        order: list[_Dir] = []
        stack = [top]
        while stack:
            node = stack.pop()
            order.append(node)
            self._list(node, stack)
            self._drain(block=False)
        self._submit_batch()
        self._drain(block=True)
        # Reused subtrees keep their cache entries. Rather than pick those out of the whole
        # cache (O(workspace) per snapshot), copy it (one C-level dict copy), let every
        # listed directory replace its own entry, and drop the subtrees of directories that
        # are gone (:meth:`_drop_vanished`): every cached directory is either listed, below
        # a reused one, or below one that vanished from a listed parent, so the result is
        # exactly the listed and reused directories.
        self._copied = self._reused
        new_cache: dict[bytes, DirCache] = dict(self.cache) if self._copied else {}
        for node in reversed(order):
            self._finish(node, new_cache)
        if top.unreadable:
            raise WorkspaceError(f"cannot list the workspace root {self.root}; check its "
                                 "permissions")
        return ScanResult(new_cache[b""][0], top.mode, self.stats, self.skipped, new_cache,
                          self._changes.get(b""))

    def _list(self, node: _Dir, stack: list[_Dir]) -> None:
        if (self._needed is not None and node.cached is not None and self.dirty is not None
                and node.rel not in self.dirty):
            if not self._patch_from_cache(node, stack):
                self._list_from_cache(node, stack)
            return
        try:
            with os.scandir(node.path) as it:
                listing = list(it)
        except OSError as exc:
            node.unreadable = True
            self.skipped.append(Skipped(node.rel, f"directory unreadable: {exc.strerror}"))
            return
        matcher = self.matcher
        has_ignore = False
        if node.rel and matcher.rules.use_gitignore and not node.rules.in_git:
            for de in listing:
                if de.name == GITIGNORE:
                    has_ignore = True
                    break
        if has_ignore:
            parent_rules = node.slot[0].rules if node.slot else node.rules
            node.rules = matcher.enter(parent_rules, node.rel.rpartition(b"/")[2], node.rel,
                                       has_ignore=True)
        rules, limits = node.rules, self.limits
        cached_map = node.cached[1] if node.cached is not None else {}
        check = matcher.may_exclude(rules)
        prefix = node.rel + b"/" if node.rel else b""
        entries = node.entries
        files = links = nbytes = 0
        dirty = node.dirty
        for de in listing:
            name: bytes = de.name  # type: ignore[assignment]
            if check:
                try:
                    is_dir = de.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if matcher.excluded(rules, name, prefix + name, is_dir):
                    continue
            elif name.startswith(_TEMP):
                continue
            try:
                s = de.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # vanished since the listing
            except OSError as exc:
                self.skipped.append(Skipped(prefix + name, f"cannot stat: {exc.strerror}"))
                continue
            mode = s.st_mode
            fmt = mode & _IFMT
            cached = cached_map.get(name)
            if fmt == _IFDIR:
                rel = prefix + name
                entry = [name, DIR, mode & 0o7777, 0, 0, None, None]
                entries.append(entry)
                if cached is None or cached[0][0] != mode:
                    dirty = True
                elif self._needed is not None and rel not in self._needed:
                    sub = self.cache.get(rel)
                    if sub is not None and sub[0] == cached[1]:
                        self._reuse_unlisted(rel, entry, sub)
                        continue
                child_rules = matcher.enter(rules, name, rel, has_ignore=False)
                stack.append(_Dir(rel, de.path, child_rules,  # type: ignore[arg-type]
                                  self.cache.get(rel), (node, entry), mode & 0o7777))
                self.stats.dirs += 1
                continue
            if fmt == _IFREG:
                kind = FILE
            elif fmt == _IFLNK:
                kind = SYMLINK
            else:
                self.skipped.append(Skipped(prefix + name, _special_kind(mode)))
                continue
            size, mtime = s.st_size, s.st_mtime_ns
            key = (mode, size, mtime, s.st_ctime_ns, s.st_ino)
            entry = [name, kind, mode & 0o7777, size, mtime, key, None]
            if cached is not None and cached[2] and cached[0] == key:
                entry[_OID] = cached[1]
            else:
                dirty = True
                if kind == FILE and size > limits.max_file_size:
                    self.skipped.append(Skipped(
                        prefix + name, f"larger than max_file_size ({size:,} > "
                        f"{limits.max_file_size:,} bytes)"))
                    continue
                if kind == SYMLINK:
                    try:
                        entry[_OID] = self.sink.put(os.readlink(de.path))
                    except OSError as exc:
                        self.skipped.append(Skipped(prefix + name,
                                                    f"cannot read link: {exc.strerror}"))
                        continue
                else:
                    self._queue_read(node, entry, de.path, size)  # type: ignore[arg-type]
            entries.append(entry)
            if kind == FILE:
                files += 1
                nbytes += size
            else:
                links += 1
        node.dirty = dirty
        stats = self.stats
        stats.files += files
        stats.symlinks += links
        stats.bytes += nbytes
        self.entry_budget[0] += len(entries)
        if self.entry_budget[0] > limits.max_entries:
            raise LimitExceeded(
                f"the workspace has more than max_entries={limits.max_entries:,} files and "
                "directories; exclude large generated folders (exclude_patterns) or raise "
                "max_entries")
        if stats.bytes > limits.max_bytes:
            raise LimitExceeded(
                f"the workspace holds more than max_bytes={limits.max_bytes:,} bytes; "
                "exclude large folders (exclude_patterns, exclude_globs) or raise max_bytes")

    def _patch_from_cache(self, node: _Dir, stack: list[_Dir]) -> bool:
        """:meth:`_list_from_cache` in time proportional to the subdirectories entered, not to
        the directory's entries: when the cached tree is in memory, only the needed
        subdirectories are entered, and the statistics of everything else come from the
        cached subtree totals (the node's totals less those of the entered children, which
        count themselves). :meth:`_finish_patched` then patches the cached tree. ``False``
        (nothing done) when the tree is not in memory, or an entered child has no cache entry
        matching its tree id or no record in the tree; the caller then lists from the cache
        entry by entry."""
        assert node.cached is not None
        base = self.tree_cache(node.cached[0]) if self.tree_cache is not None else None
        if base is None:
            return False
        mapping = node.cached[1]
        prefix = node.rel + b"/" if node.rel else b""
        entered = []
        for name in self._needed_children.get(node.rel, ()):
            was = mapping.get(name)
            if was is None or was[0][0] & _IFMT != _IFDIR:
                continue  # not a directory of the cached listing: as _list_from_cache
            rel = prefix + name
            sub = self.cache.get(rel)
            if sub is None or sub[0] != was[1]:
                return False
            at = _find_record(base, _dir_record(was[0][0] & 0o7777, was[1], name))
            if at < 0:
                return False
            entered.append((name, rel, was[0][0] & 0o7777, sub))
            node.at.append(at)
        node.from_cache = True
        node.base = base
        self._reused = True
        if node.rel and b".gitignore" in mapping and self.matcher.rules.use_gitignore:
            parent_rules = node.slot[0].rules if node.slot else node.rules
            node.rules = self.matcher.enter(parent_rules, node.rel.rpartition(b"/")[2],
                                            node.rel, has_ignore=True)
        files, dirs, links, nbytes = node.cached[2]
        for name, rel, perm, sub in entered:
            entry = [name, DIR, perm, 0, 0, None, None]
            node.entries.append(entry)
            child_rules = self.matcher.enter(node.rules, name, rel, has_ignore=False)
            stack.append(_Dir(rel, node.path + b"/" + name, child_rules, sub, (node, entry),
                              perm))
            f, d, s_, b = sub[2]
            files, dirs, links, nbytes = files - f, dirs - d, links - s_, nbytes - b
        stats = self.stats
        stats.files += files
        stats.dirs += dirs
        stats.symlinks += links
        stats.bytes += nbytes
        stats.reused_trees += _subdirs(base) - len(entered)
        self.entry_budget[0] += files + dirs + links
        if self.previous_skipped:
            inside = [e[1] + b"/" for e in entered]
            self.skipped += [
                k for k in self.previous_skipped
                if (not node.rel or k.path.startswith(prefix))
                and not any(k.path.startswith(p) for p in inside)]
        return True

    def _list_from_cache(self, node: _Dir, stack: list[_Dir]) -> None:
        """A directory above a changed one, which the watcher saw no change in: its listing is
        the cached one, and only the subdirectories on the way to a change are entered."""
        assert node.cached is not None and self._needed is not None
        node.from_cache = True
        prefix = node.rel + b"/" if node.rel else b""
        if node.rel and b".gitignore" in node.cached[1] and self.matcher.rules.use_gitignore:
            parent_rules = node.slot[0].rules if node.slot else node.rules
            node.rules = self.matcher.enter(parent_rules, node.rel.rpartition(b"/")[2],
                                            node.rel, has_ignore=True)
        files = links = nbytes = 0
        for name, (key, oid, _trusted) in node.cached[1].items():
            mode = key[0]
            fmt = mode & _IFMT
            if fmt == _IFDIR:
                rel = prefix + name
                entry = [name, DIR, mode & 0o7777, 0, 0, None, None]
                node.entries.append(entry)
                sub = self.cache.get(rel)
                if rel not in self._needed and sub is not None and sub[0] == oid:
                    self._reuse_unlisted(rel, entry, sub)
                    continue
                child_rules = self.matcher.enter(node.rules, name, rel, has_ignore=False)
                stack.append(_Dir(rel, node.path + b"/" + name, child_rules, sub,
                                  (node, entry), mode & 0o7777))
                self.stats.dirs += 1
                continue
            kind = FILE if fmt == _IFREG else SYMLINK
            node.entries.append([name, kind, mode & 0o7777, key[1], key[2], key, oid])
            if kind == FILE:
                files += 1
                nbytes += key[1]
            else:
                links += 1
        self.stats.files += files
        self.stats.symlinks += links
        self.stats.bytes += nbytes
        self.entry_budget[0] += len(node.entries)
        self.skipped += [k for k in self.previous_skipped
                         if k.path.rpartition(b"/")[0] == node.rel]

    def _reuse_unlisted(self, rel: bytes, entry: list[Any], sub: DirCache) -> None:
        """Trust the watcher: nothing changed below ``rel``, so reuse its cached tree whole."""
        entry[_OID] = sub[0]
        files, dirs, links, nbytes = sub[2]
        self.stats.files += files
        self.stats.dirs += dirs + 1
        self.stats.symlinks += links
        self.stats.bytes += nbytes
        self.stats.reused_trees += 1
        self.entry_budget[0] += files + dirs + links
        self._reused = True
        prefix = rel + b"/"
        self.skipped += [s for s in self.previous_skipped if s.path.startswith(prefix)]

    # -- reading (worker threads) -----------------------------------------------------------

    def _queue_read(self, node: _Dir, entry: list[Any], path: bytes, size: int) -> None:
        """Small files are read right here: measured on 100,000 files, handing them to threads
        costs more in GIL hand-offs than it saves. Large files go to the pool in batches, where
        reading, hashing and compressing run in parallel without the GIL."""
        if size < _INLINE_MAX:
            self._apply(node, entry, self._read(path, size))
            return
        self._batch.append((node, entry, path, size))
        self._batch_bytes += size
        if len(self._batch) >= _BATCH_FILES or self._batch_bytes >= _BATCH_BYTES:
            self._submit_batch()

    def _submit_batch(self) -> None:
        if not self._batch:
            return
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        fut = self.pool.submit(self._read_batch, [(p, n) for _, _, p, n in batch])
        self._pending.append(([(node, entry) for node, entry, _, _ in batch], fut))
        if len(self._pending) > _MAX_INFLIGHT:
            self._drain(block=False, limit=_MAX_INFLIGHT // 2)

    def _read_batch(self, items: list[tuple[bytes, int]]) -> list[tuple[str, Any, Any, Any]]:
        return [self._read(path, size) for path, size in items]

    def _read(self, path: bytes, size: int) -> tuple[str, Any, Any, Any]:
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except FileNotFoundError:
            return ("gone", None, None, None)
        except OSError as exc:
            return ("skip", f"unreadable: {exc.strerror}", None, None)
        try:
            before = os.fstat(fd)
            if not st.S_ISREG(before.st_mode):
                return ("skip", "replaced by a non-regular file while scanning", None, None)
            for _ in range(_READ_ATTEMPTS):
                oid, payload = self.sink.read_file(fd, before.st_size)
                after = os.fstat(fd)
                if (before.st_size, before.st_mtime_ns, before.st_ctime_ns) == (
                        after.st_size, after.st_mtime_ns, after.st_ctime_ns):
                    return ("ok", oid, payload, after)
                self.sink.discard(payload)
                before = after
                os.lseek(fd, 0, os.SEEK_SET)
            return ("skip", f"kept changing while being read ({_READ_ATTEMPTS} attempts)",
                    None, None)
        except OSError as exc:
            if exc.errno in (28, 122):  # ENOSPC, EDQUOT: the store is full, stop everything
                raise
            return ("skip", f"unreadable: {exc.strerror}", None, None)
        finally:
            os.close(fd)

    def _drain(self, block: bool, limit: int = 0) -> None:
        """Consume finished reads. ``block``: all of them; ``limit``: wait until at most
        ``limit`` batches are in flight; otherwise only those already done, oldest first."""
        pending = self._pending
        while pending:
            if not block and not (limit and len(pending) > limit) and not pending[0][1].done():
                break
            items, fut = pending.popleft()
            for (node, entry), result in zip(items, fut.result(), strict=True):
                self._apply(node, entry, result)

    def _apply(self, node: _Dir, entry: list[Any], result: tuple[str, Any, Any, Any]) -> None:
        """Record one read: the id and the stat it is consistent with, or why it was skipped."""
        status, value, payload, after = result
        stats = self.stats
        if status == "ok":
            self.sink.accept(value, payload)
            stats.bytes += after.st_size - entry[_SIZE]
            entry[_OID] = value
            entry[_SIZE], entry[_MTIME] = after.st_size, after.st_mtime_ns
            entry[_PERM] = after.st_mode & 0o7777
            entry[_KEY] = (after.st_mode, after.st_size, after.st_mtime_ns, after.st_ctime_ns,
                           after.st_ino)
            stats.hashed += 1
        else:
            entry[_OID] = None
            stats.files -= 1
            stats.bytes -= entry[_SIZE]
            if status == "skip":
                rel = (node.rel + b"/" if node.rel else b"") + entry[_NAME]
                self.skipped.append(Skipped(rel, value))

    # -- building trees ----------------------------------------------------------------------

    def _finish(self, node: _Dir, new_cache: dict[bytes, DirCache]) -> None:
        if node.unreadable:
            if node.slot is not None:
                node.slot[1][_OID] = None
                node.slot[0].dirty = True
            if self._copied:
                self._drop(new_cache, node.rel)
            return
        if node.base is not None:
            self._finish_patched(node, new_cache)
            return
        entries = [e for e in node.entries if e[_OID] is not None]
        cached = node.cached
        if not node.dirty and cached is not None and len(entries) == len(cached[1]):
            tree_oid, mapping, totals = cached
            self.stats.reused_trees += 1
            self._changes[node.rel] = _NO_CHANGES
        else:
            entries.sort(key=lambda e: e[_NAME])
            tree = [Entry(e[_NAME], e[_KIND], e[_PERM], e[_SIZE], e[_MTIME], e[_OID])
                    for e in entries]
            tree_oid = self.sink.put(encode_tree(tree))
            self.built_trees[tree_oid] = tree
            cutoff = self._cutoff
            mapping = {}
            prefix = node.rel + b"/" if node.rel else b""
            files = dirs = links = nbytes = 0
            for e in entries:
                if e[_KIND] == DIR:
                    sub = new_cache[prefix + e[_NAME]]
                    mapping[e[_NAME]] = ((_IFDIR | e[_PERM], 0, 0, 0, 0), e[_OID], True)
                    f, d, s_, b = sub[2]
                    files, dirs, links, nbytes = files + f, dirs + d + 1, links + s_, nbytes + b
                else:
                    key = e[_KEY]
                    mapping[e[_NAME]] = (key, e[_OID], key[2] < cutoff and key[3] < cutoff)
                    if e[_KIND] == FILE:
                        files += 1
                        nbytes += e[_SIZE]
                    else:
                        links += 1
            totals = (files, dirs, links, nbytes)
            if cached is not None:
                changes = self._count(node, entries, new_cache)
                if changes is not None:
                    self._changes[node.rel] = changes
                if self._copied and not node.from_cache:
                    self._drop_vanished(node, mapping, new_cache)
        self._done(node, (tree_oid, mapping, totals), new_cache)

    def _finish_patched(self, node: _Dir, new_cache: dict[bytes, DirCache]) -> None:
        """Finish a directory :meth:`_patch_from_cache` listed: swap the new tree ids of the
        entered subdirectories into the cached tree, listing and totals (dropping those that
        became unreadable), and add up their changes."""
        assert node.cached is not None and node.base is not None
        tree_oid, mapping, totals = node.cached
        changed = [e for e in node.entries if e[_OID] != mapping[e[_NAME]][1]]
        if not changed:
            self.stats.reused_trees += 1
            self._changes[node.rel] = _NO_CHANGES
            self._done(node, node.cached, new_cache)
            return
        mapping = dict(mapping)
        files, dirs, links, nbytes = totals
        created = modified = deleted = 0
        counted = True
        prefix = node.rel + b"/" if node.rel else b""
        edits = []  # (where, old record's length, new record)
        for e, at in zip(node.entries, node.at, strict=True):
            if e[_OID] == mapping[e[_NAME]][1]:
                continue
            name = e[_NAME]
            rel = prefix + name
            key, old_oid, _trusted = mapping[name]
            old_size = len(_dir_record(key[0] & 0o7777, old_oid, name))
            f, d, s_, b = self.cache[rel][2]  # entered only with a matching cache entry
            if e[_OID] is None:  # unreadable now: gone from the tree
                edits.append((at, old_size, b""))
                del mapping[name]
                files, dirs, links, nbytes = files - f, dirs - d - 1, links - s_, nbytes - b
                deleted += f + s_
                continue
            edits.append((at, old_size, _dir_record(key[0] & 0o7777, e[_OID], name)))
            mapping[name] = (key, e[_OID], True)
            nf, nd, ns, nb = new_cache[rel][2]
            files, dirs, links, nbytes = (files + nf - f, dirs + nd - d, links + ns - s_,
                                          nbytes + nb - b)
            sub = self._changes.get(rel)
            if sub is None:
                counted = False
            else:
                created, modified, deleted = (created + sub[0], modified + sub[1],
                                              deleted + sub[2])
        edits.sort()
        base, pieces, done = node.base, [], 0
        for at, old_size, record in edits:
            pieces += (base[done:at], record)
            done = at + old_size
        pieces.append(base[done:])
        data = b"".join(pieces)
        tree_oid = self.sink.put(data)
        self.patched_trees[tree_oid] = data
        if counted:
            self._changes[node.rel] = (created, modified, deleted)
        self._done(node, (tree_oid, mapping, (files, dirs, links, nbytes)), new_cache)

    def _done(self, node: _Dir, result: DirCache, new_cache: dict[bytes, DirCache]) -> None:
        """Record a finished directory's cache entry and hand its tree id to its parent."""
        tree_oid = result[0]
        new_cache[node.rel] = result
        if node.slot is not None:
            parent, entry = node.slot
            entry[_OID] = tree_oid
            if not parent.dirty:
                before = parent.cached[1].get(node.rel.rpartition(b"/")[2]) \
                    if parent.cached is not None else None
                if before is None or before[1] != tree_oid:
                    parent.dirty = True

    def _count(self, node: _Dir, entries: list[list[Any]],
               new_cache: dict[bytes, DirCache]) -> Changes | None:
        """Changes of a rebuilt directory's subtree against its cached listing, by the rules
        of ``diff_trees`` + ``count_changes``: a file or link whose id or permission bits
        differ is modified, one whose kind changed is deleted and created, and a directory
        that appeared or vanished counts every file and link below it (from the cache's
        subtree totals). A subdirectory whose tree id changed was itself rebuilt and counted
        its own subtree. Costs the directory's entries, never the subtree's; ``None`` when
        the cache lacks a directory it would need (the caller then diffs the trees)."""
        assert node.cached is not None
        old = node.cached[1]
        prefix = node.rel + b"/" if node.rel else b""
        created = modified = deleted = matched = 0
        for e in entries:
            name, kind = e[_NAME], e[_KIND]
            was = old.get(name)
            if was is None:
                new = _subtree_files(kind, prefix + name, new_cache)
                if new < 0:
                    return None
                created += new
                continue
            matched += 1
            old_mode = was[0][0]
            old_kind = _kind_of(old_mode)
            if old_kind != kind:
                gone = _subtree_files(old_kind, prefix + name, self.cache)
                new = _subtree_files(kind, prefix + name, new_cache)
                if gone < 0 or new < 0:
                    return None
                deleted += gone
                created += new
            elif kind == DIR:
                if was[1] != e[_OID]:
                    rel = prefix + name
                    sub = self._changes.get(rel)
                    before = self.cache.get(rel)
                    if sub is None or before is None or before[0] != was[1]:
                        return None
                    created, modified, deleted = (created + sub[0], modified + sub[1],
                                                  deleted + sub[2])
            elif was[1] != e[_OID] or old_mode & 0o7777 != e[_PERM]:
                modified += 1
        if matched != len(old):
            names = {e[_NAME] for e in entries}
            for name, was in old.items():
                if name not in names:
                    gone = _subtree_files(_kind_of(was[0][0]), prefix + name, self.cache)
                    if gone < 0:
                        return None
                    deleted += gone
        return created, modified, deleted

    def _drop_vanished(self, node: _Dir, mapping: dict[bytes, Any],
                       new_cache: dict[bytes, DirCache]) -> None:
        """Drop from the copied cache the subtrees of ``node``'s cached subdirectories that
        are no longer subdirectories of it (deleted, excluded, unreadable, or replaced by a
        file): their entries must not outlive the snapshot that holds their objects."""
        assert node.cached is not None
        prefix = node.rel + b"/" if node.rel else b""
        for name, was in node.cached[1].items():
            if was[0][0] & _IFMT == _IFDIR:
                now = mapping.get(name)
                if now is None or now[0][0] & _IFMT != _IFDIR:
                    self._drop(new_cache, prefix + name)

    def _drop(self, new_cache: dict[bytes, DirCache], rel: bytes) -> None:
        """Remove ``rel`` and every directory the old cache holds below it."""
        todo = [rel]
        while todo:
            rel = todo.pop()
            new_cache.pop(rel, None)
            old = self.cache.get(rel)
            if old is not None:
                todo += [rel + b"/" + name for name, was in old[1].items()
                         if was[0][0] & _IFMT == _IFDIR]


def _dir_record(perm: int, oid: bytes, name: bytes) -> bytes:
    """A subdirectory's record in an encoded tree (see :func:`~ctrlz.state.trees.encode_tree`:
    directories have size and mtime 0)."""
    return b"d %o 0 0 %s %s\0" % (perm, oid.hex().encode(), name)


def _find_record(data: bytes, record: bytes) -> int:
    """Where ``record`` starts in the encoded tree ``data``, or -1. Only at a record boundary
    (after the header or a NUL): a name may contain what looks like another record, never a
    NUL."""
    if data.startswith(HEADER + record):
        return len(HEADER)
    at = data.find(b"\0" + record)
    return at + 1 if at >= 0 else -1


def _subdirs(data: bytes) -> int:
    """Subdirectories in an encoded tree: records start after the header or a NUL, and no
    other field holds a NUL."""
    return data.count(b"\0d ") + data.startswith(HEADER + b"d ")


def _kind_of(mode: int) -> str:
    fmt = mode & _IFMT
    return DIR if fmt == _IFDIR else FILE if fmt == _IFREG else SYMLINK


def _subtree_files(kind: str, rel: bytes, cache: dict[bytes, DirCache]) -> int:
    """Files and links at ``rel``: one, or for a directory its cached subtree totals; -1 when
    the cache has no entry for that directory."""
    if kind != DIR:
        return 1
    sub = cache.get(rel)
    if sub is None:
        return -1
    return sub[2][0] + sub[2][2]


def _special_kind(mode: int) -> str:
    if st.S_ISFIFO(mode):
        return "special file skipped (FIFO)"
    if st.S_ISSOCK(mode):
        return "special file skipped (socket)"
    if st.S_ISCHR(mode) or st.S_ISBLK(mode):
        return "special file skipped (device)"
    return "special file skipped"
