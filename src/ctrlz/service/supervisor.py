"""Watcher supervision: one workspace daemon per registered workspace, kept alive.

The service is to its watchers what Capsem's service is to its per-VM processes: it starts one
(:func:`ctrlz.session.daemon_client.spawn_supervised`, with its own pid as the parent) for each
registered workspace whose root exists, notices when one exits (``Popen.poll``), and starts it
again after a back-off that doubles from 1 s to 60 s and resets once a watcher has run for a
minute, so a watcher that cannot start does not spin. A daemon a hook had started before the
service took over is left to serve (state ``external``) and replaced when it stops. Stopping
the service stops its watchers; if the service is killed instead, each watcher notices that
its parent is gone and exits by itself (:mod:`ctrlz.session.daemon.daemon`).

States: ``starting`` (spawned, not answering yet), ``running``, ``restarting`` (exited;
waiting out the back-off), ``external``, ``missing`` (the workspace root is gone),
``stopped`` (unregistered), ``unwatched`` (no file watcher on this platform,
:mod:`ctrlz.platform`: no daemon can run, so none is started).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 60.0
HEALTHY_AFTER_S = 60.0
STOP_WAIT_S = 10.0


@dataclass
class Watcher:
    ws_id: str
    root: str
    store: str
    state: str = "starting"
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    restarts: int = 0
    last_exit: int | None = None
    backoff: float = BACKOFF_MIN_S
    next_start: float = 0.0
    history: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "pid": self.proc.pid if self.proc else None,
                "restarts": self.restarts, "last_exit": self.last_exit}


class Supervisor:
    """Starts, watches and stops the watchers (see the module docstring). Its methods run on
    the service's event loop; each is quick (a poll, a spawn, a non-blocking lock test)."""

    def __init__(self, home: Path, publish: Callable[[str, dict[str, Any]], Any]) -> None:
        self.home = home
        self.publish = publish
        self.watchers: dict[str, Watcher] = {}
        self.pid = os.getpid()

    def info(self, ws_id: str) -> dict[str, Any] | None:
        w = self.watchers.get(ws_id)
        return w.to_json() if w else None

    def summary(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for w in self.watchers.values():
            counts[w.state] = counts.get(w.state, 0) + 1
        return counts

    def _set(self, w: Watcher, state: str) -> None:
        if w.state != state:
            w.state = state
            self.publish("watcher", {"workspace": w.ws_id, "watcher": w.to_json()})

    def reconcile(self, known: list[Any]) -> None:
        """Make the watchers match the registered workspaces, then look after each."""
        wanted = {k.id: k for k in known if k.registered}
        for ws_id in list(self.watchers):
            if ws_id not in wanted:
                w = self.watchers.pop(ws_id)
                self._terminate(w)
                self._set(w, "stopped")
        for ws_id, k in wanted.items():
            w = self.watchers.get(ws_id)
            if w is None:
                w = self.watchers[ws_id] = Watcher(ws_id, k.root, k.store)
                self.publish("watcher", {"workspace": ws_id, "watcher": w.to_json()})
            self._tend(w, k.present)

    def _tend(self, w: Watcher, present: bool) -> None:
        from ..session import daemon_client

        now = time.monotonic()
        if w.proc is not None:
            code = w.proc.poll()
            if code is None:
                if w.state == "starting" and os.path.exists(
                        os.path.join(w.store, daemon_client.SOCKET_NAME)):
                    self._set(w, "running")
                if now - w.started > HEALTHY_AFTER_S:
                    w.backoff = BACKOFF_MIN_S
                if not present:
                    self._terminate(w)
                    self._set(w, "missing")
                return
            w.proc, w.last_exit = None, code
            w.restarts += 1
            w.next_start = now + w.backoff
            w.backoff = min(w.backoff * 2, BACKOFF_MAX_S)
            self._set(w, "restarting")
        if not present:
            self._set(w, "missing")
            return
        if now < w.next_start:
            return
        if not daemon_client.can_watch():
            self._set(w, "unwatched")  # no file watcher here: hooks and commands walk
            return
        if daemon_client.running(Path(w.store)):
            self._set(w, "external")  # a hook's daemon serves for now; ours takes over after
            return
        w.proc = daemon_client.spawn_supervised(Path(w.root), Path(w.store), self.pid)
        w.started = now
        self._set(w, "starting")

    def _terminate(self, w: Watcher) -> None:
        if w.proc is not None and w.proc.poll() is None:
            w.proc.terminate()
            try:
                w.proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()
        w.proc = None

    def stop_all(self) -> None:
        """Stop every watcher (SIGTERM at once to all, then wait; SIGKILL the slow ones)."""
        procs = [w.proc for w in self.watchers.values() if w.proc is not None]
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + STOP_WAIT_S
        for p in procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for w in self.watchers.values():
            w.proc = None
            w.state = "stopped"
