"""What a file watcher reports, apart from the watching: the events and the dirty set, and
the rules that shape them (coalescing two actions on a path, and the events waiting to be
delivered: :class:`Pending`; telling git's own paths apart).

Kept out of :mod:`ctrlz.sources.watch` so that code which only reads these (``ctrlz run``'s
git trigger, tests) does not load inotify.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Action = Literal["created", "modified", "deleted"]

log = logging.getLogger("ctrlz.sources.watch")

_GIT = b".git"
_GIT_REFS_FILES = (b"HEAD", b"logs/HEAD", b"packed-refs")
#: Past this many changed names, a directory is reported whole: listing it once is cheaper than
#: this many ``lstat`` calls, and the set stays small whatever happens in it.
NAMES_MAX = 256


@dataclass(frozen=True)
class FileEvent:
    """One coalesced change. ``path`` is raw bytes, workspace-relative and '/'-separated, so
    names that are not valid UTF-8 survive; ``size`` is the size after the change (None for
    deletions and directories, or when the path vanished before it could be measured)."""

    timestamp: float
    action: Action
    path: bytes
    size: int | None
    is_dir: bool


@dataclass(frozen=True)
class DirtySet:
    """Directories (workspace-relative, ``b""`` for the root) whose listing or files changed.
    ``rescan_all`` overrides ``dirs``: the watcher may have missed changes anywhere. ``names``:
    for some of ``dirs``, every name an event named in it; a directory without an entry here
    is to be listed whole (it is new, or more than ``NAMES_MAX`` of its names changed)."""

    dirs: frozenset[bytes]
    rescan_all: bool
    names: dict[bytes, frozenset[bytes]] = field(default_factory=dict)
    #: folders the watcher could not watch (no watches left): each, and everything under
    #: it, is to be listed at every snapshot, as if it had changed
    unwatched: frozenset[bytes] = frozenset()


_NO_NAMES: set[bytes] = set()  # a sentinel: "not dirty yet"


class DirtyBook:
    """The dirty set a watcher keeps between two takes, safe to use from any thread: per
    folder, the names events named in it, or None for the whole folder; and whether nothing
    can be vouched for (``rescan_all``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirty: dict[bytes, set[bytes] | None] = {}
        self._rescan_all = False

    def mark(self, d: bytes, name: bytes | None = None) -> None:
        """``d`` changed: only at ``name`` when one is given, else anywhere (a directory new to
        the watcher). Whole wins over names, whatever the order the two come in."""
        with self._lock:
            if name is None:
                self._dirty[d] = None
                return
            names = self._dirty.get(d, _NO_NAMES)
            if names is _NO_NAMES:
                self._dirty[d] = {name}
            elif names is not None:
                names.add(name)
                if len(names) > NAMES_MAX:
                    self._dirty[d] = None

    def rescan(self) -> None:
        """Changes may have gone unseen anywhere: the next take asks for a full scan."""
        with self._lock:
            self._rescan_all = True

    def covers(self, d: bytes) -> bool:
        """Whether a change marked since the last take covers folder ``d``: one in it, or one
        in a folder above it naming the branch that leads down to it (a rename, a deletion)."""
        with self._lock:
            if d in self._dirty or self._rescan_all:
                return True
            while d:
                parent, _, name = d.rpartition(b"/")
                if parent in self._dirty:
                    names = self._dirty[parent]
                    if names is None or name in names:
                        return True
                d = parent
            return False

    def take(self, rescan_all: bool = False,
             unwatched: frozenset[bytes] = frozenset()) -> DirtySet:
        """Return and clear the set; ``rescan_all`` raises the flag for this take whatever
        was marked (the watcher cannot vouch for it)."""
        with self._lock:
            names = {d: frozenset(n) for d, n in self._dirty.items() if n is not None}
            out = DirtySet(frozenset(self._dirty), self._rescan_all or rescan_all, names,
                           unwatched)
            self._dirty = {}
            self._rescan_all = False
        return out


def combine(earlier: Action, later: Action) -> Action | None:
    """Coalesce two actions on one path into one, or None when the path ends as it began
    (created then deleted). The result depends only on whether the path existed before the
    first action and exists after the last one:

    created+modified → created, created+deleted → nothing, modified+deleted → deleted,
    deleted+created → modified.
    """
    existed = earlier != "created"
    exists = later != "deleted"
    if existed:
        return "modified" if exists else "deleted"
    return "created" if exists else None


def git_paths(rel: bytes) -> tuple[bool, bool]:
    """``(quiet, trigger)`` for a path: ``quiet`` when it lies under ``.git/objects`` (no per-path
    events: a commit writes dozens), ``trigger`` when it is a ref, ``HEAD``, ``logs/HEAD`` or
    ``packed-refs`` (lock files excluded: git renames them into place, which is the trigger)."""
    if _GIT not in rel:  # the common case, without splitting
        return False, False
    parts = rel.split(b"/")
    if _GIT not in parts:
        return False, False
    tail = parts[parts.index(_GIT) + 1:]
    if not tail:
        return False, False
    if tail[0] == b"objects":
        return True, False
    sub = b"/".join(tail)
    trigger = (sub in _GIT_REFS_FILES or (tail[0] == b"refs" and len(tail) > 1)) \
        and not sub.endswith(b".lock")
    return False, trigger


class Pending:
    """Events waiting to be delivered, one per path, coalesced (:func:`combine`) until the
    tree has been quiet for ``quiet_s`` or the oldest has waited ``max_delay_s``. Paths under
    ``.git/objects`` are never recorded (:func:`git_paths`). Owned by one thread."""

    def __init__(self, quiet_s: float, max_delay_s: float) -> None:
        self.quiet_s = quiet_s
        self.max_delay_s = max_delay_s
        #: path -> (action, is_dir, wall-clock time of its latest event)
        self._events: dict[bytes, tuple[Action, bool, float]] = {}
        self._first = 0.0  # monotonic: when the oldest pending event came
        self._last = 0.0  # and the newest

    def __bool__(self) -> bool:
        return bool(self._events)

    def add(self, rel: bytes, action: Action, is_dir: bool) -> None:
        if git_paths(rel)[0]:
            return
        now = time.monotonic()
        if not self._events:
            self._first = now
        self._last = now
        prev = self._events.get(rel)
        merged = action if prev is None else combine(prev[0], action)
        if merged is None:
            del self._events[rel]
        else:
            self._events[rel] = (merged, is_dir, time.time())

    def timeout_ms(self) -> int:
        """How long a poll may wait before :meth:`due`: -1 (for ever) with nothing pending."""
        if not self._events:
            return -1
        deadline = min(self._last + self.quiet_s, self._first + self.max_delay_s)
        return max(0, int((deadline - time.monotonic()) * 1000) + 1)

    def due(self) -> bool:
        if not self._events:
            return False
        now = time.monotonic()
        return now - self._last >= self.quiet_s or now - self._first >= self.max_delay_s

    def take(self) -> dict[bytes, tuple[Action, bool, float]]:
        """Every pending event, in the order their paths first came; none is left."""
        events, self._events = self._events, {}
        return events


def call_back(fn: Callable[..., None] | None, arg: object) -> bool:
    """Call a watcher's callback on its thread; False (logged) when it raised: the thread
    must live on, and the caller decides what the failure lost."""
    if fn is None:
        return True
    try:
        fn(arg)
        return True
    except Exception:
        log.exception("file watcher callback %r failed", fn)
        return False


def deliver(pending: Pending, root: bytes, on_events: Callable[[list[FileEvent]], None],
            on_git_change: Callable[[bytes], None] | None) -> bool:
    """Hand every pending event to ``on_events`` (each file's size read now) and each git
    ref among them to ``on_git_change``. False when ``on_events`` raised: the consumer lost
    those events, and the watcher must make the session rescan."""
    taken = pending.take()
    if not taken:
        return True
    events: list[FileEvent] = []
    triggers: list[bytes] = []
    for rel, (action, is_dir, timestamp) in taken.items():
        size = None
        if action != "deleted" and not is_dir:
            try:
                st = os.lstat(root + b"/" + rel)
                if not stat.S_ISDIR(st.st_mode):
                    size = st.st_size
            except OSError:
                pass  # gone already: its deletion is queued behind
        events.append(FileEvent(timestamp, action, rel, size, is_dir))
        if git_paths(rel)[1]:
            triggers.append(rel)
    delivered = call_back(on_events, events)
    for rel in triggers:
        call_back(on_git_change, rel)
    return delivered
