"""Whether the daemon's watcher still tells the truth: the checks behind a dirty snapshot.

The daemon takes its snapshots from what inotify reported. Some changes never raise an
event (:mod:`ctrlz.state.scan.blind` lists them: hard links, mounts, ``mmap`` writes), and
a watch can go missing (a kernel queue that overflowed is reported; a bug in keeping the
watches is not). A snapshot that misses a change is worse than a slow one: a later rollback
to it puts back the old bytes, and the new ones are in no snapshot. So nothing the watcher
says is taken on trust alone:

- **every dirty scan** re-stats the files with more than one link and lists the mount
  points whole (the scanner does it: :func:`~ctrlz.state.scan.blind.with_blind_spots`);
- **before each snapshot** the daemon re-stats :data:`SAMPLE` files picked at random outside
  the directories the watcher reported; a file that changed unseen makes the snapshot a full
  scan and the watcher renew every watch;
- **before the snapshots a restore depends on** (:data:`CHECKED_TYPES`: the safety capture
  of a restore, ``pre-run``, and the agents' pre-tool ``tool`` snapshots) the sample is
  :data:`SAMPLE_CHECKED` files; before a restore's capture and a ``pre-run`` snapshot
  (:data:`MAPPED_TYPES`), the files some process has mapped shared and writable are
  re-stat'ed too. That takes reading every process's ``/proc/PID/maps``, 15 ms with 90
  processes: too much for the snapshot before every shell command, and the capture before
  a restore is where an unseen write would be lost;
- **while idle**, :meth:`Audit.step` re-stats the whole tree, :data:`AUDIT_FILES` files per
  second in order, so whatever escaped the rest is found within minutes, not never; what it
  finds goes into the dirty set, and the next snapshot takes it.
"""

from __future__ import annotations

import logging
import os
import random
import stat
import time
from typing import TYPE_CHECKING

from ...state.scan.blind import mapped_for_write, mount_points, sample_differs, with_blind_spots
from ...state.scan.model import IFDIR, IFMT

if TYPE_CHECKING:
    from ...sources.watch import Watcher
    from ...state.db.statcache import StatCache
    from ...state.scan import DirtyDirs
    from ...state.store.repository import Repository

log = logging.getLogger("ctrlz.daemon")

#: Files re-stat'ed at random before each snapshot (2-25 µs each, as busy as the machine is).
SAMPLE = 16
#: ... and before a snapshot a restore depends on.
SAMPLE_CHECKED = 64
#: The snapshot types a restore depends on: their capture is checked hardest.
CHECKED_TYPES = frozenset({"safety", "pre-run", "tool"})
#: ... and those before which the files mapped for writing are looked for too.
MAPPED_TYPES = frozenset({"safety", "pre-run"})
#: Files the idle audit re-stats per tick (one tick a second without requests): 100,000
#: files in under two minutes, at ~3 ms of one core per tick.
AUDIT_FILES = 1000
#: A change this recent may still have its event in the kernel's queue: not counted a miss.
RECENT_NS = 2_000_000_000
#: Seconds without a snapshot or restore before the idle audit runs (pings and served hooks
#: do not hold it back), and between two of its steps.
IDLE_AFTER_S = 2.0
STEP_EVERY_S = 1.0


class Audit:
    """The checks of one daemon (see the module docstring). ``root``: the workspace root,
    resolved, as ``/proc`` names the files mapped from it."""

    def __init__(self, root: bytes, rng: random.Random | None = None) -> None:
        self.root = root
        self.rng = rng or random.Random()
        #: changes found that no event reported (by a sample or the idle audit)
        self.missed = 0
        self._cache_id = 0  # id() of the stat cache the audit's order was made from
        self._stepped = 0.0  # when the idle audit last ran (monotonic)
        self._order: list[bytes] = []
        self._at = 0

    def before_snapshot(self, cache: StatCache, dirty: DirtyDirs, watcher: Watcher, *,
                        checked: bool, mapped: bool, since_ns: int,
                        unwatched: frozenset[bytes] = frozenset()) -> DirtyDirs | None:
        """``dirty`` with the files mapped for writing (when ``mapped``), or None when a
        sample (a larger one when ``checked``) finds a change the watcher missed: then the
        snapshot must scan fully, and the watcher renews its watches. ``since_ns``: when
        ``dirty`` was taken; a file changed after that is not a miss (its event is on the
        way). ``unwatched``: folders the watcher has no watch on (none left), listed whole
        with everything under them, as mount points are."""
        mounts = mount_points(self.root) + sorted(unwatched)
        linked = cache.linked_in(0) + (mapped_for_write(self.root) if mapped else [])
        # what the scan will look at again anyway (a new hard link brings its other names)
        dirty = with_blind_spots(dirty, linked, mounts, cache.root(0),  # type: ignore[assignment]
                                 self.root)
        missed = sample_differs(self.root, cache.root(0), dirty,
                                SAMPLE_CHECKED if checked else SAMPLE, self.rng,
                                after_ns=since_ns, mounts=mounts, linked=cache.linked_in(0))
        if missed is None:
            return dirty
        self.missed += 1
        log.warning("the watcher missed a change to %s; this snapshot scans the whole tree "
                    "and every watch is renewed", os.fsdecode(missed))
        watcher.renew(f"a change to {os.fsdecode(missed)!r} raised no event")
        return None

    def when_idle(self, repo: Repository, watcher: Watcher, since_ns: int, *,
                  idle_s: float) -> None:
        """One :meth:`step` against the stat cache the next dirty snapshot will be combined
        with, when the daemon has been idle :data:`IDLE_AFTER_S` and the last step is
        :data:`STEP_EVERY_S` old. Never raises: an audit must not take the daemon down."""
        now = time.monotonic()
        if idle_s < IDLE_AFTER_S or now - self._stepped < STEP_EVERY_S:
            return
        self._stepped = now
        try:
            cache = repo.load_statcache()
            if cache.snapshot_id is not None and cache.scan_ns >= since_ns:
                self.step(cache, watcher)  # else the next snapshot scans fully anyway
        except Exception:  # noqa: BLE001
            log.exception("the idle audit failed")

    def step(self, cache: StatCache, watcher: Watcher) -> int:
        """Re-stat the next :data:`AUDIT_FILES` files of the stat cache, in order, and put
        each that changed unseen into the watcher's dirty set; returns how many did. A
        folder the watcher already reports is passed over: the next snapshot lists it."""
        tree = cache.root(0)
        if id(tree) != self._cache_id or self._at >= len(self._order):
            self._cache_id, self._order, self._at = id(tree), sorted(tree), 0
        found = checked = 0
        linked = set(cache.linked_in(0))
        recent = time.time_ns() - RECENT_NS
        mounts = [m + b"/" for m in mount_points(self.root)]
        while checked < AUDIT_FILES and self._at < len(self._order):
            rel = self._order[self._at]
            self._at += 1
            entry = tree.get(rel)
            if entry is None or watcher.is_dirty(rel) \
                    or any((rel + b"/").startswith(m) for m in mounts):
                continue
            base = self.root + b"/" + rel + b"/" if rel else self.root + b"/"
            prefix = rel + b"/" if rel else b""
            for name, (key, _oid, _trusted) in entry[1].items():
                if key[0] & IFMT == IFDIR:
                    continue
                checked += 1
                try:
                    st = os.lstat(base + name)
                except FileNotFoundError:
                    st = None
                except OSError:
                    continue
                if st is not None and st.st_ctime_ns >= recent:
                    continue  # its event may be on the way
                if prefix + name in linked:
                    continue  # every dirty scan stats it
                if st is None or stat.S_ISDIR(st.st_mode) or (
                        st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                        st.st_ino) != key:
                    if watcher.is_dirty(rel):  # its event came meanwhile
                        break
                    found += 1
                    watcher.mark_dirty(rel, name)
        if found:
            self.missed += found
            log.warning("the idle audit found %d change(s) no event reported; the next "
                        "snapshot takes them", found)
        return found
