"""Grouped small objects: several small objects of one pack compressed together as one zstd
frame, so that zstd finds what neighbouring files share (most of what a stream compressor
finds; one frame per object threw it away). Measured on 100,000 small files, grouping took the
store from 1.05x git's size to well under it (docs/benchmarks.md, History).

A group record in a pack::

    GROUP_HEAD (b"CZGR", member count, frame length)
    count x GROUP_ENTRY (member id, raw size), in the order of their bytes in the frame
    one zstd frame: the members' raw bytes, concatenated

The index is stored uncompressed, so the catalog's rows stay rebuildable from the packs
alone, as they are from a single object's :data:`ctrlz.state.store.packs.RECORD` header
(:func:`pack_records` reads both). A member's catalog row says where its group starts
(``offset``), the member's share of the group's stored bytes (``length``: the shares of a
group add up to its length, so the catalog's stored-bytes totals stay right), its raw size
and the codec :data:`GROUP`. A read of one member reads its group and decompresses it up to
that member's end; the last few groups decoded are kept (:class:`GroupCache`), and a read past
the part decoded decodes the group whole, so reading a pack's members in order (a full
restore, verify, gc) decodes each group at most twice, once in part.

Stores holding groups carry catalog schema 7 (:mod:`ctrlz.state.db.catalog`): an older ctrlz
refuses them with its "written by a newer ctrlz" error rather than meet an unknown codec.
"""

from __future__ import annotations

import _thread
import struct
from collections.abc import Iterator
from itertools import accumulate

from ...errors import CorruptObject
from .packs import zstd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: the ``objects.codec`` of a member of a group
GROUP = 3
GROUP_MAGIC = b"CZGR"
#: a group whose members' bytes are stored as they are, because zstd saved less than 5% of
#: them (a few small trees, say): reading it needs no zstd, so a command that reads only such
#: groups (a no-change snapshot of a small tree) does not load zstandard (tests/cli,
#: test_a_no_change_snapshot_and_a_rollback_load_nothing_heavy)
STORED_MAGIC = b"CZGS"
GROUP_HEAD = struct.Struct(">4sIQ")  # magic, member count, frame length
GROUP_ENTRY = struct.Struct(">32sI")  # member id, raw size
#: a group is sealed once its members hold this many raw bytes: about the most a read of one
#: small object decompresses. 512 KiB: groups of 1 MiB stored 2-4% less (git's source, the
#: 100,000-file tree) and took a cold read of one object from 0.05 ms to 0.8 ms (half a
#: group decoded, on average); 256 KiB stored 4-6% more (decision 18)
GROUP_BYTES = 512 << 10
#: objects above this are stored alone (a group of one gains nothing)
MEMBER_MAX = 1 << 20
#: zstd's level for a group. 3, zstd's default: a group is compressed on a helper thread
#: while the walk reads on, and level 3 keeps up with it where level 6 did not
GROUP_LEVEL = 3
#: groups kept decoded by a reader
CACHED_GROUPS = 4

_local = _thread._local()


def _compressor() -> Any:
    c = getattr(_local, "gctx", None)
    if c is None:
        c = _local.gctx = zstd().ZstdCompressor(level=GROUP_LEVEL)
    return c


def _decompressor() -> Any:
    """This thread's decompressor for groups (a context costs more to make than a small
    group takes to decode)."""
    d = getattr(_local, "gdctx", None)
    if d is None:
        d = _local.gdctx = zstd().ZstdDecompressor()
    return d


def encode_group(oids: list[bytes], items: list[bytes]) -> bytes:
    """The group record of these objects (any thread: zstd lets the GIL go)."""
    raw = b"".join(items)
    frame = _compressor().compress(raw)
    magic = GROUP_MAGIC
    if len(frame) >= len(raw) * 0.95:
        frame, magic = raw, STORED_MAGIC
    return b"".join([GROUP_HEAD.pack(magic, len(oids), len(frame)),
                     *(GROUP_ENTRY.pack(o, len(d)) for o, d in zip(oids, items, strict=True)),
                     frame])


def shares(record_length: int, sizes: list[int]) -> list[int]:
    """Each member's share of its group's stored bytes: 1 each, and the rest by raw size,
    adding up to ``record_length`` exactly (the catalog's ``length`` of each member). A
    record always has more bytes than members (each has a 36-byte index entry)."""
    spare = record_length - len(sizes)
    if spare < 0:
        raise AssertionError("a group smaller than its member count")
    total = sum(sizes) or 1
    out = [1 + spare * s // total for s in sizes]
    out[-1] += record_length - sum(out)
    return out


class Group:
    """One decoded group, or the front of one: where each member sits in its raw bytes, and
    as much of those bytes as was decoded."""

    __slots__ = ("members", "raw")

    def __init__(self, members: dict[bytes, tuple[int, int]], raw: bytes) -> None:
        self.members = members
        self.raw = raw

    def covers(self, oid: bytes) -> bool:
        """Is ``oid`` a member whose bytes were decoded?"""
        where = self.members.get(oid)
        return where is not None and where[0] + where[1] <= len(self.raw)

    def member(self, oid: bytes) -> bytes | None:
        """A member's bytes (``None``: not a member, or past what was decoded)."""
        where = self.members.get(oid)
        if where is None or where[0] + where[1] > len(self.raw):
            return None
        return self.raw[where[0]:where[0] + where[1]]


def parse_index(head: bytes) -> tuple[dict[bytes, tuple[int, int]], int, int]:
    """(member id -> (start, size), raw total, frame length) of a group's head and index;
    raises :class:`CorruptObject` on a record that is not one."""
    if len(head) < GROUP_HEAD.size:
        raise CorruptObject("a group record is truncated; run `ctrlz verify`")
    magic, count, frame_len = GROUP_HEAD.unpack_from(head)
    if magic not in (GROUP_MAGIC, STORED_MAGIC) \
            or len(head) < GROUP_HEAD.size + count * GROUP_ENTRY.size:
        raise CorruptObject("a group record is damaged; run `ctrlz verify`")
    entries = GROUP_ENTRY.iter_unpack(
        memoryview(head)[GROUP_HEAD.size:GROUP_HEAD.size + count * GROUP_ENTRY.size])
    oids, sizes = zip(*entries, strict=True) if count else ((), ())
    starts = list(accumulate(sizes, initial=0))
    where = zip(starts, sizes, strict=False)  # starts has one more: the total
    return dict(zip(oids, where, strict=False)), starts[-1], frame_len


def decode_group(record: bytes | memoryview, upto: bytes | None = None) -> Group:
    """A whole group record, decoded and length-checked; or, given the member ``upto``, its
    front as far as that member's end (a read of one object decodes half a group, on
    average: zstd stops there)."""
    members, total, frame_len = parse_index(bytes(record[:GROUP_HEAD.size + _count(record)
                                                         * GROUP_ENTRY.size]))
    body = GROUP_HEAD.size + len(members) * GROUP_ENTRY.size
    frame = record[body:body + frame_len]
    if len(frame) != frame_len:
        raise CorruptObject("a group record is truncated; run `ctrlz verify`")
    where = members.get(upto) if upto is not None else None
    want = total if where is None else where[0] + where[1]
    if bytes(record[:4]) == STORED_MAGIC:
        if frame_len != total:
            raise CorruptObject("a group has the wrong length; run `ctrlz verify`")
        return Group(members, bytes(frame[:want]))
    try:
        reader = _decompressor().stream_reader(bytes(frame))
        raw = reader.read(want + 1) if want == total else _read_exactly(reader, want)
    except zstd().ZstdError as exc:
        raise CorruptObject(f"a group cannot be decompressed: {exc}; run `ctrlz verify`"
                            ) from exc
    if len(raw) != want:
        raise CorruptObject("a group has the wrong length; run `ctrlz verify`")
    return Group(members, raw)


def _read_exactly(reader: Any, n: int) -> bytes:
    """``n`` bytes from a zstd stream reader (one ``read`` may return fewer)."""
    parts, got = [], 0
    while got < n:
        chunk = reader.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _count(record: bytes | memoryview) -> int:
    if len(record) < GROUP_HEAD.size:
        raise CorruptObject("a group record is truncated; run `ctrlz verify`")
    return int(GROUP_HEAD.unpack_from(record)[1])


class GroupCache:
    """The last :data:`CACHED_GROUPS` groups a reader decoded, by (pack id, offset): pack ids
    are never reused and packs never change, so an entry cannot go stale. Thread-safe: a
    restore reads from worker threads."""

    __slots__ = ("_lock", "_groups")

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._groups: dict[tuple[int, int], Group] = {}

    def get(self, key: tuple[int, int]) -> Group | None:
        with self._lock:
            group = self._groups.pop(key, None)
            if group is not None:
                self._groups[key] = group  # now the most recently used
            return group

    def add(self, key: tuple[int, int], group: Group) -> None:
        with self._lock:
            self._groups[key] = group
            while len(self._groups) > CACHED_GROUPS:
                del self._groups[next(iter(self._groups))]

    def clear(self) -> None:
        with self._lock:
            self._groups.clear()


def pack_records(data: bytes, record: struct.Struct, record_magic: bytes,
                 start: int) -> Iterator[tuple[bytes, int, int, int, int]]:
    """(id, offset, stored length, raw size, codec) of every object in a pack's bytes from
    ``start`` (past its magic), as the catalog's rows would say: what rebuilds the index from
    the packs alone. A single object's ``offset`` is where its stored bytes start; a group
    member's is where its group starts. Raises :class:`CorruptObject` on bytes that are
    neither kind of record."""
    pos = start
    while pos < len(data):
        magic = data[pos:pos + 4]
        if magic == record_magic:
            _, codec, oid, size, length = record.unpack_from(data, pos)
            yield oid, pos + record.size, length, size, codec
            pos += record.size + length
        elif magic in (GROUP_MAGIC, STORED_MAGIC):
            count = _count(data[pos:pos + GROUP_HEAD.size])
            members, _, frame_len = parse_index(
                data[pos:pos + GROUP_HEAD.size + count * GROUP_ENTRY.size])
            length = GROUP_HEAD.size + count * GROUP_ENTRY.size + frame_len
            for oid, share, (_, size) in zip(members, shares(length, [
                    s for _, s in members.values()]), members.values(), strict=True):
                yield oid, pos, share, size, GROUP
            pos += length
        else:
            raise CorruptObject(f"a pack holds an unknown record at {pos}; run `ctrlz verify`")
