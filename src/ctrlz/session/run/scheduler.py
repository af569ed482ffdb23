"""When to take automatic snapshots during a session, and the one thread that takes them.

Triggers (each can be disabled with Moat's ``disable_*`` keys):

* ``auto``: every ``auto_interval`` seconds, into the auto ring; skipped when nothing changed
  since the last snapshot, so a quiet session does not push useful snapshots out of the ring;
* ``git``: a successful ``git commit`` in the trace, or a ref change under ``.git`` seen by the
  watcher; debounced 2 s so a burst of commits (or both signals for one commit) is one snapshot;
* ``build``: a command from Moat's build list exits 0;
* ``idle``: no file events and no execs for ``idle_threshold_seconds``; then nothing more until
  activity resumes (the cooldown).

Snapshots are taken by one worker thread, one at a time, with the dirty set from the watcher.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("ctrlz.session")

GIT_DEBOUNCE = 2.0


@dataclass(frozen=True)
class TriggerConfig:
    auto_interval: float = 300
    idle_threshold: float = 30
    disable_auto: bool = False
    disable_git_commits: bool = False
    disable_builds: bool = False
    disable_idle: bool = False


class Scheduler:
    """``take(type, label)`` is called on the worker thread; everything else is thread-safe."""

    def __init__(self, config: TriggerConfig, take: Callable[[str, str | None], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.take = take
        self.clock = clock
        self._cond = threading.Condition()
        self._queue: list[tuple[str, str | None]] = []
        self._stop = False
        now = clock()
        self._last_activity = now
        self._last_auto = now
        self._changed_since_snapshot = False
        self._idle_fired = False
        self._git_due: float | None = None
        self._thread = threading.Thread(target=self._run, name="ctrlz-scheduler", daemon=True)
        self.errors: list[str] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join()

    # -- signals from the watcher and the tracer ----------------------------------------------

    def activity(self, files_changed: bool = False) -> None:
        with self._cond:
            self._last_activity = self.clock()
            self._idle_fired = False
            if files_changed:
                self._changed_since_snapshot = True

    def git_commit(self) -> None:
        if self.config.disable_git_commits:
            return
        with self._cond:
            self._git_due = self.clock() + GIT_DEBOUNCE
            self._cond.notify_all()

    def build_finished(self, command: str) -> None:
        if self.config.disable_builds:
            return
        self.request("build", command[:80])

    def request(self, type: str, label: str | None = None) -> None:
        with self._cond:
            self._queue.append((type, label))
            self._cond.notify_all()

    # -- the worker ---------------------------------------------------------------------------

    def _due(self, now: float) -> list[tuple[str, str | None]]:
        due = self._queue
        self._queue = []
        cfg = self.config
        if self._git_due is not None and now >= self._git_due:
            due.append(("git", "git commit"))
            self._git_due = None
        if (not cfg.disable_auto and cfg.auto_interval > 0
                and now - self._last_auto >= cfg.auto_interval):
            self._last_auto = now
            if self._changed_since_snapshot:
                due.append(("auto", None))
        if (not cfg.disable_idle and not self._idle_fired
                and now - self._last_activity >= cfg.idle_threshold):
            self._idle_fired = True
            due.append(("idle", None))
        if due:
            self._changed_since_snapshot = False
        return due

    def _wait_time(self, now: float) -> float:
        cfg = self.config
        waits = [1.0]
        if self._git_due is not None:
            waits.append(self._git_due - now)
        if not cfg.disable_auto and cfg.auto_interval > 0:
            waits.append(self._last_auto + cfg.auto_interval - now)
        if not cfg.disable_idle and not self._idle_fired:
            waits.append(self._last_activity + cfg.idle_threshold - now)
        return max(0.01, min(waits))

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stop:
                    return
                now = self.clock()
                due = self._due(now)
                if not due:
                    self._cond.wait(self._wait_time(now))
                    continue
            for type, label in due:
                try:
                    self.take(type, label)
                except Exception as exc:  # a failed automatic snapshot must not stop the agent
                    log.warning("automatic %s snapshot failed: %s", type, exc)
                    self.errors.append(f"{type}: {exc}")
