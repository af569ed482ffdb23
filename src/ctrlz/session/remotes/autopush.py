"""Background push: ``remote.auto_push = NAME`` sends new snapshots as they are taken.

``ctrlz run`` and the workspace daemon start one :class:`AutoPusher` and :meth:`~AutoPusher.kick`
it after every snapshot. It pushes on its own thread with its own handle on the store (never
the session's connections), bounded to ``auto_push_bandwidth`` bytes per second, and retries a
failed push with exponential backoff (2 s doubling to 5 minutes), so a laptop that goes
offline catches up when it comes back. A push never blocks a snapshot: the store lock is held
only while the snapshots are listed. ``ctrlz status`` shows what is still unpushed.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

log = logging.getLogger("ctrlz.autopush")

BACKOFF_FIRST = 2.0
BACKOFF_MAX = 300.0


class AutoPusher:
    def __init__(self, root: Path, remote: str, bandwidth: int) -> None:
        self.root = root
        self.remote = remote
        self.bandwidth = bandwidth
        self.last_error: str | None = None
        self.pushes = 0
        self.attempts = 0
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="ctrlz-autopush", daemon=True)

    @classmethod
    def from_config(cls, root: Path, values: dict[str, object]) -> AutoPusher | None:
        name = str(values.get("auto_push") or "")
        if not name:
            return None
        pusher = cls(root, name, int(values.get("auto_push_bandwidth") or 0))  # type: ignore[call-overload]
        pusher._thread.start()
        return pusher

    def kick(self) -> None:
        """New snapshots exist: push soon."""
        self._idle.clear()
        self._wake.set()

    def close(self, wait: float = 0.0) -> bool:
        """Push what is left (waiting up to ``wait`` seconds) and stop; True if all went."""
        if wait > 0:
            self.kick()
            end = time.monotonic() + wait
            attempts = self.attempts
            # done, or one more attempt failed (a run does not wait out the backoff)
            while time.monotonic() < end and not self._idle.is_set() and not (
                    self.attempts > attempts and self.last_error is not None):
                self._idle.wait(0.1)
        done = self._idle.is_set() and self.last_error is None
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=1.0)
        return done

    def _loop(self) -> None:
        delay = BACKOFF_FIRST
        while not self._stop:
            self._wake.wait()
            self._wake.clear()
            if self._stop:
                break
            try:
                self._push_once()
                self.last_error = None
                self.attempts += 1
                delay = BACKOFF_FIRST
                if not self._wake.is_set():
                    self._idle.set()
            except Exception as exc:  # noqa: BLE001 - a background push must never crash its host
                self.last_error = str(exc)
                self.attempts += 1
                log.warning("auto push to %s failed (%s); retrying in %.0f s", self.remote,
                            exc, delay)
                end = time.monotonic() + delay
                while not self._stop and time.monotonic() < end:
                    time.sleep(0.2)
                delay = min(delay * 2, BACKOFF_MAX)
                self._wake.set()

    def _push_once(self) -> None:
        from ..protected import ProtectedWorkspace
        from . import remotes

        with ProtectedWorkspace.open(self.root) as ws:
            report = remotes.push_snapshots(ws, self.remote, bandwidth=self.bandwidth)
        self.pushes += 1
        if report.pushed:
            log.info("auto push: %d snapshots to %s", len(report.pushed), self.remote)
