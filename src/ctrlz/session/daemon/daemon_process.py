"""The workspace daemon's process: its lock, log, socket and serve loop around a
:class:`~ctrlz.session.daemon.daemon.Daemon`.

``python -m ctrlz.session.daemon.daemon_process ROOT STORE [--parent-pid PID]`` runs it; what
:func:`ctrlz.session.daemon_client.spawn` starts is :mod:`ctrlz.door.program`, the same with
the native door's request added. See :mod:`ctrlz.session.daemon.daemon` for what the
daemon does and when it stops.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from ...errors import CtrlzError
from ...state import failpoints
from .. import daemon_client as wire
from ..daemon_client import FAILED_NAME, LOCK_NAME, LOG_NAME, STARTING_NAME
from ..protected import ProtectedWorkspace
from . import daemon_startup
from .daemon import Daemon, log
from .serial import DaemonStopping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from .daemon import AtOnce, Op

LOG_MAX = 1 << 20


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


#: connections answered at once, on threads of their own (more wait in the backlog)
CONNECTIONS_MAX = 32


def serve(daemon: Daemon, listener: socket.socket,
          start_up: Callable[[], None] | None = None) -> None:
    """Answer requests until told to stop. A thread accepts connections and reads each
    request on a thread of its own (:data:`CONNECTIONS_MAX` at once); a request the daemon
    may answer at once (:meth:`Daemon.at_once`: a served hook) is answered there, and every
    other one is handed to this thread, which answers them one at a time, in order, through
    ``daemon.serial`` (:mod:`.serial`). ``start_up`` runs on a thread of its own meanwhile
    (:mod:`.daemon_startup`: until it is done, the requests that need it are declined on
    their connection's thread). A second without a request drives :meth:`Daemon.tick`."""
    stopping = threading.Event()
    slots = threading.BoundedSemaphore(CONNECTIONS_MAX)
    threads: list[threading.Thread] = []
    acceptor = threading.Thread(target=_accept, args=(daemon, listener, stopping, slots,
                                                      threads),
                                name="ctrlz-accept", daemon=True)
    acceptor.start()
    starter = None
    if start_up is not None:
        starter = threading.Thread(target=start_up, name="ctrlz-startup", daemon=True)
        starter.start()
    try:
        while daemon.stop_reason is None:
            work = daemon.serial.next_job(timeout=1.0)
            if work is None:
                daemon.tick()
                continue
            work()
            # The caller was woken by the reply, often onto this CPU (the scheduler's wake
            # affinity): let it run before the housekeeping does, or it waits out ~1.2 ms of
            # it (a warm caller's served snapshot: 3.4 -> 2.25 ms on 2 cores;
            # docs/decisions/0010-restores-served-by-the-daemon.md)
            os.sched_yield()
            daemon.after_reply()
    finally:
        stopping.set()
        daemon.serial.close()  # requests still waiting: "stopping", nothing of them done
        if starter is not None:  # it owns the workspace until it ends: the close waits
            starter.join()
        acceptor.join(timeout=5.0)
        for thread in list(threads):  # answers under way finish before the daemon closes
            thread.join(timeout=30.0)
    log.info("stopping: %s", daemon.stop_reason)


def _accept(daemon: Daemon, listener: socket.socket, stopping: threading.Event,
            slots: threading.BoundedSemaphore, threads: list[threading.Thread]) -> None:
    listener.settimeout(1.0)
    while not stopping.is_set() and daemon.stop_reason is None:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError as exc:  # EMFILE and the like: the caller works in-process
            log.info("accept failed: %s", exc)
            stopping.wait(0.1)
            continue
        slots.acquire()
        thread = threading.Thread(target=_connection, args=(daemon, conn, slots, threads),
                                  name="ctrlz-conn", daemon=True)
        threads.append(thread)
        thread.start()


def _connection(daemon: Daemon, conn: socket.socket, slots: threading.BoundedSemaphore,
                threads: list[threading.Thread]) -> None:
    """Read one request; answer it here, or hand it whole to the serving thread, which
    answers it, closes it and gives its slot back (so handed requests count against
    :data:`CONNECTIONS_MAX` until they are answered: the backlog holds the rest)."""
    handed = False
    try:
        conn.settimeout(10.0)
        try:
            if _peer_uid(conn) != os.getuid():
                wire.send_message(conn, {"ok": False, "error": "not the workspace owner"})
                return
            message = wire.read_message(conn)
            refused = _capture_only(daemon, conn, message)
            if refused is None and not daemon.at_once(message):
                refused = _while_starting(daemon, message)
            if refused is not None:
                wire.send_message(conn, refused)
                return
        except (OSError, ValueError) as exc:
            log.info("bad request: %s", exc)
            try:
                wire.send_message(conn, {"ok": False, "error": f"bad request: {exc}"})
            except OSError:
                pass
            return
        if daemon.at_once(message):
            _answer(daemon, conn, message)
            return

        def answer() -> None:
            try:
                _answer(daemon, conn, message)
            finally:
                conn.close()
                slots.release()

        def refuse() -> None:  # the daemon stopped first: nothing done, the caller does it
            try:
                _reply(conn, {"ok": False,
                              "error": "the workspace daemon stopped before this request"})
            finally:
                conn.close()
                slots.release()

        try:
            daemon.serial.hand_over(answer, refuse)
            handed = True
        except DaemonStopping as exc:
            _reply(conn, {"ok": False, "error": str(exc)})
    finally:
        threads.remove(threading.current_thread())
        if not handed:
            conn.close()
            slots.release()


def _while_starting(daemon: Daemon, message: dict[str, Any]) -> dict[str, Any] | None:
    """While the daemon starts up, the reply to any request but a served hook, here on the
    connection's thread: a ``ping`` (its progress) or a ``stop`` answered, anything else
    declined (:meth:`.daemon_startup.StartUp.refusal`), so that its caller works in-process
    rather than wait. None once it is ready."""
    if daemon.startup.ready.is_set():
        return None
    if message.get("op") in ("ping", "stop"):
        return daemon.handle(message)
    return daemon.startup.refusal()


def _capture_only(daemon: Daemon, conn: socket.socket,
                  message: dict[str, Any]) -> dict[str, Any] | None:
    """The refusal of a request that is no capture from a sandboxed session's process
    (:mod:`.confined`), else None. Captures (hooks, snapshots: the hot path) are let through
    before anything is read from ``/proc``."""
    from . import confined

    if confined.daemon_allows(message, daemon.captures):
        return None
    record = confined.confined_peer(conn, confined.home_of_store(daemon.ws.store_path))
    if record is None:
        return None
    log.warning("refused %r from a process of sandboxed session %s", message.get("op"),
                record.session)
    return confined.daemon_refusal(message)


def _answer(daemon: Daemon, conn: socket.socket, message: dict[str, Any]) -> None:
    try:
        reply = daemon.handle(message)
    except Exception as exc:  # one bad request must not take the watcher down
        log.exception("request %r failed", message.get("op"))
        reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    _reply(conn, reply)


def _reply(conn: socket.socket, reply: dict[str, Any]) -> None:
    conn.settimeout(30.0)
    try:
        wire.send_message(conn, reply)
    except OSError as exc:  # the hook gave up; the snapshot stands
        log.info("could not reply: %s", exc)


def _setup_log(store: Path) -> None:
    path = store / LOG_NAME
    try:
        if path.stat().st_size > LOG_MAX:
            os.replace(path, path.with_name(LOG_NAME + ".1"))
    except FileNotFoundError:
        pass
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(
        f"%(asctime)s [{os.getpid()}] %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def _record_failure(store: Path, reason: str) -> None:
    data = {"time_ns": time.time_ns(), "pid": os.getpid(), "reason": reason}
    tmp = store / (FAILED_NAME + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, store / FAILED_NAME)


def _bind(store: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    with wire.socket_address(store) as address:
        try:
            os.unlink(address)  # stale, from a daemon that was killed: we hold the lock now
        except FileNotFoundError:
            pass
        old = os.umask(0o077)
        try:
            listener.bind(address)
        finally:
            os.umask(old)
    listener.listen(64)
    return listener


def run_daemon(root: Path, store: Path, parent_pid: int | None = None,
               ops: Mapping[str, Op] | None = None,
               at_once: Mapping[str, AtOnce] | None = None, lock_fd: int | None = None,
               captures: Mapping[str, AtOnce] | None = None) -> int:
    """The daemon's whole life; returns its exit status. Quietly does nothing when another
    daemon already serves this store. ``parent_pid``: see "Under the ctrlz service" above;
    ``ops``: the program's own requests (:attr:`Daemon.ops`); ``at_once``: which of them
    it answers on their connection's thread (:meth:`Daemon.at_once`); ``captures``: which
    of them a sandboxed session's process may ask (:attr:`Daemon.captures`); ``lock_fd``: the
    daemon lock, already taken for us by :func:`~ctrlz.session.daemon_client.spawn` (locking
    it again is a no-op on the same open file)."""
    import fcntl

    store = Path(store)
    if lock_fd is None:
        lock_fd = os.open(store / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    else:
        os.set_inheritable(lock_fd, False)  # nothing this daemon starts may keep it locked
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock_fd)
        return 0
    pid = f"{os.getpid()}\n".encode()  # for `ctrlz daemon stop` before it listens
    if os.pread(lock_fd, 64, 0) != pid:  # (spawn wrote it already, with the same offset)
        os.ftruncate(lock_fd, 0)
        os.pwrite(lock_fd, pid, 0)
    _setup_log(store)
    # before the workspace is opened: the whole start-up yields the cores to commands
    # (:func:`.daemon_startup.run` raises it back once ready)
    daemon_startup.lower_group_priority()
    stopping: list[int] = []
    daemon: Daemon | None = None

    def on_signal(signum: int, frame: object) -> None:
        stopping.append(signum)
        if daemon is not None:
            daemon.stop_reason = f"signal {signum}"

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    listener: socket.socket | None = None
    try:
        ws = ProtectedWorkspace.open(root)
        if ws.store_path.resolve() != store.resolve():
            raise CtrlzError(f"{root} uses the store {ws.store_path}, not {store}")
        daemon = Daemon(ws, parent_pid, ops, at_once, captures)
        if stopping:
            daemon.stop_reason = f"signal {stopping[0]}"
        (store / STARTING_NAME).touch()  # before the socket: no command asks before it is ready
        listener = _bind(store)  # at once: the watches and the prime come in the background
        serve(daemon, listener, start_up=lambda: daemon_startup.run(daemon))
        if daemon.startup.error is not None:
            raise daemon.startup.error
        return 0
    except Exception as exc:
        log.exception("daemon failed")
        try:
            _record_failure(store, f"{type(exc).__name__}: {exc}")
        except OSError:
            pass
        return 1
    finally:
        (store / STARTING_NAME).unlink(missing_ok=True)
        if listener is not None:
            with wire.socket_address(store) as address:
                try:
                    os.unlink(address)
                except OSError:
                    pass
            listener.close()
        if daemon is not None:
            daemon.close()
        os.close(lock_fd)


def main(argv: list[str] | None = None, ops: Mapping[str, Op] | None = None,
         at_once: Mapping[str, AtOnce] | None = None,
         captures: Mapping[str, AtOnce] | None = None) -> int:
    """``ROOT STORE [--parent-pid PID | --lock-fd FD]``: see :func:`run_daemon`. The program
    users' daemons run is :mod:`ctrlz.door.program`, which calls this with the native door's
    request."""
    args = sys.argv[1:] if argv is None else argv
    parent: int | None = None
    lock_fd: int | None = None
    if len(args) == 4 and args[2] == "--parent-pid" and args[3].isdigit():
        parent, args = int(args[3]), args[:2]
    elif len(args) == 4 and args[2] == "--lock-fd" and args[3].isdigit():
        lock_fd, args = int(args[3]), args[:2]
    if len(args) != 2:
        print(f"usage: python -m {wire.DAEMON_PROGRAM} ROOT STORE [--parent-pid PID | "
              "--lock-fd FD]", file=sys.stderr)
        return 2
    if parent is not None and os.getppid() != parent:
        return 0  # the service died before we started: nobody would supervise us
    # crash tests kill the daemon at a named point of its work (state/failpoints.py)
    failpoints.arm_spec(os.environ.get("CTRLZ_TEST_FAILPOINTS", ""))
    return run_daemon(Path(args[0]), Path(args[1]), parent, ops, at_once, lock_fd, captures)


if __name__ == "__main__":
    raise SystemExit(main())
