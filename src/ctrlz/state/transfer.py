"""Moving stored objects between stores (archives, remotes) without re-encoding them.

An object travels as its *stored* bytes: the codec the source store chose (raw or zstd) and the
bytes as they sit in a pack or a loose file. Sending them as they are costs no compression
work; receiving them costs one decode and one hash, which is exactly the check every received
object must pass before it may enter a store: its decoded bytes must hash to its id.

:func:`stored_object` reads an object's stored form out of a store; :class:`ObjectSink` checks
and adds objects to an :class:`~ctrlz.state.objects.ObjectWriter`, so that nothing is visible
until the caller commits the writer inside its catalog transaction (and a crash before that
leaves only files that the next writer's recovery removes). Small objects go to the writer's
pack; large ones (``LOOSE_MIN`` and up) become loose files, as a snapshot would store them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

import zstandard

from ..errors import CorruptObject
from .atomic import fsync_dir, temp_name
from .objects import CHUNK, LOOSE_MIN, RAW, ZSTD, ObjectStore, ObjectWriter


def open_stored(store: ObjectStore, oid: bytes) -> tuple[int, int, int, Iterator[bytes]]:
    """(raw size, codec, stored length, chunks) of ``oid``'s stored bytes. The bytes are
    located (a pack read, or an open loose file) before this returns, and that is retried once
    with a fresh lookup: another process's gc may have moved the object in between, as
    :meth:`ObjectStore.read` allows for. A loose object is streamed, never loaded whole."""
    try:
        return _open_stored(store, oid)
    except CorruptObject:
        store.close()  # forget cached pack descriptors and names, then look again
        return _open_stored(store, oid)


def _open_stored(store: ObjectStore, oid: bytes) -> tuple[int, int, int, Iterator[bytes]]:
    row = store.catalog.lookup(oid)
    if row is None:
        raise CorruptObject(f"object {oid.hex()[:16]} is missing from the store; "
                            "run `ctrlz verify`")
    _, pack, offset, length, size, codec = row
    if pack is not None:
        data = store.read_stored(pack, offset, length)
        if len(data) != length:
            raise CorruptObject(f"object {oid.hex()[:16]} is truncated in its pack; "
                                "run `ctrlz verify`")
        return size, codec, length, iter((data,))
    try:
        f = open(store.loose_path(oid), "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise CorruptObject(f"loose object {oid.hex()[:16]} is missing; "
                            "run `ctrlz verify`") from None
    return size, codec, length, _file_chunks(f, length, oid)


def _file_chunks(f: BinaryIO, length: int, oid: bytes) -> Iterator[bytes]:
    with f:
        left = length
        while left > 0:
            chunk = f.read(min(CHUNK, left))
            if not chunk:
                raise CorruptObject(f"loose object {oid.hex()[:16]} is truncated; "
                                    "run `ctrlz verify`")
            left -= len(chunk)
            yield chunk


def stored_object(store: ObjectStore, oid: bytes) -> tuple[int, int, bytes]:
    """(raw size, codec, stored bytes) of ``oid``, whole."""
    size, codec, _length, chunks = open_stored(store, oid)
    return size, codec, b"".join(chunks)


def decode_stored(oid: bytes, size: int, codec: int, stored: bytes) -> bytes:
    """The raw bytes of a stored object, checked against its size (not its id)."""
    if codec == RAW:
        data = stored
    elif codec == ZSTD:
        try:
            # a streaming frame (large objects) has no content size: decode it as a stream
            data = zstandard.ZstdDecompressor().decompressobj().decompress(stored)
        except zstandard.ZstdError as exc:
            raise CorruptObject(f"object {oid.hex()[:16]} cannot be decompressed: {exc}") \
                from exc
    else:
        raise CorruptObject(f"object {oid.hex()[:16]} has unknown codec {codec}")
    if len(data) != size:
        raise CorruptObject(f"object {oid.hex()[:16]} has the wrong length")
    return data


class ObjectSink:
    """Checks received objects and stages them in ``writer`` (visible only at its commit)."""

    def __init__(self, store: ObjectStore, writer: ObjectWriter) -> None:
        self.store = store
        self.writer = writer
        self.added = 0
        self.bytes = 0

    def has(self, oid: bytes) -> bool:
        return self.writer.contains(oid)

    def add(self, oid: bytes, size: int, codec: int, stored: bytes) -> bytes:
        """Check and stage one object; returns its raw bytes (trees are decoded from them).
        Raises :class:`CorruptObject` when the bytes do not hash to ``oid``."""
        data = decode_stored(oid, size, codec, stored)
        if self.store.digest(data) != oid:
            raise CorruptObject(f"object {oid.hex()[:16]} does not match its id")
        if self.writer.contains(oid):
            return data
        if size >= LOOSE_MIN:
            self._add_loose(oid, size, codec, stored)
        else:
            self.writer.put_encoded(oid, size, codec, stored)
        self.added += 1
        self.bytes += size
        return data

    def add_stream(self, oid: bytes, size: int, codec: int, length: int,
                   chunks: Iterator[bytes]) -> None:
        """Check and stage a large object that arrives in pieces, without holding it whole."""
        tmp = self._temp_path()
        hasher = self.store.new_hasher()
        total = 0
        try:
            with open(tmp, "wb") as out:
                dec = zstandard.ZstdDecompressor().decompressobj() if codec == ZSTD else None
                got = 0
                for chunk in chunks:
                    out.write(chunk)
                    got += len(chunk)
                    raw = dec.decompress(chunk) if dec is not None else chunk
                    hasher.update(raw)
                    total += len(raw)
                if got != length:
                    raise CorruptObject(f"object {oid.hex()[:16]} is truncated")
                out.flush()
                os.fsync(out.fileno())
            if codec not in (RAW, ZSTD):
                raise CorruptObject(f"object {oid.hex()[:16]} has unknown codec {codec}")
            if total != size or hasher.digest() != oid:
                raise CorruptObject(f"object {oid.hex()[:16]} does not match its id")
        except BaseException:
            _unlink(tmp)
            raise
        self.writer.adopt_large(oid, tmp, size, length, codec)
        self.added += 1
        self.bytes += size

    def _add_loose(self, oid: bytes, size: int, codec: int, stored: bytes) -> None:
        tmp = self._temp_path()
        try:
            with open(tmp, "wb") as out:
                out.write(stored)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            _unlink(tmp)
            raise
        self.writer.adopt_large(oid, tmp, size, len(stored), codec)

    def _temp_path(self):  # type: ignore[no-untyped-def]
        """A temp file in ``objects/`` (what recovery sweeps after a crash)."""
        loose = self.store.loose_dir
        if not loose.is_dir():
            loose.mkdir(exist_ok=True)
            fsync_dir(loose.parent)  # the new directory's entry, before anything relies on it
        return loose / temp_name("large")


def _unlink(path: os.PathLike[str]) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
