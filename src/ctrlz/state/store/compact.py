"""Compressing the large objects a snapshot stored as they were (part of ``ctrlz gc``).

Why: a snapshot compresses a large object's reads only while the disk is slower than the
compressor (:meth:`ctrlz.state.fsio.direct_io.ObjectFile.keeping_up`). On a fast disk it stores
them in zstd frames of raw blocks, which hold the bytes as they are (``stored_frame``):
on the 2-core machine of docs/benchmarks.md that takes the first snapshot of 2 GB of large
files from about 3.5 s to 1.9 s, while the disk holds 1.8 GB instead of 1.34 GB. Nobody waits
for gc, so gc gives the space back: it compresses each such object again, whole.

Which objects: loose zstd objects with a frame that does not say its content size, which is
how a snapshot marks the frames it stored as they were (:func:`_stored_as_is`).
Objects cut into chunks for a remote are left alone (their chunk table names offsets in the
file), and so are clones (they share the workspace's blocks and cost nothing). Every frame
of the new file says its size, so an object is compressed once, even one whose bytes zstd
cannot shrink (its new file is then a few bytes longer, at most).

Crash safety: the compressed copy is written beside the objects under a temp name (a crash
leaves a stray the next writer removes: the "writing" marker says so), checked against the
object's id as it is read, and fsynced. The catalog's stored length is committed next, then
the copy is renamed over the old file. Both files decode to the same bytes, so a reader in
another process, which opens the file by name without the lock, reads one or the other
whole, and a crash between the commit and the rename leaves the old file, which the next gc
finds again (the length is only the store's accounting until then).
"""

from __future__ import annotations

import os

from ...errors import CorruptObject
from .. import failpoints, meter
from ..fsio.atomic import TEMP_PREFIX, fsync_dir, temp_name
from ..fsio.direct_io import ObjectFile
from ..fsio.pools import shared_pool
from .packs import CHUNK, LOOSE_MIN, ZSTD, decoded_chunks, full_disk, zstd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .objects import ObjectStore

_MAGIC = b"\x28\xb5\x2f\xfd"  # a zstd frame's first four bytes


class Compacted:
    """What :func:`compact` did: objects compressed, and stored bytes given back."""

    __slots__ = ("objects", "saved_bytes")

    def __init__(self) -> None:
        self.objects = 0
        self.saved_bytes = 0


def compact(store: ObjectStore) -> Compacted:
    """Compress again the large objects stored as they were. Call with the store's lock.

    One object per core at a time (zstd lets go of the GIL), each into a temp file; this
    thread records its length and renames it in place. Every one has finished, written or
    not, before this returns and the caller lets go of the lock."""
    done = Compacted()
    todo = candidates(store)
    if not todo:
        return done
    bar = meter.current()
    if bar is not None:
        bar.start("Compress", len(todo), sum(t[2] for t in todo), unit="objects")
    from concurrent.futures import FIRST_EXCEPTION, wait

    pool = shared_pool("compact", max(1, min(4, os.cpu_count() or 1)))
    store.writer_started()  # a crash leaves a temp file: the next writer looks for strays
    running = {pool.submit(_write_compressed, store, oid): (oid, stored, size)
               for oid, stored, size in todo}
    try:
        while running:
            finished, _ = wait(running, return_when=FIRST_EXCEPTION)
            for future in finished:
                oid, stored, size = running.pop(future)
                tmp, new = future.result()  # its error, if any, stops the rest
                _adopt(store, oid, tmp, new)
                done.objects += 1
                done.saved_bytes += stored - new
                if bar is not None:
                    bar.files += 1
                    bar.bytes += size
    except BaseException:
        for future in running:
            future.cancel()
        wait(running)  # none may still write once the lock is let go
        for future in running:
            if not future.cancelled() and future.exception() is None:
                _unlink(future.result()[0])
        # each temp file was removed where it failed: the marker goes too unless one stayed
        # (a failure, unlike a kill, leaves nothing for the next sweep; issue 41)
        store.writer_done(aborted=_temps_left(store))
        raise
    store.writer_done(aborted=False)
    return done


def _adopt(store: ObjectStore, oid: bytes, tmp: str, new: int) -> None:
    """The catalog's length first, then the rename: a crash between the two leaves the old
    file, which still has frames stored as they were, so the next gc does this again (and
    the temp file to the next writer's sweep)."""
    try:
        with store.catalog.transaction():
            store.catalog.set_stored_length(oid, new)
        failpoints.hit("compact-before-rename")
        dest = store.loose_name(oid)
        os.replace(tmp, dest)
    except BaseException:
        _unlink(tmp)
        raise
    try:
        fsync_dir(os.path.dirname(dest))
    except OSError as exc:
        raise full_disk(exc, dest) from exc


def _temps_left(store: ObjectStore) -> bool:
    """Is a temp file of this process's compaction still in ``objects/``?"""
    mine = f"{TEMP_PREFIX}{os.getpid()}-"
    try:
        return any(n.startswith(mine) and n.endswith("-compact")
                   for n in os.listdir(store.loose_dir))
    except OSError:
        return True


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def candidates(store: ObjectStore) -> list[tuple[bytes, int, int]]:
    """(id, stored length, size) of the objects :func:`compact` would compress again."""
    found = []
    for oid, pack, _offset, stored, size, codec in store.catalog.object_rows():
        if (pack is None and codec == ZSTD and size >= LOOSE_MIN
                and store.catalog.cuts(oid) is None
                and _stored_as_is(store.loose_name(oid))):
            found.append((oid, stored, size))
    return found


def _stored_as_is(path: str) -> bool:
    """Has this loose object a zstd frame a snapshot stored as it was: one that does not say
    its content size (:func:`~ctrlz.state.store.packs.stored_frame` writes it without; every
    other frame of a large object has it)? No, too, for a file this walk does not
    understand: it is left alone, and ``ctrlz verify`` judges it.

    The walk reads each frame's header and its blocks' 3-byte headers (RFC 8878, 3.1.1),
    not the blocks, up to the first such frame: about 8 small reads per MiB of content
    passed over."""
    z = zstd()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        end = os.fstat(fd).st_size
        offset = 0
        while offset < end:
            head = os.pread(fd, 18, offset)  # a frame header is at most 18 bytes
            if head[:4] != _MAGIC:
                return False
            try:
                params = z.get_frame_parameters(head)
                offset += z.frame_header_size(head)
            except z.ZstdError:
                return False
            if params.content_size == z.CONTENTSIZE_UNKNOWN:
                return True
            last = False
            while not last:
                block = os.pread(fd, 3, offset)
                if len(block) != 3:
                    return False
                word = int.from_bytes(block, "little")
                last, kind, length = bool(word & 1), (word >> 1) & 3, word >> 3
                if kind == 3:  # reserved: not a frame we wrote
                    return False
                offset += 3 + (1 if kind == 1 else length)  # an RLE block holds one byte
            offset += 4 if params.has_checksum else 0
        return False
    finally:
        os.close(fd)


def _write_compressed(store: ObjectStore, oid: bytes) -> tuple[str, int]:
    """On a pool thread: ``oid`` compressed into a temp file beside the objects, checked
    against its id and fsynced; (its path, its length). The file is opened by name, without
    the catalog, which is this thread's caller's."""
    tmp = os.path.join(store.loose_dir, temp_name("compact"))
    cctx = zstd().ZstdCompressor(level=1)
    hasher = store.new_hasher()
    try:
        with open(store.loose_name(oid), "rb") as src, ObjectFile(tmp) as out:
            pending = b""
            for piece in decoded_chunks(src, ZSTD):
                hasher.update(piece)
                pending += piece
                while len(pending) >= CHUNK:  # frames of CHUNK, as a snapshot writes them
                    out.write(cctx.compress(pending[:CHUNK]))
                    pending = pending[CHUNK:]
            if pending:
                out.write(cctx.compress(pending))
            if hasher.digest() != oid:
                raise CorruptObject(f"object {oid.hex()[:16]} does not match its id; "
                                    "run `ctrlz verify`")
            out.sync()
            return tmp, out.tell()
    except BaseException as exc:
        _unlink(tmp)
        if isinstance(exc, FileNotFoundError):
            raise CorruptObject(f"loose object {oid.hex()[:16]} is missing; "
                                "run `ctrlz verify`") from None
        if isinstance(exc, OSError):
            raise full_disk(exc, tmp) from exc
        raise


__all__ = ["Compacted", "candidates", "compact"]
