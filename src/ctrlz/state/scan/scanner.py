"""The scanner: one tracked root, walked top-down, then finished bottom-up into tree objects.

:class:`Scanner` holds the state of one scan and runs its two passes; each step is a function
of its own module (``walk``, ``incremental``, ``reader``, ``build``) that takes the scanner.
Both passes are loops over explicit lists, never recursion, so a directory chain deeper than
Python's recursion limit scans like any other.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import WorkspaceError
from ...types import Skipped
from ..exclude import Matcher
from ..statcache import RACY_WINDOW_NS, DirCache
from ..trees import Entry
from .build import finish
from .incremental import list_unchanged, needed_dirs
from .model import Changes, DirNode, Limits, ScanResult, ScanStats
from .reader import FileReader
from .sinks import Sink
from .walk import list_disk


@dataclass
class Scanner:
    """Scans one root. Create one per root per snapshot."""

    root: Path
    matcher: Matcher
    sink: Sink
    pool: ThreadPoolExecutor
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
        self._cutoff = self.scan_ns - RACY_WINDOW_NS
        #: per needed directory, the names of its needed subdirectories
        self._needed_children: dict[bytes, list[bytes]] = {}
        if self.dirty is not None:
            self._needed, self._needed_children = needed_dirs(self.dirty)

    def scan(self) -> ScanResult:
        root_mode = os.lstat(self._root_bytes).st_mode
        top = DirNode(b"", self._root_bytes, self.matcher.root_rules, self.cache.get(b""), None,
                      root_mode & 0o7777)
        order: list[DirNode] = []
        stack = [top]
        reader = self._reader
        while stack:
            node = stack.pop()
            order.append(node)
            self._list(node, stack)
            reader.drain(block=False)
        reader.submit_batch()
        reader.drain(block=True)
        # Reused subtrees keep their cache entries. Rather than pick those out of the whole
        # cache (O(workspace) per snapshot), copy it (one C-level dict copy), let every
        # listed directory replace its own entry, and drop the subtrees of directories that
        # are gone (``incremental.drop_vanished``): every cached directory is either listed,
        # below a reused one, or below one that vanished from a listed parent, so the result
        # is exactly the listed and reused directories.
        self._copied = self._reused
        new_cache: dict[bytes, DirCache] = dict(self.cache) if self._copied else {}
        for node in reversed(order):
            finish(self, node, new_cache)
        if top.unreadable:
            raise WorkspaceError(f"cannot list the workspace root {self.root}; check its "
                                 "permissions")
        return ScanResult(new_cache[b""][0], top.mode, self.stats, self.skipped, new_cache,
                          self._changes.get(b""))

    def _list(self, node: DirNode, stack: list[DirNode]) -> None:
        """A directory the watcher saw no change in is listed from the cache; any other one
        from the disk."""
        if (self._needed is not None and node.cached is not None and self.dirty is not None
                and node.rel not in self.dirty):
            list_unchanged(self, node, stack)
            return
        list_disk(self, node, stack)
