"""Where scanned content goes: into the store (a snapshot), or only through the hash (a dry
scan, which diffs the working tree without storing anything).

The scanner hands every new file, link target and tree to a sink and gets its object id back;
it never knows whether bytes were kept. ``read_file`` runs on the reader's worker threads for
large files (hashing and compressing release the GIL); ``accept`` and ``put`` run on the main
thread, the only one that appends to the pack.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..store.objects import LOOSE_MIN, ObjectWriter, encode_small

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: the writer's lane for trees and link targets: groups of their own (see ObjectWriter.put_small)
TREES_LANE = 1
#: files below this are small to the reader (:mod:`.reader`): read by the walking thread, or
#: in batches on the small files' threads, and their compressing left to the writer (which
#: groups them); larger ones are read on the reader's pool and compressed where they are read
INLINE_MAX = 1 << 20


class Sink:
    """Where scanned content goes: into the store, or only through the hash (a dry scan).
    A plain base class rather than a ``typing.Protocol``: every snapshot loads this module,
    and ``typing`` would cost each one milliseconds."""

    def put(self, data: bytes) -> bytes:
        raise NotImplementedError

    def read_file(self, fd: int, size: int) -> tuple[bytes, int | None, Any]:
        """(id, bytes read, payload) of the open file, whose stat said ``size``. The count is
        the length of what the id names (``None`` when nothing was read: a clone whose blocks
        name it), for the reader to check against the stat after the read."""
        raise NotImplementedError

    def clones(self) -> bool:
        """Whether a large file costs this sink a clone rather than a read (for now: a store
        on a filesystem that clones, which no file has refused yet)."""
        return False

    def accept(self, oid: bytes, payload: Any) -> None:
        raise NotImplementedError

    def discard(self, payload: Any) -> None:
        raise NotImplementedError


class StoreSink(Sink):
    """Writes new content into the store through an :class:`ObjectWriter`."""

    def __init__(self, writer: ObjectWriter) -> None:
        self.writer = writer
        self.digest = writer.store.digest
        self.blobs: dict[bytes, bytes] = {}  # trees and link targets put by this scan

    def put(self, data: bytes) -> bytes:
        """Trees and link targets. Asked about first, so that a snapshot that changed
        nothing compresses nothing (and never loads zstandard); one index query either way,
        as ``put_small`` does not ask again. Grouped apart from the files: a restore reads
        trees first, and should not decode files to get at them."""
        oid = self.digest(data)
        writer = self.writer
        if not writer.contains(oid):
            writer.put_small(oid, data, TREES_LANE)
        self.blobs[oid] = data
        return oid

    def clones(self) -> bool:
        return self.writer.clones_cheaply()

    def read_file(self, fd: int, size: int) -> tuple[bytes, int | None, Any]:
        if size >= LOOSE_MIN:
            oid, tmp, raw, stored, codec = self.writer.ingest_large(fd, clone=True)
            return oid, raw, ("large", tmp, raw, stored, codec)
        data = read_all(fd, size)
        oid = self.digest(data)
        if self.writer.contains(oid):
            return oid, len(data), None
        if size < INLINE_MAX:  # the writer groups and compresses it, on its helper thread
            return oid, len(data), ("small", data)
        # a large file's pool thread: right here
        return oid, len(data), ("encoded", len(data), *encode_small(data))

    def accept(self, oid: bytes, payload: Any) -> None:
        if payload is None:
            return
        if payload[0] == "small":  # read_file asked the index already
            self.writer.put_small(oid, payload[1])
        elif payload[0] == "encoded":
            self.writer.put_encoded(oid, payload[1], payload[2], payload[3], checked=True)
        else:
            self.writer.adopt_large(oid, *payload[1:])

    def discard(self, payload: Any) -> None:
        if payload is not None and payload[0] == "large":
            try:
                os.unlink(payload[1])
            except OSError:
                pass


class HashSink(Sink):
    """Computes ids without storing anything: diff against the working tree.

    ``known_clone(fd, size)``: the id of a stored clone the file shares every block with, so
    a large file a snapshot stored as a clone gets the same id here without being read."""

    def __init__(self, digest: Callable[[bytes], bytes], new_hasher: Callable[[], Any],
                 known_clone: Callable[[int, int], bytes | None] | None = None) -> None:
        self.digest = digest
        self.new_hasher = new_hasher
        self.known_clone = known_clone

    def put(self, data: bytes) -> bytes:
        return self.digest(data)

    def read_file(self, fd: int, size: int) -> tuple[bytes, int | None, Any]:
        if size < LOOSE_MIN:
            data = read_all(fd, size)
            return self.digest(data), len(data), None
        if self.known_clone is not None and (oid := self.known_clone(fd, size)) is not None:
            return oid, None, None
        h = self.new_hasher()
        got = 0
        while chunk := os.read(fd, 4 << 20):
            h.update(chunk)
            got += len(chunk)
        return h.digest(), got, None

    def accept(self, oid: bytes, payload: Any) -> None:
        pass

    def discard(self, payload: Any) -> None:
        pass


def read_all(fd: int, size: int) -> bytes:
    """The file's ``size`` bytes from ``fd``, and one more if it has grown since its stat: the
    reader then sees a length that is not the stat's and reads it again, so no more is ever
    needed.

    Asks for exactly that: a buffer of 1 MiB for every small file (as this once did, to read
    to the end) cost a first snapshot of 100,000 small files a second or more in the
    allocator, for the same bytes."""
    want = size + 1
    chunk = os.read(fd, want)
    if len(chunk) == size or not chunk:  # the usual case: all of it, or an empty file
        return chunk
    chunks, got = [chunk], len(chunk)
    while got < want:  # a short read (it shrank, or a signal), or it grew
        chunk = os.read(fd, want - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
