"""Cut objects: the half of the object store that keeps large objects' chunk tables.

A store whose workspace has a remote (:meth:`CutObjects.want_cuts`, set by ``remote add``,
``clone``, and every pull and push) cuts each large object of ``CHUNK_FROM`` bytes and up into
content-defined chunks as it stores it (:func:`write_cut`), compressing each chunk as a zstd
frame of its own, and records the cut table in the catalog with the object's row
(:mod:`ctrlz.state.chunking`). A push then reads the table, names the chunks the remote has,
and reads only the new ones, each decoded and checked against its id alone
(:meth:`CutObjects.cut_reader`).

A store without a remote does none of this: cutting and hashing each chunk costs about 0.5 s
per GB a snapshot stores, for nothing until a push. An object stored without a table is read
and cut whole when it is pushed.
"""

from __future__ import annotations

import os

from ...errors import CorruptObject
from ..chunking import CHUNK_FROM, Cut, Cutter, decode_table
from .packs import CHUNK, RAW, ZSTD, decompressor, zstd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import BinaryIO

    from ..db.catalog import Catalog
    from ..fsio.direct_io import ObjectFile
    from ..hashing import Hasher

_WANT = "cut_large"  # catalog meta key: "1" once the store's workspace has a remote


class CutReader:
    """The chunks of one cut object, read one at a time from its open loose file."""

    def __init__(self, oid: bytes, cuts: list[Cut], f: BinaryIO, codec: int,
                 digest: Callable[[bytes], bytes]) -> None:
        self.oid = oid
        self.cuts = cuts
        self._f = f
        self._codec = codec
        self._digest = digest

    def read(self, cut: Cut) -> bytes:
        """The raw bytes of one chunk, checked against its id (thread-safe: ``pread``)."""
        cid, raw, offset, stored = cut
        data = os.pread(self._f.fileno(), stored, offset)
        if self._codec == ZSTD:
            try:
                data = decompressor().decompress(data, max_output_size=raw)
            except zstd().ZstdError:
                data = b""
        if len(data) != raw or self._digest(data) != cid:
            raise CorruptObject(f"chunk {cid.hex()[:16]} of object {self.oid.hex()[:16]} "
                                "does not match its id; run `ctrlz verify`")
        return data

    def close(self) -> None:
        self._f.close()


class CutObjects:
    """Mixed into the object store; relies on its ``catalog``, ``digest`` and
    ``loose_name``."""

    catalog: Catalog
    digest: Callable[[bytes], bytes]

    def loose_name(self, oid: bytes) -> str:  # pragma: no cover - the store's
        raise NotImplementedError

    def cuts_wanted(self) -> bool:
        return self.catalog.get_meta(_WANT) == "1"

    def want_cuts(self) -> None:
        """From now on, large objects are stored cut (the workspace has a remote)."""
        if not self.cuts_wanted():
            with self.catalog.transaction():
                self.catalog.set_meta(_WANT, "1")

    def cuts(self, oid: bytes) -> list[Cut] | None:
        """The chunks of ``oid``, or ``None`` when it has no cut table that fits it (it is
        then read and cut whole)."""
        table = self.catalog.cuts(oid)
        row = self.catalog.lookup(oid) if table is not None else None
        if table is None or row is None or row[1] is not None or row[5] not in (RAW, ZSTD):
            return None
        return decode_table(table, row[4], row[3], raw_stored=row[5] == RAW)

    def cut_reader(self, oid: bytes, cuts: list[Cut]) -> CutReader:
        """A reader of the chunks :meth:`cuts` gave; the caller closes it."""
        row = self.catalog.lookup(oid)
        try:
            if row is None:
                raise FileNotFoundError
            f = open(self.loose_name(oid), "rb")  # noqa: SIM115 - the reader closes it
        except FileNotFoundError:
            raise CorruptObject(f"loose object {oid.hex()[:16]} is missing; "
                                "run `ctrlz verify`") from None
        return CutReader(oid, cuts, f, row[5], self.digest)


def write_cut(fd: int, out: ObjectFile, first: bytes, hasher: Hasher, compress: bool,
              digest: Callable[[bytes], bytes]) -> tuple[int, list[tuple[bytes, int, int]]]:
    """Copy the rest of ``fd`` (``first`` already read) into ``out`` chunk by chunk, each a
    zstd frame of its own when ``compress``; hash the whole into ``hasher`` as it goes.
    Returns (raw size, cut table entries: chunk id, raw length, stored length)."""
    cctx = zstd().ZstdCompressor(level=1) if compress else None
    cutter = Cutter()
    table: list[tuple[bytes, int, int]] = []
    size = 0

    def emit(pieces: list[memoryview]) -> None:
        for piece in pieces:
            frame = cctx.compress(piece) if cctx is not None else piece
            out.write(frame)
            table.append((digest(piece), len(piece), len(frame)))

    chunk = first
    while chunk:
        hasher.update(chunk)
        size += len(chunk)
        emit(cutter.feed(chunk))
        chunk = os.read(fd, CHUNK)
    emit(cutter.finish())
    return size, table


__all__ = ["CHUNK_FROM", "CutObjects", "CutReader", "write_cut"]
