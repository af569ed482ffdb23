"""The object store: content-addressed bytes in append-only packs, large ones as loose files.

Small objects (file contents below ``LOOSE_MIN``, symlink targets and trees) are appended to pack
files so that 100,000 small files cost a handful of files in the store, not 100,000. Each record
in a pack carries a header with its id, codec and lengths, so the index could be rebuilt from the
packs alone; the live index is the ``objects`` table of the catalog. Large objects are written as
one file each under ``objects/xx/…``, raw when they do not compress, which keeps restores of big
files to a streaming copy.

Every read re-hashes what it returns: a flipped bit on disk is reported as :class:`CorruptObject`
and never written into a workspace.

Readers may live long (the daemon, the MCP server) while other processes write and collect
garbage, so a reader keeps at most ``MAX_PACK_FDS`` packs open (least recently used first out: a
store of a thousand packs must not need a thousand file descriptors), and a read that finds its
pack or loose file gone, or bytes that do not match, looks the object up once more before it
calls the object corrupt: gc may have moved it to a new pack between the lookup and the read.
Pack ids are never reused (the catalog's ``packs.id`` is ``AUTOINCREMENT``), so a cached
pack id → file mapping can go stale but never point at another pack's bytes.
"""

from __future__ import annotations

import _thread
import errno
import os
import struct
from collections.abc import Container, Iterator
from functools import cached_property
from typing import TYPE_CHECKING, BinaryIO

import zstandard

from ..errors import CorruptObject, StoreError, StoreFull
from . import failpoints
from .atomic import TEMP_PREFIX, fsync_dir, temp_name
from .catalog import Catalog, ObjectRow
from .hashing import digest_function, hasher_factory

if TYPE_CHECKING:
    from pathlib import Path

RAW, ZSTD = 0, 1
LOOSE_MIN = 4 << 20  # files at least this big become loose objects
PACK_MAX = 128 << 20  # start a new pack past this size
CHUNK = 4 << 20
ZSTD_LEVEL = 3
PACK_MAGIC = b"CTZPACK1"
_WRITE_BUFFER = 1 << 20  # pack appends are buffered: one write() per MiB, not two per object
RECORD = struct.Struct(">4sB32sQQ")  # b"CZOB", codec, oid, raw size, stored length
RECORD_MAGIC = b"CZOB"
MAX_PACK_FDS = 16  # open pack files a reader keeps; fits under `ulimit -n 64` with room to spare

# _thread, not threading: the same primitives (threading.local and threading.Lock are these),
# without importing threading into every agent hook
_local = _thread._local()


def _compressor() -> zstandard.ZstdCompressor:
    c = getattr(_local, "cctx", None)
    if c is None:
        c = _local.cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return c


def _decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "dctx", None)
    if d is None:
        d = _local.dctx = zstandard.ZstdDecompressor()
    return d


def encode_small(data: bytes) -> tuple[int, bytes]:
    """Compress when it pays (at least 5% smaller), else store raw."""
    if len(data) < 128:
        return RAW, data
    packed = _compressor().compress(data)
    if len(packed) < len(data) * 0.95:
        return ZSTD, packed
    return RAW, data


def _full_disk(exc: OSError, where: str | os.PathLike[str]) -> Exception:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFull(f"no space left on the store's disk ({where}); free space or move "
                         "CTRLZ_HOME, then try again")
    return StoreError(f"cannot write to the store ({where}): {exc.strerror or exc}")


class _PackInProgress:
    """A pack being written. A plain class: agent hooks import this module, and
    ``dataclasses`` would add milliseconds to each one's start-up."""

    __slots__ = ("name", "path", "fd", "size", "rows")

    def __init__(self, name: str, path: str, fd: int, size: int) -> None:
        self.name = name
        self.path = path
        self.fd = fd
        self.size = size
        self.rows: list[ObjectRow] = []


class _PackFds:
    """Open pack file descriptors, at most ``limit`` of them, least recently used closed first.

    Restores and snapshots read from worker threads, so a descriptor is never closed while a
    thread still reads through it (the number could be reused by the next ``open`` and hand
    that thread another file's bytes): :meth:`get` and :meth:`add` hand out a slot counted as in
    use, :meth:`put` hands it back, and a slot evicted or forgotten while in use is closed by its
    last user. Past the limit with every descriptor in use, the cache overflows rather than
    waits. A slot is ``[fd, users, cached]``."""

    __slots__ = ("limit", "_lock", "_slots")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = _thread.allocate_lock()
        self._slots: dict[int, list[int]] = {}  # pack id -> slot, least recently used first

    def get(self, pack_id: int) -> list[int] | None:
        with self._lock:
            slot = self._slots.pop(pack_id, None)
            if slot is not None:
                self._slots[pack_id] = slot  # now the most recently used
                slot[1] += 1
            return slot

    def add(self, pack_id: int, fd: int) -> list[int]:
        """Cache a freshly opened descriptor; returns its slot, or the slot another thread
        added meanwhile (closing ``fd``)."""
        with self._lock:
            slot = self._slots.get(pack_id)
            if slot is not None:
                os.close(fd)
                slot[1] += 1
                return slot
            slot = self._slots[pack_id] = [fd, 1, 1]
            if len(self._slots) > self.limit:
                for key in [k for k, v in self._slots.items() if v[1] == 0]:
                    os.close(self._slots.pop(key)[0])
                    if len(self._slots) <= self.limit:
                        break
            return slot

    def put(self, slot: list[int]) -> None:
        with self._lock:
            slot[1] -= 1
            if slot[1] == 0 and not slot[2]:
                os.close(slot[0])

    def clear(self) -> None:
        """Forget every descriptor; one in use is closed by its last user."""
        with self._lock:
            for slot in self._slots.values():
                slot[2] = 0
                if slot[1] == 0:
                    os.close(slot[0])
            self._slots.clear()

    def __len__(self) -> int:
        return len(self._slots)


class ObjectStore:
    """Read access to a store's objects, plus :meth:`writer` for a locked writer.

    ``root`` may be a string or a ``Path``; ``packs_dir``, ``loose_dir`` and ``loose_path``
    give ``Path`` objects, but the pack-writing path (all an agent hook needs) runs on strings,
    so a hook never imports ``pathlib``, a few milliseconds of its start-up."""

    def __init__(self, root: str | os.PathLike[str], catalog: Catalog, algorithm: str) -> None:
        self.root = root
        self.catalog = catalog
        self.algorithm = algorithm
        self.digest = digest_function(algorithm)
        self.new_hasher = hasher_factory(algorithm)
        self._packs = os.path.join(os.fspath(root), "packs")
        self._loose = os.path.join(os.fspath(root), "objects")
        self._pack_fds = _PackFds(MAX_PACK_FDS)
        self._pack_names: dict[int, str] = {}

    @cached_property
    def packs_dir(self) -> Path:
        from pathlib import Path

        return Path(self._packs)

    @cached_property
    def loose_dir(self) -> Path:
        from pathlib import Path

        return Path(self._loose)

    def close(self) -> None:
        """Close the cached pack descriptors (gc calls this after deleting packs)."""
        self._pack_fds.clear()
        self._pack_names = {}

    def loose_path(self, oid: bytes) -> Path:
        h = oid.hex()
        return self.loose_dir / h[:2] / h[2:]

    # -- reading ---------------------------------------------------------------------------

    def _pack_slot(self, pack_id: int) -> list[int]:
        """An open descriptor of pack ``pack_id``, as a slot of :class:`_PackFds`; give it back
        with ``self._pack_fds.put(slot)``."""
        slot = self._pack_fds.get(pack_id)
        if slot is not None:
            return slot
        name = self._pack_names.get(pack_id)
        if name is None:
            self._pack_names = {k: v[0] for k, v in self.catalog.packs().items()}
            name = self._pack_names.get(pack_id)
            if name is None:
                raise CorruptObject(f"the index names pack {pack_id}, which is not "
                                    "registered; run `ctrlz verify`")
        try:
            fd = os.open(os.path.join(self._packs, name), os.O_RDONLY)
        except FileNotFoundError:
            raise CorruptObject(f"pack file {name} is missing; run `ctrlz verify`") from None
        return self._pack_fds.add(pack_id, fd)

    def _pread(self, pack_id: int, length: int, offset: int) -> bytes:
        slot = self._pack_slot(pack_id)
        try:
            return os.pread(slot[0], length, offset)
        finally:
            self._pack_fds.put(slot)

    def _forget_locations(self) -> None:
        """Drop what this reader cached about where objects live (pack names and open packs),
        so the next lookup sees what another process's gc has done since."""
        self._pack_fds.clear()
        self._pack_names = {}

    def has(self, oid: bytes) -> bool:
        return self.catalog.lookup(oid) is not None

    def read(self, oid: bytes) -> bytes:
        """The object's bytes, verified against its id.

        A failure is retried once with a fresh lookup and fresh descriptors before it is
        reported: another process's gc may have repacked the object (and deleted the pack this
        reader found it in) between the lookup and the read."""
        try:
            return self._read_once(oid)
        except CorruptObject:
            self._forget_locations()
            return self._read_once(oid)

    def _read_once(self, oid: bytes) -> bytes:
        row = self.catalog.lookup(oid)
        if row is None:
            raise CorruptObject(f"object {oid.hex()[:16]} is missing from the store; "
                                "run `ctrlz verify`")
        _, pack, offset, length, size, codec = row
        if pack is None:
            try:
                with open(self.loose_path(oid), "rb") as f:
                    stored = f.read()
            except FileNotFoundError:
                raise CorruptObject(f"loose object {oid.hex()[:16]} is missing; "
                                    "run `ctrlz verify`") from None
        else:
            stored = self._pread(pack, length, offset)
        data = self._decode(stored, codec, size, oid)
        if self.digest(data) != oid:
            raise CorruptObject(f"object {oid.hex()[:16]} does not match its id; "
                                "run `ctrlz verify`")
        return data

    def check_stored(self, oid: bytes, stored: bytes, codec: int, size: int) -> None:
        if self.digest(self._decode(stored, codec, size, oid)) != oid:
            raise CorruptObject(f"object {oid.hex()[:16]} does not match its id; "
                                "run `ctrlz verify`")

    def _decode(self, stored: bytes, codec: int, size: int, oid: bytes) -> bytes:
        if codec == RAW:
            data = stored
        elif codec == ZSTD:
            try:
                data = _decompressor().decompress(stored, max_output_size=size)
            except zstandard.ZstdError as exc:
                raise CorruptObject(f"object {oid.hex()[:16]} cannot be decompressed: "
                                    f"{exc}") from exc
        else:
            raise CorruptObject(f"object {oid.hex()[:16]} has unknown codec {codec}")
        if len(data) != size:
            raise CorruptObject(f"object {oid.hex()[:16]} has the wrong length")
        return data

    def iter_chunks(self, oid: bytes) -> Iterator[bytes]:
        """Stream a (possibly large) object. The caller must check :meth:`digest` of the
        stream itself; :meth:`write_to` does."""
        loose = self._open_loose(oid)
        if loose is None:
            yield self.read(oid)
            return
        f, codec = loose
        with f:
            if codec == ZSTD:
                reader = _decompressor().stream_reader(f)
                while chunk := reader.read(CHUNK):
                    yield chunk
            else:
                while chunk := f.read(CHUNK):
                    yield chunk

    def _open_loose(self, oid: bytes) -> tuple[BinaryIO, int] | None:
        """The open file and codec of a loose object, or ``None`` for a packed one. A file
        found missing is looked up once more, as in :meth:`read`: gc may have dropped it and a
        snapshot added the same content back since the first lookup."""
        for retry in (False, True):
            row = self.catalog.lookup(oid)
            if row is None:
                raise CorruptObject(f"object {oid.hex()[:16]} is missing from the store; "
                                    "run `ctrlz verify`")
            if row[1] is not None:
                return None
            try:
                return open(self.loose_path(oid), "rb"), row[5]  # noqa: SIM115
            except FileNotFoundError:
                if retry:
                    raise CorruptObject(f"loose object {oid.hex()[:16]} is missing; "
                                        "run `ctrlz verify`") from None
        raise AssertionError("unreachable")

    def write_to(self, oid: bytes, fd: int) -> int:
        """Write the object to an open file descriptor, verifying it; returns its size."""
        hasher = self.new_hasher()
        total = 0
        for chunk in self.iter_chunks(oid):
            hasher.update(chunk)
            view = memoryview(chunk)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            total += len(chunk)
        if hasher.digest() != oid:
            raise CorruptObject(f"object {oid.hex()[:16]} does not match its id; "
                                "run `ctrlz verify`")
        return total

    def read_stored(self, pack: int, offset: int, length: int) -> bytes:
        """Raw stored bytes of a packed object (gc copies them between packs)."""
        return self._pread(pack, length, offset)

    def writer(self, *, fresh: bool = False) -> ObjectWriter:
        """``fresh``: write every object given, even ones the index already has (repacking)."""
        w = ObjectWriter(self)
        if fresh:
            w._known = set()
        return w


class ObjectWriter:
    """Adds objects during one locked operation; nothing is visible until :meth:`commit`.

    Pack bytes and loose files are fsynced in :meth:`commit`, before the index rows are
    written in the caller's catalog transaction.
    """

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._known: set[bytes] | None = None
        self._known_lock = _thread.allocate_lock()
        self._lookups = 0
        self._new: set[bytes] = set()  # written by this writer (until ``known`` is loaded)
        self._buffer = bytearray()  # pack bytes not yet written to the file
        self._pack: _PackInProgress | None = None
        self._done_packs: list[_PackInProgress] = []
        self._loose_rows: list[ObjectRow] = []
        self._loose_dirs: set[Path] = set()
        self._new_dirs: set[str] = set()  # directories this writer created: their parents
        self.added_objects = 0
        self.added_bytes = 0  # raw bytes of new objects
        self.stored_bytes = 0  # bytes they take in the store

    def contains(self, oid: bytes) -> bool:
        """Is ``oid`` stored (or being stored)? Asks the index row by row until that gets
        frequent, then loads every id once: a no-change snapshot writes one or two objects and
        should not load 100,000 ids to do it."""
        if self._known is None:
            self._lookups += 1
            if self._lookups <= 2048:
                return oid in self._new or self.store.catalog.lookup(oid) is not None
        return oid in self.known

    @property
    def known(self) -> set[bytes]:
        """Ids already in the store; loaded on first use, since no-change snapshots never
        need it."""
        if self._known is None:
            with self._known_lock:
                if self._known is None:
                    self._known = self.store.catalog.all_oids() | self._new
        return self._known

    def put(self, data: bytes) -> bytes:
        """Hash, compress and store a small object; returns its id."""
        oid = self.store.digest(data)
        if not self.contains(oid):
            codec, stored = encode_small(data)
            self.put_encoded(oid, len(data), codec, stored)
        return oid

    def put_encoded(self, oid: bytes, size: int, codec: int, stored: bytes, *,
                    checked: bool = False) -> None:
        """Append an already hashed and encoded object (encoding happens in worker threads).

        ``checked``: the caller asked :meth:`contains` already, under this writer's lock, so
        only objects added since (by this writer) need ruling out, without a second index
        query."""
        if checked:
            if oid in self._new or (self._known is not None and oid in self._known):
                return
        elif self.contains(oid):
            return
        pack = self._open_pack()
        header = RECORD.pack(RECORD_MAGIC, codec, oid, size, len(stored))
        self._buffer += header
        self._buffer += stored
        if len(self._buffer) >= _WRITE_BUFFER:
            self._flush(pack)
        offset = pack.size + len(header)
        pack.rows.append((oid, None, offset, len(stored), size, codec))
        pack.size = offset + len(stored)
        self._remember(oid)
        self.added_objects += 1
        self.added_bytes += size
        self.stored_bytes += len(stored) + len(header)
        failpoints.hit("pack-append")
        if pack.size >= PACK_MAX:
            self._finish_pack()

    def _remember(self, oid: bytes) -> None:
        if self._known is not None:
            self._known.add(oid)
        else:
            self._new.add(oid)

    def _flush(self, pack: _PackInProgress) -> None:
        try:
            with memoryview(self._buffer) as view:
                done = 0
                while done < len(view):
                    done += os.write(pack.fd, view[done:])
        except OSError as exc:
            raise _full_disk(exc, pack.path) from exc
        finally:
            self._buffer.clear()

    def _open_pack(self) -> _PackInProgress:
        if self._pack is None:
            if _mkdir(self.store._packs):
                self._new_dirs.add(self.store._packs)
            name = "pack-" + os.urandom(8).hex() + ".pack"
            path = os.path.join(self.store._packs, name)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
                os.write(fd, PACK_MAGIC)
            except OSError as exc:
                raise _full_disk(exc, path) from exc
            self._pack = _PackInProgress(name, path, fd, len(PACK_MAGIC))
        return self._pack

    def _finish_pack(self) -> None:
        pack, self._pack = self._pack, None
        if pack is None:
            return
        try:
            self._flush(pack)
            os.fsync(pack.fd)
        except OSError as exc:
            raise _full_disk(exc, pack.path) from exc
        finally:
            os.close(pack.fd)
        self._done_packs.append(pack)

    def ingest_large(self, fd: int) -> tuple[bytes, Path, int, int, int]:
        """Copy an open file into a temp loose object while hashing it (thread-safe).

        Returns (oid, temp path, raw size, stored length, codec). The bytes stored are exactly
        the bytes hashed, so the object always matches its id even if the source changes
        underneath; the caller decides whether the source stayed stable.
        """
        if _mkdir(self.store._loose):
            self._new_dirs.add(self.store._loose)
        tmp = self.store.loose_dir / temp_name("large")
        hasher = self.store.new_hasher()
        first = os.read(fd, CHUNK)
        compress = len(first) >= 4096 and len(_compressor().compress(first[:1 << 20])) < (
            min(len(first), 1 << 20) * 0.8)
        size = 0
        try:
            with open(tmp, "wb") as out:
                sink = (zstandard.ZstdCompressor(level=1).stream_writer(out, closefd=False)
                        if compress else out)
                chunk = first
                while chunk:
                    hasher.update(chunk)
                    sink.write(chunk)
                    size += len(chunk)
                    chunk = os.read(fd, CHUNK)
                if compress:
                    sink.flush(zstandard.FLUSH_FRAME)
                out.flush()
                os.fsync(out.fileno())
                stored = out.tell()
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise _full_disk(exc, tmp) from exc
        return hasher.digest(), tmp, size, stored, (ZSTD if compress else RAW)

    def adopt_large(self, oid: bytes, tmp: Path, size: int, stored: int, codec: int) -> None:
        """Move a temp loose object into place (main thread), or drop it if already known."""
        if self.contains(oid):
            os.unlink(tmp)
            return
        dest = self.store.loose_path(oid)
        if _mkdir(dest.parent):
            self._new_dirs.add(os.fspath(dest.parent))
        os.replace(tmp, dest)
        self._loose_dirs.add(dest.parent)
        self._loose_rows.append((oid, None, 0, stored, size, codec))
        self._remember(oid)
        self.added_objects += 1
        self.added_bytes += size
        self.stored_bytes += stored

    def commit(self, catalog: Catalog) -> None:
        """Make everything durable, then index it. Call inside a catalog transaction."""
        self._finish_pack()
        try:
            for d in self._loose_dirs:
                fsync_dir(d)
            if self._done_packs:
                fsync_dir(self.store._packs)
            # a directory created by this writer is durable only once its parent's entry for
            # it is: objects/ for a new objects/xx/, the store itself for packs/ and objects/
            for parent in {os.path.dirname(d) for d in self._new_dirs}:
                fsync_dir(parent)
            self._new_dirs.clear()
        except OSError as exc:
            raise _full_disk(exc, self.store.root) from exc
        failpoints.hit("before-index-commit")
        for pack in self._done_packs:
            pack_id = catalog.add_pack(pack.name, pack.size)
            catalog.add_objects((o, pack_id, off, ln, sz, c) for o, _, off, ln, sz, c in pack.rows)
        catalog.add_objects(self._loose_rows)
        self._done_packs.clear()
        self._loose_rows.clear()

    def abort(self) -> None:
        """Forget uncommitted work; its bytes stay as orphans until the next recovery."""
        self._buffer.clear()
        if self._pack is not None:
            os.close(self._pack.fd)
            self._pack = None
        # a directory made here may be used by the next writer, which will not know it is new
        for parent in {os.path.dirname(d) for d in self._new_dirs}:
            try:
                fsync_dir(parent)
            except OSError:
                pass
        self._new_dirs.clear()


class Sweep:
    """What :func:`sweep` did. A plain class (agent hooks import this module)."""

    __slots__ = ("removed_objects", "removed_bytes", "repacked_packs", "kept_objects")

    def __init__(self) -> None:
        self.removed_objects = 0
        self.removed_bytes = 0  # stored bytes reclaimed
        self.repacked_packs = 0
        self.kept_objects = 0


def sweep(store: ObjectStore, live: Container[bytes]) -> Sweep:
    """Forget every object not in ``live`` and reclaim its bytes. Call with the store's lock.

    The one sweep behind both collectors (the workspace store's gc, which decides ``live`` by
    walking snapshots, and the tool-call store's compaction, which asks its entries). A pack
    with any dead object is rewritten: its live objects move to a new pack, so dead bytes never
    linger in a pack kept alive by one live neighbour. Crash-safe in the same order as a
    snapshot: the new pack is fsynced, one transaction re-points the index and drops the dead
    rows, and only after that commit are old packs and dead loose files deleted; a crash before
    it leaves a stray new pack, a crash after it stray old files, both removed by the next
    writer's recovery. Pack ids are not reused (``packs.id`` is ``AUTOINCREMENT``), so a reader
    in another process that cached an old pack's id finds it gone and looks again."""
    result = Sweep()
    rows = store.catalog.object_rows()
    dead = [r for r in rows if r[0] not in live]
    result.kept_objects = len(rows) - len(dead)
    if not dead:
        return result
    dead_packs = {r[1] for r in dead if r[1] is not None}
    moving = [r for r in rows if r[1] in dead_packs and r[0] in live]
    writer = store.writer(fresh=True)  # the live ids move to a new pack
    try:
        for oid, pack, offset, length, size, codec in moving:
            assert pack is not None
            stored = store.read_stored(pack, offset, length)
            store.check_stored(oid, stored, codec, size)
            writer.put_encoded(oid, size, codec, stored)
        failpoints.hit("gc-before-commit")
        packs = store.catalog.packs()
        with store.catalog.transaction():
            store.catalog.delete_objects(r[0] for r in dead)
            store.catalog.delete_objects(r[0] for r in moving)
            writer.commit(store.catalog)
            for pack_id in dead_packs:
                store.catalog.delete_pack(pack_id)
    except BaseException:
        writer.abort()
        raise
    failpoints.hit("gc-after-commit")
    store.close()
    for pack_id in dead_packs:
        try:
            os.unlink(os.path.join(store._packs, packs[pack_id][0]))
        except FileNotFoundError:
            pass
    for oid, pack, _offset, length, _size, _codec in dead:
        result.removed_objects += 1
        result.removed_bytes += length
        if pack is None:
            try:
                os.unlink(store.loose_path(oid))
            except FileNotFoundError:
                pass
    result.repacked_packs = len(dead_packs)
    return result


def _mkdir(path: str | os.PathLike[str]) -> bool:
    """Create a directory if it is missing; returns whether this call created it (so that
    the writer fsyncs its parent at commit, and only then)."""
    try:
        os.mkdir(path)
    except FileExistsError:
        return False
    return True


def stray_files(store: ObjectStore) -> list[Path]:
    """Files in the store that no committed index row references: leftovers of a crash."""
    packs = {name for name, _ in store.catalog.packs().values()}
    loose = {store.loose_path(bytes(r[0])) for r in store.catalog.db.execute(
        "SELECT oid FROM objects WHERE pack IS NULL")}
    strays: list[Path] = []
    if store.packs_dir.is_dir():
        strays += [p for p in store.packs_dir.iterdir() if p.name not in packs]
    if store.loose_dir.is_dir():
        for sub in store.loose_dir.iterdir():
            if sub.name.startswith(TEMP_PREFIX):
                strays.append(sub)
            elif sub.is_dir():
                strays += [p for p in sub.iterdir() if p not in loose]
    return strays
