"""What ctrlz's two file watchers share, apart from how they hear of changes: the callbacks
and the state a session reads (the dirty set, the pending events), the ignore-rules rule, and
the listing of one folder that both walk a tree with.

:class:`~ctrlz.sources.watch.Watcher` (inotify) and
:class:`~ctrlz.sources.observe.ObserverWatcher` (watchdog) differ in their threads and in
what the kernel tells them; everything here must behave the same in both, so it is written
once (the events' own rules live in :mod:`ctrlz.sources.changes`).
"""

from __future__ import annotations

import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Self

from .changes import Action, DirtyBook, FileEvent, Pending, call_back

GITIGNORE = b".gitignore"
GIT_INFO_EXCLUDE = b".git/info/exclude"


def is_rules_file(name: bytes, rel: bytes) -> bool:
    """Whether the path ``rel`` (last part ``name``) may hold ignore rules; one inside a
    ``.git`` directory other than ``info/exclude`` is weeded out by ``_rules_changed``."""
    return name == GITIGNORE or rel == GIT_INFO_EXCLUDE


class WatcherBase(ABC):
    """The part of a watcher that does not depend on where its events come from. The
    arguments are :class:`~ctrlz.sources.watch.Watcher`'s (its docstring says what each is
    for); a subclass brings the watching: :meth:`start`, :meth:`stop`, its thread."""

    def __init__(
        self,
        root: Path,
        is_excluded: Callable[[bytes, bool], bool],
        on_events: Callable[[list[FileEvent]], None],
        *,
        coalesce_seconds: float,
        on_overflow: Callable[[str], None] | None,
        on_git_change: Callable[[bytes], None] | None,
        on_rules_change: Callable[[bytes], None] | None,
    ) -> None:
        self.root = Path(root)
        self._root_b = os.fsencode(self.root)
        self._is_excluded = is_excluded
        self._on_events = on_events
        self._on_overflow = on_overflow
        self._on_git_change = on_git_change
        self._on_rules_change = on_rules_change
        self.coalesce_seconds = coalesce_seconds
        #: times events were lost (each raised ``rescan_all``)
        self.overflowed = 0
        # the subclass's module logger, so a log line names the watcher that wrote it
        self._log = logging.getLogger(type(self).__module__)

        self._book = DirtyBook()  # the dirty set (its own lock)
        self._pending = Pending(coalesce_seconds, max(1.0, 10 * coalesce_seconds))
        self._lock = threading.Lock()
        self._failed = False
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @abstractmethod
    def start(self) -> None:
        """Watch the tree; when this returns, every change is seen."""

    @abstractmethod
    def stop(self) -> None:
        """Stop watching and stop the thread. Idempotent."""

    def mark_dirty(self, d: bytes, name: bytes | None = None) -> None:
        """A change found by another way than an event (``session/daemon/watch_audit.py``)."""
        self._book.mark(d, name)

    def is_dirty(self, d: bytes) -> bool:
        """Whether a change since the last take covers folder ``d`` (:meth:`DirtyBook.covers`)."""
        return self._book.covers(d)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- for the subclasses -----------------------------------------------------------------

    def _record(self, rel: bytes, action: Action, is_dir: bool) -> None:
        self._pending.add(rel, action, is_dir)

    _call = staticmethod(call_back)

    def _abs(self, rel: bytes) -> bytes:
        return self._root_b + b"/" + rel if rel else self._root_b

    def _rules_changed(self, rel: bytes) -> None:
        """An ignore file changed: nothing captured below it can be trusted from the cache
        (the next take is a full scan), and the owner hears it to rebuild its
        ``is_excluded``; then :meth:`_rules_widened` (directories the old rules excluded)."""
        if rel != GIT_INFO_EXCLUDE and (rel.startswith(b".git/") or b"/.git/" in rel):
            return  # a file inside a .git directory is not an ignore file
        self._log.info("file watcher: %s changed; the next snapshot scans everything",
                       os.fsdecode(rel))
        self._book.rescan()
        self._call(self._on_rules_change, rel)
        self._rules_widened(rel)

    def _rules_widened(self, rel: bytes) -> None:
        """The ignore file ``rel`` changed and the owner knows: a watcher that holds one
        watch per folder adds those the new rules include. Nothing by default."""
        return

    def _subfolders(self, d: bytes, *, report: bool,
                    rules: Callable[[bytes], None]) -> Iterator[bytes]:
        """List folder ``d`` (raises OSError when it cannot be) and yield its non-excluded
        subfolders. With ``report`` the folder is new to the workspace: each non-excluded
        entry is recorded created, and each ignore file in it handed to ``rules``."""
        with os.scandir(self._abs(d)) as it:
            for entry in it:
                rel = d + b"/" + entry.name if d else entry.name
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if report and is_rules_file(entry.name, rel):
                    rules(rel)  # a new directory brought its own rules
                if self._is_excluded(rel, is_dir):
                    continue
                if report:
                    self._record(rel, "created", is_dir)
                if is_dir:
                    yield rel
