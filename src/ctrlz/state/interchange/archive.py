"""The archive format: snapshots and exactly the objects they need, as one verifiable stream.

An archive is written front to back and read front to back, so it can go through a pipe
(``ctrlz export latest -o - | ssh host ctrlz import -``)::

    b"CTZARCH1"
    record*      kind (1 byte) | payload length (u64, big-endian) | payload
        b"M"     the manifest: zstd-compressed JSON (format, hash algorithm, snapshot records,
                 the ``since`` snapshot of an incremental archive, object count)
        b"O"     one object: oid (32) | codec (u8) | raw size (u64) | stored bytes
        b"E"     the end: the digest (the archive's hash algorithm) of every byte before this
                 record, and nothing may follow it

The manifest comes first, the end record last. Objects travel in their stored form (zstd where
the source store found it pays, raw otherwise), so they are compressed without being compressed
twice. Every object is checked against its id as it is read, and the end digest covers the
manifest and the framing: a truncated archive has no end record, and a changed byte anywhere
fails either an object's id or the end digest. :class:`ArchiveReader` raises
:class:`~ctrlz.errors.RemoteError` naming what was wrong; the importer stages objects and
commits only after the end record checked out.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from typing import Any, BinaryIO

import zstandard

from ...errors import RemoteError
from ..hashing import hasher_factory

MAGIC = b"CTZARCH1"
FORMAT = "ctrlz-archive 1"
FRAME = struct.Struct(">cQ")
OBJECT = struct.Struct(">32sBQ")
MANIFEST, OBJ, END = b"M", b"O", b"E"
MAX_MANIFEST = 1 << 30


class ArchiveWriter:
    """Writes one archive to a binary stream; call :meth:`close` to write the end record."""

    def __init__(self, out: BinaryIO, algorithm: str, manifest: dict[str, Any]) -> None:
        self.out = out
        self.hasher = hasher_factory(algorithm)()
        self.objects = 0
        self.bytes = 0
        self._write(MAGIC)
        body = zstandard.ZstdCompressor(level=3).compress(
            json.dumps({"format": FORMAT, "algorithm": algorithm, **manifest}).encode())
        self._frame(MANIFEST, len(body))
        self._write(body)

    def _write(self, data: bytes) -> None:
        self.hasher.update(data)
        self.out.write(data)
        self.bytes += len(data)

    def _frame(self, kind: bytes, length: int) -> None:
        self._write(FRAME.pack(kind, length))

    def add(self, oid: bytes, size: int, codec: int, length: int,
            chunks: Iterator[bytes]) -> None:
        """One object, its stored bytes given in ``chunks`` (``length`` of them in all)."""
        self._frame(OBJ, OBJECT.size + length)
        self._write(OBJECT.pack(oid, codec, size))
        written = 0
        for chunk in chunks:
            self._write(chunk)
            written += len(chunk)
        if written != length:
            raise RemoteError(f"object {oid.hex()[:16]} changed size while it was exported; "
                              "run `ctrlz verify`")
        self.objects += 1

    def close(self) -> None:
        digest = self.hasher.digest()
        self.out.write(FRAME.pack(END, len(digest)) + digest)
        self.bytes += FRAME.size + len(digest)
        self.out.flush()


class ArchiveReader:
    """Reads an archive: :attr:`manifest` first, then :meth:`objects`, then the end check."""

    def __init__(self, src: BinaryIO, name: str) -> None:
        self.src = src
        self.name = name
        magic = self._read_exact(len(MAGIC), "its header")
        if magic != MAGIC:
            raise RemoteError(f"{name} is not a ctrlz archive")
        self._pending = magic
        kind, length = self._next_frame()
        if kind != MANIFEST or length > MAX_MANIFEST:
            raise RemoteError(f"{name} is damaged: the manifest is missing")
        body = self._read_exact(length, "the manifest")
        try:
            self.manifest: dict[str, Any] = json.loads(
                zstandard.ZstdDecompressor().decompressobj().decompress(body))
        except (zstandard.ZstdError, ValueError) as exc:
            raise RemoteError(f"{name} is damaged: the manifest cannot be read ({exc})") \
                from exc
        if self.manifest.get("format") != FORMAT:
            raise RemoteError(f"{name} has an unknown format "
                              f"{self.manifest.get('format')!r}; upgrade ctrlz")
        algorithm = self.manifest.get("algorithm")
        try:
            self.hasher = hasher_factory(str(algorithm))()
        except ValueError:
            raise RemoteError(f"{name} uses an unknown hash algorithm {algorithm!r}") from None
        self.hasher.update(self._pending)
        self.hasher.update(FRAME.pack(kind, length))
        self.hasher.update(body)
        self._pending = b""

    def _read_exact(self, n: int, what: str) -> bytes:
        parts = []
        left = n
        while left:
            chunk = self.src.read(min(left, 1 << 20))
            if not chunk:
                raise RemoteError(f"{self.name} is truncated (it ends inside {what}); "
                                  "nothing was imported")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def _next_frame(self) -> tuple[bytes, int]:
        kind, length = FRAME.unpack(self._read_exact(FRAME.size, "a record header"))
        return kind, length

    def objects(self) -> Iterator[tuple[bytes, int, int, int, Iterator[bytes]]]:
        """(oid, raw size, codec, stored length, chunks) per object; the chunks must be
        consumed before the next object. Ends after the end record checked out."""
        while True:
            head = self._read_exact(FRAME.size, "a record header")
            kind, length = FRAME.unpack(head)
            if kind == END:
                digest = self._read_exact(length, "the end record")
                if digest != self.hasher.digest():
                    raise RemoteError(f"{self.name} is damaged: its checksum does not match "
                                      "(changed or truncated); nothing was imported")
                if self.src.read(1):
                    raise RemoteError(f"{self.name} has data after its end record; "
                                      "nothing was imported")
                return
            self.hasher.update(head)
            if kind != OBJ or length < OBJECT.size:
                raise RemoteError(f"{self.name} is damaged: unknown record {kind!r}; "
                                  "nothing was imported")
            fixed = self._read_exact(OBJECT.size, "an object header")
            self.hasher.update(fixed)
            oid, codec, size = OBJECT.unpack(fixed)
            yield oid, size, codec, length - OBJECT.size, self._chunks(length - OBJECT.size)

    def _chunks(self, length: int) -> Iterator[bytes]:
        left = length
        while left:
            chunk = self._read_exact(min(left, 4 << 20), "an object")
            self.hasher.update(chunk)
            left -= len(chunk)
            yield chunk
