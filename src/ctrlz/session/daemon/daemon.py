"""The workspace daemon: a resident file watcher, so a hook's snapshot costs what changed.

Why it exists: agents run a hook as a fresh process before every shell command, and a snapshot
taken from a cold process must lstat every file (100,000 files: ~1.5 s of Python, against git's
~0.5 s with its index). The daemon is ctrlz's fsmonitor. The ``SessionStart`` hook starts it
(so does the first shell hook that finds none); it watches the workspace with the watcher
``ctrlz run`` uses (``sources/watchers.py``: inotify on Linux, watchdog's observers elsewhere
and in portable mode) and takes the snapshot itself when a hook
asks, rescanning only the directories that changed.

When a dirty set may be trusted: the watcher's dirty set holds every change since the previous
:meth:`~ctrlz.sources.watch.Watcher.take_dirty` (or since all watches were in place). A stat
cache may be combined with it only when the scan that wrote the cache started after that moment
(``cache.scan_ns >= since``); otherwise (a cache from before the daemon, a queue overflow,
changed ignore rules, the first watch that could not be added) the snapshot is a full scan.
Folders left without a watch (``fs.inotify.max_user_watches`` or ``daemon_max_watches``
reached) are listed whole at every snapshot. The check runs under the store's writer lock,
so another process's snapshot cannot slip in between.

Start-up: the daemon listens at once, and places its watches and primes its stat cache (one
scan that writes nothing, so that the first request is already incremental) in the
background, at low priority; until then it declines every request that needs them, and the
caller works in-process (:mod:`.daemon_startup`).

Restores: a short-lived process hands its rollback to the daemon whole (``op: restore``, see
:mod:`ctrlz.session.restore_wire`); the daemon runs ``session.restores.run`` with the watcher's
dirty set as
the capture's scan, under the same rule as a snapshot. It answers ``ok: false`` only before
starting; after that, failure included, the outcome is the reply, so that the caller never
runs the restore a second time.

Lifecycle (the process around the daemon is :mod:`.daemon_process`): one daemon per store (an
flock on ``<store>/daemon.lock``), a socket at ``<store>/daemon.sock`` that only the owner's uid
may use, a log at ``<store>/daemon.log``. It stops after ``daemon_idle_seconds`` without a
request, on ``ctrlz daemon stop`` or SIGTERM, when the workspace or the store disappears, and
when the workspace's configuration changes (it refuses that request, so the caller snapshots
with the new rules, and the next hook starts a fresh daemon). A start that fails is recorded in
``daemon-failed.json``, which keeps hooks from respawning it for a while, and shown by ``ctrlz
daemon status``.

Under the ctrlz service (``--parent-pid``): the service starts one daemon per registered
workspace and restarts it when it dies, so such a daemon never stops for idleness; it stops when
its parent is gone instead (its parent pid changes), so a daemon that outlives a killed service
exits by itself within a second or two rather than holding the watches forever.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from ... import platform
from ...engine.restore.durable import close_released, hold_released
from ...engine.snapshot import disk_ignore_reader, internal_dirs
from ...errors import CtrlzError, RestoreError
from ...sources.watchers import open_watcher
from ...state.ignore.exclude import Matcher
from .. import daemon_client, restore_wire
from ..protected import ProtectedWorkspace
from .daemon_startup import StartUp
from .serial import Serial
from .watch_audit import CHECKED_TYPES, MAPPED_TYPES, Audit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ...engine.restore.requests import Request, RestoreResult
    from ...state.scan import DirtyDirs

    Op = Callable[["Daemon", dict[str, Any]], dict[str, Any]]
    AtOnce = Callable[[dict[str, Any]], bool]

log = logging.getLogger("ctrlz.daemon")

#: Seconds without requests before the deferred stat cache is written for other processes.
FLUSH_AFTER_S = 2.0
#: Seconds between two background polls where the watcher polls (portable mode): a request's
#: snapshot polls at once anyway (``sources/observe.py``), so these only notice a vanished root
POLL_S = 10.0
#: More changed directories than this are not worth sending: the caller scans fully.
HAND_OUT_MAX = 20_000


class Daemon:
    """The watcher plus the request handlers; :func:`serve` runs the socket loop around it."""

    def __init__(self, ws: ProtectedWorkspace, parent_pid: int | None = None,
                 ops: Mapping[str, Op] | None = None,
                 at_once: Mapping[str, AtOnce] | None = None,
                 captures: Mapping[str, AtOnce] | None = None) -> None:
        self.ws = ws
        #: requests answered by the program around the daemon (a face: the native door's,
        #: see :mod:`ctrlz.door`), each with the daemon to call back
        self.ops: Mapping[str, Op] = ops or {}
        #: for some of those, whether a request is answered on its connection's thread, not
        #: after the requests before it (a served hook's file capture; see :meth:`at_once`)
        self._at_once: Mapping[str, AtOnce] = at_once or {}
        #: for some of those, whether a request only captures, and so may come from a
        #: sandboxed session's process (:mod:`.confined`; the door's hooks and snapshots)
        self.captures: Mapping[str, AtOnce] = captures or {}
        #: the thread that runs everything else, one request at a time (the one that made
        #: the daemon: :func:`~.daemon_process.serve` runs it)
        self.serial = Serial()
        ws.use_daemon = False  # we are the daemon
        ws.housekeep_later = True  # see after_reply
        ws.repo.catalog.trim_wal_later = True  # likewise
        hold_released()
        self.config_json = ws.config.to_json()
        #: the supervising service; None for a daemon a hook started
        self.parent_pid = parent_pid
        self.idle_seconds = 0 if parent_pid else int(ws.config["daemon_idle_seconds"])
        self.started_ns = time.time_ns()
        self.last_request = time.monotonic()
        self.since_ns = 0  # the dirty set holds every change after this moment
        self._carry: frozenset[bytes] = frozenset()  # taken by a snapshot that failed
        self._carry_rescan = False
        self.served = {"dirty": 0, "full": 0, "handed": 0, "restores": 0}
        self.primed = False
        #: the watches and the prime, in the background (:mod:`.daemon_startup`)
        self.startup = StartUp()
        from ..remotes.autopush import AutoPusher

        #: pushes new snapshots in the background when remote.auto_push names a remote
        self.pusher = AutoPusher.from_config(ws.root, ws.config.values)
        self._flushed = True  # nothing deferred yet
        self.stop_reason: str | None = None
        self._matcher = self._new_matcher()
        #: the checks that keep the watcher honest (:mod:`.watch_audit`)
        self.audit = Audit(os.fsencode(os.path.realpath(ws.root)))
        self.watcher = open_watcher(ws.root, self._is_excluded, lambda events: None,
                                    on_overflow=self._on_overflow,
                                    on_rules_change=self._on_rules_change,
                                    max_watches=int(ws.config["daemon_max_watches"]),
                                    poll_seconds=POLL_S)

    # -- watching ---------------------------------------------------------------------------

    def _new_matcher(self) -> Matcher:
        return Matcher(self.ws.config.rules, disk_ignore_reader(self.ws.root),
                       internal_dirs(self.ws.root, self.ws.store_path))

    def _is_excluded(self, rel: bytes, is_dir: bool) -> bool:
        # the same rules as the scanner: a directory it captures must be watched
        return bool(rel) and not self._matcher.covers(rel, is_dir)

    def _on_rules_change(self, rel: bytes) -> None:
        self._matcher = self._new_matcher()

    def _on_overflow(self, reason: str) -> None:
        log.warning("watcher: %s; the next snapshot is a full scan", reason)
        if not self.ws.root.is_dir():
            self.stop_reason = "the workspace root is gone"

    def start(self) -> None:
        """Watch, on this thread, and be ready at once (no prime): for a caller that runs the
        daemon in its own process and thread. The daemon's process starts up in the
        background instead (:func:`.daemon_startup.run`)."""
        self.watcher.start()
        self.watching()
        self.startup.done()

    def watching(self) -> None:
        """The watches are in place and the reader runs: the dirty set holds every change
        from now on."""
        self.since_ns = time.time_ns()
        self.ws.repo.defer_statcache_writes = True
        log.info("watching %s: %d directories", self.ws.root, self.watcher.watched_dirs)

    def primed_now(self) -> None:
        """The prime wrote a deferred stat cache (:func:`.daemon_startup.prime`)."""
        self._flushed = False
        self.primed = True
        platform.release_freed_memory()  # the prime's full scan is gone: give its pages back

    # -- requests ---------------------------------------------------------------------------

    def at_once(self, message: dict[str, Any]) -> bool:
        """Whether ``message`` may be answered on its connection's thread, alongside the
        request the serving thread is running. Only an op of the program's own may say so,
        for work that touches none of this object's state but through :attr:`serial`."""
        op = message.get("op")
        check = self._at_once.get(op) if isinstance(op, str) else None
        return bool(check is not None and check(message))

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        if op == "ping":
            return {"ok": True, **self.info()}
        if op == "stop":
            self.stop_reason = "asked to stop"
            return {"ok": True, "pid": os.getpid()}
        if op == "snapshot":
            return self.snapshot(message)
        if op == "dirty":
            return self.hand_out_dirty(message)
        if op == "restore":  # its one conversion to the wire
            return restore_wire.reply(lambda: self.restore(message))
        handler = self.ops.get(op) if isinstance(op, str) else None
        if handler is not None:
            return handler(self, message)
        return {"ok": False, "error": f"unknown op {op!r}"}

    def info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "root": str(self.ws.root), "store": str(self.ws.store_path),
                "started_ns": self.started_ns, "watcher": platform.watcher(),
                "watched_dirs": self.watcher.watched_dirs,
                "overflows": self.watcher.overflowed, "primed": self.primed,
                "missed": self.audit.missed,
                "unwatched": sorted(os.fsdecode(d) for d in self.watcher.unwatched)[:20],
                "unwatched_count": len(self.watcher.unwatched),
                "served": dict(self.served), "idle_seconds": self.idle_seconds,
                "supervised": self.parent_pid is not None,
                "idle_for_s": round(time.monotonic() - self.last_request, 1),
                **self.startup.info(self.watcher)}

    def refusal(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Why this request must be served in the caller's process, if it must: the
        workspace's configuration changed since we started (we stop, and the next hook starts
        a daemon with the new rules), or the caller runs with other settings than the files
        say (a library caller may pass its own ``Config``)."""
        from ..config import load_config

        current = load_config(self.ws.root)
        if current.to_json() != self.config_json:
            self.stop_reason = "the workspace configuration changed"
            return {"ok": False, "error": "the configuration changed; work in-process"}
        wanted = message.get("config")
        if wanted is not None and wanted != json.loads(json.dumps(current.values)):
            return {"ok": False, "error": "the caller's configuration differs from the "
                                          "workspace's files; work in-process"}
        return None

    def _interrupted(self) -> dict[str, Any] | None:
        """A refusal when a restore's journal is there. Call with the store lock held: a
        live restore holds it until its journal is gone, so the journal is one that a dead
        process left. Its recovery belongs to the caller, which opens the workspace, cleans
        up and tells the user what it did before anything else runs. The daemon checks, not
        each caller: one stat here, ~1 ms of imports in a fresh process."""
        from ...engine.restore import journal

        if journal.pending(self.ws.store_path):
            return {"ok": False, "error": "an interrupted restore's journal is there; work "
                                          "in-process, which cleans up after it first"}
        return None

    def snapshot(self, message: dict[str, Any]) -> dict[str, Any]:
        ws, repo = self.ws, self.ws.repo
        refusal = self.startup.refusal() or self.refusal(message)
        if refusal is not None:
            return refusal
        self.last_request = time.monotonic()  # snapshots (and served hooks) keep it alive
        kind = str(message.get("type") or "tool")
        label = message.get("label")
        session_id = message.get("session_id")
        with repo.lock:
            if daemon_client.too_late(message):  # the hook is doing it itself, or was killed
                log.warning("dropped a hook's snapshot: its caller stopped waiting")
                return {"ok": False, "error": "the hook stopped waiting for this snapshot"}
            interrupted = self._interrupted()
            if interrupted is not None:
                return interrupted
            dirs, trusted, sync_ns = self._take_dirty(checked=kind in CHECKED_TYPES,
                                                      mapped=kind in MAPPED_TYPES)
            dirty = dirs if trusted else None
            try:
                snap = ws.snapshot(type=kind, label=str(label) if label is not None else None,
                                   pinned=bool(message.get("pinned")), dirty=dirty,
                                   session_id=str(session_id) if session_id else None)
            except BaseException:
                # nothing was committed: keep what was taken for the next request
                self._carry, self._carry_rescan = dirs, not trusted
                raise
            self._carry, self._carry_rescan = frozenset(), False
            self.since_ns = sync_ns
        self._flushed = False
        scan = "dirty" if trusted else "full"
        self.served[scan] += 1
        log.info("snapshot %s (%s scan, %d dirty dirs)", snap.id, scan,
                 len(dirty) if dirty is not None else -1)
        if self.pusher is not None:
            self.pusher.kick()
        from ...state.interchange.portable import to_record

        return {"ok": True, "snapshot": snap.to_json(), "scan": scan,
                "record": {**to_record(snap), "number": snap.number},
                "dirty_dirs": len(dirty) if dirty is not None else None}

    def restore(self, message: dict[str, Any]) -> RestoreResult | dict[str, Any]:
        """Run a restore another process handed over (its capture scans the watcher's dirty
        set): its result, or the reply declining it (``ok: false``) before anything started.
        Once the engine runs, a failure is raised, never a decline: never a second restore."""
        from .. import restores

        refusal = self.startup.refusal() or self.refusal(message)
        if refusal is None:
            with self.ws.repo.lock:  # waits out a live restore, as the restore itself would
                refusal = self._interrupted()
        if refusal is not None:
            return refusal
        try:
            if "rollback" in message:  # by the ref the user gave: resolved here
                ref, rels, kind = restore_wire.decode_rollback(message["rollback"])
                req = restores.rollback_request(
                    self.ws, self.ws.resolve(ref), rels, kind, dry_run=False,
                    git=restore_wire.rollback_git(message["rollback"]))
            else:
                req = restore_wire.decode_request(self.ws.resolve, message["request"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return {"ok": False, "error": f"malformed restore request: {exc}"}
        except CtrlzError as exc:  # the target is gone: the caller meets that itself
            return {"ok": False, "error": str(exc)}
        self.last_request = time.monotonic()
        try:
            return self._run_restore(req)
        except CtrlzError:
            raise
        except Exception as exc:  # after the engine may have started: never an ``ok: false``
            log.exception("restore failed after it started")
            raise RestoreError(
                f"the workspace daemon's restore failed: {type(exc).__name__}: {exc}; run "
                "`ctrlz status` and `ctrlz list` to see what was done") from exc

    def _run_restore(self, req: Request) -> RestoreResult:
        """The restore itself, and the dirty-set bookkeeping around it (as :meth:`snapshot`
        does for a snapshot)."""
        from .. import restores

        taken: list[tuple[frozenset[bytes], bool, int]] = []

        def dirty_source() -> list[frozenset[bytes] | None] | None:
            # asked by the capture step under the store lock, as for a snapshot
            dirs, trusted, sync_ns = self._take_dirty(checked=True, mapped=True)
            taken.append((dirs, trusted, sync_ns))
            return [dirs] if trusted else None

        try:
            result = restores.run(self.ws, req, dirty_source=dirty_source)
        except Exception as exc:
            if taken:
                # whether the capture committed or not, the next scan is a full one: what
                # was taken must not be lost, and a full scan never misses anything
                self._carry, self._carry_rescan = taken[0][0], True
            self._flushed = False
            if isinstance(exc, CtrlzError):  # the caller prints it; the log keeps it too
                log.info("restore failed: %s", exc)
                raise
            log.exception("restore failed")
            raise RestoreError(f"the workspace daemon's restore failed: {type(exc).__name__}: "
                               f"{exc}; its log (`ctrlz daemon status`) has the details") from exc
        if taken:
            self._carry, self._carry_rescan = frozenset(), False
            self.since_ns = taken[0][2]
        self._flushed = False
        self.served["restores"] += 1
        log.info("restore to %s (%d actions; capture: %s)",
                 req.target.id if req.target else "?", len(result.applied),
                 f"{len(taken[0][0])} dirty dirs" if taken and taken[0][1] else "full scan")
        if self.pusher is not None:
            self.pusher.kick()
        return result

    def _take_dirty(self, *, checked: bool = False,
                    mapped: bool = False) -> tuple[DirtyDirs, bool, int]:
        """The directories changed since ``since_ns`` (with any a failed snapshot left), whether
        they may be combined with the store's stat cache (the rule in the module docstring, and
        the checks of :mod:`.watch_audit`, harder when ``checked`` or ``mapped``: a restore
        depends on the snapshot), and the moment the set was taken, which becomes
        ``since_ns`` once a snapshot uses it."""
        from ...state.scan import DirtyDirs

        cache = self.ws.repo.load_statcache()
        sync_ns = time.time_ns()
        taken = self.watcher.take_dirty()
        trusted = (not taken.rescan_all and not self._carry_rescan
                   and cache.snapshot_id is not None and cache.scan_ns >= self.since_ns)
        # a directory carried over from a failed snapshot is listed whole
        names = {d: n for d, n in taken.names.items() if d not in self._carry}
        dirty = DirtyDirs(self._carry | taken.dirs, names)
        if trusted:
            checked_dirty = self.audit.before_snapshot(cache, dirty, self.watcher,
                                                       checked=checked, mapped=mapped,
                                                       since_ns=sync_ns,
                                                       unwatched=taken.unwatched)
            if checked_dirty is None:
                trusted = False
            else:
                dirty = checked_dirty
        return dirty, trusted, sync_ns

    def hand_out_dirty(self, message: dict[str, Any]) -> dict[str, Any]:
        """What changed since the stat cache was written, for a process about to snapshot
        in-process under the store lock it already holds (a restore's capture step): the
        fsmonitor query of git, answered from the watcher's dirty set.

        The caller holds the lock and waits for this reply, so this writes our deferred stat
        cache without taking the lock: the caller's scan then starts from the very cache the
        answer is about. The dirty set is handed over and cleared, and ``since_ns`` moves to
        now. If the caller's snapshot fails, its stat cache is never written, so the next
        request finds the cache older than ``since_ns`` and scans fully: nothing handed out
        can be lost."""
        repo = self.ws.repo
        refusal = self.startup.refusal() or self.refusal(message)
        if refusal is not None:
            return refusal
        self.last_request = time.monotonic()
        repo.flush_statcache()
        repo.defer_statcache_writes = True
        dirs, trusted, sync_ns = self._take_dirty(checked=True, mapped=True)
        trusted = trusted and len(dirs) <= HAND_OUT_MAX
        self._carry, self._carry_rescan = frozenset(), False
        self.since_ns = sync_ns
        self._flushed = True
        self.served["handed"] += 1
        log.info("dirty set handed out (%s)",
                 f"{len(dirs)} dirs" if trusted else "untrusted: full scan")
        if not trusted:
            return {"ok": True, "dirty": None}
        return {"ok": True, "dirty": sorted(d.hex() for d in dirs),
                "names": {d.hex(): sorted(n.hex() for n in ns)
                          for d, ns in dirs.names.items()}}

    # -- housekeeping -----------------------------------------------------------------------

    def after_reply(self) -> None:
        """What the caller need not wait for, once it has its answer: the filesystem frees
        the inodes a restore replaced or removed (``engine.restore.durable.let_go``), the
        pools drop what the rings and caps no longer keep, and the catalog's WAL is trimmed.
        The pools never wait for the store lock (another process writing holds it); they
        stay due, and the next request or :meth:`tick` tries again, as after a failure,
        which is logged. Nothing while starting: the start-up owns the workspace until it
        is ready."""
        if not self.startup.ready.is_set():
            return
        try:
            close_released()
        except OSError as exc:  # a read-only descriptor's close: nothing of ours is lost
            log.info("closing released inodes: %s", exc)
        repo = self.ws.repo
        timeout, repo.lock.timeout = repo.lock.timeout, 0.0
        try:
            self.ws.housekeep()
            repo.catalog.trim_wal()  # what the request and the pools wrote; waits for nobody
        except CtrlzError as exc:  # the lock is busy, or the store refused: later
            log.info("pools not applied yet: %s", exc)
        except Exception:  # noqa: BLE001 - the request was answered; the next one retries
            log.exception("housekeeping after a request failed")
        finally:
            repo.lock.timeout = timeout
        if self.since_ns:
            self.audit.when_idle(self.ws.repo, self.watcher, self.since_ns,
                                 idle_s=time.monotonic() - self.last_request)

    def tick(self) -> None:
        """Between requests: write the stat cache when quiet, stop when idle or orphaned."""
        self.after_reply()  # pools left due by a busy lock; the idle audit
        idle = time.monotonic() - self.last_request
        repo = self.ws.repo
        if idle >= FLUSH_AFTER_S and not self._flushed and self.startup.ready.is_set():
            timeout, repo.lock.timeout = repo.lock.timeout, 0.0  # never wait: hooks may call
            try:
                with repo.lock:
                    repo.flush_statcache()
                self._flushed = True
                platform.release_freed_memory()  # once per quiet spell: what the snapshots dropped
            except CtrlzError as exc:  # another writer holds the lock: try again later
                log.info("stat cache not written yet: %s", exc)
            finally:
                repo.lock.timeout = timeout
            repo.defer_statcache_writes = True
        if self.idle_seconds and idle >= self.idle_seconds:
            self.stop_reason = f"idle for {self.idle_seconds} s"
        if self.parent_pid is not None and os.getppid() != self.parent_pid:
            self.stop_reason = f"the service (pid {self.parent_pid}) is gone"
        if not self.ws.root.is_dir():
            self.stop_reason = "the workspace root is gone"
        if not (self.ws.store_path / "catalog.db").is_file():
            self.stop_reason = "the store is gone"

    def close(self) -> None:
        if self.pusher is not None:
            self.pusher.close(wait=10.0)
        self.watcher.stop()
        self.after_reply()
        repo = self.ws.repo
        if not self._flushed and (self.ws.store_path / "catalog.db").is_file():
            try:
                with repo.lock:
                    repo.flush_statcache()
            except CtrlzError as exc:
                log.info("stat cache not written: %s", exc)
        hold_released(False)  # on since __init__: a closed daemon leaves the process as it was
        self.ws.close()
