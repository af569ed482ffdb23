"""The state of one scan, apart from the passes that run it.

Every step of a scan is a function of its own module that takes this context; keeping it apart
from :class:`~ctrlz.state.scan.scanner.Scanner` (which imports those modules to run them) means
the steps never import the scanner back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...types import Skipped
from ..exclude import Matcher
from ..statcache import DirCache
from ..trees import Entry
from .model import Changes, DirNode, Limits, ScanStats
from .reader import FileReader
from .sinks import Sink

if TYPE_CHECKING:
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



@dataclass
class ScanContext:
    """The state of one scan of one root: what every step (``walk``, ``incremental``,
    ``build``) reads and updates. :class:`~ctrlz.state.scan.scanner.Scanner` adds the passes."""

    root: Path
    matcher: Matcher
    sink: Sink
    pool: Pool
    limits: Limits = field(default_factory=Limits)
    cache: dict[bytes, DirCache] = field(default_factory=dict)
    #: when this scan started; entries whose mtime or ctime are this recent are cached as
    #: racily clean (not trusted next time)
    scan_ns: int = 0
    entry_budget: list[int] = field(default_factory=lambda: [0])  # shared across roots
    #: directories a watcher saw change since the cache was written; ``None``: unknown, list
    #: everything. Any other directory with a cache entry is reused without being listed.
    dirty: set[bytes] | None = None
    #: what the cache's snapshot skipped, carried over for directories reused unlisted
    previous_skipped: list[Skipped] = field(default_factory=list)
    #: the encoding of a cached tree id when it is at hand in memory (else ``None``): lets
    #: a directory listed from the cache be patched instead of rebuilt entry by entry
    tree_cache: Callable[[bytes], bytes | None] | None = None

    def __post_init__(self) -> None:
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
        #: every tree this scan encoded, decoded form (diffs and the repository's tree cache
        #: use them instead of reading the store back), except those it patched:
        self.built_trees: dict[bytes, list[Entry]] = {}
        #: the trees this scan patched (``incremental.finish_patched``), encoded
        self.patched_trees: dict[bytes, bytes] = {}
        #: per needed directory, the names of its needed subdirectories
        self._needed_children: dict[bytes, list[bytes]] = {}
        if self.dirty is not None:
            self._needed, self._needed_children = needed_dirs(self.dirty)
