"""Moving stored objects between stores (archives, remotes) without re-encoding them.

An object travels as its *stored* bytes: the codec the source store chose (raw or zstd) and the
bytes as they sit in a pack or a loose file. Sending them as they are costs no compression
work; receiving them costs one decode and one hash, which is exactly the check every received
object must pass before it may enter a store: its decoded bytes must hash to its id.

A copy-on-write clone (codec ``CLONE``) is named by its blocks, not by a hash of its bytes,
so its bytes alone cannot be checked against its id. It travels as its seal (the content hash,
computed now if the clone has none) followed by its raw bytes; the receiver checks the bytes
against the seal, keeps the object under the same id as a plain file with codec ``CLONE`` and
records the seal on it, so that every later read there is checked as it is here.

:func:`stored_object` reads an object's stored form out of a store; :class:`ObjectSink` checks
and adds objects to an :class:`~ctrlz.state.store.objects.ObjectWriter`, so that nothing is visible
until the caller commits the writer inside its catalog transaction (and a crash before that
leaves only files that the next writer's recovery removes). Small objects go to the writer's
pack; large ones (``LOOSE_MIN`` and up) become loose files, as a snapshot would store them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

import zstandard

from ...errors import CorruptObject
from ..fsio import cow
from ..fsio.atomic import fsync_dir, temp_name
from ..store.groups import GROUP
from ..store.objects import CHUNK, CLONE, LOOSE_MIN, RAW, ZSTD, ObjectStore, ObjectWriter
from ..store.packs import FrameDecoder, decode_frames, encode_small

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...types import Snapshot
    from ..db.catalog import ObjectRow
    from ..store.repository import Repository


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
    if codec == CLONE:  # sent as seal + raw bytes (see the module docstring)
        seal = store.content_id(oid)
        try:
            f = open(store.loose_path(oid), "rb")  # noqa: SIM115
        except FileNotFoundError:
            raise CorruptObject(f"loose object {oid.hex()[:16]} is missing; "
                                "run `ctrlz verify`") from None
        return size, CLONE, len(seal) + size, _prefixed(seal, _file_chunks(f, size, oid))
    if codec == GROUP:  # a member of a group travels alone, as before groups
        codec, stored = encode_small(read_checked(store, oid))
        return size, codec, len(stored), iter((stored,))
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


def read_checked(store: ObjectStore, oid: bytes) -> bytes:
    """:meth:`ObjectStore.read` for sending (a grouped object, which travels alone): a
    damaged object is reported as :func:`open_checked` reports one, as not sent."""
    try:
        return store.read(oid)
    except CorruptObject as exc:
        why = str(exc).removesuffix("; run `ctrlz verify`")
        raise CorruptObject(f"object {oid.hex()[:16]} in the local store is damaged ({why}), "
                            "so it was not sent; run `ctrlz verify`") from None


def members_checked(store: ObjectStore, rows: Iterable[ObjectRow]
                    ) -> Iterator[tuple[bytes, bytes]]:
    """:meth:`ObjectStore.read_members` for sending (a push's grouped objects, each group
    decoded once); a member its group did not give is read as :func:`read_checked` reads."""
    for oid, data in store.read_members(rows):
        yield oid, data if data is not None else read_checked(store, oid)


def open_checked(store: ObjectStore, oid: bytes) -> tuple[int, int, int, Iterator[bytes]]:
    """:func:`open_stored` for sending (a push, an export): the bytes are checked against
    ``oid`` before the last of them leaves, so a damaged local object (bit rot, a bad block)
    is never uploaded or exported as if it were good; the receiver would refuse it, and a
    remote would keep the damaged copy as the one every later push relies on.

    An object held in one piece (a packed one, a small loose one) is checked at once, and
    checked again after a fresh lookup if it fails, as :meth:`ObjectStore.read` does (gc may
    have moved it). A larger one is checked as it streams: its last chunk is held back until
    the whole object hashed to its id, so a stream that fails stops short of it. Raises
    :class:`CorruptObject` naming the object."""
    for attempt in (0, 1):
        size, codec, length, chunks = open_stored(store, oid)
        if length > CHUNK:
            return size, codec, length, _checked(store, oid, size, codec, chunks)
        stored = b"".join(chunks)
        try:
            for _ in _checked(store, oid, size, codec, iter((stored,))):
                pass
        except CorruptObject:
            if attempt:
                raise
            store.close()  # forget cached pack descriptors and names, then look again
            continue
        return size, codec, length, iter((stored,))
    raise AssertionError("unreachable")


def _checked(store: ObjectStore, oid: bytes, size: int, codec: int,
             chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks`` (stored bytes) as they are, hashed on the way; the last one is yielded
    only once the whole object matched ``oid`` (a clone: the seal it starts with)."""
    hasher = store.new_hasher()
    dec = FrameDecoder() if codec == ZSTD else None
    head = len(oid) if codec == CLONE else 0  # a clone is sent as seal + raw bytes
    seal = b""
    total = 0
    held: bytes | None = None
    try:
        for chunk in chunks:
            if held is not None:
                yield held
            held = body = chunk
            if len(seal) < head:
                take = head - len(seal)
                seal, body = seal + body[:take], body[take:]
            raw = dec.decompress(body) if dec is not None else body
            hasher.update(raw)
            total += len(raw)
    except zstandard.ZstdError:
        total = -1  # cannot be decompressed: damaged, as below
    if codec not in (RAW, ZSTD, CLONE) or total != size \
            or hasher.digest() != (seal if codec == CLONE else oid):
        raise CorruptObject(f"object {oid.hex()[:16]} in the local store is damaged (its "
                            "bytes do not match its id), so it was not sent; run "
                            "`ctrlz verify`")
    if held is not None:
        yield held


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


def _prefixed(first: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from chunks


def stored_object(store: ObjectStore, oid: bytes) -> tuple[int, int, bytes]:
    """(raw size, codec, stored bytes) of ``oid``, whole."""
    size, codec, _length, chunks = open_stored(store, oid)
    return size, codec, b"".join(chunks)


def decode_stored(oid: bytes, size: int, codec: int, stored: bytes) -> bytes:
    """The raw bytes of a stored object, checked against its size (not its id)."""
    if codec == RAW:
        data = stored
    elif codec == CLONE:
        data = stored[len(oid):]
    elif codec == ZSTD:
        try:
            # a streamed frame (large objects) has no content size, and a cut object is
            # one frame per chunk: decode as a stream, across frames
            data = decode_frames(stored, size)
        except zstandard.ZstdError as exc:
            raise CorruptObject(f"object {oid.hex()[:16]} cannot be decompressed: {exc}") \
                from exc
    else:
        raise CorruptObject(f"object {oid.hex()[:16]} has unknown codec {codec}")
    if len(data) != size:
        raise CorruptObject(f"object {oid.hex()[:16]} has the wrong length")
    return data


@contextmanager
def receiving(repo: Repository) -> Iterator[ObjectSink]:
    """An :class:`ObjectSink` on a new writer of ``repo``'s store. On any error what it
    staged is removed at once (not left for the next writer's recovery) and the error goes
    on; nothing is visible until :func:`commit_received`."""
    writer = repo.objects.writer()
    try:
        yield ObjectSink(repo.objects, writer)
    except BaseException:
        writer.abort()
        repo.recover()
        raise


def commit_received(repo: Repository, sink: ObjectSink, snaps: Iterable[Snapshot]) -> None:
    """Make the staged objects and the snapshots that name them visible in one catalog
    transaction (an archive's import, a pull): oldest first, each with a new local number."""
    with repo.catalog.transaction():
        sink.writer.commit(repo.catalog)
        for s in sorted(snaps, key=lambda s: s.created_ns):
            repo.catalog.add_snapshot(s.replace(number=repo.catalog.next_number()))


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
        data = self.check(oid, size, codec, stored)
        self.stage(oid, size, codec, stored, data)
        return data

    def check(self, oid: bytes, size: int, codec: int, stored: bytes) -> bytes:
        """The raw bytes of a received object, checked against its id (or raises
        :class:`CorruptObject`). It touches no state, so a pull runs it on its download
        threads, where decompressing and hashing (both release the GIL) use every core."""
        data = decode_stored(oid, size, codec, stored)
        seal = _check_clone(oid, size, codec, stored[:len(oid)])
        if self.store.digest(data) != (seal or oid):
            raise CorruptObject(f"object {oid.hex()[:16]} does not match its id")
        return data

    def stage(self, oid: bytes, size: int, codec: int, stored: bytes, data: bytes) -> None:
        """Stage an object :meth:`check` passed (``data``: what it returned)."""
        if self.writer.contains(oid):
            return
        written = self.write_loose(oid, size, codec, stored, data)
        if written is not None:
            self.stage_written(oid, size, codec, written)
            return
        self.writer.put_encoded(oid, size, codec, stored)
        self.added += 1
        self.bytes += size

    def write_loose(self, oid: bytes, size: int, codec: int, stored: bytes, data: bytes
                    ) -> tuple[str, int] | None:
        """Write a checked object that is stored loose (``LOOSE_MIN`` and up, or a clone) to
        a durable temp file in ``objects/``; ``None`` for one that goes into a pack.

        Thread-safe and touching no writer state but the strays marker, so a pull runs it on
        its download threads: the file writes and fsyncs of a clone's large objects overlap
        with the downloads instead of queueing behind them on one thread. The temp file is
        invisible until :meth:`stage_written` adopts it (on the caller's thread)."""
        seal = _check_clone(oid, size, codec, stored[:len(oid)])
        if seal is None and size < LOOSE_MIN:
            return None
        self.writer.mark_writing()  # before the first file: a crash's temp file is swept
        body = data if seal is not None else stored  # a clone is kept as its raw bytes
        tmp = self._temp_path()
        try:
            with open(tmp, "wb") as out:
                out.write(body)
                out.flush()
                os.fsync(out.fileno())
            if seal is not None:
                cow.write_seal(tmp, self.store.algorithm, seal)
        except BaseException:
            _unlink(tmp)
            raise
        return os.fspath(tmp), len(body)

    def stage_written(self, oid: bytes, size: int, codec: int, written: tuple[str, int]
                      ) -> None:
        """Adopt a temp file :meth:`write_loose` wrote (or drop it, if the object is already
        staged)."""
        tmp, length = written
        if self.writer.contains(oid):
            _unlink(tmp)
            return
        self.writer.adopt_large(oid, tmp, size, length, codec)
        self.added += 1
        self.bytes += size

    def add_stream(self, oid: bytes, size: int, codec: int, length: int,
                   chunks: Iterator[bytes]) -> None:
        """Check and stage a large object that arrives in pieces, without holding it whole."""
        self.writer.mark_writing()
        tmp = self._temp_path()
        hasher = self.store.new_hasher()
        total = 0
        head = len(oid) if codec == CLONE else 0  # a clone's seal comes first
        seal = b""
        try:
            with open(tmp, "wb") as out:
                dec = FrameDecoder() if codec == ZSTD else None
                got = 0
                for chunk in chunks:
                    got += len(chunk)
                    if len(seal) < head:
                        take = head - len(seal)
                        seal, chunk = seal + chunk[:take], chunk[take:]
                    out.write(chunk)
                    raw = dec.decompress(chunk) if dec is not None else chunk
                    hasher.update(raw)
                    total += len(raw)
                if got != length:
                    raise CorruptObject(f"object {oid.hex()[:16]} is truncated")
                out.flush()
                os.fsync(out.fileno())
            if codec not in (RAW, ZSTD, CLONE):
                raise CorruptObject(f"object {oid.hex()[:16]} has unknown codec {codec}")
            expected = _check_clone(oid, size, codec, seal) or oid
            if total != size or hasher.digest() != expected:
                raise CorruptObject(f"object {oid.hex()[:16]} does not match its id")
            if codec == CLONE:
                cow.write_seal(tmp, self.store.algorithm, expected)
        except BaseException:
            _unlink(tmp)
            raise
        self.writer.adopt_large(oid, tmp, size, size if codec == CLONE else length, codec)
        self.added += 1
        self.bytes += size

    def scratch_path(self) -> str:
        """A temp file's path in ``objects/`` for work in progress (a chunked blob being put
        together): a crash leaves it to the next writer's sweep, as any temp file."""
        self.writer.mark_writing()
        return os.fspath(self._temp_path())

    def assemble(self, oid: bytes, size: int, scratch: str) -> tuple[int, tuple[str, int]]:
        """Store a large object from ``scratch``, a file holding its raw bytes (the chunks of a
        chunked blob, put together): read, hashed and written as a snapshot stores a large
        file, and refused unless it hashes to ``oid``. Returns (codec, written) for
        :meth:`stage_written`. Thread-safe, like :meth:`write_loose`: a pull assembles
        several objects at once (compressing releases the GIL)."""
        fd = os.open(scratch, os.O_RDONLY | os.O_CLOEXEC)
        try:
            got, tmp, raw, stored, codec = self.writer.ingest_large(fd)
        finally:
            os.close(fd)
        if got != oid or raw != size:
            _unlink(tmp)  # type: ignore[arg-type]
            raise CorruptObject(f"object {oid.hex()[:16]} put together from its chunks does "
                                "not match its id")
        return codec, (tmp, stored)

    def _temp_path(self):  # type: ignore[no-untyped-def]
        """A temp file in ``objects/`` (what recovery sweeps after a crash)."""
        loose = self.store.loose_dir
        if not loose.is_dir():
            loose.mkdir(exist_ok=True)
            fsync_dir(loose.parent)  # the new directory's entry, before anything relies on it
        return loose / temp_name("large")


def clone_seal(oid: bytes, size: int, codec: int, stored: bytes) -> bytes | None:
    """The seal a received clone's bytes must hash to (the first ``len(oid)`` bytes of its
    stored form), or ``None`` for any other object."""
    return _check_clone(oid, size, codec, stored[:len(oid)])


def _check_clone(oid: bytes, size: int, codec: int, seal: bytes) -> bytes | None:
    """A received clone's seal (the hash its bytes must have), or ``None`` for any other
    object. Only a large object named like a clone may arrive as one."""
    if codec != CLONE:
        return None
    if not cow.is_clone_id(oid) or size < LOOSE_MIN or len(seal) != len(oid):
        raise CorruptObject(f"object {oid.hex()[:16]} is not a valid clone")
    return seal


def _unlink(path: os.PathLike[str]) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
