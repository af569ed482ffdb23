"""Waking the event poller the moment a store's database files change (inotify).

The CLI, agent hooks, the workspace daemons and the MCP server write the stores directly, so
without help the service would only notice at its next once-a-second look. This watches, per
known store, the store directory and its ``toolcalls/`` directory for writes to the SQLite
files the poller's signature reads (the catalog and its WAL, the session database's WAL, the
tool-call catalog and its WAL, and the tool-call inbox, where hooks leave captures), plus
``<home>/workspaces`` (stores made or removed) and ``<home>`` (``registry.json`` rewritten),
and calls ``wake`` when one is written. It reads nothing itself: the poller still decides
what changed, so a spurious wake costs one ``stat`` per file.

This is not :mod:`ctrlz.sources.watch`: that one watches workspace trees for the session, with
exclusion rules, coalescing and overflow rescans, and faces do not import sources. This one
has a handful of watches on the service's own home and the inotify file descriptor sits in the
event loop (``loop.add_reader``), so it costs no thread. Where inotify is missing (not Linux,
no ``inotify_simple``, ``max_user_instances`` or ``max_user_watches`` exhausted) it says so
once in the log and the once-a-second look is what remains.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from .. import platform
from ..session.locator import stores_dir
from .events import DB_FILES

log = logging.getLogger("ctrlz.service")

#: file names (per directory kind) whose writes matter
_STORE_NAMES = frozenset(n for n in DB_FILES if "/" not in n) | {"catalog.db", "session.db"}
_TOOLCALL_NAMES = frozenset(n.split("/", 1)[1] for n in DB_FILES if n.startswith("toolcalls/"))
_HOME_NAMES = frozenset({"registry.json"})


class StoreWatch:
    """inotify watches on the known stores' database files (see the module docstring)."""

    def __init__(self, home: str, wake: Callable[[], None]) -> None:
        self.home = home
        self.wake = wake
        self._inotify: Any = None
        self._flags: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watches: dict[str, int] = {}  # directory -> watch descriptor
        self._names: dict[int, frozenset[str] | None] = {}  # wd -> names that wake (None: any)
        self._failed: set[str] = set()  # directories that could not be watched (logged once)
        self.wakeups = 0  # for the service's report

    @property
    def active(self) -> bool:
        return self._inotify is not None

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Open the inotify instance and hand its descriptor to ``loop``; False (and the
        poll alone from then on) where that is not possible."""
        if platform.watcher() != "inotify":  # watchdog's observers are the daemons' own
            log.info("no inotify on this platform: changes to the stores are found by polling")
            return False
        try:
            from inotify_simple import INotify
            from inotify_simple import flags as F
        except ImportError:
            log.info("inotify_simple is not available: changes are found by polling")
            return False
        try:
            self._inotify = INotify(nonblocking=True)
        except OSError as exc:
            log.warning("inotify is not available (%s): changes are found by polling, up to "
                        "a second late", exc)
            return False
        self._flags = F
        self._loop = loop
        loop.add_reader(self._inotify.fileno(), self._readable)
        self._add(self.home, _HOME_NAMES)
        self._add(stores_dir(self.home), None)
        return True

    def track(self, stores: Iterable[str]) -> bool:
        """Watch each of ``stores`` (and its ``toolcalls/``), and no store that is gone:
        called with the known stores at every housekeeping round, so new ones are picked up
        within a second of appearing. True when a watch was added: what happened in that
        directory before it was watched woke nobody, so the caller looks now."""
        if self._inotify is None:
            return False
        wanted: dict[str, frozenset[str] | None] = {
            self.home: _HOME_NAMES, stores_dir(self.home): None}
        for store in stores:
            wanted[store] = _STORE_NAMES
            wanted[os.path.join(store, "toolcalls")] = _TOOLCALL_NAMES
            wanted[os.path.join(store, "toolcalls", "inbox")] = None  # any record landing
        for path in [p for p in self._watches if p not in wanted]:
            wd = self._watches.pop(path)
            self._names.pop(wd, None)
            with contextlib.suppress(OSError):
                self._inotify.rm_watch(wd)
        added = False
        for path, names in wanted.items():
            if path not in self._watches:
                added = self._add(path, names) or added
        return added

    def _add(self, path: str, names: frozenset[str] | None) -> bool:
        F = self._flags
        mask = (F.MODIFY | F.CLOSE_WRITE | F.CREATE | F.MOVED_TO | F.MOVED_FROM | F.DELETE
                | F.ONLYDIR)
        try:
            wd = self._inotify.add_watch(path, mask)
        except FileNotFoundError:
            return False  # not made yet (a store's toolcalls/): the next round tries again
        except OSError as exc:  # ENOSPC: out of watches; the poll still finds the change
            if path not in self._failed:
                self._failed.add(path)
                log.warning("cannot watch %s (%s): its changes are found by polling", path,
                            exc)
            return False
        self._failed.discard(path)
        self._watches[path] = wd
        self._names[wd] = names
        return True

    def _readable(self) -> None:
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            return
        F = self._flags
        hit = False
        for e in events:
            if e.mask & F.IGNORED:  # the directory went: forget it, track() may add it back
                path = next((p for p, wd in self._watches.items() if wd == e.wd), None)
                if path is not None:
                    del self._watches[path]
                self._names.pop(e.wd, None)
                hit = True
                continue
            if e.mask & F.Q_OVERFLOW:
                hit = True
                continue
            names = self._names.get(e.wd, frozenset())
            if names is None or e.name in names:
                hit = True
        if hit:
            self.wakeups += 1
            self.wake()

    def close(self) -> None:
        if self._inotify is None:
            return
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._inotify.fileno())
        with contextlib.suppress(OSError):
            self._inotify.close()
        self._inotify = None
