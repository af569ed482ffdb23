"""The scanner: one tracked root, walked top-down, then finished bottom-up into tree objects.

:class:`Scanner` holds the state of one scan and runs its two passes; each step is a function
of its own module (``walk``, ``incremental``, ``reader``, ``build``) that takes the scanner.
Both passes are loops over explicit lists, never recursion, so a directory chain deeper than
Python's recursion limit scans like any other.
"""

from __future__ import annotations

import os

from ...errors import WorkspaceError
from ..db.statcache import DirCache, Stamp
from ..ignore.exclude import GITIGNORE
from .blind import fs_type, names_of
from .build import finish
from .context import ScanContext
from .incremental import list_unchanged
from .model import DirNode, ScanResult
from .walk import STAMPED_FS, list_disk, list_names, release_deferred


class Scanner(ScanContext):
    """Scans one root. Create one per root per snapshot."""

    def scan(self) -> ScanResult:
        st = os.lstat(self._root_bytes)
        root_mode = st.st_mode
        if self.stamps and fs_type(os.path.realpath(self._root_bytes)) in STAMPED_FS:
            self.stamp_dev = st.st_dev
        top = DirNode(b"", self._root_bytes, self.matcher.root_rules, self.cache.get(b""), None,
                      root_mode & 0o7777, (root_mode, st.st_dev, st.st_mtime_ns,
                                           st.st_ctime_ns, st.st_ino))
        order: list[DirNode] = []
        stack = [top]
        reader = self._reader
        while stack:
            node = stack.pop()
            order.append(node)
            self._list(node, stack)
            reader.drain(block=False)
        release_deferred(self)
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
            why = next((k.reason.partition(": ")[2] for k in self.skipped
                        if k.path == top.rel), "")
            raise WorkspaceError(f"cannot list the workspace root {self.root}"
                                 f"{': ' + why if why else ''}; check its permissions")
        return ScanResult(new_cache[b""][0], top.mode, self.stats, self.skipped, new_cache,
                          self._changes.get(b""), self._all_linked(new_cache),
                          self._all_stamps(new_cache, order))

    def _all_stamps(self, new_cache: dict[bytes, DirCache],
                    listed: list[DirNode]) -> dict[bytes, Stamp]:
        """The stamps this scan took, and the old ones of the folders whose cache entry it
        kept as it was (the same object: the same names), listed or not: a stamp says that
        while the folder's stat is unchanged, its names are those of its cache entry.

        A scan that copied the old cache (it reused subtrees: a dirty scan) copies the old
        stamps too, and drops those of the folders it listed into a new entry or dropped
        (:func:`.incremental.drop`): the same stamps as the loop below, at the cost of what
        changed rather than a Python loop over every folder (60 ms a dirty snapshot at
        100,000 files, the daemon's largest share of a 10-edit snapshot)."""
        new = self.new_stamps
        old_cache = self.cache
        if self._copied:
            kept = dict(self.stamps)
            for node in listed:
                if new_cache.get(node.rel) is not old_cache.get(node.rel):
                    kept.pop(node.rel, None)
            for rel in self.dropped:
                kept.pop(rel, None)
            kept.update(new)
            return kept
        for rel, stamp in self.stamps.items():
            if rel not in new and (entry := new_cache.get(rel)) is not None \
                    and entry is old_cache.get(rel):
                new[rel] = stamp
        return new

    def _all_linked(self, new_cache: dict[bytes, DirCache]) -> list[bytes]:
        """The files found with more than one link, with the other names the cache knows for
        the inodes new among them (a copy of a tree made with ``cp -al`` links files no event
        named): from the next scan on, each is stat'ed again."""
        new = [p for p in self.linked if p not in self._linked_before]
        if not new:
            return self.linked
        inodes = set()
        for path in new:
            d, _, name = path.rpartition(b"/")
            entry = new_cache.get(d, (None, {}, None))[1].get(name)
            if entry is not None:
                inodes.add(entry[0][4])
        return sorted(set(self.linked).union(names_of(inodes, new_cache)))

    def _list(self, node: DirNode, stack: list[DirNode]) -> None:
        """A directory the watcher saw no change in is listed from the cache, one it saw only
        some names change in from the cache and those names; any other one from the disk."""
        if self._needed is not None and node.cached is not None and self.dirty is not None:
            if node.rel not in self.dirty and node.rel not in self.relist:
                list_unchanged(self, node, stack)
                return
            names = self.dirty_names.get(node.rel)
            if names is not None and GITIGNORE not in names:
                list_names(self, node, stack, names)
                return
        list_disk(self, node, stack)
