"""What the running service shares between its routes, its gateway and its background tasks."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .events import EventBus
    from .supervisor import Supervisor

LOGIN_CODE_SECONDS = 120
SESSION_SECONDS = 7 * 86_400
#: the browser sessions, kept across restarts (in the run directory; see :class:`Logins`)
SESSIONS_FILE = "ui-sessions.json"

log = logging.getLogger("ctrlz.service")


@dataclass
class Logins:
    """One-time login codes (``ctrlz ui`` asks for one over the socket) and the browser
    sessions they become. Only hashes are kept, so lookups compare no secret byte by byte.

    Sessions are also written to ``path`` (0600, in the 0700 run directory): the SHA-256 of
    each session cookie, its CSRF token and its expiry in wall-clock seconds. So a restart of
    the service (an upgrade, ``systemctl --user restart``) does not log every open dashboard
    out, while the file holds nothing that works as a cookie. The run directory is the
    per-user tmpfs, so logins end at logout or reboot anyway, and after 7 days whatever
    happens. Login codes stay in memory: they live two minutes and are used once."""

    path: Path | None = None
    codes: dict[str, float] = field(default_factory=dict)  # sha256(code) -> expiry (monotonic)
    sessions: dict[str, tuple[str, float]] = field(default_factory=dict)  # sha256 -> csrf, exp
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def _key(secret: str) -> str:
        return hashlib.sha256(secret.encode()).hexdigest()

    def load(self) -> None:
        """The sessions a previous run of the service left, those not expired."""
        if self.path is None:
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            found = {str(k): (str(v["csrf"]), float(v["expires"]))
                     for k, v in data["sessions"].items()}
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring unreadable %s (%s): browsers log in again", self.path, exc)
            return
        now = time.time()
        with self._lock:
            self.sessions = {k: v for k, v in found.items() if v[1] > now}

    def _save(self) -> None:
        """Write the live sessions (called with the lock held); a failure only costs the
        logins at the next restart, so it is logged, not raised."""
        if self.path is None:
            return
        from .runtime import write_private

        now = time.time()
        self.sessions = {k: v for k, v in self.sessions.items() if v[1] > now}
        body = {"version": 1, "sessions": {k: {"csrf": c, "expires": round(e, 3)}
                                           for k, (c, e) in self.sessions.items()}}
        try:
            write_private(self.path, json.dumps(body))
        except OSError as exc:
            log.warning("cannot save the browser logins to %s: %s", self.path, exc)

    def new_code(self) -> str:
        code = secrets.token_urlsafe(24)
        with self._lock:
            now = time.monotonic()
            self.codes = {k: t for k, t in self.codes.items() if t > now}
            self.codes[self._key(code)] = now + LOGIN_CODE_SECONDS
        return code

    def redeem(self, code: str) -> tuple[str, str] | None:
        """A code, used once, becomes (session cookie, CSRF token); None if it is unknown,
        used or expired."""
        with self._lock:
            expiry = self.codes.pop(self._key(code), None)
            if expiry is None or expiry < time.monotonic():
                return None
            session, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
            self.sessions[self._key(session)] = (csrf, time.time() + SESSION_SECONDS)
            self._save()
            return session, csrf

    def csrf_for(self, session: str) -> str | None:
        """The session's CSRF token, or None when the cookie names no live session."""
        with self._lock:
            found = self.sessions.get(self._key(session))
            if found is None or found[1] < time.time():
                return None
            return found[0]

    def end(self, session: str) -> None:
        with self._lock:
            if self.sessions.pop(self._key(session), None) is not None:
                self._save()


class ServiceState:
    """The service's shared state (see the module docstring)."""

    def __init__(self, home: Path, run_dir: Path, token: str, events: EventBus,
                 supervisor: Supervisor | None = None) -> None:
        self.home = home
        self.run_dir = run_dir
        self.token = token
        self.events = events
        self.supervisor = supervisor
        self.logins = Logins(run_dir / SESSIONS_FILE)
        self.logins.load()
        self.port: int | None = None
        self.started_ns = time.time_ns()
        self.pid = os.getpid()
        self.locks = KeyedLocks()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.on_change: Callable[[str], None] | None = None
        self.stop: Callable[[], None] | None = None
        self.poller: Any = None  # events.Poller, set by the server
        self.storewatch: Any = None  # storewatch.StoreWatch, set by the server

    def workspace_lock(self, ws_id: str) -> asyncio.Lock:
        """The lock a change to workspace ``ws_id`` holds: awaited on the event loop, so a
        change queued behind another (or behind a store lock another process holds) waits
        without holding a worker thread, and requests for other workspaces, and the service's
        own, keep their workers. Only ever used on the loop's thread (see routing.routes)."""
        return self.locks.get(ws_id)

    def changed(self, ws_id: str) -> None:
        """A route changed workspace ``ws_id``: look for its events now, not at the next
        poll (called from worker threads)."""
        if self.loop is not None and self.on_change is not None:
            self.loop.call_soon_threadsafe(self.on_change, ws_id)

    def info(self) -> dict[str, Any]:
        from importlib.metadata import version

        from ..types import iso_utc
        from . import runtime

        watchers = self.supervisor.summary() if self.supervisor else {}
        return {"type": "service", "version": version("ctrlz"), "pid": self.pid,
                "started_at": iso_utc(self.started_ns),
                "uptime_seconds": round((time.time_ns() - self.started_ns) / 1e9, 1),
                "home": str(self.home), "run_dir": str(self.run_dir),
                "socket": str(self.run_dir / runtime.SOCKET),
                "gateway": {"port": self.port,
                            "url": f"http://127.0.0.1:{self.port}" if self.port else None},
                "watchers": watchers, "event_subscribers": self.events.subscriber_count,
                "events": self._events_info()}

    def _events_info(self) -> dict[str, Any]:
        """How changes are found: ``inotify`` (woken at once) or ``poll`` (once a second)."""
        watch, poller = self.storewatch, self.poller
        return {"source": "inotify" if watch is not None and watch.active else "poll",
                "wakeups": watch.wakeups if watch is not None else 0,
                "looks": poller.looks if poller is not None else 0}


class KeyedLocks:
    """One lock per key, made on first use (a workspace's changes run one at a time inside
    the service, so they queue here, first come first served, instead of polling the
    store's file lock). asyncio locks, used on the event loop's thread only: a request
    waiting its turn holds no worker thread, where 40 of them waiting on thread locks froze
    every other request of the service."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def get(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    def keys(self) -> Iterator[str]:
        return iter(list(self._locks))
