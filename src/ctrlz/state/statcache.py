"""The stat cache: what each path looked like when the last snapshot hashed it.

Like git's index, it lets a snapshot trust a file whose (mode, size, mtime_ns, ctime_ns, inode)
have not changed instead of reading it again, and reuse the tree id of a directory in which
nothing changed. A file whose timestamps fall within ``RACY_WINDOW_NS`` of the scan that cached
it is "racily clean": an edit in the same clock tick could keep every stat field, so it is
re-hashed next time instead of trusted.

The cache is one ``marshal`` file in the store, replaced atomically (without fsync: it is only a
cache) after each snapshot commits; a long-lived process keeps it in memory between snapshots.
It names the snapshot it was built with; it is only used while that snapshot still exists, so it
never vouches for an object that gc has removed. Losing it costs speed, never correctness.
"""

from __future__ import annotations

import marshal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomic import atomic_write_bytes

RACY_WINDOW_NS = 1_000_000_000
VERSION = 3

# per path: (stat key, oid, trusted) where the stat key is (st_mode, size, mtime_ns, ctime_ns,
# inode) and ``trusted`` is False for racily clean entries (decided when the cache is written);
# per directory: (tree oid, entries, subtree totals (files, dirs, symlinks, bytes)) -- the
# totals let a directory the watcher saw no change in be reused without being listed
CacheEntry = tuple[tuple[int, int, int, int, int], bytes, bool]
Totals = tuple[int, int, int, int]
DirCache = tuple[bytes, dict[bytes, CacheEntry], Totals]


@dataclass
class StatCache:
    snapshot_id: str | None = None
    scan_ns: int = 0
    algorithm: str = ""
    roots: list[dict[bytes, DirCache]] = field(default_factory=list)

    def root(self, index: int) -> dict[bytes, DirCache]:
        return self.roots[index] if index < len(self.roots) else {}


def load(path: Path, algorithm: str) -> StatCache:
    try:
        raw: Any = marshal.loads(path.read_bytes())
        version, snapshot_id, scan_ns, algo, roots = raw
        if version != VERSION or algo != algorithm:
            return StatCache()
        return StatCache(snapshot_id, scan_ns, algo, roots)
    except (OSError, ValueError, EOFError, TypeError):
        return StatCache()


def save(path: Path, cache: StatCache) -> None:
    data = marshal.dumps((VERSION, cache.snapshot_id, cache.scan_ns, cache.algorithm,
                          cache.roots))
    atomic_write_bytes(path, data, durable=False)  # a lost cache costs a rescan, no data
