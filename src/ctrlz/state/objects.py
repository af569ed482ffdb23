"""The object store: content-addressed bytes in append-only packs, large ones as loose files.

Small objects (file contents below ``LOOSE_MIN``, symlink targets and trees) are appended to pack
files (:mod:`ctrlz.state.packs`) so that 100,000 small files cost a handful of files in the
store, not 100,000. Each record in a pack carries a header with its id, codec and lengths, so the
index could be rebuilt from the packs alone; the live index is the ``objects`` table of the
catalog. Large objects are written as one file each under ``objects/xx/…``, raw when they do not
compress, which keeps restores of big files to a streaming copy. Where the store's filesystem can
clone (XFS, btrfs), a snapshot stores a large file as a copy-on-write clone of it instead, named
by its blocks rather than its hash (:mod:`ctrlz.state.cow`, :mod:`ctrlz.state.clones`).

Every read re-hashes what it returns: a flipped bit on disk is reported as :class:`CorruptObject`
and never written into a workspace. A clone is checked against its seal (its content hash, once
something has computed it); until then its bytes are trusted as the blocks the filesystem
shares with the file they were cloned from.

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
import os
from functools import cached_property

from ..errors import CorruptObject
from . import failpoints
from .atomic import fsync_dir, temp_name
from .catalog import Catalog, ObjectRow
from .clones import CloneObjects
from .hashing import digest_function, hasher_factory
from .packs import (
    CHUNK,
    CLONE,
    LOOSE_MIN,
    MAX_PACK_FDS,
    PACK_MAGIC,
    PACK_MAX,
    RAW,
    RECORD,
    RECORD_MAGIC,
    WRITE_BUFFER,
    ZSTD,
    ZSTD_LEVEL,
    PackFds,
    PackInProgress,
    compressor,
    decoded_chunks,
    decompressor,
    encode_small,
    full_disk,
    make_dir,
    write_all,
    zstd,
)
from .strays import StrayMarker

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import BinaryIO

__all__ = ["CHUNK", "CLONE", "LOOSE_MIN", "MAX_PACK_FDS", "PACK_MAGIC", "PACK_MAX", "RAW",
           "RECORD", "RECORD_MAGIC", "ZSTD", "ZSTD_LEVEL", "ObjectStore", "ObjectWriter",
           "encode_small"]


def _corrupt(oid: bytes, what: str = "does not match its id") -> CorruptObject:
    return CorruptObject(f"object {oid.hex()[:16]} {what}; run `ctrlz verify`")


class ObjectStore(CloneObjects, StrayMarker):
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
        self._pack_fds = PackFds(MAX_PACK_FDS)
        self._pack_names: dict[int, str] = {}
        self._init_strays(root)
        self._init_clones()

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

    def loose_name(self, oid: bytes) -> str:
        """:meth:`loose_path` as a string, without ``pathlib``."""
        h = oid.hex()
        return os.path.join(self._loose, h[:2], h[2:])

    # -- reading ---------------------------------------------------------------------------

    def _pack_slot(self, pack_id: int) -> list[int]:
        """An open descriptor of pack ``pack_id``, as a slot of :class:`PackFds`; give it back
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
        """The object's bytes, verified against its id (a clone: against its seal).

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
            raise _corrupt(oid, "is missing from the store")
        _, pack, offset, length, size, codec = row
        if pack is None:
            try:
                with open(self.loose_name(oid), "rb") as f:
                    stored = f.read()
            except FileNotFoundError:
                raise CorruptObject(f"loose object {oid.hex()[:16]} is missing; "
                                    "run `ctrlz verify`") from None
        else:
            stored = self._pread(pack, length, offset)
        data = self._decode(stored, codec, size, oid)
        if not self.content_ok(oid, codec, self.digest(data)):
            raise _corrupt(oid)
        return data

    def check_stored(self, oid: bytes, stored: bytes, codec: int, size: int) -> None:
        if self.digest(self._decode(stored, codec, size, oid)) != oid:
            raise _corrupt(oid)

    def _decode(self, stored: bytes, codec: int, size: int, oid: bytes) -> bytes:
        if codec in (RAW, CLONE):
            data = stored
        elif codec == ZSTD:
            try:
                data = decompressor().decompress(stored, max_output_size=size)
            except zstd().ZstdError as exc:
                raise CorruptObject(f"object {oid.hex()[:16]} cannot be decompressed: "
                                    f"{exc}") from exc
        else:
            raise CorruptObject(f"object {oid.hex()[:16]} has unknown codec {codec}")
        if len(data) != size:
            raise CorruptObject(f"object {oid.hex()[:16]} has the wrong length")
        return data

    def iter_chunks(self, oid: bytes) -> Iterator[bytes]:
        """Stream a (possibly large) object. The caller must check :meth:`digest` of the
        stream itself (:meth:`content_matches` for a clone); :meth:`write_to` does."""
        loose = self._open_loose(oid)
        if loose is None:
            yield self.read(oid)
            return
        f, codec = loose
        with f:
            yield from decoded_chunks(f, codec)

    def _open_loose(self, oid: bytes) -> tuple[BinaryIO, int] | None:
        """The open file and codec of a loose object, or ``None`` for a packed one. A file
        found missing is looked up once more, as in :meth:`read`: gc may have dropped it and a
        snapshot added the same content back since the first lookup."""
        for retry in (False, True):
            row = self.catalog.lookup(oid)
            if row is None:
                raise _corrupt(oid, "is missing from the store")
            if row[1] is not None:
                return None
            try:
                return open(self.loose_name(oid), "rb"), row[5]  # noqa: SIM115
            except FileNotFoundError:
                if retry:
                    raise CorruptObject(f"loose object {oid.hex()[:16]} is missing; "
                                        "run `ctrlz verify`") from None
        raise AssertionError("unreachable")

    def write_to(self, oid: bytes, fd: int) -> int:
        """Write the object to an open file descriptor, verifying it; returns its size."""
        write = self.loose_writer(oid)
        if write is None:
            return write_all(fd, self.read(oid))
        return write(fd)

    def loose_writer(self, oid: bytes) -> Callable[[int], int] | None:
        """For a loose object, :meth:`write_to` split in two: the catalog lookup and the open
        happen now, and the function returned streams, decodes, hashes and writes (verified)
        without touching anything shared, so a restore may run it on another thread. ``None``
        for a packed object. The function must be called once: it closes the file."""
        loose = self._open_loose(oid)
        if loose is None:
            return None
        f, codec = loose

        def write(fd: int) -> int:
            hasher = self.new_hasher()
            total = 0
            with f:
                for chunk in decoded_chunks(f, codec):
                    hasher.update(chunk)
                    total += write_all(fd, chunk)
            if not self.content_ok(oid, codec, hasher.digest()):
                raise _corrupt(oid)
            return total

        return write

    def loose_reader(self, oid: bytes) -> Callable[[], bytes] | None:
        """For a loose object, :meth:`read` split in two, as :meth:`loose_writer` splits
        :meth:`write_to`: the lookup and the open happen now, and the function returned
        decodes and checks the bytes on any thread (a push reads big objects ahead on its
        pool). ``None`` for a packed object. Call the function once: it closes the file."""
        loose = self._open_loose(oid)
        if loose is None:
            return None
        f, codec = loose

        def read() -> bytes:
            with f:
                data = b"".join(decoded_chunks(f, codec))
            if not self.content_ok(oid, codec, self.digest(data)):
                raise _corrupt(oid)
            return data

        return read

    def read_stored(self, pack: int, offset: int, length: int) -> bytes:
        """Raw stored bytes of a packed object (gc copies them between packs)."""
        return self._pread(pack, length, offset)

    def writer(self, *, fresh: bool = False) -> ObjectWriter:
        """``fresh``: write every object given, even ones the index already has (repacking)."""
        w = ObjectWriter(self)
        if fresh:
            w._known = set()
        return w


#: a store with at most this many objects has its ids loaded by a writer's first question
_LOAD_AT_ONCE = 4096


class ObjectWriter:
    """Adds objects during one locked operation; nothing is visible until :meth:`commit`.

    Pack bytes and loose files are fsynced in :meth:`commit`, before the index rows are
    written in the caller's catalog transaction; clones are made durable there with one
    ``syncfs`` of the store's filesystem.
    """

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._known: set[bytes] | None = None
        self._known_lock = _thread.allocate_lock()
        self._lookups = 0
        self._new: set[bytes] = set()  # written by this writer (until ``known`` is loaded)
        self._buffer = bytearray()  # pack bytes not yet written to the file
        self._pack: PackInProgress | None = None
        self._done_packs: list[PackInProgress] = []
        self._loose_rows: list[ObjectRow] = []
        self._loose_dirs: set[str] = set()
        self._new_dirs: set[str] = set()  # directories this writer created: their parents
        self._clones = False  # adopted a clone: the store's filesystem is flushed at commit
        self.added_objects = 0
        self.added_bytes = 0  # raw bytes of new objects
        self.stored_bytes = 0  # bytes they take in the store
        self._marked = False  # this writer has told the store it may leave strays

    def _mark(self) -> None:
        """Before this writer's first file: the marker a crash leaves for the next sweep."""
        with self._known_lock:  # large files arrive from the reader threads
            if self._marked:
                return
            self.store.writer_started()
            self._marked = True

    def mark_writing(self) -> None:
        """For a caller that writes its own temp files into ``objects/`` before adopting them
        (:meth:`adopt_large`): the strays marker goes down before the first one (thread-safe)."""
        self._mark()

    def contains(self, oid: bytes) -> bool:
        """Is ``oid`` stored (or being stored)? Asks the index row by row until that gets
        frequent, then loads every id once: a no-change snapshot writes one or two objects and
        should not load 100,000 ids to do it. A store of a few thousand objects (a first
        snapshot's, which asks about every file) loads its ids at once: that costs less than
        a handful of lookups."""
        if self._known is None:
            if self._lookups == 0 and not self.store.catalog.holds_more_objects_than(
                    _LOAD_AT_ONCE):
                return oid in self.known
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

    def put(self, data: bytes, compress: bool = True) -> bytes:
        """Hash, compress (unless ``compress`` is false: stored raw) and store a small object;
        returns its id."""
        oid = self.store.digest(data)
        if not self.contains(oid):
            codec, stored = encode_small(data) if compress else (RAW, data)
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
        if len(self._buffer) >= WRITE_BUFFER:
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

    def _flush(self, pack: PackInProgress) -> None:
        try:
            with memoryview(self._buffer) as view:
                done = 0
                while done < len(view):
                    done += os.write(pack.fd, view[done:])
        except OSError as exc:
            raise full_disk(exc, pack.path) from exc
        finally:
            self._buffer.clear()

    def _open_pack(self) -> PackInProgress:
        if self._pack is None:
            if make_dir(self.store._packs):
                self._new_dirs.add(self.store._packs)
            self._mark()
            name = "pack-" + os.urandom(8).hex() + ".pack"
            path = os.path.join(self.store._packs, name)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
                os.write(fd, PACK_MAGIC)
            except OSError as exc:
                raise full_disk(exc, path) from exc
            self._pack = PackInProgress(name, path, fd, len(PACK_MAGIC))
        return self._pack

    def _finish_pack(self) -> None:
        pack, self._pack = self._pack, None
        if pack is None:
            return
        try:
            self._flush(pack)
            os.fsync(pack.fd)
        except OSError as exc:
            raise full_disk(exc, pack.path) from exc
        finally:
            os.close(pack.fd)
        self._done_packs.append(pack)

    def ingest_large(self, fd: int, *, clone: bool = False) -> tuple[bytes, str, int, int, int]:
        """Copy an open file into a temp loose object while hashing it (thread-safe).

        Returns (oid, temp path, raw size, stored length, codec). The bytes stored are exactly
        the bytes hashed, so the object always matches its id even if the source changes
        underneath; the caller decides whether the source stayed stable.

        ``clone``: where the store can, clone the file instead and name it by its blocks
        (codec ``CLONE``, nothing read; see :mod:`ctrlz.state.clones`). Only a snapshot's scan
        asks for this: its caller records whatever id comes back; callers that check the id
        against a hash they know (a pre-image body) must not.
        """
        self._mark()
        if make_dir(self.store._loose):
            self._new_dirs.add(self.store._loose)
        tmp = os.path.join(self.store._loose, temp_name("large"))
        if clone and self.store.can_clone():
            got = self.store.ingest_clone(fd, tmp)
            if got is not None:
                return got
        hasher = self.store.new_hasher()
        first = os.read(fd, CHUNK)
        compress = len(first) >= 4096 and len(compressor().compress(first[:1 << 20])) < (
            min(len(first), 1 << 20) * 0.8)
        size = 0
        try:
            with open(tmp, "wb") as out:
                sink = (zstd().ZstdCompressor(level=1).stream_writer(out, closefd=False)
                        if compress else out)
                chunk = first
                while chunk:
                    hasher.update(chunk)
                    sink.write(chunk)
                    size += len(chunk)
                    chunk = os.read(fd, CHUNK)
                if compress:
                    sink.flush(zstd().FLUSH_FRAME)
                out.flush()
                os.fsync(out.fileno())
                stored = out.tell()
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise full_disk(exc, tmp) from exc
        return hasher.digest(), tmp, size, stored, (ZSTD if compress else RAW)

    def adopt_large(self, oid: bytes, tmp: str | os.PathLike[str], size: int, stored: int,
                    codec: int) -> None:
        """Move a temp loose object into place (main thread), or drop it if already known.
        (A clone's id was checked against a stored object of the same name when it was made:
        the two share their blocks, so dropping the new one loses nothing.)"""
        if self.contains(oid):
            os.unlink(tmp)
            return
        dest = self.store.loose_name(oid)
        parent = os.path.dirname(dest)
        if make_dir(parent):
            self._new_dirs.add(parent)
        os.replace(tmp, dest)
        self._loose_dirs.add(parent)
        self._loose_rows.append((oid, None, 0, stored, size, codec))
        self._remember(oid)
        if codec == CLONE:
            self._clones = True
        self.added_objects += 1
        self.added_bytes += size
        self.stored_bytes += stored

    def commit(self, catalog: Catalog) -> None:
        """Make everything durable, then index it. Call inside a catalog transaction."""
        self._finish_pack()
        try:
            if self._clones:  # one flush for every clone (and their directory entries)
                from .cow import syncfs

                syncfs(self.store._loose)
                self._clones = False
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
            raise full_disk(exc, self.store.root) from exc
        failpoints.hit("before-index-commit")
        for pack in self._done_packs:
            pack_id = catalog.add_pack(pack.name, pack.size)
            catalog.add_objects((o, pack_id, off, ln, sz, c) for o, _, off, ln, sz, c in pack.rows)
        catalog.add_objects(self._loose_rows)
        self._done_packs.clear()
        self._loose_rows.clear()
        self._loose_dirs.clear()
        if self._marked:  # its files are strays until the transaction commits
            self._marked = False
            catalog.on_end(lambda committed: self.store.writer_done(aborted=not committed))

    def abort(self) -> None:
        """Forget uncommitted work; its bytes stay as orphans until the next recovery."""
        if self._marked:
            self._marked = False
            self.store.writer_done(aborted=True)
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
