"""Which folder each inotify watch stands for: the watcher's map, kept by descriptor.

A watch belongs to an inode, not to a path: when a folder moves, its watch goes with it, and
``add_watch`` on a folder already watched answers the same descriptor. A map kept by path
alone goes wrong the moment a path names another folder than before (a folder renamed over
another, two swapped): the new watch is dropped with the old one, and the watcher goes blind
there until it restarts. So every change here is made by descriptor, and a path entry is only
removed when it still points at the descriptor being removed.
"""

from __future__ import annotations


class WatchMap:
    """Descriptor ↔ folder (workspace-relative). Used by the watcher thread alone."""

    def __init__(self) -> None:
        self._wd_path: dict[int, bytes] = {}
        self._path_wd: dict[bytes, int] = {}
        #: descriptors forgotten by path since the last :meth:`take_unmapped`: their folders
        #: moved, to another place in the workspace (mapped again) or out of it (to remove)
        self._dropped: set[int] = set()

    def __len__(self) -> int:
        return len(self._path_wd)

    def __contains__(self, path: bytes) -> bool:
        return path in self._path_wd

    def path(self, wd: int) -> bytes | None:
        return self._wd_path.get(wd)

    def put(self, wd: int, path: bytes) -> None:
        """``wd`` watches ``path`` now. If it watched another path before, the folder moved
        here: that path keeps its entry only if it names another descriptor already."""
        old = self._wd_path.get(wd)
        if old is not None and old != path and self._path_wd.get(old) == wd:
            del self._path_wd[old]
        self._wd_path[wd] = path
        self._path_wd[path] = wd

    def forget(self, wd: int, path: bytes) -> None:
        """The kernel dropped ``wd`` (its folder was deleted or left the filesystem). The path
        may already hold a new watch (a folder renamed over it): that one stays."""
        self._wd_path.pop(wd, None)
        if self._path_wd.get(path) == wd:
            del self._path_wd[path]

    def drop_tree(self, top: bytes, *, moved: bool) -> None:
        """Forget ``top`` and the folders under it. The kernel watches stay: a deleted folder
        loses its own, and a ``moved`` one keeps them at its new place, which the caller maps
        again (:meth:`put`) or removes (:meth:`take_unmapped`)."""
        prefix = top + b"/"
        for path in [p for p in self._path_wd if p == top or p.startswith(prefix)]:
            wd = self._path_wd.pop(path)
            if self._wd_path.get(wd) == path:
                del self._wd_path[wd]
            if moved:
                self._dropped.add(wd)

    def take_unmapped(self) -> set[int]:
        """The descriptors dropped as moved that no path maps since: their folders left the
        workspace, and their watches are the caller's to remove."""
        gone, self._dropped = self._dropped - self._wd_path.keys(), set()
        return gone

    def clear(self) -> set[int]:
        """Forget everything; returns every descriptor that was known (mapped or dropped)."""
        known = set(self._wd_path) | self._dropped
        self._wd_path.clear()
        self._path_wd.clear()
        self._dropped = set()
        return known

    def descriptors(self) -> set[int]:
        return set(self._wd_path)
