"""The object store: content-addressed bytes in append-only packs, large ones as loose files.

Small objects (file contents below ``LOOSE_MIN``, symlink targets and trees) are appended to pack
files (:mod:`ctrlz.state.store.packs`) so that 100,000 small files cost a handful of files in the
store, not 100,000. Each record in a pack carries a header with its id, codec and lengths, so the
index could be rebuilt from the packs alone; the live index is the ``objects`` table of the
catalog. Large objects are written as one file each under ``objects/xx/…``, raw when they do not
compress, which keeps restores of big files to a streaming copy. Where the store's filesystem can
clone (XFS, btrfs), a snapshot stores a large file as a copy-on-write clone of it instead, named
by its blocks rather than its hash (:mod:`ctrlz.state.fsio.cow`, :mod:`ctrlz.state.store.clones`).

Every read re-hashes what it returns: a flipped bit on disk is reported as :class:`CorruptObject`
and never written into a workspace. A clone is checked against its seal (its content hash, once
something has computed it); until then its bytes are trusted as the blocks the filesystem
shares with the file they were cloned from.

Readers may live long (the daemon, the MCP server) while other processes write and collect
garbage, so a reader keeps at most ``MAX_PACK_FDS`` packs open (least recently used first out: a
store of a thousand packs must not need a thousand file descriptors), and a read that finds its
pack or loose file gone, or bytes that do not match, looks the object up once more before it
calls the object corrupt: gc may have moved it to a new pack between the lookup and the read.
Pack ids are never reused (the catalog's ``packs.id`` is ``AUTOINCREMENT``), so a cached
pack id → file mapping can go stale but never point at another pack's bytes.
"""

from __future__ import annotations

import os
from functools import cached_property

from ...errors import CorruptObject
from ..db.catalog import Catalog
from ..hashing import digest_function, hasher_factory
from .clones import CloneObjects
from .cut_objects import CutObjects
from .groups import GROUP, GROUP_ENTRY, GROUP_HEAD, GroupCache, decode_group
from .object_writer import ObjectWriter
from .packs import (
    CHUNK,
    CLONE,
    LOOSE_MIN,
    MAX_PACK_FDS,
    PACK_MAGIC,
    PACK_MAX,
    RAW,
    RECORD,
    RECORD_MAGIC,
    ZSTD,
    ZSTD_LEVEL,
    PackFds,
    decode_frames,
    decoded_chunks,
    encode_small,
    write_all,
    zstd,
)
from .strays import StrayMarker

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from pathlib import Path
    from typing import BinaryIO

    from ..db.catalog import ObjectRow
    from .groups import Group

__all__ = ["CHUNK", "CLONE", "LOOSE_MIN", "MAX_PACK_FDS", "PACK_MAGIC", "PACK_MAX", "RAW",
           "RECORD", "RECORD_MAGIC", "ZSTD", "ZSTD_LEVEL", "ObjectStore", "ObjectWriter",
           "encode_small"]


def _corrupt(oid: bytes, what: str = "does not match its id") -> CorruptObject:
    return CorruptObject(f"object {oid.hex()[:16]} {what}; run `ctrlz verify`")


class ObjectStore(CloneObjects, CutObjects, StrayMarker):
    """Read access to a store's objects, plus :meth:`writer` for a locked writer.

    ``root`` may be a string or a ``Path``; ``packs_dir``, ``loose_dir`` and ``loose_path``
    give ``Path`` objects, but the pack-writing path (all an agent hook needs) runs on strings,
    so a hook never imports ``pathlib``, a few milliseconds of its start-up."""

    def __init__(self, root: str | os.PathLike[str], catalog: Catalog, algorithm: str) -> None:
        self.root = root
        self.catalog = catalog
        self.algorithm = algorithm
        self.digest = digest_function(algorithm)
        self.new_hasher = hasher_factory(algorithm)
        self._packs = os.path.join(os.fspath(root), "packs")
        self._loose = os.path.join(os.fspath(root), "objects")
        self._pack_fds = PackFds(MAX_PACK_FDS)
        self._pack_names: dict[int, str] = {}
        self._groups = GroupCache()
        self._init_strays(root)
        self._init_clones()

    @cached_property
    def packs_dir(self) -> Path:
        from pathlib import Path

        return Path(self._packs)

    @cached_property
    def loose_dir(self) -> Path:
        from pathlib import Path

        return Path(self._loose)

    def close(self) -> None:
        """Close the cached pack descriptors (gc calls this after deleting packs)."""
        self._pack_fds.clear()
        self._pack_names = {}
        self._groups.clear()

    def loose_path(self, oid: bytes) -> Path:
        h = oid.hex()
        return self.loose_dir / h[:2] / h[2:]

    def loose_name(self, oid: bytes) -> str:
        """:meth:`loose_path` as a string, without ``pathlib``."""
        h = oid.hex()
        return os.path.join(self._loose, h[:2], h[2:])

    # -- reading ---------------------------------------------------------------------------

    def _pack_slot(self, pack_id: int) -> list[int]:
        """An open descriptor of pack ``pack_id``, as a slot of :class:`PackFds`; give it back
        with ``self._pack_fds.put(slot)``."""
        slot = self._pack_fds.get(pack_id)
        if slot is not None:
            return slot
        name = self._pack_names.get(pack_id)
        if name is None:
            self._pack_names = {k: v[0] for k, v in self.catalog.packs().items()}
            name = self._pack_names.get(pack_id)
            if name is None:
                raise CorruptObject(f"the index names pack {pack_id}, which is not "
                                    "registered; run `ctrlz verify`")
        try:
            fd = os.open(os.path.join(self._packs, name), os.O_RDONLY)
        except FileNotFoundError:
            raise CorruptObject(f"pack file {name} is missing; run `ctrlz verify`") from None
        return self._pack_fds.add(pack_id, fd)

    def _pread(self, pack_id: int, length: int, offset: int) -> bytes:
        slot = self._pack_slot(pack_id)
        try:
            return os.pread(slot[0], length, offset)
        finally:
            self._pack_fds.put(slot)

    def _forget_locations(self) -> None:
        """Drop what this reader cached about where objects live (pack names and open packs),
        so the next lookup sees what another process's gc has done since."""
        self._pack_fds.clear()
        self._pack_names = {}
        self._groups.clear()

    def has(self, oid: bytes) -> bool:
        return self.catalog.lookup(oid) is not None

    def read(self, oid: bytes, row: ObjectRow | None = None) -> bytes:
        """The object's bytes, verified against its id (a clone: against its seal); ``row``:
        its catalog row, if the caller has just looked it up.

        A failure is retried once with a fresh lookup and fresh descriptors before it is
        reported: another process's gc may have repacked the object (and deleted the pack this
        reader found it in) between the lookup and the read."""
        try:
            return self._read_once(oid, row)
        except CorruptObject:
            self._forget_locations()
            return self._read_once(oid)

    def _read_once(self, oid: bytes, row: ObjectRow | None = None) -> bytes:
        if row is None:
            row = self.catalog.lookup(oid)
        if row is None:
            raise _corrupt(oid, "is missing from the store")
        _, pack, offset, length, size, codec = row
        if codec == GROUP and pack is not None:
            data = self._group(pack, offset, oid).member(oid)
            if data is None:
                raise _corrupt(oid, "is not in the group its index names")
            if len(data) != size:
                raise CorruptObject(f"object {oid.hex()[:16]} has the wrong length")
            if self.digest(data) != oid:
                raise _corrupt(oid)
            return data
        if pack is None:
            try:
                with open(self.loose_name(oid), "rb") as f:
                    stored = f.read()
            except FileNotFoundError:
                raise CorruptObject(f"loose object {oid.hex()[:16]} is missing; "
                                    "run `ctrlz verify`") from None
        else:
            stored = self._pread(pack, length, offset)
        data = self._decode(stored, codec, size, oid)
        if not self.content_ok(oid, codec, self.digest(data)):
            raise _corrupt(oid)
        return data

    def _group(self, pack: int, offset: int, oid: bytes) -> Group:
        """The group at ``offset`` of pack ``pack``, decoded at least as far as member
        ``oid``: two reads (its head says how long it is), or none when this reader decoded
        that far lately. Decoded in part the first time (up to ``oid``'s end), whole when a
        later read needs more of it (see :mod:`ctrlz.state.store.groups`)."""
        key = (pack, offset)
        group = self._groups.get(key)
        if group is None or not group.covers(oid):
            group = decode_group(self._group_record(pack, offset),
                                 upto=oid if group is None else None)
            self._groups.add(key, group)
        return group

    def _group_record(self, pack: int, offset: int) -> bytes:
        """The stored bytes of the group record at ``offset`` of pack ``pack`` (two reads:
        its head says how long it is)."""
        head = self._pread(pack, GROUP_HEAD.size, offset)
        if len(head) < GROUP_HEAD.size:
            raise CorruptObject(f"a group in pack {pack} is truncated; run `ctrlz verify`")
        _, count, frame_len = GROUP_HEAD.unpack(head)
        return self._pread(pack, GROUP_HEAD.size + count * GROUP_ENTRY.size + frame_len,
                           offset)

    def read_members(self, rows: Iterable[ObjectRow]) -> Iterator[tuple[bytes, bytes | None]]:
        """(id, bytes) of each group member named by its catalog row, checked against its id,
        ordered by where their groups lie in the packs: each group is read and decoded once,
        whole, however many of its members are wanted. A push sends every member of a
        snapshot; read one by one in the order of its trees, they decoded each group several
        times, half of it each time (the push's CPU on 10,000 files went from 1.2 s to 1.9 s
        with groups). The bytes are ``None`` for a member its group did not give (damaged,
        or gc moved it since ``rows`` were read): the caller reads it alone with
        :meth:`read`, which looks it up again or raises :class:`CorruptObject`."""
        wanted: dict[tuple[int, int], list[bytes]] = {}
        for oid, pack, offset, *_ in rows:
            if pack is None:
                yield oid, None
            else:
                wanted.setdefault((pack, offset), []).append(oid)
        for (pack, offset), oids in sorted(wanted.items()):
            try:
                group: Group | None = decode_group(self._group_record(pack, offset))
            except CorruptObject:
                group = None
            for oid in oids:
                data = group.member(oid) if group is not None else None
                yield oid, data if data is not None and self.digest(data) == oid else None

    def check_stored(self, oid: bytes, stored: bytes, codec: int, size: int) -> None:
        if self.digest(self._decode(stored, codec, size, oid)) != oid:
            raise _corrupt(oid)

    def _decode(self, stored: bytes, codec: int, size: int, oid: bytes) -> bytes:
        if codec in (RAW, CLONE):
            data = stored
        elif codec == ZSTD:
            try:
                data = decode_frames(stored, size)
            except zstd().ZstdError as exc:
                raise CorruptObject(f"object {oid.hex()[:16]} cannot be decompressed: "
                                    f"{exc}") from exc
        else:
            raise CorruptObject(f"object {oid.hex()[:16]} has unknown codec {codec}")
        if len(data) != size:
            raise CorruptObject(f"object {oid.hex()[:16]} has the wrong length")
        return data

    def iter_chunks(self, oid: bytes) -> Iterator[bytes]:
        """Stream a (possibly large) object. The caller must check :meth:`digest` of the
        stream itself (:meth:`content_matches` for a clone); :meth:`write_to` does."""
        loose = self._open_loose(oid)
        if loose is None:
            yield self.read(oid)
            return
        f, codec = loose
        with f:
            yield from decoded_chunks(f, codec)

    def _open_loose(self, oid: bytes) -> tuple[BinaryIO, int] | None:
        """The open file and codec of a loose object, or ``None`` for a packed one. A file
        found missing is looked up once more, as in :meth:`read`: gc may have dropped it and a
        snapshot added the same content back since the first lookup."""
        for retry in (False, True):
            row = self.catalog.lookup(oid)
            if row is None:
                raise _corrupt(oid, "is missing from the store")
            if row[1] is not None:
                return None
            try:
                return open(self.loose_name(oid), "rb"), row[5]  # noqa: SIM115
            except FileNotFoundError:
                if retry:
                    raise CorruptObject(f"loose object {oid.hex()[:16]} is missing; "
                                        "run `ctrlz verify`") from None
        raise AssertionError("unreachable")

    def write_to(self, oid: bytes, fd: int) -> int:
        """Write the object to an open file descriptor, verifying it; returns its size. A
        packed object is looked up once, not once to learn it is packed and again to read
        it (a clone of 10,000 small files made 20,000 lookups)."""
        row = self.catalog.lookup(oid)
        if row is not None and row[1] is not None:
            return write_all(fd, self.read(oid, row))
        write = self.loose_writer(oid)
        if write is None:
            return write_all(fd, self.read(oid))
        return write(fd)

    def loose_writer(self, oid: bytes) -> Callable[[int], int] | None:
        """For a loose object, :meth:`write_to` split in two: the catalog lookup and the open
        happen now, and the function returned streams, decodes, hashes and writes (verified)
        without touching anything shared, so a restore may run it on another thread. ``None``
        for a packed object. The function must be called once: it closes the file."""
        loose = self._open_loose(oid)
        if loose is None:
            return None
        f, codec = loose

        def write(fd: int) -> int:
            hasher = self.new_hasher()
            total = 0
            with f:
                for chunk in decoded_chunks(f, codec):
                    hasher.update(chunk)
                    total += write_all(fd, chunk)
            if not self.content_ok(oid, codec, hasher.digest()):
                raise _corrupt(oid)
            return total

        return write

    def loose_reader(self, oid: bytes) -> Callable[[], bytes] | None:
        """For a loose object, :meth:`read` split in two, as :meth:`loose_writer` splits
        :meth:`write_to`: the lookup and the open happen now, and the function returned
        decodes and checks the bytes on any thread (a push reads big objects ahead on its
        pool). ``None`` for a packed object. Call the function once: it closes the file."""
        loose = self._open_loose(oid)
        if loose is None:
            return None
        f, codec = loose

        def read() -> bytes:
            with f:
                data = b"".join(decoded_chunks(f, codec))
            if not self.content_ok(oid, codec, self.digest(data)):
                raise _corrupt(oid)
            return data

        return read

    def read_stored(self, pack: int, offset: int, length: int) -> bytes:
        """Raw stored bytes of a packed object (gc copies them between packs)."""
        return self._pread(pack, length, offset)

    def writer(self, *, fresh: bool = False) -> ObjectWriter:
        """``fresh``: write every object given, even ones the index already has (repacking)."""
        w = ObjectWriter(self)
        if fresh:
            w._known = set()
        return w
