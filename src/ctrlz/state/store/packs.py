"""Pack files and codecs: how small objects sit in a store, and the open-pack cache readers keep.

A pack is ``PACK_MAGIC`` followed by records, each a :data:`RECORD` header (magic, codec, id, raw
size, stored length) and the stored bytes; the headers make the catalog's index rebuildable from
the packs alone. Kept apart from :mod:`ctrlz.state.store.objects` (which reads and writes through
these) so that each module has one job; everything public here is re-exported there.

Agent hooks import this module on every start, so it imports nothing heavy: ``_thread`` rather
than ``threading``, plain classes rather than ``dataclasses``.
"""

from __future__ import annotations

import _thread
import errno
import os
import struct
from collections.abc import Iterator

from ... import platform
from ...errors import StoreError, StoreFull, exhausted
from ..db.catalog import ObjectRow

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO

#: codecs of the ``objects.codec`` column. ``CLONE``: a loose file that is a copy-on-write
#: clone, raw bytes, named by its blocks rather than its hash (see :mod:`ctrlz.state.fsio.cow`)
RAW, ZSTD, CLONE = 0, 1, 2
LOOSE_MIN = 4 << 20  # files at least this big become loose objects
PACK_MAX = 128 << 20  # start a new pack past this size
CHUNK = 4 << 20
#: zstd's level for small objects. 2, not zstd's default 3: on git's source it compresses 40%
#: faster (a first snapshot of it: ~12% faster) for a store 3-4% larger.
ZSTD_LEVEL = 2
#: a zstd frame that holds its bytes as they are (:func:`stored_frame`): the magic number, a
#: frame header descriptor saying no content size, no checksum, no dictionary, and a window
#: of 128 KiB (exponent 7: 2**(10 + 7)), the largest block a raw block may be
_STORED_HEAD = b"\x28\xb5\x2f\xfd\x00\x38"
_RAW_BLOCK = 128 << 10


def stored_frame(data: bytes | memoryview) -> bytes:
    """``data`` as one zstd frame of raw blocks (RFC 8878, 3.1.1), for a large object's read
    the disk is waiting for: every zstd decoder reads it, at the cost of one copy (zstd's
    own fastest level makes about the same frame at 1.4 GB/s per core, a fifth of a copy's
    speed). It alone is written without its content size: that is how ``ctrlz gc`` finds
    the objects it compresses later (:mod:`ctrlz.state.store.compact`)."""
    view = memoryview(data).cast("B")
    n = len(view)
    parts: list[bytes | memoryview] = [_STORED_HEAD]
    if n == 0:
        parts.append(b"\x01\x00\x00")  # one empty raw block, the last
    for start in range(0, n, _RAW_BLOCK):
        size = min(_RAW_BLOCK, n - start)
        parts.append(((size << 3) | (start + size >= n)).to_bytes(3, "little"))
        parts.append(view[start:start + size])
    return b"".join(parts)


PACK_MAGIC = b"CTZPACK1"
WRITE_BUFFER = 1 << 20  # pack appends are buffered: one write() per MiB, not two per object
RECORD = struct.Struct(">4sB32sQQ")  # b"CZOB", codec, oid, raw size, stored length
RECORD_MAGIC = b"CZOB"
MAX_PACK_FDS = 16  # open pack files a reader keeps; fits under `ulimit -n 64` with room to spare

# _thread, not threading: the same primitives (threading.local and threading.Lock are these),
# without importing threading into every agent hook
_local = _thread._local()


def zstd() -> Any:
    """The zstandard module, loaded on first use (:func:`ctrlz.platform.zstandard`: its C
    backend without the package's start-up where it can), which a command reading only the
    catalog (`ctrlz list`) or writing a tiny pre-image does not load at all."""
    return platform.zstandard()


def compressor(level: int = ZSTD_LEVEL) -> Any:
    """This thread's compressor at ``level`` (contexts are not thread-safe, and costly to make
    per object)."""
    made = getattr(_local, "cctx", None)
    if made is None:
        made = _local.cctx = {}
    c = made.get(level)
    if c is None:
        c = made[level] = zstd().ZstdCompressor(level=level)
    return c


def decompressor() -> Any:
    d = getattr(_local, "dctx", None)
    if d is None:
        d = _local.dctx = zstd().ZstdDecompressor()
    return d


_COMPRESS_FROM = 128  # bytes: smaller objects are stored raw


def encode_small(data: bytes, level: int = ZSTD_LEVEL) -> tuple[int, bytes]:
    """Compress when it pays (at least 5% smaller), else store raw."""
    if len(data) < _COMPRESS_FROM:
        return RAW, data
    return _pick(data, compressor(level).compress(data))


def encode_many(items: list[bytes]) -> list[tuple[int, bytes]]:
    """:func:`encode_small` of each, the same bytes, in one call into zstd: the GIL is let go
    once for the whole list rather than once per object, which is what lets a helper thread
    compress small files while another walks (:mod:`ctrlz.state.store.behind`), and costs half the
    time of one call each on 4,000 small texts."""
    cctx = compressor()
    big = [data for data in items if len(data) >= _COMPRESS_FROM]
    if not big:
        return [(RAW, data) for data in items]
    try:
        packed = iter(cctx.multi_compress_to_buffer(big))
    except (AttributeError, NotImplementedError):  # zstandard's cffi backend (PyPy) has none
        packed = iter([cctx.compress(data) for data in big])
    return [(RAW, data) if len(data) < _COMPRESS_FROM else _pick(data, next(packed))
            for data in items]


def _pick(data: bytes, packed: Any) -> tuple[int, bytes]:
    if len(packed) < len(data) * 0.95:
        return ZSTD, packed if type(packed) is bytes else packed.tobytes()
    return RAW, data


def decode_frames(stored: bytes, size: int) -> bytes:
    """The raw bytes of zstd ``stored`` bytes, read across frames: a large object cut into
    chunks is one frame per chunk (:mod:`ctrlz.state.chunking`), and a plain ``decompress``
    stops after the first. At most ``size + 1`` bytes come out, so the caller's length check
    catches both a short object and a decompression bomb."""
    return decompressor().stream_reader(stored, read_across_frames=True).read(size + 1)


class FrameDecoder:
    """Incremental zstd decoding across frames, for stored bytes that arrive in pieces. It
    has a context of its own: a decoding object shares its context's state, and the thread's
    shared one may serve another object between two pieces of this one."""

    def __init__(self) -> None:
        self._d = zstd().ZstdDecompressor()
        self._obj: Any = None

    def decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            if self._obj is None:
                self._obj = self._d.decompressobj()
            out.append(self._obj.decompress(data))
            if not self._obj.eof:
                break
            data, self._obj = self._obj.unused_data, None
        return b"".join(out)


def decoded_chunks(f: BinaryIO, codec: int) -> Iterator[bytes]:
    """The raw bytes of a loose object file, in chunks of about ``CHUNK`` (across frames:
    see :func:`decode_frames`)."""
    if codec == ZSTD:
        reader = decompressor().stream_reader(f, read_across_frames=True)
        while chunk := reader.read(CHUNK):
            yield chunk
    else:  # RAW, CLONE
        while chunk := f.read(CHUNK):
            yield chunk


def write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    return len(data)


def pwrite_all(fd: int, data: bytes, offset: int) -> None:
    """:func:`write_all` at ``offset``: a short write (a nearly full disk) goes on where it
    stopped rather than leaving a hole."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def full_disk(exc: OSError, where: str | os.PathLike[str]) -> Exception:
    """The error an ``OSError`` while writing to the store means: the store's disk is full
    (ENOSPC, EDQUOT), this process ran out of descriptors or memory (the limit to raise), or
    the store cannot be written."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFull(f"no space left on the store's disk ({where}); free space or move "
                         "CTRLZ_HOME, then try again")
    return exhausted(exc, f"writing to the store ({where})") or StoreError(
        f"cannot write to the store ({where}): {exc.strerror or exc}")


def make_dir(path: str | os.PathLike[str]) -> bool:
    """Create a directory if it is missing; returns whether this call created it (so that
    the writer fsyncs its parent at commit, and only then)."""
    try:
        os.mkdir(path)
    except FileExistsError:
        return False
    return True


#: one object's index row while its pack is written: id, offset, stored length, raw size,
#: codec (native byte order, no padding: it never leaves the process)
_ROW = struct.Struct("=32sQQQB")


class PackInProgress:
    """A pack being written, and the index rows of the objects in it so far. A plain class:
    agent hooks import this module, and ``dataclasses`` would add milliseconds to each one's
    start-up.

    The rows are packed into one ``bytearray``, 57 bytes each, not kept as tuples: a first
    snapshot holds one per object until its commit, and a tuple with its three ints took
    about 180 bytes (issue 45: a first snapshot of 300,000 files needed 2.1 KiB per file)."""

    __slots__ = ("name", "path", "fd", "size", "_rows")

    def __init__(self, name: str, path: str, fd: int, size: int) -> None:
        self.name = name
        self.path = path
        self.fd = fd
        self.size = size
        self._rows = bytearray()

    def add_row(self, oid: bytes, offset: int, length: int, size: int, codec: int) -> None:
        self._rows += _ROW.pack(oid, offset, length, size, codec)

    def rows(self, pack_id: int) -> Iterator[ObjectRow]:
        """The catalog's rows of the objects written so far, once the pack is ``pack_id``."""
        for oid, offset, length, size, codec in _ROW.iter_unpack(self._rows):
            yield oid, pack_id, offset, length, size, codec

    def __len__(self) -> int:
        return len(self._rows) // _ROW.size


class PackFds:
    """Open pack file descriptors, at most ``limit`` of them, least recently used closed first.

    Restores and snapshots read from worker threads, so a descriptor is never closed while a
    thread still reads through it (the number could be reused by the next ``open`` and hand
    that thread another file's bytes): :meth:`get` and :meth:`add` hand out a slot counted as in
    use, :meth:`put` hands it back, and a slot evicted or forgotten while in use is closed by its
    last user. Past the limit with every descriptor in use, the cache overflows rather than
    waits. A slot is ``[fd, users, cached]``."""

    __slots__ = ("limit", "_lock", "_slots")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = _thread.allocate_lock()
        self._slots: dict[int, list[int]] = {}  # pack id -> slot, least recently used first

    def get(self, pack_id: int) -> list[int] | None:
        with self._lock:
            slot = self._slots.pop(pack_id, None)
            if slot is not None:
                self._slots[pack_id] = slot  # now the most recently used
                slot[1] += 1
            return slot

    def add(self, pack_id: int, fd: int) -> list[int]:
        """Cache a freshly opened descriptor; returns its slot, or the slot another thread
        added meanwhile (closing ``fd``)."""
        with self._lock:
            slot = self._slots.get(pack_id)
            if slot is not None:
                os.close(fd)
                slot[1] += 1
                return slot
            slot = self._slots[pack_id] = [fd, 1, 1]
            if len(self._slots) > self.limit:
                for key in [k for k, v in self._slots.items() if v[1] == 0]:
                    os.close(self._slots.pop(key)[0])
                    if len(self._slots) <= self.limit:
                        break
            return slot

    def put(self, slot: list[int]) -> None:
        with self._lock:
            slot[1] -= 1
            if slot[1] == 0 and not slot[2]:
                os.close(slot[0])

    def clear(self) -> None:
        """Forget every descriptor; one in use is closed by its last user."""
        with self._lock:
            for slot in self._slots.values():
                slot[2] = 0
                if slot[1] == 0:
                    os.close(slot[0])
            self._slots.clear()

    def __len__(self) -> int:
        return len(self._slots)
