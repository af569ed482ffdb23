"""``ctrlz run``: one protected session of an agent (or any command) in a workspace.

In order: open the session's records; start the file watcher; take a pinned ``pre-run``
snapshot; run the command under the exec tracer with the terminal, stdin, stdout, stderr and
signals passing straight through; meanwhile the scheduler takes ``auto``/``git``/``build``/``idle``
snapshots, each re-scanning only the directories the watcher saw change; when the command ends,
take a ``post-run`` snapshot with a full scan and reconcile: every path that differs between
pre-run and post-run gets a file event even if the watcher missed it. The exit code is recorded
and returned unchanged.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...engine.diff import DIR, MODIFIED, PERMISSIONS, diff_trees
from ...engine.snapshot import disk_ignore_reader
from ...errors import UsageError
from ...sources.changes import git_paths
from ...sources.trace import Denial, ExecEvent, Tracer
from ...state.ignore.exclude import Matcher
from ...state.scan import DirtyDirs
from ...types import Snapshot, clip, iso_utc, signal_name, text_path
from ..daemon.watch_audit import CHECKED_TYPES, MAPPED_TYPES, Audit
from ..protected import check_label
from ..remotes.autopush import AutoPusher
from .scheduler import Scheduler, TriggerConfig
from .triggers import is_build, is_git_commit, is_git_ref_change

if TYPE_CHECKING:
    from ..protected import ProtectedWorkspace as Workspace
    from .sandboxing import Plan, SandboxOptions

log = logging.getLogger("ctrlz.session")
AUTO_PUSH_WAIT = 60.0  # seconds a finished run waits for its background push
_ALPHABET = string.ascii_lowercase + string.digits


def new_session_id() -> str:
    return "sess_" + "".join(secrets.choice(_ALPHABET) for _ in range(8))


@dataclass
class RunResult:
    session_id: str
    exit_code: int
    traced: bool
    trace_note: str | None
    pre_run: Snapshot | None
    post_run: Snapshot | None
    snapshots: list[Snapshot] = field(default_factory=list)
    changes: tuple[int, int, int] = (0, 0, 0)  # created, modified, deleted (pre-run → post-run)
    changed_paths: list[str] = field(default_factory=list)
    reconciled: int = 0  # file events added by the final reconciliation
    errors: list[str] = field(default_factory=list)
    #: what the sandbox refused (``ctrlz run --sandbox``): the session DB's ``denials`` rows
    denials: list[dict[str, Any]] = field(default_factory=list)
    denials_dropped: int = 0  # refused writes past the tracer's cap, counted only

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session_id, "exit_code": self.exit_code, "traced": self.traced,
                "trace_note": self.trace_note,
                "pre_run": self.pre_run.id if self.pre_run else None,
                "post_run": self.post_run.id if self.post_run else None,
                "snapshots": [{"id": s.id, "type": s.type} for s in self.snapshots],
                "changes": dict(zip(("created", "modified", "deleted"), self.changes,
                                    strict=True)),
                "reconciled": self.reconciled, "errors": self.errors,
                "denials": len(self.denials) + self.denials_dropped}


class Session:
    """Everything one ``ctrlz run`` holds while the command runs."""

    def __init__(self, ws: Workspace, argv: list[str], label: str | None, trace: bool,
                 sandbox: Plan | None = None) -> None:
        self.ws = ws
        #: the checked sandbox of this run (:mod:`.sandboxing`), None when it is not sandboxed
        self.sandbox = sandbox
        self.sandboxed = sandbox is not None
        self.policy = sandbox.policy if sandbox is not None else None
        self.pusher: AutoPusher | None = None  # remote.auto_push, started by run()
        self.argv = argv
        self.label = label
        self.id = new_session_id()
        self.db = ws.session_db
        self.dir = ws.store_path / "sessions" / self.id
        self.dir.mkdir(parents=True, exist_ok=True)
        cfg = ws.config
        if not trace:
            self.tracer, self.trace_note = Tracer(None), "tracing off (--no-trace)"
        elif cfg["disable_exec"]:
            self.tracer, self.trace_note = Tracer(None), "tracing off (disable_exec)"
        else:  # sandboxed without the native observer: the tracer records the refused writes
            by_tracer = sandbox is not None and not sandbox.observes  # (trace/denials.py)
            self.tracer = Tracer.detect(
                denials=by_tracer, writable=sandbox.policy.writable if by_tracer else ())
            self.trace_note = self.tracer.reason
        self.scheduler = Scheduler(TriggerConfig(
            auto_interval=cfg["auto_interval"], idle_threshold=cfg["idle_threshold_seconds"],
            disable_auto=cfg["disable_auto"], disable_git_commits=cfg["disable_git_commits"],
            disable_builds=cfg["disable_builds"], disable_idle=cfg["disable_idle"]),
            self._take_auto)
        self.snapshots: list[Snapshot] = []
        #: the proxy's decisions (:meth:`record_network`), saved with the tracer's denials
        self._network: list[dict[str, Any]] = []
        self._exit_code = 127  # the command's status, once it ran
        self._lock = threading.Lock()  # one snapshot at a time (scheduler vs. main thread)
        self._lock_network = threading.Lock()
        self.watcher = self._make_watcher()
        #: the same checks as the daemon's before a snapshot from the watcher's dirty set
        self.audit = Audit(os.fsencode(os.path.realpath(self.ws.root)))

    # -- the watcher ------------------------------------------------------------------------

    def _make_watcher(self) -> Any:
        from ...sources.watchers import open_watcher  # inotify or watchdog: imported when used

        def new_matcher() -> Matcher:
            return Matcher(self.ws.config.rules, disk_ignore_reader(self.ws.root))

        matcher = [new_matcher()]

        def is_excluded(rel: bytes, is_dir: bool) -> bool:
            return bool(rel) and not matcher[0].covers(rel, is_dir)

        def on_rules_change(rel: bytes) -> None:  # a .gitignore changed: re-read them all
            matcher[0] = new_matcher()

        return open_watcher(self.ws.root, is_excluded, self._on_file_events,
                            on_overflow=self._on_overflow, on_git_change=self._on_git_change,
                            on_rules_change=on_rules_change)

    def _on_file_events(self, events: list[Any]) -> None:
        rows = [(iso_utc(int(e.timestamp * 1e9)), e.action, text_path(e.path), e.size)
                for e in events if not e.is_dir]
        if rows:
            self.db.add_fs_events(rows)
        self.scheduler.activity(files_changed=True)

    def _on_overflow(self, reason: str) -> None:
        log.warning("file watcher: %s; the next snapshot scans everything", reason)

    def _on_git_change(self, rel: bytes) -> None:
        if is_git_ref_change(rel):
            self.scheduler.git_commit()

    # -- the tracer -------------------------------------------------------------------------

    def _on_exec(self, event: ExecEvent) -> None:
        self.scheduler.activity()

    def _on_exit(self, event: ExecEvent) -> None:
        self.scheduler.activity()
        if event.exit_code == 0:
            if is_git_commit(event.argv):
                self.scheduler.git_commit()
            elif is_build(event.argv):
                self.scheduler.build_finished(" ".join([event.command, *event.args]))

    def _save_execs(self, events: list[ExecEvent]) -> None:
        """Into the session database and ``exec.jsonl`` beside it."""
        if not events:
            return
        records = [e.to_json() for e in events]
        self.db.add_exec_events(self.id, records)
        with open(self.dir / "exec.jsonl", "a", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=True) + "\n")

    # -- what the sandbox refused -----------------------------------------------------------

    def record_network(self, decision: dict[str, Any]) -> None:
        """The ``record`` callback of the sandbox's proxy (:mod:`ctrlz.sandbox.proxy`): one
        decision (``time``, ``host``, ``port``, ``method``, ``allowed``, ``reason``). Kept in
        memory and written with the tracer's denials when the command ends, because the
        proxy calls from its own thread and the session database's one connection must not
        have two writers' transactions interleave. A refusal becomes a ``net`` denial."""
        with self._lock_network:
            self._network.append(dict(decision))

    def _save_denials(self, found: list[Denial]) -> list[dict[str, Any]]:
        """The tracer's refused writes and the proxy's decisions, into the session DB (every
        network decision in the session's ``network_events``, refusals in ``denials``);
        returns the ``denials`` rows."""
        with self._lock_network:
            network, self._network = self._network, []
        rows = [d.to_json() for d in found]
        for n in network:
            if n.get("allowed") is False:
                rows.append({"timestamp": n.get("time") or iso_utc(time.time_ns()),
                             "pid": None, "exe": None, "syscall": n.get("method"),
                             "path": f"{n.get('host')}:{n.get('port')}",
                             "errno": n.get("reason"), "kind": "net"})
        rows.sort(key=lambda r: r["timestamp"])  # the order the database reads them back
        if rows:
            self.db.add_denials(self.id, rows)
        if network:
            self.db.add_network_events(self.id, network)
        return rows

    # -- snapshots --------------------------------------------------------------------------

    def take(self, type: str, label: str | None = None, *, pinned: bool = False,
             full: bool = False) -> Snapshot:
        with self._lock:
            dirty: set[bytes] | None = None
            if not full:
                since = time.time_ns()
                taken = self.watcher.take_dirty()
                if not taken.rescan_all:
                    dirty = self.audit.before_snapshot(
                        self.ws.repo.load_statcache(), DirtyDirs(taken.dirs, taken.names),
                        self.watcher, checked=type in CHECKED_TYPES,
                        mapped=type in MAPPED_TYPES, since_ns=since, unwatched=taken.unwatched)
            else:
                self.watcher.take_dirty()  # a full scan covers everything seen so far
            snap = self.ws.snapshot(type=type, label=label, pinned=pinned, dirty=dirty,
                                    session_id=self.id)
            self.snapshots.append(snap)
            if self.pusher is not None:
                self.pusher.kick()
            return snap

    def _take_auto(self, type: str, label: str | None) -> None:
        self.take(type, label)

    # -- the run ----------------------------------------------------------------------------

    def run(self, notify: Callable[[str], None]) -> RunResult:
        self.db.start_session(self.id, iso_utc(time.time_ns()), self.label, self.argv,
                              [str(r) for r in self.ws.roots], self.tracer.enabled,
                              self.trace_note)
        try:
            return self._run(notify)
        except BaseException:
            # a session that could not run (a snapshot failed, a signal) is over, not
            # "running" for ever: 127, the shell's "could not run", when the command never
            # started; else the status it ended with, when it did
            try:
                if self.db.session(self.id).ended is None:  # type: ignore[union-attr]
                    self.db.end_session(self.id, iso_utc(time.time_ns()), self._exit_code)
            except Exception:  # noqa: BLE001 - never hide the error that ended the run
                log.warning("could not close session %s", self.id, exc_info=True)
            raise

    def _run(self, notify: Callable[[str], None]) -> RunResult:
        ws, cfg = self.ws, self.ws.config
        if not self.tracer.enabled:
            sampled = "; process starts are sampled (psutil)" if self.tracer.sampling else ""
            notify(f"ctrlz: running untraced: {self.trace_note}{sampled}")
        self.watcher.start()
        self.pusher = AutoPusher.from_config(ws.root, cfg.values)
        ws.repo.defer_statcache_writes = True  # flushed once, after the post-run snapshot
        pre = None
        if not cfg["disable_pre_run"]:
            pre = self.take("pre-run", self.label or f"before {clip(shown(self.argv), 60)}",
                            pinned=True, full=True)
        self.scheduler.start()
        exit_code = 127
        events: list[ExecEvent] = []
        refused: list[Denial] = []
        dropped = 0
        argv, env = self.argv, None
        try:
            if self.sandbox is not None:  # the launcher (and bwrap) between strace and CMD
                self.sandbox.start(self.id, self.record_network)
                argv, env = self.sandbox.wrap(self.argv), self.sandbox.env()
            result = self.tracer.run(argv, cwd=os.getcwd(), env=env, on_exec=self._on_exec,
                                     on_exit=self._on_exit,
                                     trace_file=self.dir / "strace.log")
            exit_code, events, refused = result.returncode, result.events, result.denials
            dropped = result.denials_dropped
            if self.sandbox is not None and (error := self.sandbox.refusal()) is not None:
                raise error  # the launcher ran nothing: no post-run snapshot of nothing
            self._exit_code = exit_code
            if self.sandbox is not None and self.sandbox.observes:
                refused, dropped = self.sandbox.refused()  # the observer's, in the launcher
        finally:
            if self.sandbox is not None:
                self.sandbox.close()  # the proxy first: its last decisions are saved below
            self.scheduler.stop()
            self.watcher.stop()
            self._save_execs(events)
            denials = self._save_denials(refused)
        post = self.take("post-run", f"after {clip(shown(self.argv), 60)} "
                         f"({ended_text(exit_code)})", full=True)
        ws.repo.flush_statcache()
        if self.pusher is not None and not self.pusher.close(wait=AUTO_PUSH_WAIT):
            notify(f"ctrlz: auto push to {self.pusher.remote} did not finish "
                   f"({self.pusher.last_error or 'still running'}); `ctrlz push` sends the rest")
        out = RunResult(self.id, exit_code, self.tracer.enabled, self.trace_note, pre, post,
                        list(self.snapshots), errors=list(self.scheduler.errors),
                        denials=denials, denials_dropped=dropped)
        if pre is not None:
            self._reconcile(pre, post, out)
        self.db.end_session(self.id, iso_utc(time.time_ns()), exit_code)
        return out

    def _reconcile(self, pre: Snapshot, post: Snapshot, out: RunResult) -> None:
        """Make sure every path that changed during the session has a file event."""
        repo = self.ws.repo
        first = self.db.session(self.id).first_fs_event_id  # type: ignore[union-attr]
        seen = {row[3] for row in self.db.fs_events(first)}
        created = modified = deleted = 0
        missing = []
        now = iso_utc(time.time_ns())
        for c in diff_trees(repo.tree, pre.root, repo.tree, post.root):
            if c.kind == DIR or not c.path.startswith(b"0/") or git_paths(c.path[2:])[0]:
                continue  # like the watcher, no per-object events for .git/objects
            rel = text_path(c.path[2:])
            action = MODIFIED if c.change_type == PERMISSIONS else c.change_type
            created += action == "created"
            modified += action == MODIFIED
            deleted += action == "deleted"
            out.changed_paths.append(f"{action[0].upper()} {rel}")
            if rel not in seen:
                size = c.new.size if c.new is not None else None
                missing.append((now, action, rel, size))
        if missing:
            self.db.add_fs_events(missing)
        out.changes = (created, modified, deleted)
        out.reconciled = len(missing)


def check_command(program: str) -> None:
    """A usage error unless ``program`` is something to run: a name found on ``$PATH``, or
    a path (with a ``/``) to an executable file. Said before anything is recorded or
    snapshotted, in ctrlz's words, where the tracer would fail after the pre-run snapshot
    (strace's "Can't stat", exit 1)."""
    import shutil

    if "/" not in program:
        if shutil.which(program) is None:
            raise UsageError(f"{shown([program])}: command not found on $PATH; give the "
                             "program's name or a path to it")
        return
    if not os.path.exists(program):
        raise UsageError(f"{shown([program])}: no such file; give the program's name or a "
                         "path to it")
    if os.path.isdir(program) or not os.access(program, os.X_OK):
        raise UsageError(f"{shown([program])}: not an executable file; chmod +x it or run "
                         "it with its interpreter (ctrlz run -- sh SCRIPT)")


def ended_text(code: int) -> str:
    """How a command ended, for its post-run label: ``exit 3``, or ``killed by SIGKILL``."""
    return f"exit {code}" if code >= 0 else f"killed by {signal_name(-code)}"


def shown(argv: list[str]) -> str:
    """A command line as label text: an argument's bytes that are not UTF-8 as ``\\xNN``
    (a label must be text; the session row keeps the arguments exact)."""
    return " ".join(text_path(os.fsencode(a)) for a in argv)


def run_session(ws: Workspace, argv: list[str], *, label: str | None = None,
                trace: bool = True, notify: Callable[[str], None] = lambda m: None,
                sandbox: SandboxOptions | None = None) -> RunResult:
    # the session watches the tree itself: a daemon would be a second set of inotify watches
    # competing for the user's limit
    check_label(label)  # before the session's row and directory: a refusal leaves neither
    check_command(argv[0])
    plan = None
    from .sandboxing import prepare, wanted

    if wanted(ws, sandbox):
        plan = prepare(ws, argv, sandbox)  # refuses (exit 2) before anything is recorded
        # hooks run confined and cannot write the store: they hand their captures to the
        # workspace daemon through its socket (Landlock lets a pathname socket be reached;
        # bwrap gets it bound in), so a sandboxed run needs the daemon, watches or not
        from .. import daemon_client

        if not daemon_client.autostart(ws.root, ws.store_path, bool(ws.config["daemon"])) \
                and not daemon_client.running(ws.store_path):
            notify("ctrlz: no workspace daemon (daemon = false?): the agent's hooks cannot "
                   "capture from inside the sandbox; `ctrlz run` snapshots still do")
        else:  # the first hook may come at once; under bwrap the socket is bound in now.
            # Ready, not only listening: a starting daemon declines a shell call's snapshot,
            # and a confined hook cannot take it itself
            daemon_client.wait_ready(ws.store_path, 30)
    started, ws.start_daemon = ws.start_daemon, False
    try:
        return Session(ws, argv, label, trace, plan).run(notify)
    finally:
        ws.start_daemon = started


def session_dir(ws: Workspace, session_id: str) -> Path:
    return ws.store_path / "sessions" / session_id
