"""Large objects in content-defined chunks on a remote.

A 64-byte edit of a 100 MB file makes a new 100 MB object; uploading it whole is what kept an
incremental push of big files far slower than restic's. So on a remote (never in a local store)
a blob of at least ``CHUNK_FROM`` bytes is a *chunk list* under its own id: the remote index
entry has codec ``CHUNKED`` and its blob holds the ids and lengths of the blob's chunks, in
order. The chunks are plain content-addressed objects in data packs. Chunk boundaries come from
FastCDC (:mod:`ctrlz.state.chunking`, shared with the local store's cut tables), so an edit
moves the boundaries near it only: the rest of the chunks keep their ids, and a push uploads
the one or two that changed.

Sizes: at least 512 KiB, about 1 MiB, at most 4 MiB per chunk, while only blobs of 8 MiB and up
are chunked, so a chunk can never itself be a chunked blob (the index names each id once).

A chunk list is ``b"CTZCHK01"``, the blob's raw size (8 bytes, big-endian), the chunk count (4
bytes), then per chunk its id (32 bytes) and length (4 bytes). :func:`decode_list` checks that
the lengths add up to the size the index gives and that none is out of bounds; the ids are
checked when the chunks arrive, and the reassembled blob against its own id.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from ...errors import CorruptObject
from ..chunking import CHUNK_FROM, CHUNK_MAX, cut

__all__ = ["CHUNKED", "CHUNK_FROM", "chunked", "cut", "decode_list", "encode_list"]

#: the remote index codec of a chunk list (local stores never hold one)
CHUNKED = 16

_MAGIC = b"CTZCHK01"
_HEAD = struct.Struct(">8sQI")
_ENTRY = struct.Struct(">32sI")


def chunked(data: bytes, digest: Callable[[bytes | memoryview], bytes]
            ) -> list[tuple[bytes, int, int]]:
    """(chunk id, offset, length) of each chunk of ``data``."""
    view = memoryview(data)
    return [(digest(view[off:off + n]), off, n) for off, n in cut(view)]


def encode_list(size: int, chunks: list[tuple[bytes, int]]) -> bytes:
    """The chunk list of a blob of ``size`` bytes made of ``chunks`` (id, length)."""
    return _HEAD.pack(_MAGIC, size, len(chunks)) + b"".join(
        _ENTRY.pack(cid, n) for cid, n in chunks)


def decode_list(oid: bytes, size: int, data: bytes) -> list[tuple[bytes, int]]:
    """(id, length) of each chunk of blob ``oid`` (``size`` bytes), or
    :class:`CorruptObject`."""
    try:
        magic, total, count = _HEAD.unpack_from(data)
        if magic != _MAGIC or total != size or len(data) != _HEAD.size + count * _ENTRY.size:
            raise ValueError("bad header or length")
        chunks = list(_ENTRY.iter_unpack(memoryview(data)[_HEAD.size:]))
    except (struct.error, ValueError) as exc:
        raise CorruptObject(f"the chunk list of object {oid.hex()[:16]} is damaged "
                            f"({exc})") from None
    if sum(n for _, n in chunks) != size or any(n <= 0 or n > CHUNK_MAX for _, n in chunks):
        raise CorruptObject(f"the chunk list of object {oid.hex()[:16]} does not add up to "
                            "its size")
    return chunks
