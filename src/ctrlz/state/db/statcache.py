"""The stat cache: what each path looked like when the last snapshot hashed it.

Like git's index, it lets a snapshot trust a file whose (mode, size, mtime_ns, ctime_ns, inode)
have not changed instead of reading it again, and reuse the tree id of a directory in which
nothing changed. A file is "racily clean" when a later edit could keep every stat field: when
its mtime or ctime is not older than the start of the scan that cached it, less the timestamp
granularity (git's rule; see :func:`trusted`). Only such files are re-hashed next time; every
other one, however large, is trusted by its stat and never read again.

The cache is one ``marshal`` file in the store, replaced atomically (without fsync: it is only a
cache) after each snapshot commits; a long-lived process keeps it in memory between snapshots.
Each folder's listing is one :class:`Listing`: a few packed byte strings (names, stat keys,
object ids, trust flags), like a slice of git's index, not one Python object per file. Loading
the file decodes no row; the walk unpacks a folder's rows only while it lists that folder, and
a daemon holds about 280 bytes per file instead of about 690 (docs/decisions/0019).
It names the snapshot it was built with; it is only used while that snapshot still exists, so it
never vouches for an object that gc has removed. Losing it costs speed, never correctness.

Like git's untracked cache, it also keeps the stat of each folder whose cached listing was its
whole listing (:data:`Stamp`): while a folder's own stat is unchanged, no name in it was
added, removed or renamed, so a scan without a watcher stats the names it knows instead of
listing the folder again (``scan/walk.list_known``).
"""

from __future__ import annotations

import marshal
import struct
from pathlib import Path

from ..fsio.atomic import atomic_write_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

#: How far a file's timestamp may trail the scan's clock and still belong to the same tick.
#: Linux stamps files from its coarse clock, which trails ``time.time_ns()`` by up to one
#: tick (10 ms at the slowest HZ=100); an edit in the tick after the scan's read can share the
#: stamp of one in the tick before it, so two ticks plus a margin.
FINE_WINDOW_NS = 50_000_000
#: Timestamps in whole seconds (ext3, HFS+, FAT's 2 s, a tar extract on any file system) are
#: judged against a 2 s window: all an edit within the same second or two changes is content.
COARSE_WINDOW_NS = 2_000_000_000
_SECOND = 1_000_000_000
VERSION = 6  # 4: the files with more than one link, per root; 5: the folders' stamps;
# 6: each folder's listing packed (:class:`Listing`). A version-5 file is packed as it loads
# (the same rows, unpacked), so an upgrade does not read and hash the workspace again; a file
# of any other version is ignored: the next snapshot lists and hashes everything once.

def trusted(key: tuple[int, int, int, int, int], scan_ns: int) -> bool:
    """Whether an entry stat'ed by the scan that started at ``scan_ns`` can be trusted by its
    stat key next time: its mtime and ctime are both older than the scan's start by more than
    their granularity. A whole-second stamp is taken as a coarse file system's (a fine one
    lands on a whole second once in a billion: it is merely re-hashed once)."""
    mtime, ctime = key[2], key[3]
    return (mtime < scan_ns - (COARSE_WINDOW_NS if mtime % _SECOND == 0 else FINE_WINDOW_NS)
            and ctime < scan_ns - (COARSE_WINDOW_NS if ctime % _SECOND == 0
                                   else FINE_WINDOW_NS))


# per path: (stat key, oid, trusted) where the stat key is (st_mode, size, mtime_ns, ctime_ns,
# inode) and ``trusted`` is False for racily clean entries (decided when the cache is written);
# per directory: (tree oid, entries, subtree totals (files, dirs, symlinks, bytes)) -- the
# totals let a directory the watcher saw no change in be reused without being listed
CacheEntry = tuple[tuple[int, int, int, int, int], bytes, bool]
Totals = tuple[int, int, int, int]
DirCache = tuple[bytes, "Listing", Totals]
#: a folder's own (st_mode, mtime_ns, ctime_ns, inode, device), kept only for a folder that
#: nothing in was left out of (its cached listing is its whole listing) and that was not
#: racily clean. Any name added, removed or renamed in it changes its mtime and ctime, and
#: ``os.utime`` can set the mtime back but never the ctime.
Stamp = tuple[int, int, int, int, int]


#: a stat key packed: st_mode, size, mtime_ns, ctime_ns, inode
KEY = struct.Struct("<QQqqQ")
#: a listing's header: rows, bytes of the names part, bytes of one object id, then how many
#: rows are files and links and the files' bytes (what a folder found unchanged adds up to)
_HEAD = struct.Struct("<IIIIIQ")
_EMPTY_HEAD = _HEAD.pack(0, 1, 0, 0, 0, 0) + b"\0"
_LAYOUT = struct.Struct("<III")  # the header's first three fields
_NO_COUNTS = 0xFFFF_FFFF  # the files' bytes overflow the header: count the rows instead
_IFMT, _IFDIR, _IFREG = 0o170000, 0o040000, 0o100000


class Listing:
    """One folder's cached listing, packed: ``data`` holds a header, the names sorted and
    each between NULs (``\0a\0b\0``: a name never holds a NUL, so one ``find`` looks a name
    up), then per row its stat key (:data:`KEY`), its object id and a trust byte. A folder's
    own row has its mode alone in its key (so it never matches a stat) and its tree id.

    It answers what a ``dict[bytes, CacheEntry]`` would (``get``, ``items``, ``in``, ``len``,
    iteration in name order) by unpacking rows on demand and keeping nothing: a caller that
    looks many names up asks :meth:`decode` once for a plain dict. Immutable, so a folder
    found unchanged keeps its old listing object in the new cache."""

    __slots__ = ("data",)

    def __init__(self, data: bytes = _EMPTY_HEAD) -> None:
        self.data = data

    @classmethod
    def pack(cls, rows: Iterable[tuple[bytes, CacheEntry]]) -> Listing:
        """A listing of ``rows`` (name, (key, oid, trusted)), in any order."""
        rows = sorted(rows, key=lambda r: r[0])
        if not rows:
            return cls()
        names = b"\0" + b"\0".join([r[0] for r in rows]) + b"\0"
        width = len(rows[0][1][1])
        oids = b"".join([r[1][1] for r in rows])
        if len(oids) != width * len(rows):
            raise ValueError("a listing's object ids differ in length")
        keys = b"".join([KEY.pack(*r[1][0]) for r in rows])
        flags = bytes([1 if r[1][2] else 0 for r in rows])
        files = [r[1][0][1] for r in rows if r[1][0][0] & _IFMT == _IFREG]
        links = sum(1 for r in rows if r[1][0][0] & _IFMT not in (_IFREG, _IFDIR))
        total = sum(files)
        nfiles = len(files) if total < 1 << 64 else _NO_COUNTS  # absurd sparse files
        return cls(b"".join((_HEAD.pack(len(rows), len(names), width, nfiles, links,
                                        total if nfiles != _NO_COUNTS else 0),
                             names, keys, oids, flags)))

    def _layout(self) -> tuple[int, int, int, int, int]:
        """(rows, oid width, where the names start, where the keys start, where the oids
        start); the flags follow the oids."""
        n, names, width = _LAYOUT.unpack_from(self.data)
        at = _HEAD.size
        return n, width, at, at + names, at + names + n * KEY.size

    def counts(self) -> tuple[int, int, int]:
        """How many rows are files and links, and the files' bytes (files ``0xFFFFFFFF``:
        unknown, the bytes would overflow; a caller then counts the rows)."""
        return _HEAD.unpack_from(self.data)[3:]  # type: ignore[return-value]

    def walk_parts(self) -> tuple[list[bytes], Iterator[tuple[int, int, int, int, int]],
                                  bytes]:
        """The names, the stat keys (unpacked as they are iterated) and the trust bytes of
        the rows, in name order: what the walk compares, at one reading of the header."""
        n, width, at, keys, oids = self._layout()
        if not n:
            return [], iter(()), b""
        data = self.data
        flags = oids + n * width
        return (data[at + 1:keys - 1].split(b"\0"),
                KEY.iter_unpack(memoryview(data)[keys:oids]),  # type: ignore[arg-type]
                data[flags:flags + n])

    def oid(self, name: bytes) -> bytes | None:
        """The object id of ``name``'s row, or None."""
        n, width, at, keys, oids = self._layout()
        data = self.data
        pos = data.find(b"\0" + name + b"\0", at, keys)
        if pos < 0:
            return None
        o = oids + data.count(b"\0", at, pos) * width
        return data[o:o + width]

    def names(self) -> list[bytes]:
        n, _w, at, keys, _o = self._layout()
        return self.data[at + 1:keys - 1].split(b"\0") if n else []

    def keys_and_flags(self) -> tuple[Iterator[tuple[int, int, int, int, int]], bytes]:
        """The rows' stat keys (unpacked as they are iterated) and trust bytes, in name
        order: what the walk compares."""
        n, width, _at, keys, oids = self._layout()
        flags = oids + n * width
        return (KEY.iter_unpack(memoryview(self.data)[keys:oids]),  # type: ignore[return-value]
                self.data[flags:flags + n])

    def keys(self) -> list[tuple[int, int, int, int, int]]:
        """The rows' stat keys, in name order."""
        return list(self.keys_and_flags()[0])

    def index(self, name: bytes) -> int:
        """The row of ``name``, or -1."""
        n, _w, at, keys, _o = self._layout()
        pos = self.data.find(b"\0" + name + b"\0", at, keys)
        return self.data.count(b"\0", at, pos) if pos >= 0 else -1

    def row(self, i: int) -> CacheEntry:
        n, width, _at, keys, oids = self._layout()
        data = self.data
        return (KEY.unpack_from(data, keys + i * KEY.size),  # type: ignore[return-value]
                data[oids + i * width:oids + (i + 1) * width], data[oids + n * width + i] != 0)

    def rows(self) -> list[CacheEntry]:
        n, width, _at, keys, oids = self._layout()
        if not n:
            return []
        data, flags = self.data, oids + n * width
        return [(key, data[o:o + width], data[f] != 0)  # type: ignore[misc]
                for key, o, f in zip(KEY.iter_unpack(memoryview(data)[keys:oids]),
                                     range(oids, flags, width), range(flags, flags + n),
                                     strict=True)]

    def decode(self) -> dict[bytes, CacheEntry]:
        return dict(zip(self.names(), self.rows(), strict=True))

    def indexed(self) -> dict[bytes, tuple[tuple[int, int, int, int, int], bytes, bool, int]]:
        """As :meth:`decode`, each entry followed by its row (what ``DirNode.same`` keeps)."""
        return {name: (*row, i)  # type: ignore[misc]
                for i, (name, row) in enumerate(zip(self.names(), self.rows(), strict=True))}

    def items(self) -> list[tuple[bytes, CacheEntry]]:
        return list(zip(self.names(), self.rows(), strict=True))

    def get(self, name: bytes, default: CacheEntry | None = None) -> CacheEntry | None:
        i = self.index(name)
        return self.row(i) if i >= 0 else default

    def __getitem__(self, name: bytes) -> CacheEntry:
        i = self.index(name)
        if i < 0:
            raise KeyError(name)
        return self.row(i)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, bytes) and self.index(name) >= 0

    def __len__(self) -> int:
        return int.from_bytes(self.data[:4], "little")

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.names())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Listing) and self.data == other.data

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Listing({self.decode()!r})"


class StatCache:
    """One stat cache: the snapshot it was built with, when that scan began, the hash
    algorithm, and per root its directories. (A plain class: see :mod:`ctrlz.types` on why
    the records every process opens are not dataclasses.)"""

    __slots__ = ("algorithm", "linked", "roots", "scan_ns", "snapshot_id", "stamps")

    def __init__(self, snapshot_id: str | None = None, scan_ns: int = 0, algorithm: str = "",
                 roots: list[dict[bytes, DirCache]] | None = None,
                 linked: list[list[bytes]] | None = None,
                 stamps: list[dict[bytes, Stamp]] | None = None) -> None:
        self.snapshot_id = snapshot_id
        self.scan_ns = scan_ns
        self.algorithm = algorithm
        self.roots = roots if roots is not None else []
        #: per root, the files the scan found with more than one link: a watcher cannot see
        #: them change (:mod:`ctrlz.state.scan.blind`), so every dirty scan stats them again
        self.linked = linked if linked is not None else []
        #: per root, the folders' stamps (:data:`Stamp`), by relative path
        self.stamps = stamps if stamps is not None else []

    def __repr__(self) -> str:
        return (f"StatCache(snapshot_id={self.snapshot_id!r}, scan_ns={self.scan_ns}, "
                f"algorithm={self.algorithm!r}, roots=<{len(self.roots)}>)")

    def root(self, index: int) -> dict[bytes, DirCache]:
        return self.roots[index] if index < len(self.roots) else {}

    def linked_in(self, index: int) -> list[bytes]:
        return self.linked[index] if index < len(self.linked) else []

    def stamps_in(self, index: int) -> dict[bytes, Stamp]:
        return self.stamps[index] if index < len(self.stamps) else {}


def load(path: Path, algorithm: str) -> StatCache:
    try:
        raw: Any = marshal.loads(path.read_bytes())
        version, snapshot_id, scan_ns, algo, roots, linked, stamps = raw
        if version not in (VERSION, 5) or algo != algorithm:
            return StatCache()
        listing = Listing if version == VERSION else _packed
        return StatCache(snapshot_id, scan_ns, algo,
                         [{rel: (oid, listing(data), totals)
                           for rel, (oid, data, totals) in root.items()} for root in roots],
                         linked, stamps)
    except (OSError, ValueError, EOFError, TypeError, AttributeError, struct.error):
        return StatCache()


def _packed(rows: dict[bytes, CacheEntry]) -> Listing:
    """A version-5 folder listing (a plain dict of the same rows) packed."""
    return Listing.pack(rows.items())


def save(path: Path, cache: StatCache) -> None:
    roots = [{rel: (oid, listing.data, totals) for rel, (oid, listing, totals) in root.items()}
             for root in cache.roots]
    data = marshal.dumps((VERSION, cache.snapshot_id, cache.scan_ns, cache.algorithm,
                          roots, cache.linked, cache.stamps))
    atomic_write_bytes(path, data, durable=False)  # a lost cache costs a rescan, no data
