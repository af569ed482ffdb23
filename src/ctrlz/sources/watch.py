"""The file watcher behind ``ctrlz run``: inotify events, coalesced, never silently lost.

Earlier systems polled the tree and dropped whatever changed between two polls. This watcher
takes the other route: one inotify watch per directory, a background thread that reads the
kernel's queue, and a rule for every way events can go missing.

What the session gets:

- ``on_events(list[FileEvent])``: created / modified / deleted paths, coalesced per path within
  a window (see :func:`combine`). Delivery is at-least-once, so consumers should upsert: a path
  can occasionally be reported ``created`` twice when a new directory is scanned while its first
  files are still being written.
- :meth:`Watcher.take_dirty`: the directories whose listing or files changed since the last
  take, and in each the names that changed (unless there were many, or the directory is new),
  so a snapshot taken during a session re-scans only those. ``rescan_all`` means "the
  watcher cannot vouch for the set": after a queue overflow, the first watch that could not
  be added (``max_user_watches`` exhausted), the root moving, or a callback raising. Folders
  left unwatched are in ``unwatched`` on every take, to be listed whole.
- ``on_overflow(reason)``: fired whenever ``rescan_all`` is raised, so the session can reconcile
  by scanning instead of trusting an incomplete event stream.
- ``on_git_change(rel_path)``: a ref, ``HEAD``, ``logs/HEAD`` or ``packed-refs`` changed in a
  ``.git`` directory, so the session can fire its git trigger.
- ``on_rules_change(rel_path)``: a ``.gitignore`` or ``.git/info/exclude`` changed. Ignore rules
  decide what is captured anywhere below them, so this also raises ``rescan_all``; the callback
  lets the owner rebuild its ``is_excluded`` before the watcher walks the tree again to watch
  directories the new rules include.

Renames are reported as ``deleted`` (old path) plus ``created`` (new path, and everything under
it when it is a directory: the new location is scanned). A deleted or moved-away *directory* is
one ``deleted`` event with ``is_dir=True`` meaning its whole subtree is gone; files still inside
it at that moment are not listed one by one.

Threading: every callback runs on the watcher thread, one at a time, never while an internal
lock is held. Callbacks must be quick (the kernel queue fills while they run; if it overflows the
session is told) and must not call :meth:`Watcher.sync` or :meth:`Watcher.take_dirty` (those wait
for the watcher thread; called from it they return without waiting).
"""

from __future__ import annotations

import errno
import logging
import os
import select
import threading
from collections.abc import Callable
from pathlib import Path

from inotify_simple import INotify
from inotify_simple import flags as F

from .changes import NAMES_MAX, Action, DirtySet, FileEvent, combine, deliver, git_paths
from .wake import WakePipe
from .watch_map import WatchMap
from .watcher_base import GIT_INFO_EXCLUDE, WatcherBase, is_rules_file

__all__ = ["NAMES_MAX", "WATCH_MASK", "Action", "DirtySet", "FileEvent", "Watcher", "combine",
           "git_paths"]

log = logging.getLogger(__name__)

#: The watch mask. IN_EXCL_UNLINK keeps a file that is unlinked while still open from turning a
#: ``deleted`` back into ``modified``; IN_ONLYDIR | IN_DONT_FOLLOW make sure a directory swapped
#: for a symlink between our ``scandir`` and ``add_watch`` is never followed.
WATCH_MASK = (F.CREATE | F.DELETE | F.CLOSE_WRITE | F.MODIFY | F.MOVED_FROM | F.MOVED_TO
              | F.ATTRIB | F.DELETE_SELF | F.MOVE_SELF | F.ONLYDIR | F.DONT_FOLLOW
              | F.EXCL_UNLINK)

_CREATED = F.CREATE | F.MOVED_TO
_DELETED = F.DELETE | F.MOVED_FROM
_MODIFIED = F.MODIFY | F.CLOSE_WRITE | F.ATTRIB
# add_watch errors that mean "this directory is not watched although it should be".
_LOST_ERRNOS = (errno.ENOSPC, errno.ENOMEM)
#: how many folders :meth:`Watcher.place` watches between two calls of its ``pace``
PACE_EVERY = 256
# Seconds to let events pile up after a wake-up. At ~100,000 events/s the queue (16,384 by
# default) still has ten times the room it needs.
_BATCH_DELAY = 0.01


class Watcher(WatcherBase):
    """Watches every non-excluded directory under ``root`` (see the module docstring).

    ``is_excluded(rel_path, is_dir)`` decides what is neither watched nor reported; it is called
    for each path whose parent is watched, on the watcher thread. ``coalesce_seconds`` is the
    quiet time after which pending events are delivered; a path written continuously is still
    reported at least every ``max(1, 10 * coalesce_seconds)`` seconds.
    """

    def __init__(
        self,
        root: Path,
        is_excluded: Callable[[bytes, bool], bool],
        on_events: Callable[[list[FileEvent]], None],
        *,
        coalesce_seconds: float = 0.2,
        on_overflow: Callable[[str], None] | None = None,
        on_git_change: Callable[[bytes], None] | None = None,
        on_rules_change: Callable[[bytes], None] | None = None,
        max_watches: int = 0,
    ) -> None:
        super().__init__(root, is_excluded, on_events, coalesce_seconds=coalesce_seconds,
                         on_overflow=on_overflow, on_git_change=on_git_change,
                         on_rules_change=on_rules_change)
        #: at most this many watches (0: as many as the kernel gives); past it, folders are
        #: unwatched as when ``fs.inotify.max_user_watches`` runs out
        self.max_watches = max_watches

        # Owned by the watcher thread (and by start() before the thread runs).
        self._inotify: INotify | None = None
        self._watches = WatchMap()  # which folder each watch descriptor stands for
        self._reasons: list[str] = []  # overflow reasons waiting to be delivered
        self._moved: set[bytes] = set()  # folders the batch being read moved (from or to)

        # Shared, under _lock (and _failed, _thread, _stopping: WatcherBase's).
        self._unwatched: set[bytes] = set()  # dirs whose watch failed (see ``unwatched``)
        self._sync_waiters: list[threading.Event] = []
        self._renew_reason: str | None = None
        self._pipe: WakePipe | None = None

    # -- public API -------------------------------------------------------------------------

    def start(self) -> None:
        """Watch the whole tree (synchronously: when this returns, every non-excluded directory
        is watched) and start the reader thread."""
        self.place()
        self.start_reader()

    def place(self, pace: Callable[[], None] | None = None) -> None:
        """:meth:`start`'s first half: the watches alone. A caller that places them on a
        thread of low priority (the daemon's start-up) starts the reader from another one,
        :meth:`start_reader`, soon after: a thread inherits its creator's priority, and the
        events queue in the kernel meanwhile. ``pace``: called every :data:`PACE_EVERY`
        folders, where the caller may wait (the daemon's start-up lets a command's walk go
        first); a folder not yet watched meanwhile is watched before it is listed, as ever."""
        if self._thread is not None or self._inotify is not None:
            raise RuntimeError("watcher already started")
        self._inotify = INotify(nonblocking=True)
        self._pipe = WakePipe()
        self._add_tree(b"", emit=False, pace=pace)
        if b"" not in self._watches:
            self._close_fds()
            raise OSError(errno.ENOENT, "cannot watch workspace root", str(self.root))

    def start_reader(self) -> None:
        """The reader thread, once :meth:`place` has returned."""
        if self._inotify is None or self._thread is not None:
            raise RuntimeError("watches not placed, or the reader runs already")
        self._thread = threading.Thread(target=self._run, name="ctrlz-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Deliver everything that happened before this call, then stop the thread and close
        the inotify descriptor. Idempotent."""
        thread = self._thread
        if self._stopping.is_set():
            return
        if thread is None:  # placed (or never started), no reader: the descriptors alone
            if self._inotify is not None:
                self._stopping.set()
                self._close_fds()
            return
        self._stopping.set()
        self._wake()
        thread.join()
        self._close_fds()

    def sync(self, timeout: float = 10.0) -> bool:
        """Wait until every change made before this call has reached the dirty set and been
        delivered to ``on_events`` (pending events are flushed early). inotify queues events
        synchronously with the system call that causes them, so one read after this call
        started sees them all. Returns False on timeout or when the thread is not running."""
        thread = self._thread
        if thread is None or not thread.is_alive() or threading.current_thread() is thread:
            return False
        done = threading.Event()
        with self._lock:
            self._sync_waiters.append(done)
        self._wake()
        return done.wait(timeout)

    def take_dirty(self) -> DirtySet:
        """Return and clear the dirty set (after a :meth:`sync`). ``rescan_all`` is cleared too,
        except while some directory is still unwatched or the thread has died: then it stays up
        on every take, since the watcher cannot see changes there. So it is when the sync
        times out (a thread too slow to drain the queue): the set may lack the latest changes."""
        synced = self.sync()
        with self._lock:
            thread_dead = self._thread is not None and not self._thread.is_alive() \
                and not self._stopping.is_set()
            blind = self._failed or thread_dead or not synced
            unwatched = frozenset(self._unwatched)
        return self._book.take(rescan_all=blind, unwatched=unwatched)

    def renew(self, reason: str) -> None:
        """Walk the tree again and put back every watch that should be there, as after a queue
        overflow, and ask for one full rescan: a change was found that no event reported."""
        with self._lock:
            self._renew_reason = reason
        self._wake()

    @property
    def unwatched(self) -> frozenset[bytes]:
        """The folders whose watch failed (no watches left), each standing for its subtree:
        a snapshot lists them whole every time (``DirtySet.unwatched``)."""
        with self._lock:
            return frozenset(self._unwatched)

    @property
    def watched_dirs(self) -> int:
        """How many directories currently hold a watch (each costs one of the user's
        ``fs.inotify.max_user_watches``)."""
        return len(self._watches)

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        assert self._inotify is not None and self._pipe is not None
        poller = select.poll()
        poller.register(self._inotify.fileno(), select.POLLIN)
        poller.register(self._pipe.r, select.POLLIN)
        waker = select.poll()  # the wake pipe alone: what may cut a batch's wait short
        waker.register(self._pipe.r, select.POLLIN)
        try:
            self._deliver_reasons()  # failures during start()
            while True:
                woken = poller.poll(self._pending.timeout_ms())
                self._pipe.drain()
                stopping = self._stopping.is_set()
                # Let a burst accumulate: one read of many events costs far less CPU than one
                # wake-up per event (the agent's process competes for the same cores). A sync
                # (a snapshot waiting) or a stop ends the wait at once.
                if (woken and not stopping and not self._sync_waiters
                        and waker.poll(int(_BATCH_DELAY * 1000))):
                    self._pipe.drain()
                    stopping = self._stopping.is_set()
                with self._lock:
                    waiters, self._sync_waiters = self._sync_waiters, []
                self._read_events()
                with self._lock:
                    renew, self._renew_reason = self._renew_reason, None
                if renew is not None:
                    self._lose(renew)
                    self._rewatch()
                    self._deliver_reasons()
                if waiters and self._unwatched and not stopping:
                    self._retry_unwatched()
                if stopping or waiters or self._pending.due():
                    self._flush()
                for w in waiters:
                    w.set()
                if stopping:
                    return
        except Exception:  # never die silently: the session must know to rescan
            log.exception("file watcher thread failed; the session must rescan")
            with self._lock:
                self._failed = True
                waiters, self._sync_waiters = self._sync_waiters, []
            for w in waiters:
                w.set()
            self._call(self._on_overflow, "watcher failed")

    def _read_events(self) -> None:
        assert self._inotify is not None
        events = self._inotify.read(timeout=0)
        for ev in events:
            self._handle(ev.wd, ev.mask, os.fsencode(ev.name))
        if self._moved:
            self._settle_moves()
        self._deliver_reasons()

    def _handle(self, wd: int, mask: int, name: bytes) -> None:
        if mask & F.Q_OVERFLOW:
            self.overflowed += 1
            self._lose("inotify queue overflow")
            self._rewatch()
            return
        d = self._watches.path(wd)
        if d is None:  # a watch we already dropped
            return
        if mask & F.IGNORED:
            self._watches.forget(wd, d)
            return
        if not name:  # an event on the watched directory itself
            if d == b"" and mask & (F.DELETE_SELF | F.MOVE_SELF | F.UNMOUNT):
                self._lose("workspace root moved, deleted or unmounted")
            elif mask & F.ATTRIB:  # chmod, chown: whether it can be listed may have changed
                self._book.mark(d)
            return
        rel = d + b"/" + name if d else name
        is_dir = bool(mask & F.ISDIR)
        if is_rules_file(name, rel):
            self._rules_changed(rel)
        if self._is_excluded(rel, is_dir):
            return
        self._book.mark(d, name)
        if is_dir and mask & (F.MOVED_FROM | F.MOVED_TO):
            self._moved.add(rel)  # settled once the batch is read (:meth:`_settle_moves`)
        if mask & _CREATED:
            self._record(rel, "created", is_dir)
            if is_dir:
                self._add_tree(rel, emit=True)
        elif mask & _DELETED:
            if is_dir:
                self._drop_tree(rel, moved=bool(mask & F.MOVED_FROM))
            self._record(rel, "deleted", is_dir)
        elif mask & _MODIFIED:
            self._record(rel, "modified", is_dir)

    # -- watches ----------------------------------------------------------------------------

    def _add_tree(self, top: bytes, *, emit: bool, report: bool = True,
                  mark: bool = False, pace: Callable[[], None] | None = None) -> None:
        """Watch ``top`` and every non-excluded directory under it. The watch goes on *before*
        the listing, so a file created in between is seen by one or the other (or both:
        coalescing merges the duplicate). With ``emit``, everything found is reported created:
        the directory is new to the workspace; with ``emit`` or ``mark``, each directory found
        is dirty whole."""
        assert self._inotify is not None
        stack = [top]
        lost: list[bytes] = []
        rules_changed: list[bytes] = []
        count = 0
        while stack:
            d = stack.pop()
            count += 1
            if pace is not None and count % PACE_EVERY == 0:
                pace()
            try:
                if self.max_watches and len(self._watches) >= self.max_watches \
                        and d not in self._watches:
                    raise OSError(errno.ENOSPC, "daemon_max_watches reached")
                wd = self._inotify.add_watch(self._abs(d), WATCH_MASK)
            except OSError as e:
                if e.errno in _LOST_ERRNOS:
                    lost.append(d)
                continue  # vanished, not a directory any more, or unreadable: nothing to see
            self._watches.put(wd, d)
            if emit or mark:
                self._book.mark(d)
            try:
                for sub in self._subfolders(d, report=emit, rules=rules_changed.append):
                    stack.append(sub)
            except OSError:
                continue
        for rel in rules_changed:
            self._rules_changed(rel)
        if lost:
            with self._lock:
                fresh = not self._unwatched
                self._unwatched.update(lost)
            if fresh and report:  # report the first failure, not every retry
                self._lose(f"cannot add watches ({len(lost)} directories): "
                           "fs.inotify.max_user_watches exhausted?")

    def _rules_widened(self, rel: bytes) -> None:
        """Directories the changed ignore file used to exclude may now need watches."""
        self._add_tree(b"" if rel == GIT_INFO_EXCLUDE else rel.rpartition(b"/")[0], emit=False)

    def _retry_unwatched(self) -> None:
        """Try again to watch directories whose watch failed (someone may have freed watches).
        Whatever changed there meanwhile went unseen: each folder watched now is dirty whole."""
        with self._lock:
            retry, self._unwatched = self._unwatched, set()
        for d in sorted(retry):
            self._add_tree(d, emit=False, report=False, mark=True)

    def _drop_tree(self, top: bytes, *, moved: bool) -> None:
        """Forget ``top`` and the directories under it (:meth:`.WatchMap.drop_tree`), and any
        of them still waiting for a watch."""
        self._watches.drop_tree(top, moved=moved)
        prefix = top + b"/"
        with self._lock:
            self._unwatched = {p for p in self._unwatched
                               if not (p == top or p.startswith(prefix))}

    def _settle_moves(self) -> None:
        """Make the watches of the folders a batch moved match where the folders are now.

        Events name a moved folder by its old and new paths, never by the inode, so a rename
        over an existing folder or a swap of two (``RENAME_EXCHANGE``) cannot be followed
        event by event: the second half of a swap names the path the first half just mapped.
        So the moves of a batch are settled at its end, from the disk: every path a move
        named is forgotten and watched afresh (``add_watch`` on a folder already watched
        answers its descriptor, so nothing is lost in between), each folder found is marked
        dirty whole (an event read before the settling may have been put down to the wrong
        path), and only then are the watches no path maps any more removed: those of folders
        that left the workspace."""
        moved, self._moved = self._moved, set()
        for top in moved:
            self._drop_tree(top, moved=True)
        for top in sorted(moved):
            if not self._is_excluded(top, True):
                self._add_tree(top, emit=False, mark=True)
        self._rm_watches(self._watches.take_unmapped())

    def _rm_watches(self, wds: set[int]) -> None:
        assert self._inotify is not None
        for wd in wds:
            try:
                self._inotify.rm_watch(wd)
            except OSError:  # already gone with its folder
                pass

    def _rewatch(self) -> None:
        """After an overflow the map may be stale (directories created, moved or deleted while
        events were lost): walk the tree again, adding missing watches and dropping those whose
        directory is no longer where we thought. No events are emitted: ``rescan_all`` covers
        them."""
        before = self._watches.clear()
        self._moved = set()
        with self._lock:
            self._unwatched.clear()
        self._add_tree(b"", emit=False)
        self._rm_watches(before - self._watches.descriptors())

    # -- dirty set, pending events, delivery ------------------------------------------------

    def _lose(self, reason: str) -> None:
        log.warning("file watcher: %s; the session must rescan", reason)
        self._book.rescan()
        self._reasons.append(reason)

    def _flush(self) -> None:
        if not self._pending:
            return
        if not deliver(self._pending, self._root_b, self._on_events, self._on_git_change):
            self._lose("on_events callback failed")  # the consumer lost these events
        self._deliver_reasons()

    def _deliver_reasons(self) -> None:
        reasons, self._reasons = self._reasons, []
        for reason in reasons:
            self._call(self._on_overflow, reason)

    # -- plumbing ---------------------------------------------------------------------------

    def _wake(self) -> None:
        if self._pipe is not None:
            self._pipe.wake()

    def _close_fds(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
        if self._pipe is not None:
            self._pipe.close()
