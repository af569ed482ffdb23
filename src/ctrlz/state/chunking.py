"""Content-defined chunks of large objects: where they are cut, and the table that records it.

A 64-byte edit of a 100 MB file makes a new 100 MB object. A remote keeps big blobs as chunks
(:mod:`ctrlz.state.remote.chunks`) so that the edit costs one or two new chunks there; this
module is the cutting both sides share. Boundaries come from FastCDC (``fastcdc``): a cut
depends only on the bytes from the chunk's start to at most ``CHUNK_MAX`` past it, so an edit
moves the boundaries near it only, and a file cut as a stream (:class:`Cutter`, while a
snapshot reads it) gets exactly the chunks :func:`cut` finds in it whole.

Sizes: at least 512 KiB, about 1 MiB, at most 4 MiB per chunk, and only objects of
``CHUNK_FROM`` (8 MiB) and up are cut, so a chunk can never itself be a cut object.

A store whose workspace has a remote cuts large objects as a snapshot stores them
(:meth:`~ctrlz.state.store.objects.ObjectWriter.ingest_large`) and records a *cut table* beside the
object's index row: per chunk, its id, raw length and stored length. A compressed object is
then one zstd frame per chunk, so the stored bytes of any one chunk can be read and decoded
alone. A push reads the table instead of the object: the chunks the remote has are named, not
read, and only new ones are read from disk
(:meth:`~ctrlz.state.store.objects.ObjectStore.read_cut`).
The table is an accelerator, never the only record of anything: an object without one (an
older store, a store with no remote, a clone) is read and cut whole, as before.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

#: objects this big and up are cut
CHUNK_FROM = 8 << 20
CHUNK_MIN, CHUNK_AVG, CHUNK_MAX = 512 << 10, 1 << 20, 4 << 20

#: one cut-table entry: chunk id, raw length, stored length
_CUT = struct.Struct(">32sII")

Cut = tuple[bytes, int, int, int]  # chunk id, raw length, stored offset, stored length


def cut(data: bytes | memoryview, sizes: tuple[int, int, int] | None = None
        ) -> Iterator[tuple[int, int]]:
    """(offset, length) of each chunk of ``data``, in order (``sizes``: min, average and max,
    for tests only)."""
    from fastcdc import fastcdc

    low, avg, high = sizes or (CHUNK_MIN, CHUNK_AVG, CHUNK_MAX)
    for c in fastcdc(data, min_size=low, avg_size=avg, max_size=high):
        yield c.offset, c.length


class Cutter:
    """Cuts a stream fed in pieces into the same chunks :func:`cut` finds in it whole.

    Every chunk of a piece but the last is final: its cut was found within the bytes fed. The
    last one may have been cut short by the end of the piece, so it is carried into the next
    feed and cut again (at most ``CHUNK_MAX`` bytes carried)."""

    def __init__(self, sizes: tuple[int, int, int] | None = None) -> None:
        self._carry = b""
        self._sizes = sizes

    def feed(self, data: bytes) -> list[memoryview]:
        """The chunks completed by ``data`` (views valid until the next call)."""
        buf = self._carry + data if self._carry else data
        view = memoryview(buf)
        spans = list(cut(view, self._sizes))
        last = spans[-1][0] if spans else 0
        self._carry = bytes(view[last:])
        return [view[off:off + n] for off, n in spans[:-1]]

    def finish(self) -> list[memoryview]:
        """The chunks left once the stream has ended."""
        view = memoryview(self._carry)
        self._carry = b""
        return [view[off:off + n] for off, n in cut(view, self._sizes)] if len(view) else []


def encode_table(entries: list[tuple[bytes, int, int]]) -> bytes:
    """A cut table from (chunk id, raw length, stored length) in order."""
    return b"".join(_CUT.pack(cid, raw, stored) for cid, raw, stored in entries)


def decode_table(table: bytes, size: int, length: int, raw_stored: bool) -> list[Cut] | None:
    """The chunks of an object of ``size`` raw bytes stored in ``length`` bytes, with where
    each one's stored bytes sit; ``None`` if the table does not fit the object (it is then
    read and cut whole). ``raw_stored``: stored uncompressed, so each stored length must equal
    its raw length."""
    if len(table) % _CUT.size:
        return None
    out: list[Cut] = []
    raw_total = offset = 0
    for cid, raw, stored in _CUT.iter_unpack(table):
        if not 0 < raw <= CHUNK_MAX or stored <= 0 or (raw_stored and stored != raw):
            return None
        out.append((cid, raw, offset, stored))
        raw_total += raw
        offset += stored
    if raw_total != size or offset != length:
        return None
    return out
