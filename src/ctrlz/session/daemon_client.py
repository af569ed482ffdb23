"""Talking to the workspace daemon (see :mod:`ctrlz.session.daemon.daemon`) from a short-lived
process.

An agent hook is a fresh process per tool call, so this module is what a hook imports: sockets
and JSON text (:mod:`ctrlz.jsontext`, not ``json``: ~6 ms of each such process) only, no engine
and no ``pathlib``. Every call degrades instead of failing: when no daemon answers, the
caller snapshots in-process (slower, same result) and may :func:`spawn` one for next time.

The wire format is one JSON object per line each way over a Unix stream socket,
``<store>/daemon.sock``; its names, sizes and timeouts are :mod:`ctrlz.protocol`'s, which
the native door shares. The store directory is private (mode 0700), and the daemon also checks
the peer's uid, so only the workspace's owner can ask it for anything.
"""

from __future__ import annotations

import errno
import os
import sys
import time

from .. import jsontext, platform

# the wire's names, sizes and timeouts, which the native door shares (one definition)
from ..protocol import (
    CONNECT_TIMEOUT_S,
    DAEMON_PROGRAM,
    DIRTY_TIMEOUT_S,
    HOOK_REPLY_TIMEOUT_S,
    HOOK_START_BY_S,
    MAX_MESSAGE,
    REPLY_TIMEOUT_S,
    SOCKET_NAME,
    STARTING_NAME,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # a hook and every snapshot import this module: keep it light
    import socket
    import subprocess
    from typing import Any

    from ..state.scan import DirtyDirs

    StrPath = str | os.PathLike[str]

LOCK_NAME = "daemon.lock"
LOG_NAME = "daemon.log"
FAILED_NAME = "daemon-failed.json"
# STARTING_NAME (:mod:`ctrlz.protocol`, which the native door shares) is present while the
# daemon starts up (:mod:`.daemon.daemon_startup`): a command does not ask it for what it would
# decline then (:data:`READY_OPS`), it works in-process at once.
#: The requests a starting daemon declines: they need its watcher or the workspace.
READY_OPS = frozenset({"snapshot", "restore", "dirty"})
#: How long a failed start keeps hooks from spawning another daemon.
FAILED_BACKOFF_S = 600
#: A request with no reply timeout still wakes this often (see :func:`read_message`).
_TICK_S = 0.5


class DaemonUnavailable(Exception):
    """No daemon answered, or it answered with an error; the caller falls back."""


class DaemonLost(Exception):
    """The daemon took a request that changes the workspace and stopped before answering (it
    was killed, or crashed): whether the work was done is unknown, so the caller must not
    simply do it again. Not a :class:`DaemonUnavailable`, so that no fallback catches it."""


def socket_address(store: StrPath) -> unix_address:
    """The daemon socket's address in ``store`` (see :class:`unix_address`)."""
    return unix_address(store, SOCKET_NAME)


class unix_address:  # noqa: N801 - used as a function: ``with unix_address(d, n) as a``
    """The address of socket ``name`` in ``directory``, for ``bind``/``connect``. A Unix
    socket path is limited to ~108 bytes and stores can live deeper than that, so long paths
    go through ``/proc/self/fd/<directory fd>/<name>``, valid while the ``with`` lasts.
    A class rather than ``contextlib.contextmanager``: every hook connects, and ``contextlib``
    is ~1 ms of its start-up."""

    def __init__(self, directory: StrPath, name: str) -> None:
        self._directory, self._name = directory, name
        self._fd: int | None = None

    def __enter__(self) -> str:
        path = os.path.join(os.fsdecode(self._directory), self._name)
        if len(os.fsencode(path)) < 100:
            return path
        self._fd = os.open(self._directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return f"/proc/self/fd/{self._fd}/{self._name}"

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_message(sock: socket.socket, limit: int | None = MAX_MESSAGE, *,
                 patient: bool = False) -> dict[str, Any]:
    """One JSON object terminated by a newline (or by the peer closing the connection), of
    at most ``limit`` bytes (None: any; for a restore's report, which names every path).

    ``patient``: the socket's timeout is only a tick, and a read that times out is tried
    again, for ever. A read that blocks with no timeout at all can miss a Ctrl+C: a signal
    that lands after Python's last check and before the ``recv`` call starts interrupts
    nothing, and the process waits on (seen under load, about once in ten tries). Each tick
    returns to Python, which raises the ``KeyboardInterrupt`` then."""
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            if patient:
                continue
            raise
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            break
        if limit is not None and size > limit:
            raise ValueError(f"message longer than {limit} bytes")
    data = b"".join(chunks)
    if not data.strip():
        raise ValueError("empty message")
    try:
        message = jsontext.loads(data)
    except RecursionError:  # "[[[[…": a bad message, not a reason for a daemon to die
        raise ValueError("message nested too deeply") from None
    if not isinstance(message, dict):
        raise ValueError("message is not a JSON object")
    return message


def send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(jsontext.dumps(message).encode() + b"\n")


def request(store: StrPath, message: dict[str, Any], *,
            timeout: float | None = REPLY_TIMEOUT_S,
            at_most_once: bool = False) -> dict[str, Any]:
    """Send one request and return the daemon's reply (``{"ok": true, ...}``); anything else,
    including an ``ok: false`` reply, raises :class:`DaemonUnavailable`.

    ``at_most_once``: for a request the daemon must not be asked twice (a restore). Once the
    whole message is sent, a missing or broken reply raises :class:`DaemonLost` instead; a
    message the daemon never got whole cannot have been acted on (it reads to the newline).
    Its reply is read whatever its size: a report of what was done must not be taken for a
    daemon that died."""
    if not os.path.exists(os.path.join(store, SOCKET_NAME)):
        # no daemon has ever listened here, or it stopped: the common case costs one stat
        # and never loads the socket module
        raise DaemonUnavailable("no daemon is running")
    if message.get("op") in READY_OPS and os.path.exists(os.path.join(store, STARTING_NAME)):
        # one more stat saves the connection, the decline and its wait for the daemon's
        # attention, busy with its start-up: a command right after the first walks at once
        raise DaemonUnavailable("the workspace daemon is starting; work in-process")
    sent = False
    try:
        with socket_address(store) as address:
            s = _unix_socket()
            try:
                s.settimeout(CONNECT_TIMEOUT_S)
                s.connect(address)
                s.settimeout(timeout)
                send_message(s, message)
                sent = True
                if timeout is None:
                    s.settimeout(_TICK_S)
                reply = read_message(s, None if at_most_once else MAX_MESSAGE,
                                     patient=timeout is None)
            finally:
                s.close()
    except (OSError, ValueError, TypeError) as exc:  # TypeError: nothing JSON can carry
        if sent and at_most_once:
            raise DaemonLost(str(exc)) from None
        raise DaemonUnavailable(f"no daemon answered: {exc}") from None
    if reply.get("ok") is not True:
        raise DaemonUnavailable(str(reply.get("error") or "the daemon refused the request"))
    return reply


def _unix_socket() -> socket.socket:
    """A Unix stream socket for one request. CPython's ``_socket`` is what ``socket.socket``
    wraps; a client needs nothing the wrapper adds, and its module (``selectors``, ``enum``
    classes, ``array``) costs each hook and each command the daemon serves ~3 ms."""
    try:
        from _socket import AF_UNIX, SOCK_CLOEXEC, SOCK_STREAM
        from _socket import socket as new_socket
    except ImportError:  # another Python implementation
        from socket import AF_UNIX, SOCK_CLOEXEC, SOCK_STREAM
        from socket import socket as new_socket
    return new_socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC)


def snapshot(store: StrPath, *, type: str, label: str | None = None,
             session_id: str | None = None, pinned: bool = False,
             config: dict[str, Any] | None = None, hook: bool = False) -> dict[str, Any]:
    """Ask the daemon for a snapshot; returns its reply (``snapshot``: id, number, root, ...;
    ``scan``: ``dirty`` or ``full``; ``dirty_dirs``). ``config``: the caller's settings,
    which the daemon refuses to serve unless they are the ones it runs with. ``hook``: a
    hook's snapshot, with a hook's deadlines (:data:`HOOK_REPLY_TIMEOUT_S`)."""
    message: dict[str, Any] = {"op": "snapshot", "type": type, "label": label,
                               "session_id": session_id, "pinned": pinned, "config": config}
    if not hook:
        return request(store, message)
    message["start_by_ns"] = start_by()
    return request(store, message, timeout=HOOK_REPLY_TIMEOUT_S)


def start_by() -> int:
    """A hook request's ``start_by_ns``."""
    return time.monotonic_ns() + int(HOOK_START_BY_S * 1e9)


def too_late(message: dict[str, Any]) -> bool:
    """Whether a hook's request came to be served after its caller stopped waiting."""
    start_by_ns = message.get("start_by_ns")
    return isinstance(start_by_ns, int) and time.monotonic_ns() > start_by_ns


def restore(store: StrPath, body: dict[str, Any],
            config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Ask the daemon to run a restore (``body``: a request or a rollback, as
    :mod:`ctrlz.session.restore_wire` encodes them).
    Its reply is ``{"ok": true, "result": ...}`` or, when the restore ran and failed,
    ``{"ok": true, "failed": ...}``: an ``ok: false`` reply (:class:`DaemonUnavailable`)
    always means that nothing was started, so the caller may restore in-process instead.
    No reply timeout: a restore takes as long as it takes, and a daemon that dies closes the
    socket (:class:`DaemonLost`)."""
    return request(store, {"op": "restore", **body, "config": config},
                   timeout=None, at_most_once=True)


def dirty(store: StrPath, config: dict[str, Any] | None = None) -> DirtyDirs | None:
    """The directories (workspace-relative) that changed since the store's stat cache was
    written, and in some of them the only names that did, from the daemon's watcher; None
    when it cannot vouch for that (a full scan is needed). Only for a caller that holds the
    store lock and snapshots right after: the daemon hands the set over and forgets it (see
    ``Daemon.hand_out_dirty``). A daemon that sends no names has every directory listed
    whole."""
    from ..state.scan import DirtyDirs

    reply = request(store, {"op": "dirty", "config": config}, timeout=DIRTY_TIMEOUT_S)
    dirs = reply.get("dirty")
    if dirs is None:
        return None
    try:
        names = {bytes.fromhex(d): frozenset(bytes.fromhex(n) for n in ns)
                 for d, ns in (reply.get("names") or {}).items()}
        return DirtyDirs((bytes.fromhex(d) for d in dirs), names)
    except (TypeError, ValueError, AttributeError):
        raise DaemonUnavailable("the daemon sent a malformed dirty set") from None


def running(store: StrPath) -> bool:
    """Whether a daemon holds this store's daemon lock (it may still be starting)."""
    try:
        fd = os.open(os.path.join(store, LOCK_NAME), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)  # closing drops a lock we may have taken
    return False


def recent_failure(store: StrPath) -> dict[str, Any] | None:
    """The last start failure, while it still holds hooks back from respawning."""
    try:
        with open(os.path.join(store, FAILED_NAME), "rb") as f:
            info = jsontext.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    if time.time_ns() - int(info.get("time_ns", 0)) > FAILED_BACKOFF_S * 10**9:
        return None
    return info


def can_watch() -> bool:
    """Whether a daemon can run here at all: it is its file watcher (:mod:`ctrlz.platform`)."""
    return platform.watcher() is not None


#: why no daemon starts where :mod:`ctrlz.platform` offers no file watcher
NO_WATCHER = ("no file watcher on this platform (ctrlz doctor; install watchdog): no daemon; "
              "every command walks the tree itself")


def spawn(root: StrPath, store: StrPath) -> bool:
    """Start a daemon for ``root`` in the background unless one runs or recently failed to
    start. Returns whether one was started. The child is fully detached (own session, no
    inherited descriptors, stdio on /dev/null): an agent that waits for its hook's output to
    close must never wait for the daemon.

    The daemon lock is taken here and handed to the child (``--lock-fd``: a ``flock`` belongs
    to the open file, which the child inherits), with the child's pid written in it. So the
    daemon counts as :func:`running` from the moment this returns, not only once its
    interpreter has imported its modules and locked the file itself (~0.1-0.2 s later): a
    ``ctrlz daemon stop`` in between stops it rather than answering "not running" and leaving
    it to run, and two commands that spawn at once start one daemon, not two."""
    if recent_failure(store) is not None:
        return False
    if platform.watcher() is None:
        return False  # a daemon is its watcher: without one, every command walks the tree
    import fcntl
    import subprocess

    try:
        lock_fd = os.open(os.path.join(store, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                          0o600)
    except OSError:
        return False  # no store to start one for (removed meanwhile)
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False  # one runs, or is starting
            raise
        os.ftruncate(lock_fd, 0)  # no stale pid for `stop` to signal while the child starts
        child = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", DAEMON_PROGRAM, os.fsdecode(root), os.fsdecode(store),
             "--lock-fd", str(lock_fd)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, pass_fds=(lock_fd,), cwd="/")
        os.write(lock_fd, f"{child.pid}\n".encode())
    finally:
        os.close(lock_fd)  # the child's copy keeps the lock
    return True


def spawn_supervised(root: StrPath, store: StrPath, parent_pid: int) -> subprocess.Popen[bytes]:
    """Start a daemon owned by the ctrlz service (``parent_pid``): its child, so the service
    sees it exit and restarts it; it never idles out and exits when the service is gone. In
    its own session, so a Ctrl+C meant for the service reaches the service alone."""
    import subprocess

    return subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", DAEMON_PROGRAM, os.fsdecode(root), os.fsdecode(store),
         "--parent-pid", str(parent_pid)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True, cwd="/")


def autostart(root: StrPath, store: StrPath, enabled: bool | None = None) -> bool:
    """:func:`spawn`, if the workspace's ``daemon`` setting allows it (``enabled``, when the
    caller has the configuration at hand; else it is read here). Whether one was started."""
    if enabled is None:
        from .config import load_config

        enabled = bool(load_config(root)["daemon"])
    if not enabled:
        return False
    try:
        return spawn(root, store)
    except OSError:  # no process to spare (EAGAIN, EMFILE): the caller's work is done, and
        return False  # the next command simply walks the tree itself again


def wait_ready(store: StrPath, timeout: float, *,
               starting: bool = False) -> dict[str, Any] | None:
    """Poll until the daemon is ready: its watches are in place and its stat cache primed,
    so that it serves snapshots (a daemon answers pings before that, while it starts up in
    the background: see :mod:`.daemon.daemon_startup`). With ``starting``, until it answers at all:
    it runs and listens. Its ping reply, or None at the timeout or when it stopped trying."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            reply = request(store, {"op": "ping"}, timeout=5.0)
            if starting or reply.get("ready", True):  # no "ready": a daemon from before
                return reply
        except DaemonUnavailable:
            pass
        if time.monotonic() > deadline:
            return None
        if not running(store) and recent_failure(store) is not None:
            return None
        time.sleep(0.05)


def status(store: StrPath) -> dict[str, Any]:
    """What ``ctrlz daemon status`` shows: ``running``, the daemon's own report when it
    answers (pid, watched directories, snapshots served, ...), and a recent start failure."""
    out: dict[str, Any] = {"type": "daemon", "running": running(store),
                           "socket": os.path.join(store, SOCKET_NAME),
                           "log": os.path.join(store, LOG_NAME)}
    if out["running"]:
        try:
            out.update(request(store, {"op": "ping"}, timeout=5.0))
            out.pop("ok", None)
            out.setdefault("ready", True)  # a daemon from before answered once ready only
        except DaemonUnavailable:
            out["ready"] = False  # its process is loading: no socket yet
            out["phase"] = "loading"
    out["last_failure"] = recent_failure(store)
    return out


def start(root: StrPath, store: StrPath, *, wait: bool,
          timeout: float = 120.0) -> dict[str, Any]:
    """Start a daemon (unless one runs) and wait until it answers; its status. It answers
    while it still starts up (places its watches, primes its stat cache: seconds on a big
    tree), and commands meanwhile work in-process; ``wait``: until it is ready, for a
    caller that needs its snapshots served (a test, a benchmark, a sandboxed session whose
    hooks cannot write the store). A recorded failure does not hold back an explicit
    start."""
    try:
        os.unlink(os.path.join(store, FAILED_NAME))
    except FileNotFoundError:
        pass
    if platform.watcher() is None:
        out = status(store)
        out["reason"] = NO_WATCHER
        return out
    spawn(root, store)
    wait_ready(store, timeout, starting=not wait)
    return status(store)


def stop(store: StrPath, timeout: float = 30.0) -> bool:
    """Ask the daemon to stop and wait until its lock is free; whether one was running. One
    that does not listen yet (importing, opening the workspace) is sent ``SIGTERM`` by the
    pid in its lock file, which its spawner wrote (:func:`spawn`). One that is starting up
    stops once the step it is in ends (its watches placed, its prime done)."""
    if not running(store):
        return False
    deadline = time.monotonic() + timeout
    asked = False
    while running(store) and time.monotonic() < deadline:
        if not asked:
            try:
                request(store, {"op": "stop"}, timeout=10.0)
                asked = True
            except DaemonUnavailable:
                asked = _signal_starting(store)
        time.sleep(0.05)
    return True


def _signal_starting(store: StrPath) -> bool:
    """``SIGTERM`` to the daemon named in the lock file; whether it was sent. The file is
    empty for the instant between its spawner's lock and its ``Popen`` (then: not yet)."""
    try:
        with open(os.path.join(store, LOCK_NAME), encoding="utf-8") as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return False
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return False
    return True
