"""The workspace daemon's start-up, in the background: its watches, then its prime.

Why in the background: placing a watch on every folder and priming the stat cache each walk
the whole tree (``ctrlz daemon start`` took 9.9 s at 300,000 files), and a command must not
wait behind that: walking the tree itself costs it no more than the daemon's own walk would.
So the daemon listens first, and its start-up runs on a thread of its own while the serving
thread already answers:

- ``ping`` and ``stop``, on the connection's thread: ``ctrlz daemon status`` shows the phase
  and how far it got (folders watched, files primed), and a stop is heard;
- the served hooks' file captures, as always (:meth:`~.daemon.Daemon.at_once`);
- every other request with ``ok: false`` (:meth:`StartUp.refusal`), which sends its caller to
  do the work in-process at once: the cold walk a command does with no daemon at all.

That thread lowers its own CPU priority (:func:`ctrlz.platform.lower_thread_priority`), so that
on a busy machine the command the user waits for gets the cores first, and before each of its
two walks it waits until no command holds the store lock (:func:`_after_writers`); the
watcher's reader thread is started by the serving thread instead, at the normal priority,
since a thread inherits its creator's.

Safety: until :attr:`StartUp.ready` is set, the start-up thread alone touches the workspace
(store, stat cache) and the watcher; the serving thread answers only what needs neither.
``ready`` is an event, so all the start-up did happens before the serving thread's first
request. A command that snapshots in-process meanwhile is one more writer under the store
lock; the prime writes the stat cache only under that lock and only while the newest
snapshot is still the one it scanned against (:func:`prime`), and the rule that a dirty set
may be combined with a stat cache (:mod:`.daemon`) holds whichever of them wrote it last.
"""

from __future__ import annotations

import logging
import threading
import time

from ... import platform
from ...errors import CtrlzError
from ...state import failpoints, meter
from ...state.db.statcache import StatCache
from ...state.trees import encode_tree
from ..daemon_client import FAILED_NAME, STARTING_NAME
from .serial import DaemonStopping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    from ...sources.watch import Watcher
    from ..protected import ProtectedWorkspace
    from .serial import Serial

    class Daemon(Protocol):
        """What the start-up uses of the daemon it starts (:class:`.daemon.Daemon`): named
        here, not imported, so that the daemon imports its start-up and not the other way."""

        ws: ProtectedWorkspace
        watcher: Any
        serial: Serial
        startup: StartUp
        stop_reason: str | None

        def watching(self) -> None: ...
        def primed_now(self) -> None: ...


log = logging.getLogger("ctrlz.daemon")

#: the start-up thread's nice value: it yields the cores to anything of normal priority
STARTUP_NICE = 10
#: where a test holds the start-up, before the prime (``CTRLZ_TEST_FAILPOINTS=NAME@PATH``)
HOLD_POINT = "daemon-before-prime"
#: whether :func:`lower_group_priority` lowered this process's group
_group_lowered = False


class StartUp:
    """Where the start-up is (``phase``), whether it is done (``ready``) and how it failed."""

    def __init__(self) -> None:
        self.phase = "loading"
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._meter: meter.Meter | None = None

    def info(self, watcher: Watcher) -> dict[str, Any]:
        """What a ``ping`` adds: ``ready``, and while starting the ``phase`` and its
        ``progress`` (read from another thread while it moves: a progress report)."""
        if self.ready.is_set():
            return {"ready": True, "phase": "ready"}
        m = self._meter
        return {"ready": False, "phase": self.phase,
                "progress": {"watched_dirs": watcher.watched_dirs,
                             "primed_files": m.files_total if m is not None else 0}}

    def refusal(self) -> dict[str, Any] | None:
        """The reply to a request that needs the watcher or the workspace, while starting."""
        if self.ready.is_set():
            return None
        return {"ok": False, "starting": True,
                "error": f"the workspace daemon is starting ({self.phase}); work in-process"}

    def done(self) -> None:
        self.phase = "ready"
        self.ready.set()


def run(daemon: Daemon) -> None:
    """The start-up thread's work (see the module docstring); a failure is kept in
    ``startup.error`` and stops the daemon, which records it."""
    startup = daemon.startup
    try:
        platform.lower_thread_priority(STARTUP_NICE)
        startup.phase = "placing watches"
        _after_writers(daemon)
        _watch(daemon)
        daemon.watching()
        # watching: a failure recorded before no longer holds hooks back from spawning
        (daemon.ws.store_path / FAILED_NAME).unlink(missing_ok=True)
        startup.phase = "priming the stat cache"
        startup._meter = meter.Meter()
        failpoints.hit(HOLD_POINT)
        _after_writers(daemon)
        if daemon.stop_reason is None:
            meter.install(startup._meter)  # the scan counts into it: the progress shown
            try:
                prime(daemon)
            except CtrlzError as exc:
                log.info("prime skipped: %s", exc)
            finally:
                meter.install(None)
        startup.done()
        _started(daemon)
    except DaemonStopping:  # stopped before its reader ran: nothing failed
        pass
    except BaseException as exc:  # noqa: BLE001 - reported by the daemon's process
        startup.error = exc
        if daemon.stop_reason is None:
            daemon.stop_reason = f"start-up failed: {type(exc).__name__}: {exc}"


def lower_group_priority() -> None:
    """The daemon's whole process yields the cores while it starts: it started a session of
    its own, so with the kernel's autogroups (the default) its threads' nice values weigh
    only among themselves, not against a command (:func:`ctrlz.platform.set_autogroup_nice`).
    Measured on 100,000 files, 2 busy cores: the second snapshot right after the first,
    which started the daemon, took 1.38x the wall time it takes with no daemon (its CPU time
    1.03x: it waited for the cores)."""
    global _group_lowered
    _group_lowered = platform.set_autogroup_nice(STARTUP_NICE)


def _started(daemon: Daemon) -> None:
    """Ready: commands ask the daemon again (:data:`~..daemon_client.STARTING_NAME` gone),
    and its process is of normal priority again, as the served commands need it."""
    global _group_lowered
    (daemon.ws.store_path / STARTING_NAME).unlink(missing_ok=True)
    if _group_lowered:  # (a daemon run in a test's process left its group as it was)
        _group_lowered = not platform.set_autogroup_nice(0)


def _watch(daemon: Daemon) -> None:
    """Place the watches here, and start the reader on the serving thread, at its priority.
    A watcher that starts whole (the portable ones: ``sources/watchers.py``) starts here, its
    threads at this one's priority."""
    watcher = daemon.watcher
    place = getattr(watcher, "place", None)
    if place is None:
        watcher.start()
        return
    # a command that takes the store lock meanwhile walks alone: this walk waits for it
    place(pace=lambda: _after_writers(daemon))
    daemon.serial.run(watcher.start_reader)


def _after_writers(daemon: Daemon) -> None:
    """Let a command at work go first: wait until no process holds the store lock. A command
    that snapshots in-process holds it for its walk, which then has the cores to itself
    rather than share them with this one (the second command right after the first, which
    started this daemon). Held for long (a big restore): go on after the lock's timeout.
    Before each of the two walks and, while the watches are placed, every
    :data:`~ctrlz.sources.watch.PACE_EVERY` folders: on an idle second core the group's nice
    value does not keep this walk from running beside the command's (10-20% on its wall
    time at 100,000 files), on the same folders."""
    try:
        with daemon.ws.repo.lock:
            pass
    except CtrlzError:
        pass


def prime(daemon: Daemon) -> bool:
    """Make the stat cache current without taking a snapshot, when the tree still equals the
    newest snapshot: right after its watches are in place the daemon scans the tree once,
    writing nothing. When that scan's root equals the newest snapshot's, the fresh stat cache
    describes that snapshot exactly, so it is kept, and the first request is already
    incremental."""
    from ...engine.snapshot import scan_working

    ws = daemon.ws
    repo = ws.repo
    newest = repo.catalog.latest()
    if newest is None:
        return False
    scan_ns = time.time_ns()  # the scan's own clock reads later: this is conservative
    state = scan_working(repo, ws.roots, [ws.config.rules], ws.config.limits)
    if state.root != newest.root:
        log.info("prime: the tree changed since %s; the first snapshot is a full scan",
                 newest.id)
        return False
    with repo.lock:
        latest = repo.catalog.latest()
        if latest is None or latest.id != newest.id:
            return False  # a command snapshotted meanwhile: its cache is the newer one
        if repo.load_statcache().scan_ns >= scan_ns:
            return False
        repo.save_statcache(StatCache(newest.id, scan_ns, repo.algorithm,
                                      [s.cache for s in state.scans],
                                      [s.linked for s in state.scans],
                                      [s.stamps for s in state.scans]))
        # encoded, as a snapshot keeps them: the first dirty scan patches these bytes
        repo.remember_tree_data({oid: encode_tree(entries)
                                 for oid, entries in state.trees.items()})
    daemon.primed_now()
    log.info("prime: stat cache current for %s", newest.id)
    return True
