"""The file watcher where ctrlz's own inotify watcher cannot run: ``watchdog`` observers.

:class:`~ctrlz.sources.watch.Watcher` needs inotify (Linux). Elsewhere (macOS: FSEvents, the
BSDs: kqueue) and in portable mode (``CTRLZ_PLATFORM=portable``: watchdog's polling observer,
the one that needs nothing from the kernel), this class watches through
`watchdog <https://pypi.org/project/watchdog/>`_ and feeds the same things the daemon and
``ctrlz run`` read: the dirty set (:class:`~ctrlz.sources.changes.DirtyBook`), coalesced
:class:`~ctrlz.sources.changes.FileEvent` lists, and the same callbacks.

The rules that keep it from going blind, as the inotify watcher's:

- **A barrier.** :meth:`ObserverWatcher.sync` returns only once every change made before it
  began is in the dirty set. Polling: the sync runs one poll itself (under the emitter's lock,
  so never beside the background one) and waits until the observer has dispatched what it
  found. Native observers deliver late (FSEvents batches by design): the sync writes a cookie
  file (``.ctrlz-sync-*``, in ``.git/`` when there is one, else in the root; git's fsmonitor
  and watchman do the same) and waits for its event: the kernel reports events of one tree in
  order, so everything before the cookie has been seen. A sync that times out makes the take
  ``rescan_all``.
- **Lost events are loud.** watchdog reports what it lost (an inotify queue overflow, a
  snapshot that could not be taken, an FSEvents callback that failed) by logging a warning; a
  handler on the ``watchdog`` logger turns each one into ``rescan_all`` and ``on_overflow``
  for every running watcher (one more full scan at worst, never one fewer). FSEvents' own
  "events were dropped, scan the subdirectories" flags, which watchdog passes over, are read
  from each batch before watchdog sees it. An observer or emitter thread that died, and the
  root going away, make every take ``rescan_all``.
- **Moves settle both sides**: the old name is marked in its folder and the new one in its
  own, and a folder that arrives (created or moved in) is walked: every folder under it is
  dirty whole and its files are reported created.
- **What polling can miss, it does not**: its stat function reports the change time as the
  modification time, so a rewrite that keeps size and mtime (``cp -p``, ``touch -r``) is
  still a modification (the ctime always moves).

Polling costs a walk of the tree (``lstat`` of every file not excluded) per poll and per sync:
correct everywhere, not fast. Where inotify exists, :class:`~ctrlz.sources.watch.Watcher` is
the one ctrlz runs (``docs/benchmarks.md`` has the figures against watchdog's inotify
backend). Threading as :class:`~ctrlz.sources.watch.Watcher`: callbacks run on this watcher's
own thread, one at a time.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .changes import DirtySet, FileEvent, deliver
from .watcher_base import WatcherBase, is_rules_file

log = logging.getLogger(__name__)

#: the observers ctrlz picks by name (:func:`ctrlz.platform.watcher` says which one)
BACKENDS = ("polling", "fsevents", "kqueue", "inotify")
COOKIE = ".ctrlz-sync-"
_cookies = itertools.count()


class ObserverWatcher(WatcherBase):
    """Watches every non-excluded path under ``root`` with a watchdog observer (the module
    docstring). The arguments are :class:`~ctrlz.sources.watch.Watcher`'s, plus ``backend``
    (one of :data:`BACKENDS`) and ``poll_seconds`` (the polling observer's interval between
    two background polls; a sync polls at once whatever it is). ``max_watches`` is accepted
    and ignored: watchdog keeps its own watches."""

    active = True

    def __init__(
        self,
        root: Path,
        is_excluded: Callable[[bytes, bool], bool],
        on_events: Callable[[list[FileEvent]], None],
        *,
        backend: str = "polling",
        coalesce_seconds: float = 0.2,
        poll_seconds: float = 1.0,
        on_overflow: Callable[[str], None] | None = None,
        on_git_change: Callable[[bytes], None] | None = None,
        on_rules_change: Callable[[bytes], None] | None = None,
        max_watches: int = 0,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown watchdog observer {backend!r}")
        super().__init__(root, is_excluded, on_events, coalesce_seconds=coalesce_seconds,
                         on_overflow=on_overflow, on_git_change=on_git_change,
                         on_rules_change=on_rules_change)
        self.backend = backend
        self.poll_seconds = poll_seconds
        self._root_s = os.fspath(self.root)
        self.watched_dirs = 0  # folders found at start (watchdog does not say how many it holds)
        self.unwatched: frozenset[bytes] = frozenset()  # watchdog watches all or fails loudly

        self._inbox: queue.Queue[Any] = queue.Queue()  # watchdog events, syncs, the stop
        self._cookies: dict[bytes, threading.Event] = {}  # cookie path -> its waiter (_lock)
        self._observer: Any = None

    # -- public API (Watcher's) -------------------------------------------------------------

    def start(self) -> None:
        """Watch the tree and start the threads; when this returns, every change is seen."""
        if self._thread is not None:
            raise RuntimeError("watcher already started")
        if not self.root.is_dir():
            raise OSError(2, "cannot watch workspace root", self._root_s)
        self.watched_dirs = sum(1 for _ in self._walk_dirs(b""))
        self._thread = threading.Thread(target=self._run, name="ctrlz-observe", daemon=True)
        self._thread.start()
        _LOST.add(self)
        try:
            self._observer = self._new_observer()
            self._observer.start()  # polling: the first poll is taken here, synchronously
        except Exception:
            self.stop()
            raise
        if self.backend != "polling" and not self.sync():
            self.stop()  # FSEvents starts its stream on its own thread: prove it delivers
            raise OSError(f"the {self.backend} file watcher did not report a test file in "
                          "time")

    def stop(self) -> None:
        """Stop the observer, deliver what it had dispatched, and stop the thread. Unlike
        the inotify watcher's, this waits for no poll or cookie: a session's last snapshot
        (``ctrlz run``'s post-run) is a full scan anyway."""
        thread = self._thread
        if thread is None or self._stopping.is_set():
            return
        _LOST.discard(self)
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(10)
        self._stopping.set()
        self._inbox.put(("stop", None))
        thread.join()

    def sync(self, timeout: float = 10.0) -> bool:
        """Wait until every change made before this call is in the dirty set and has been
        delivered to ``on_events`` (the module docstring: a poll now, or a cookie file).
        False on timeout, or when the watcher is not running."""
        thread, observer = self._thread, self._observer
        if thread is None or observer is None or not thread.is_alive() \
                or threading.current_thread() is thread or not self._observing():
            return False
        deadline = time.monotonic() + timeout
        if self.backend == "polling":
            for emitter in list(observer.emitters):
                emitter.queue_events(0)  # a poll now (its lock keeps the background one out)
            if not _drained(observer.event_queue, deadline):
                return False
        elif not self._cookie_round_trip(deadline):
            return False
        done = threading.Event()
        self._inbox.put(("sync", done))
        return done.wait(max(0.0, deadline - time.monotonic()))

    def take_dirty(self) -> DirtySet:
        """Return and clear the dirty set (after a :meth:`sync`); ``rescan_all`` when the
        sync failed or the watcher stopped seeing (the module docstring)."""
        synced = self.sync()
        blind = self._failed or not synced
        return self._book.take(rescan_all=blind)

    def renew(self, reason: str) -> None:
        """A change raised no event: ask for one full scan, and watch the tree afresh."""
        self.lose(reason)
        observer = self._observer
        if observer is not None and self._observing():
            observer.unschedule_all()
            observer.schedule(_Handler(self), self._root_s, recursive=True)

    def lose(self, reason: str) -> None:
        """Events may have gone missing (a watchdog warning, a failed callback): the next
        take is a full scan, and ``on_overflow`` hears it (on this watcher's thread)."""
        log.warning("file watcher (%s): %s; the session must rescan", self.backend, reason)
        self.overflowed += 1
        self._book.rescan()
        self._inbox.put(("lost", reason))

    # -- the observer -----------------------------------------------------------------------

    def _new_observer(self) -> Any:
        if self.backend == "polling":
            from watchdog.observers.polling import PollingObserverVFS

            observer = PollingObserverVFS(self._stat, self._listdir,
                                          polling_interval=self.poll_seconds)
        elif self.backend == "inotify":  # measured against ctrlz's own (docs/benchmarks.md)
            from watchdog.observers.inotify import InotifyObserver

            observer = InotifyObserver()
        elif self.backend == "kqueue":  # pragma: no cover - the BSDs; never run here
            from watchdog.observers.kqueue import KqueueObserver

            observer = KqueueObserver()
        else:  # pragma: no cover - macOS; never run here
            from watchdog.observers.fsevents import FSEventsObserver

            observer = FSEventsObserver()
        observer.schedule(_Handler(self), self._root_s, recursive=True)
        if self.backend == "fsevents":  # pragma: no cover - macOS; never run here
            for emitter in list(observer.emitters):
                _report_drops(emitter, self)
        return observer

    def _observing(self) -> bool:
        """Whether the observer and every emitter still run (a dead one sees nothing)."""
        observer = self._observer
        return observer is not None and observer.is_alive() \
            and all(e.is_alive() for e in list(observer.emitters)) and bool(observer.emitters)

    @staticmethod
    def _stat(path: str) -> os.stat_result:
        """``lstat`` (links are never followed), with the change time as the modification
        time: a rewrite that restores size and mtime still moves the ctime."""
        st = os.lstat(path)
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid,
                               st.st_gid, st.st_size, st.st_atime,
                               max(st.st_mtime, st.st_ctime), st.st_ctime))

    def _listdir(self, path: str | None) -> Iterator[os.DirEntry[str]]:
        """The polling observer's listing, without what ctrlz neither captures nor watches."""
        assert path is not None
        d = self._rel(os.fsencode(path))
        with os.scandir(path) as it:
            for entry in it:
                name = os.fsencode(entry.name)
                rel = d + b"/" + name if d else name
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if not self._is_excluded(rel, is_dir):
                    yield entry

    def _cookie_round_trip(self, deadline: float) -> bool:
        git = os.path.join(self._root_b, b".git")
        where = git if os.path.isdir(git) and not os.path.islink(git) else self._root_b
        path = os.path.join(where, os.fsencode(f"{COOKIE}{os.getpid()}-{next(_cookies)}"))
        seen = threading.Event()
        with self._lock:
            self._cookies[path] = seen
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            os.close(fd)
            return seen.wait(max(0.0, deadline - time.monotonic()))
        except OSError as exc:
            log.warning("file watcher: cannot write its sync file %s (%s)",
                        os.fsdecode(path), exc)
            return False
        finally:
            with self._lock:
                self._cookies.pop(path, None)
            try:
                os.unlink(path)
            except OSError:
                pass

    # -- the thread: events into the dirty set and the pending list -------------------------

    def _run(self) -> None:
        try:
            while True:
                try:
                    item = self._inbox.get(timeout=_seconds(self._pending.timeout_ms()))
                except queue.Empty:
                    item = None
                if item is not None:
                    kind, arg = item
                    if kind == "event":
                        self._handle(arg)
                    elif kind == "lost":
                        self._call(self._on_overflow, arg)
                    else:  # a sync or the stop: deliver everything seen
                        self._flush()
                        if kind == "stop":
                            return
                        arg.set()
                        continue
                if self._pending.due():
                    self._flush()
        except Exception:  # never die silently: the session must know to rescan
            log.exception("file watcher thread failed; the session must rescan")
            self._failed = True
            self._book.rescan()
            self._call(self._on_overflow, "watcher failed")

    def _handle(self, event: Any) -> None:
        src = os.fsencode(event.src_path)
        if event.event_type in ("opened", "closed_no_write"):
            return
        with self._lock:
            cookie = self._cookies.get(src)
        if cookie is not None or os.path.basename(src).startswith(COOKIE.encode()):
            if cookie is not None:
                cookie.set()
            return  # ctrlz's own, gone before any snapshot lists its folder
        if src == self._root_b:
            if event.event_type in ("deleted", "moved"):
                self.lose("workspace root moved or deleted")
            return  # a change to the root folder itself: its entries' events say what
        is_dir = bool(event.is_directory)
        if event.event_type == "moved":
            self._gone(src, is_dir)
            dest = os.fsencode(event.dest_path)
            if dest.startswith(self._root_b + b"/"):
                self._arrived(dest, is_dir)
        elif event.event_type == "created":
            self._arrived(src, is_dir)
        elif event.event_type == "deleted":
            self._gone(src, is_dir)
        elif not is_dir:  # modified, closed (after a write), attrib
            rel = self._mark(src, False)
            if rel is not None:
                self._pending.add(rel, "modified", False)
        elif event.event_type == "attrib" or self.backend in ("fsevents", "kqueue"):
            # a folder's own mode (whether it can be listed), or a native observer that may
            # name the folder rather than what changed in it: list it whole
            rel = self._mark(src, True)
            if rel is not None:
                self._book.mark(rel)
        # else a folder "modified": polling and inotify name the entries that changed in it

    def _mark(self, path: bytes, is_dir: bool) -> bytes | None:
        """Mark ``path`` changed in its folder; its relative path, or None when excluded."""
        rel = self._rel(path)
        if not rel:
            return None
        d, _, name = rel.rpartition(b"/")
        if is_rules_file(name, rel):
            self._rules_changed(rel)
        if self._is_excluded(rel, is_dir):
            return None
        self._book.mark(d, name)
        return rel

    def _gone(self, path: bytes, is_dir: bool) -> None:
        rel = self._mark(path, is_dir)
        if rel is not None:
            self._record(rel, "deleted", is_dir)

    def _arrived(self, path: bytes, is_dir: bool) -> None:
        """A path created or moved in: a folder is walked, each folder under it dirty whole
        and each file reported created (an observer may report the contents, or not)."""
        rel = self._mark(path, is_dir)
        if rel is None:
            return
        self._record(rel, "created", is_dir)
        if is_dir:
            for d in self._walk_dirs(rel, report=True):
                self._book.mark(d)

    def _walk_dirs(self, top: bytes, *, report: bool = False) -> Iterator[bytes]:
        """``top`` and every non-excluded folder under it; with ``report``, what is found is
        recorded created (the folder is new to the workspace)."""
        stack = [top]
        while stack:
            d = stack.pop()
            yield d
            try:
                for sub in self._subfolders(d, report=report, rules=self._rules_changed):
                    stack.append(sub)
            except OSError:
                continue  # gone meanwhile, or unreadable: its parent's listing says so

    def _flush(self) -> None:
        if not deliver(self._pending, self._root_b, self._on_events, self._on_git_change):
            self.lose("on_events callback failed")  # the consumer lost these events

    def _rel(self, path: bytes) -> bytes:
        if path == self._root_b:
            return b""
        return path[len(self._root_b) + 1:] if path.startswith(self._root_b + b"/") else b""


class _Handler:
    """What the observer's thread calls: the event goes to the watcher's own thread (it
    must never raise there: an exception would end the observer's thread)."""

    def __init__(self, watcher: ObserverWatcher) -> None:
        self.watcher = watcher

    def dispatch(self, event: Any) -> None:
        self.watcher._inbox.put(("event", event))


class _LostEvents(logging.Handler):
    """watchdog says what it lost only in its log (module docstring): every warning it logs
    raises ``rescan_all`` in every running :class:`ObserverWatcher`."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.watchers: set[ObserverWatcher] = set()
        self._guard = threading.Lock()

    def add(self, watcher: ObserverWatcher) -> None:
        with self._guard:
            if not self.watchers:
                logger = logging.getLogger("watchdog")
                if not logger.isEnabledFor(logging.WARNING):  # a quieter root must not
                    logger.setLevel(logging.WARNING)  # hide what was lost from us
                logger.addHandler(self)
            self.watchers.add(watcher)

    def discard(self, watcher: ObserverWatcher) -> None:
        with self._guard:
            self.watchers.discard(watcher)
            if not self.watchers:
                logging.getLogger("watchdog").removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        with self._guard:
            watchers = list(self.watchers)
        for w in watchers:
            w.lose(f"watchdog: {record.getMessage()}")


_LOST = _LostEvents()


#: FSEvents' flags for "events below here were lost": must scan subdirectories, dropped by the
#: user-space daemon, dropped by the kernel (Apple's FSEvents.h)
_FSEVENTS_LOST = 0x1 | 0x2 | 0x4


def _report_drops(emitter: Any, watcher: ObserverWatcher) -> None:  # pragma: no cover - macOS
    """watchdog's FSEvents emitter passes over the flags that say events were lost: look at
    each batch first, and make the watcher rescan when one is up."""
    queue_events = emitter.queue_events

    def checked(timeout: float, events: list[Any]) -> None:
        if any(getattr(e, "flags", 0) & _FSEVENTS_LOST for e in events):
            watcher.lose("FSEvents dropped events (must scan subdirectories)")
        queue_events(timeout, events)

    emitter.queue_events = checked


def _drained(q: queue.Queue[Any], deadline: float) -> bool:
    """Wait until every item put in ``q`` was marked done (``Queue.join`` with a deadline)."""
    with q.all_tasks_done:
        return q.all_tasks_done.wait_for(lambda: q.unfinished_tasks == 0,
                                         max(0.0, deadline - time.monotonic()))


def _seconds(ms: int) -> float | None:
    return None if ms < 0 else ms / 1000
