"""The scan's vocabulary: its limits and results, and the per-directory node the walk fills in.

Entries are plain lists, not objects: a scan handles one per file, and a list indexed by the
slot constants below costs the least per entry in CPython. Every part of the scan (the walk,
the reader, the incremental machinery, the tree builder) reads and writes these slots.
"""

from __future__ import annotations

import stat as st
from collections import namedtuple

from ..trees import DIR, FILE, SYMLINK

TYPE_CHECKING = False
if TYPE_CHECKING:  # the configuration loads this module for Limits: keep it light
    from collections.abc import Iterable, Mapping
    from typing import Any

    from ...types import Skipped
    from ..db.statcache import DirCache, Listing, Stamp
    from ..ignore.exclude import DirRules


class Limits(namedtuple("Limits", "max_entries max_bytes max_file_size refuse_over_max_bytes",
                        defaults=(2_000_000, 2 << 30, 256 << 20, False))):
    """What one scan may take in. ``max_entries`` counts files and symlinks, not folders:
    the number a user knows of a tree (``git ls-files | wc -l``), whatever its shape.
    ``max_bytes`` never blocks a snapshot unless ``refuse_over_max_bytes``: over it, the
    largest new files are left out (and reported) until the rest fits; the
    SnapshotManager API refuses instead, as seed 002 documents.
    ``max_file_size``: new files above it are skipped and reported."""

    __slots__ = ()


class ScanStats:
    """Counts of one scan (``hashed``: files actually read; ``stamped``: folders listed from
    their stamp, not read, :func:`~ctrlz.state.scan.walk.list_known`)."""

    __slots__ = ("files", "dirs", "symlinks", "bytes", "hashed", "reused_trees", "stamped")

    def __init__(self, files: int = 0, dirs: int = 0, symlinks: int = 0, bytes: int = 0,
                 hashed: int = 0, reused_trees: int = 0, stamped: int = 0) -> None:
        self.files = files
        self.dirs = dirs
        self.symlinks = symlinks
        self.bytes = bytes
        self.hashed = hashed
        self.reused_trees = reused_trees
        self.stamped = stamped

    def _values(self) -> tuple[int, ...]:
        return tuple(getattr(self, k) for k in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScanStats):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return "ScanStats(" + ", ".join(f"{k}={getattr(self, k)}" for k in self.__slots__) + ")"


Changes = tuple[int, int, int]  # (created, modified, deleted) files and symlinks
NO_CHANGES: Changes = (0, 0, 0)


class ScanResult:
    """One root's scan: ``oid``, the tree id of the root directory; ``changes``, the files and
    symlinks created, modified and deleted since the tree the stat cache describes, counted as
    :func:`~ctrlz.engine.diff.count_changes` would (``None`` when the cache could not tell: no
    cache for the root, or a directory missing from it); ``linked``, the files found with more
    than one link (:mod:`~ctrlz.state.scan.blind`); ``stamps``, the folders' stamps for the
    stat cache (:data:`~ctrlz.state.db.statcache.Stamp`)."""

    __slots__ = ("oid", "mode", "stats", "skipped", "cache", "changes", "linked", "stamps")

    def __init__(self, oid: bytes, mode: int, stats: ScanStats, skipped: list[Skipped],
                 cache: dict[bytes, DirCache], changes: Changes | None = None,
                 linked: list[bytes] | None = None,
                 stamps: dict[bytes, Stamp] | None = None) -> None:
        self.oid = oid
        self.mode = mode
        self.stats = stats
        self.skipped = skipped
        self.cache = cache
        self.changes = changes
        self.linked = linked if linked is not None else []
        self.stamps = stamps if stamps is not None else {}


#: how the reason of a file left out for ``max_bytes`` ends its figures (``walk``); such a
#: file is looked at again by every scan (:func:`~ctrlz.state.scan.context.recheck_left_out`)
OVER_MAX_BYTES = ", over max_bytes="


class DirtyDirs(frozenset[bytes]):
    """The directories a watcher saw change, and for some of them the names it saw change.

    A directory with a name set is *partly* dirty: nothing happened in it but to those names,
    so a scan stats just them and takes every other entry from the stat cache (git's
    fsmonitor reports paths for the same reason: a big directory with one edit should cost
    one ``lstat``, not one per entry). A directory without one is listed whole. Set
    operations return a plain ``frozenset``, so anything that combines dirty sets without
    knowing about names falls back to listing whole directories: never to seeing less."""

    __slots__ = ("names",)
    names: dict[bytes, frozenset[bytes]]

    def __new__(cls, dirs: Iterable[bytes],
                names: Mapping[bytes, frozenset[bytes]] | None = None) -> DirtyDirs:
        self = super().__new__(cls, dirs)
        self.names = {d: n for d, n in (names or {}).items() if d in self}
        return self


# entry slots: [name, kind, permission bits, size, mtime_ns, stat key, oid]
NAME, KIND, PERM, SIZE, MTIME, KEY, OID = range(7)
IFMT, IFDIR, IFREG, IFLNK = 0o170000, 0o040000, 0o100000, 0o120000


class DirNode:
    """One directory of the walk: what was listed in it, and where its tree id goes."""

    __slots__ = ("rel", "path", "rules", "entries", "same", "cached", "dirty", "slot", "mode",
                 "unreadable", "from_cache", "base", "at", "stamp", "listed")

    def __init__(self, rel: bytes, path: bytes, rules: DirRules, cached: DirCache | None,
                 slot: tuple[DirNode, list[Any]] | None, mode: int,
                 stamp: Stamp | None = None) -> None:
        self.rel = rel
        self.path = path
        self.rules = rules  # the exclusion rules in force in this directory
        self.entries: list[list[Any]] = []
        #: the files and links the walk found as the stat cache has them, as their rows in
        #: ``cached``'s listing: most of a tree, so they become entries only if the directory
        #: is rebuilt (:func:`same_entries`), and are kept as small ints until then
        self.same: list[int] = []
        self.cached = cached
        self.dirty = cached is None  # set as soon as anything differs from the cache
        self.slot = slot  # (parent node, parent's entry for us)
        self.mode = mode
        self.unreadable = False
        self.from_cache = False  # listed from the stat cache, not from the disk
        #: the cached tree's encoding, when listed from the cache by patching it: ``entries``
        #: then holds only the subdirectories entered
        self.base: bytes | None = None
        self.at: list[int] = []  # where each entered subdirectory's record starts in ``base``
        #: the folder's own stat as its parent's listing saw it, before it was listed (for
        #: the stat cache's stamps); None when it was not stat'ed (a dirty scan's)
        self.stamp = stamp
        #: how many names the folder's listing had, when it was listed whole (from the disk,
        #: or by its stamp): if every one became an entry, the stamp may be kept
        self.listed = -1


def same_entries(listing: Listing, same: list[int]) -> list[list[Any]]:
    """The entries of files and links found unchanged (``DirNode.same``: rows of
    ``listing``), as the walk would have made them from their stat: the cached key is that
    stat."""
    names, rows = listing.names(), listing.rows()
    return [[names[i], FILE if key[0] & IFMT == IFREG else SYMLINK, key[0] & 0o7777, key[1],
             key[2], key, oid] for i in same for key, oid, _trusted in (rows[i],)]


def kind_of(mode: int) -> str:
    fmt = mode & IFMT
    return DIR if fmt == IFDIR else FILE if fmt == IFREG else SYMLINK


def special_kind(mode: int) -> str:
    if st.S_ISFIFO(mode):
        return "special file skipped (FIFO)"
    if st.S_ISSOCK(mode):
        return "special file skipped (socket)"
    if st.S_ISCHR(mode) or st.S_ISBLK(mode):
        return "special file skipped (device)"
    return "special file skipped"
