"""The state of one scan, apart from the passes that run it.

Every step of a scan is a function of its own module that takes this context; keeping it apart
from :class:`~ctrlz.state.scan.scanner.Scanner` (which imports those modules to run them) means
the steps never import the scanner back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ...types import Skipped
from ..db.statcache import DirCache, Stamp
from ..ignore.exclude import Matcher
from ..trees import Entry
from .blind import with_blind_spots
from .model import OVER_MAX_BYTES, Changes, DirNode, DirtyDirs, Limits, ScanStats
from .reader import FileReader
from .sinks import Sink

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .reader import Pool


def needed_dirs(dirty: set[bytes]) -> tuple[set[bytes], dict[bytes, list[bytes]]]:
    """The directories a dirty scan must enter (each dirty one and every ancestor), and per
    needed directory the names of its needed subdirectories."""
    needed: set[bytes] = set()
    children: dict[bytes, list[bytes]] = {}
    for d in dirty:
        while d not in needed:
            needed.add(d)
            if not d:
                break
            parent, _, name = d.rpartition(b"/")
            children.setdefault(parent, []).append(name)
            d = parent
    return needed, children


def recheck_left_out(dirty: set[bytes], previous: list[Skipped]) -> set[bytes]:
    """``dirty`` with the names of the files the previous scan left out for ``max_bytes``.

    Whether such a file fits depends on the rest of the tree, not on the file: once other
    files shrink or go, it fits, and a full scan (which finds it absent from the stat cache)
    reads it. A dirty scan would carry its old skip over instead, with the old figures, and
    miss it; so each is stat'ed again, as if the watcher had seen it change (and read only if
    it now fits, or if it changed)."""
    left_out = [k.path for k in previous if OVER_MAX_BYTES in k.reason]
    return with_blind_spots(dirty, left_out, [], {}) if left_out else dirty


class ScanContext:
    """The state of one scan of one root: what every step (``walk``, ``incremental``,
    ``build``) reads and updates. :class:`~ctrlz.state.scan.scanner.Scanner` adds the passes.

    ``scan_ns``: when this scan started; entries whose mtime or ctime are this recent are
    cached as racily clean (not trusted next time). ``entry_budget`` is shared across roots.
    ``dirty``: directories a watcher saw change since the cache was written; ``None``:
    unknown, list everything. Any other directory with a cache entry is reused without being
    listed; in one a :class:`DirtyDirs` gives names for, only those names are stat'ed.
    ``previous_skipped``: what the cache's snapshot skipped, carried over for directories
    reused unlisted. ``tree_cache``: the encoding of a cached tree id when it is
    at hand in memory (else ``None``), which lets a directory listed from the cache be
    patched instead of rebuilt entry by entry. ``linked`` and ``mounts``: what a watcher
    cannot see (the cache's files with more than one link, the mount points inside the
    root), looked at again by a dirty scan (:mod:`.blind`). ``stamps``: the cache's folder
    stamps (:data:`~ctrlz.state.db.statcache.Stamp`)."""

    def __init__(self, root: Path, matcher: Matcher, sink: Sink, pool: Pool,
                 limits: Limits | None = None, cache: dict[bytes, DirCache] | None = None,
                 scan_ns: int = 0, entry_budget: list[int] | None = None,
                 dirty: set[bytes] | None = None,
                 previous_skipped: list[Skipped] | None = None,
                 tree_cache: Callable[[bytes], bytes | None] | None = None,
                 linked: list[bytes] | None = None,
                 mounts: list[bytes] | None = None,
                 stamps: dict[bytes, Stamp] | None = None) -> None:
        self.root = root
        self.matcher = matcher
        self.sink = sink
        self.pool = pool
        self.limits = limits if limits is not None else Limits()
        self.cache = cache if cache is not None else {}
        self.scan_ns = scan_ns
        self.entry_budget = entry_budget if entry_budget is not None else [0]
        self.previous_skipped = previous_skipped if previous_skipped is not None else []
        if dirty is not None:
            dirty = recheck_left_out(dirty, self.previous_skipped)
            dirty = with_blind_spots(dirty, linked or [], mounts or [], self.cache,
                                     os.fsencode(root))
        self.dirty = dirty
        #: the files this scan stat'ed and found with more than one link: with the dirty
        #: scan above re-stating every file the last scan found so, this is all of them
        self.linked: list[bytes] = []
        self._linked_before = frozenset(linked or ())
        self.tree_cache = tree_cache
        self.stamps = stamps if stamps is not None else {}
        #: the device on which the stamps may be believed (the root's, on a file system
        #: known to stamp folders, set by the scan); None: nowhere
        self.stamp_dev: int | None = None
        #: the stamps for the new cache (``build.finish``)
        self.new_stamps: dict[bytes, Stamp] = {}
        self.stats = ScanStats()
        self.skipped: list[Skipped] = []
        self._reader = FileReader(self.sink, self.pool, self.stats, self.skipped)
        #: large files to read, held back until the walk knows the total (walk.release_deferred)
        self.deferred: list[tuple[DirNode, list[Any], bytes, int]] = []
        self._root_bytes = os.fsencode(self.root)
        self._reused = False  # whether any subtree was reused without being listed
        self._needed: set[bytes] | None = None
        #: per finished directory whose old listing the cache holds: its subtree's changes
        #: against that listing (a parent adds those of the children whose tree id changed)
        self._changes: dict[bytes, Changes] = {}
        #: the new cache starts as a copy of the old one (see :meth:`scan`)
        self._copied = False
        #: the folders dropped from that copy (:func:`~.incremental.drop`)
        self.dropped: list[bytes] = []
        #: every tree this scan encoded, decoded form (diffs and the repository's tree cache
        #: use them instead of reading the store back), except those it patched:
        self.built_trees: dict[bytes, list[Entry]] = {}
        #: the trees this scan patched (``incremental.finish_patched``), encoded
        self.patched_trees: dict[bytes, bytes] = {}
        #: per needed directory, the names of its needed subdirectories
        self._needed_children: dict[bytes, list[bytes]] = {}
        #: directories whose mode changed since the cache: listed from the disk, never reused
        self.relist: set[bytes] = set()
        #: per partly dirty directory, the only names in it that changed (:class:`DirtyDirs`)
        self.dirty_names = dirty.names if isinstance(dirty, DirtyDirs) else {}
        if self.dirty is not None:
            self._needed, self._needed_children = needed_dirs(self.dirty)
