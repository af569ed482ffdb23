"""The stat cache: what each path looked like when the last snapshot hashed it.

Like git's index, it lets a snapshot trust a file whose (mode, size, mtime_ns, ctime_ns, inode)
have not changed instead of reading it again, and reuse the tree id of a directory in which
nothing changed. A file is "racily clean" when a later edit could keep every stat field: when
its mtime or ctime is not older than the start of the scan that cached it, less the timestamp
granularity (git's rule; see :func:`trusted`). Only such files are re-hashed next time; every
other one, however large, is trusted by its stat and never read again.

The cache is one ``marshal`` file in the store, replaced atomically (without fsync: it is only a
cache) after each snapshot commits; a long-lived process keeps it in memory between snapshots.
It names the snapshot it was built with; it is only used while that snapshot still exists, so it
never vouches for an object that gc has removed. Losing it costs speed, never correctness.

Like git's untracked cache, it also keeps the stat of each folder whose cached listing was its
whole listing (:data:`Stamp`): while a folder's own stat is unchanged, no name in it was
added, removed or renamed, so a scan without a watcher stats the names it knows instead of
listing the folder again (``scan/walk.list_known``).
"""

from __future__ import annotations

import marshal
from pathlib import Path

from ..fsio.atomic import atomic_write_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
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
VERSION = 5  # 4: the files with more than one link, per root; 5: the folders' stamps

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
DirCache = tuple[bytes, dict[bytes, CacheEntry], Totals]
#: a folder's own (st_mode, mtime_ns, ctime_ns, inode, device), kept only for a folder that
#: nothing in was left out of (its cached listing is its whole listing) and that was not
#: racily clean. Any name added, removed or renamed in it changes its mtime and ctime, and
#: ``os.utime`` can set the mtime back but never the ctime.
Stamp = tuple[int, int, int, int, int]


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
        if version != VERSION or algo != algorithm:
            return StatCache()
        return StatCache(snapshot_id, scan_ns, algo, roots, linked, stamps)
    except (OSError, ValueError, EOFError, TypeError):
        return StatCache()


def save(path: Path, cache: StatCache) -> None:
    data = marshal.dumps((VERSION, cache.snapshot_id, cache.scan_ns, cache.algorithm,
                          cache.roots, cache.linked, cache.stamps))
    atomic_write_bytes(path, data, durable=False)  # a lost cache costs a rescan, no data
