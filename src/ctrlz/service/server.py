"""The service process: ``ctrlz service run`` (or ``python -m ctrlz.service``).

One process, one event loop, two uvicorn servers: the API on the Unix socket and the gateway
on 127.0.0.1. Beside them, one housekeeping loop runs once a second, or at once when a route changed
something or inotify saw a store's database written (:mod:`.storewatch`): it reads the
registry, lets the supervisor start, restart or stop watchers, and lets the poller publish
events. SIGTERM or SIGINT (or ``POST
/v1/service/stop``) stops the servers, closes the event streams and stops the watchers; the
runtime files are removed last. The service's own lock (``service.lock``) is held for its
whole life, so a second service for the same user refuses to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import runtime

log = logging.getLogger("ctrlz.service")
PORT_TRIES = 20


def _quiet_server() -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """A uvicorn server that leaves signals to us: two servers share one process."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server


def _lock(run_dir: Path) -> int:
    fd = os.open(run_dir / runtime.LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        pid = runtime.read(runtime.PID) or "?"
        raise UsageError(f"the ctrlz service is already running (pid {pid}); "
                         "`ctrlz service status` shows it") from None
    return fd


def _bind_socket(run_dir: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    with runtime.socket_address(run_dir) as address:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)  # a killed service's socket: we hold the lock now
        old = os.umask(0o177)
        try:
            sock.bind(address)
        finally:
            os.umask(old)
        os.chmod(address, 0o600)
    sock.listen(128)
    return sock


def _bind_tcp(port: int) -> socket.socket:
    """127.0.0.1:``port``, or the next free one (``0``: any free port)."""
    last: OSError | None = None
    for candidate in [0] if port == 0 else range(port, min(port + PORT_TRIES, 65536)):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", candidate))
        except OSError as exc:
            sock.close()
            last = exc
            continue
        sock.listen(128)
        return sock
    raise UsageError(f"no free port for the gateway in {port}..{port + PORT_TRIES - 1}: "
                     f"{last}; choose another with --port, or gateway_port in the config "
                     "file (or CTRLZ_GATEWAY_PORT)")


def default_port() -> int:
    """``gateway_port`` from the user's config file or ``$CTRLZ_GATEWAY_PORT`` (19322)."""
    from ..session.config import load_config

    config = load_config(None)
    port = int(config["gateway_port"])
    if port > 65535:
        raise UsageError(f"gateway_port {port} (from {config.sources['gateway_port']}) is not "
                         "a port number")
    return port


def _poll_seconds() -> float:
    """How often every store is looked at whether or not inotify woke us:
    ``$CTRLZ_SERVICE_POLL_SECONDS``, default 1 (the safety net for changes inotify cannot
    see, such as another machine's writes to a network filesystem; the tests raise it to
    show that inotify alone delivers)."""
    raw = os.environ.get("CTRLZ_SERVICE_POLL_SECONDS", "")
    try:
        value = float(raw) if raw else 1.0
    except ValueError:
        raise UsageError(f"CTRLZ_SERVICE_POLL_SECONDS must be a number of seconds, not "
                         f"{raw!r}") from None
    return value if value > 0 else 1.0


def run(port: int | None = None, gateway: bool = True) -> int:
    """The whole life of the service; its exit status."""
    from ..session.locator import default_home
    from ..session.protected import keep_restores_in_process
    from .context import ServiceState
    from .events import EventBus

    keep_restores_in_process()

    run_dir = runtime.ensure_run_dir()
    lock_fd = _lock(run_dir)
    made: list[Path] = []
    try:
        os.chdir("/")  # never hold a workspace (or a relative path's meaning) open
        token = runtime.new_token()
        runtime.write_private(run_dir / runtime.TOKEN, token)
        made.append(run_dir / runtime.TOKEN)
        uds = _bind_socket(run_dir)
        made.append(run_dir / runtime.SOCKET)
        tcp = _bind_tcp(default_port() if port is None else port) if gateway else None
        state = ServiceState(default_home(), run_dir, token, EventBus())
        if tcp is not None:
            state.port = tcp.getsockname()[1]
            runtime.write_private(run_dir / runtime.PORT, f"{state.port}\n")
            made.append(run_dir / runtime.PORT)
        runtime.write_private(run_dir / runtime.PID, f"{os.getpid()}\n")
        made.append(run_dir / runtime.PID)
        log.info("ctrlz service %d: socket %s, gateway %s", os.getpid(),
                 run_dir / runtime.SOCKET,
                 f"http://127.0.0.1:{state.port}" if state.port else "off")
        asyncio.run(_serve(state, uds, tcp))
        return 0
    finally:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                path.unlink()
        os.close(lock_fd)


async def _serve(state: Any, uds: socket.socket, tcp: socket.socket | None) -> None:
    import uvicorn

    from ..session.registry import known
    from .app import api_app, gateway_app
    from .events import Poller
    from .peercred import checked_protocol
    from .storewatch import StoreWatch
    from .supervisor import Supervisor

    loop = asyncio.get_running_loop()
    state.loop = loop
    bus = state.events

    def publish(kind: str, data: dict[str, Any]) -> None:
        loop.call_soon_threadsafe(bus.publish, kind, data)

    state.supervisor = Supervisor(state.home, publish)
    poller = Poller(bus, state.home)
    state.on_change = poller.kick
    watch = StoreWatch(os.fspath(state.home), poller.wake.set)
    state.poller, state.storewatch = poller, watch
    api = api_app(state)
    server_class = _quiet_server()

    def config(app: Any, **extra: Any) -> Any:
        return uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False,
                              timeout_graceful_shutdown=3, proxy_headers=False,
                              server_header=False, date_header=True, **extra)

    # the socket's connections are checked against our uid, and a sandboxed session's are
    # capture-only (peercred.py); the gateway's are TCP, and authenticate with the token or
    # a login instead
    protocol = checked_protocol(os.fspath(state.home))
    servers = [(server_class(config(api, http=protocol)), uds)]
    if tcp is not None:
        servers.append((server_class(config(gateway_app(state, api))), tcp))
    stopping = asyncio.Event()

    def stop() -> None:
        if not stopping.is_set():
            log.info("stopping")
            stopping.set()
            bus.close()
            for server, _ in servers:
                server.should_exit = True
            poller.wake.set()

    state.stop = lambda: loop.call_soon_threadsafe(stop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    loop.add_signal_handler(signal.SIGHUP, lambda: None)

    poll_every = _poll_seconds()
    if os.environ.get("CTRLZ_SERVICE_INOTIFY", "1") != "0":
        watch.start(loop)
    log.info("changes found by %sa look every %gs", "inotify and " if watch.active else "",
             poll_every)

    async def housekeeping() -> None:
        woken, last_look = True, -poll_every
        while not stopping.is_set():
            try:
                found = await asyncio.to_thread(known, state.home)
                added = watch.track(w.store for w in found)
                await asyncio.to_thread(state.supervisor.reconcile, found)
                if woken or added or loop.time() - last_look >= poll_every:
                    last_look = loop.time()
                    await poller.poll(found)
            except Exception:  # keep the service up whatever one round met  # noqa: BLE001
                log.exception("housekeeping failed")
            woken = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(poller.wake.wait(), 1.0)
                woken = True
                # let the rest of a burst (one commit writes the WAL several times) arrive,
                # so it makes one look rather than several
                await asyncio.sleep(0.02)
            poller.wake.clear()

    tasks = [asyncio.create_task(s.serve(sockets=[sock])) for s, sock in servers]
    keeper = asyncio.create_task(housekeeping())
    await stopping.wait()
    await asyncio.gather(*tasks, return_exceptions=True)
    keeper.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await keeper
    watch.close()
    await asyncio.to_thread(state.supervisor.stop_all)
    log.info("stopped")


def setup_logging(path: Path | None = None) -> None:
    """Log to stderr (a terminal, or journald under systemd), or to ``path`` when started in
    the background; one megabyte, then the old log moves aside."""
    if path is not None:
        with contextlib.suppress(OSError):
            if path.stat().st_size > 1 << 20:
                os.replace(path, path.with_name(path.name + ".1"))
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s [%(process)d] %(levelname)s "
                                           "%(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
