"""Writing objects: :class:`ObjectWriter`, the one way bytes enter a store.

Small objects are appended to a pack, large ones copied into temp loose files while hashed (cut
into chunks first where the store wants that: :mod:`ctrlz.state.store.cut_objects`). Nothing is
visible until :meth:`ObjectWriter.commit`: pack bytes and loose files are fsynced, then their
index rows are written in the caller's catalog transaction. A crash before that leaves files
the next writer's sweep removes (:mod:`ctrlz.state.store.strays`), never an index row without its
bytes.

A writer that fails, rather than being killed, removes what it wrote before the error leaves
it (:meth:`ObjectWriter.abort`, or its transaction rolling back): its partial pack is most
often what filled the disk, and a store whose disk stays full until the next snapshot or
``ctrlz gc`` is one nothing can be read out of. Only a killed writer's files wait for recovery.
"""

from __future__ import annotations

import _thread
import os

from .. import failpoints
from ..chunking import CHUNK_FROM, encode_table
from ..db.catalog import Catalog, ObjectRow
from ..fsio.atomic import fsync_dir, temp_name
from ..fsio.direct_io import ObjectFile
from . import behind
from .cut_objects import write_cut
from .groups import GROUP, MEMBER_MAX, shares
from .packs import (
    CHUNK,
    CLONE,
    PACK_MAGIC,
    PACK_MAX,
    RAW,
    RECORD,
    RECORD_MAGIC,
    WRITE_BUFFER,
    ZSTD,
    PackInProgress,
    compressor,
    encode_small,
    full_disk,
    make_dir,
    stored_frame,
    zstd,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .clones import CloneObjects
    from .cut_objects import CutObjects
    from .strays import StrayMarker

    class ObjectStore(CloneObjects, CutObjects, StrayMarker):
        """What a writer uses of :class:`ctrlz.state.store.objects.ObjectStore`, named here for
        type checkers rather than imported: the store imports its writer, and an import
        back would make a circle."""

        _packs: str


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
        self._files: list[str] = []  # packs and loose files made here, named by no committed row
        self._loose_dirs: set[str] = set()
        self._new_dirs: set[str] = set()  # directories this writer created: their parents
        self._clones = False  # adopted a clone: the store's filesystem is flushed at commit
        self._cut: bool | None = None  # cut large objects (the store's workspace has a remote)
        self._tables: dict[str, bytes] = {}  # temp loose object -> its cut table
        self._cut_rows: list[tuple[bytes, bytes]] = []
        self.added_objects = 0
        self.added_bytes = 0  # raw bytes of new objects
        self.stored_bytes = 0  # bytes they take in the store
        self._marked = False  # this writer has told the store it may leave strays
        self._behind: behind.CompressBehind | None = None  # groups small objects

    def _mark(self) -> None:
        """Before this writer's first file: the marker a crash leaves for the next sweep."""
        with self._known_lock:  # large files arrive from the reader threads
            if self._marked:
                return
            self.store.writer_started()
            self._marked = True

    def _loose_ready(self) -> None:
        """``objects/`` exists, made by this writer if by anyone (its commit then makes the new
        directory durable), and the strays marker is down (thread-safe)."""
        self._mark()
        if make_dir(self.store._loose):
            self._new_dirs.add(self.store._loose)

    def clones_cheaply(self) -> bool:
        """:meth:`ObjectStore.clones_cheaply`, asked by a writer about to store a large file:
        ``objects/`` is made first, as :meth:`ingest_large` makes it, because the store's
        clone probe runs there and never makes it (see :func:`ctrlz.state.fsio.cow.probe`)."""
        self._loose_ready()
        return self.store.clones_cheaply()

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
            if compress and len(data) <= MEMBER_MAX:
                self.put_small(oid, data)
            else:
                codec, stored = encode_small(data) if compress else (RAW, data)
                self.put_encoded(oid, len(data), codec, stored, checked=True)
        return oid

    def put_encoded(self, oid: bytes, size: int, codec: int, stored: bytes, *,
                    checked: bool = False) -> None:
        """Append an already hashed and encoded object (encoding happens in worker threads).

        ``checked``: the caller asked :meth:`contains` already, under this writer's lock, so
        only objects added since (by this writer) need ruling out, without a second index
        query."""
        if checked:
            if self._added(oid):
                return
        elif self.contains(oid):
            return
        self._count(oid, size)
        self._append(oid, size, codec, stored)

    def put_small(self, oid: bytes, data: bytes, lane: int = 0) -> None:
        """Store a hashed small object the caller ruled out with :meth:`contains` (as
        ``put_encoded(checked=True)``). Objects up to ``MEMBER_MAX`` are grouped with the
        ones given next and compressed together (:mod:`ctrlz.state.store.groups`), on helper
        threads once a snapshot stores many (:mod:`ctrlz.state.store.behind`); larger ones are
        compressed alone, here. Appended in the order given, lane by lane: ``lane``'s objects
        are grouped together (trees apart from files, see :class:`behind.CompressBehind`)."""
        if self._added(oid):
            return
        self._count(oid, len(data))
        if len(data) > MEMBER_MAX:
            self._append(oid, len(data), *encode_small(data))
            return
        if self._behind is None:
            self._behind = behind.CompressBehind(self._append, self._append_group)
        self._behind.add(oid, data, lane)

    def _added(self, oid: bytes) -> bool:
        """Added by this writer (or known to be stored, once the ids are loaded)?"""
        return oid in self._new or (self._known is not None and oid in self._known)

    def _count(self, oid: bytes, size: int) -> None:
        self._remember(oid)
        self.added_objects += 1
        self.added_bytes += size

    def _append(self, oid: bytes, size: int, codec: int, stored: bytes) -> None:
        """Write one record to the open pack (the caller's thread only)."""
        pack = self._open_pack()
        header = RECORD.pack(RECORD_MAGIC, codec, oid, size, len(stored))
        self._buffer += header
        self._buffer += stored
        if len(self._buffer) >= WRITE_BUFFER:
            self._flush(pack)
        offset = pack.size + len(header)
        pack.add_row(oid, offset, len(stored), size, codec)
        pack.size = offset + len(stored)
        self.stored_bytes += len(stored) + len(header)
        failpoints.hit("pack-append")
        if pack.size >= PACK_MAX:
            self._finish_pack()

    def _append_group(self, oids: list[bytes], sizes: list[int], record: bytes) -> None:
        """Write one group record to the open pack (the caller's thread only): each member's
        row points at the group, with its share of the group's bytes as its length."""
        pack = self._open_pack()
        self._buffer += record
        if len(self._buffer) >= WRITE_BUFFER:
            self._flush(pack)
        offset = pack.size
        for oid, size, share in zip(oids, sizes, shares(len(record), sizes), strict=True):
            pack.add_row(oid, offset, share, size, GROUP)
        pack.size = offset + len(record)
        self.stored_bytes += len(record)
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
            except OSError as exc:
                raise full_disk(exc, path) from exc
            self._files.append(path)
            try:
                os.write(fd, PACK_MAGIC)
            except OSError as exc:
                os.close(fd)
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

    def ingest_large(self, fd: int, *, clone: bool = False,
                     paced: bool = True) -> tuple[bytes, str, int, int, int]:
        """Copy an open file into a temp loose object while hashing it (thread-safe).

        Returns (oid, temp path, raw size, stored length, codec). The bytes stored are exactly
        the bytes hashed, so the object always matches its id even if the source changes
        underneath; the caller decides whether the source stayed stable.

        ``clone``: where the store can, clone the file instead and name it by its blocks
        (codec ``CLONE``, nothing read; see :mod:`ctrlz.state.store.clones`). Only a snapshot's scan
        asks for this: its caller records whatever id comes back; callers that check the id
        against a hash they know (a pre-image body) must not.

        ``paced``: compress a read only while the disk is behind (see ``stored_frame``); a
        store no ``ctrlz gc`` compresses later (the tool-call store) asks for every read
        compressed.
        """
        self._loose_ready()
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
        table = None
        try:
            with ObjectFile(tmp) as out:  # past the page cache where it can (see there)
                if self._cutting() and os.fstat(fd).st_size >= CHUNK_FROM:
                    size, table = write_cut(fd, out, first, hasher, compress,
                                            self.store.digest)
                else:
                    # one frame per read, not one streamed frame: zstd's one-shot compress
                    # takes a third less time on the same bytes (no copy into the stream's
                    # window) at the same ratio, and every reader reads across frames.
                    # A read the disk is waiting for goes in a frame that holds it as it is
                    # (packs.stored_frame); gc compresses it later
                    cctx = zstd().ZstdCompressor(level=1) if compress else None
                    chunk = first
                    while chunk:
                        hasher.update(chunk)
                        if cctx is None:
                            out.write(chunk)
                        elif paced and out.keeping_up():
                            out.write(stored_frame(chunk))
                        else:
                            out.write(cctx.compress(chunk))
                        if cctx is not None:
                            failpoints.hit("large-read-decided")
                        size += len(chunk)
                        chunk = os.read(fd, CHUNK)
                out.sync()
                stored = out.tell()
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise full_disk(exc, tmp) from exc
        if table is not None and size >= CHUNK_FROM:  # it may have shrunk while read
            self._tables[tmp] = encode_table(table)
        return hasher.digest(), tmp, size, stored, (ZSTD if compress else RAW)

    def _cutting(self) -> bool:
        """Does this writer cut large objects? Asked once, on the first large one."""
        if self._cut is None:
            with self._known_lock:
                if self._cut is None:
                    self._cut = self.store.cuts_wanted()
        return self._cut

    def adopt_large(self, oid: bytes, tmp: str | os.PathLike[str], size: int, stored: int,
                    codec: int) -> None:
        """Move a temp loose object into place (main thread), or drop it if already known.
        (A clone's id was checked against a stored object of the same name when it was made:
        the two share their blocks, so dropping the new one loses nothing.)"""
        table = self._tables.pop(os.fspath(tmp), None)
        if self.contains(oid):
            os.unlink(tmp)
            return
        dest = self.store.loose_name(oid)
        parent = os.path.dirname(dest)
        if make_dir(parent):
            self._new_dirs.add(parent)
        os.replace(tmp, dest)
        self._files.append(dest)
        self._loose_dirs.add(parent)
        self._loose_rows.append((oid, None, 0, stored, size, codec))
        if table is not None:
            self._cut_rows.append((oid, table))
        self._remember(oid)
        if codec == CLONE:
            self._clones = True
        self.added_objects += 1
        self.added_bytes += size
        self.stored_bytes += stored

    def commit(self, catalog: Catalog) -> None:
        """Make everything durable, then index it. Call inside a catalog transaction. A
        commit that fails aborts the writer (:meth:`abort`): no descriptor of a pack that the
        next recovery deletes stays open, and the store stops counting it as a live writer."""
        try:
            self._commit(catalog)
        except BaseException:
            self.abort()
            raise

    def _commit(self, catalog: Catalog) -> None:
        if self._behind is not None:
            self._behind.finish()
            self._behind = None
        self._finish_pack()
        try:
            if self._clones:  # one flush for every clone (and their directory entries)
                from ..fsio.cow import syncfs

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
            catalog.add_objects(pack.rows(pack_id))
        catalog.add_objects(self._loose_rows)
        catalog.add_cuts(self._cut_rows)
        self._done_packs.clear()
        self._loose_rows.clear()
        self._cut_rows.clear()
        self._tables.clear()
        self._loose_dirs.clear()
        # its files are strays until the transaction commits; if it rolls back (a full disk
        # as SQLite writes the WAL), they are removed as an aborted writer's are
        files, self._files = self._files, []
        marked, self._marked = self._marked, False
        if marked or files:
            catalog.on_end(lambda committed: self._settle(committed, files, marked))

    def _settle(self, committed: bool, files: list[str], marked: bool) -> None:
        """The end of the transaction this writer committed into: rolled back, its files go."""
        clean = committed or _remove(files)
        if marked:
            self.store.writer_done(aborted=not clean)

    def abort(self) -> bool:
        """Forget uncommitted work and remove the files it wrote (the open pack, finished
        packs, adopted loose objects). Returns whether all of them are gone: if one could not
        be removed, the store's "writing" marker stays and the next recovery sweeps it."""
        if self._pack is not None:
            os.close(self._pack.fd)  # first: a descriptor keeps a deleted pack's blocks
            self._pack = None
        files, self._files = self._files, []
        clean = _remove(files)
        if self._marked:
            self._marked = False
            self.store.writer_done(aborted=not clean)
        self._behind = None  # its helpers finish batches no one appends
        self._buffer.clear()
        self._tables.clear()
        self._cut_rows.clear()
        self._done_packs.clear()
        self._loose_rows.clear()
        self._loose_dirs.clear()
        # a directory made here may be used by the next writer, which will not know it is new
        for parent in {os.path.dirname(d) for d in self._new_dirs}:
            try:
                fsync_dir(parent)
            except OSError:
                pass
        self._new_dirs.clear()
        return clean


def _remove(files: list[str]) -> bool:
    """Unlink files a writer made; whether none is left (one already gone counts as gone)."""
    clean = True
    for path in files:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            clean = False
    return clean
