"""Talking to the running service over its Unix socket, and starting or stopping it.

The CLI's ``ctrlz service …`` and ``ctrlz ui`` use this; nothing else needs the service.
Requests go through httpx2's Unix-socket transport (it comes with the MCP SDK). An error
answer becomes a :class:`~ctrlz.errors.CtrlzError` with the service's one-line message and the
CLI's exit code, so the CLI prints it like any of its own.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import subprocess
import sys
import time
from typing import Any

from ..errors import CtrlzError
from . import runtime


class ServiceNotRunning(CtrlzError):
    exit_code = 1


class ServiceError(CtrlzError):
    """An error answer from the service; ``exit_code`` is the one it names."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def running() -> bool:
    """Whether a service holds this user's service lock (it may still be starting)."""
    try:
        fd = os.open(runtime.run_dir() / runtime.LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)
    return False


def request(method: str, path: str, body: dict[str, Any] | None = None,
            timeout: float = 30.0) -> Any:
    """One API call over the socket; the decoded JSON answer."""
    import httpx2

    with runtime.socket_address() as address:
        transport = httpx2.HTTPTransport(uds=address)
        try:
            with httpx2.Client(transport=transport, base_url="http://ctrlz",
                               timeout=timeout) as client:
                response = client.request(method, path, json=body)
        except httpx2.TransportError as exc:
            raise ServiceNotRunning("the ctrlz service is not running (or not answering: "
                                    f"{exc}); start it with `ctrlz service start`") from None
    try:
        data = response.json()
    except ValueError:
        raise ServiceError(f"the service answered {response.status_code} without JSON") from None
    if response.status_code >= 400:
        message = data.get("message") if isinstance(data, dict) else None
        code = data.get("exit_code") if isinstance(data, dict) else None
        raise ServiceError(message or f"the service answered {response.status_code}",
                           code if isinstance(code, int) and code > 0 else 1)
    return data


def status() -> dict[str, Any]:
    """The service's own report (``GET /v1/service``), or ``{"running": false}``."""
    if not running():
        return {"type": "service", "running": False, "run_dir": str(runtime.run_dir())}
    try:
        return {"running": True, **request("GET", "/v1/service", timeout=5.0)}
    except ServiceNotRunning:
        return {"type": "service", "running": True, "starting": True,
                "pid": _pid(), "run_dir": str(runtime.run_dir())}


def _pid() -> int | None:
    raw = runtime.read(runtime.PID)
    return int(raw) if raw and raw.isdigit() else None


def start(timeout: float = 30.0, port: int | None = None) -> dict[str, Any]:
    """Start the service in the background (unless it runs) and wait until it answers."""
    if running():
        return wait_ready(timeout)
    log = runtime.log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ctrlz.service", "--log", str(log)]
    if port is not None:
        argv += ["--port", str(port)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
                            cwd="/")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            err = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace")
            last = err.strip().splitlines()[-1] if err.strip() else f"see {log}"
            raise ServiceError(f"the service exited with status {code}: "
                               f"{last.removeprefix('ctrlz: error: ')}",
                               code if code > 0 else 1)
        info = _try_status()
        if info is not None:
            if proc.stderr:
                proc.stderr.close()
            return info
        time.sleep(0.05)
    raise ServiceError(f"the service did not answer within {timeout:g} s; see {log}")


def _try_status() -> dict[str, Any] | None:
    try:
        return {"running": True, **request("GET", "/v1/service", timeout=5.0)}
    except ServiceNotRunning:
        return None


def wait_ready(timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        info = _try_status()
        if info is not None:
            return info
        if time.monotonic() > deadline:
            raise ServiceError(f"the service did not answer within {timeout:g} s")
        time.sleep(0.05)


def stop(timeout: float = 30.0) -> bool:
    """Ask the service to stop and wait until its lock is free; whether one was running."""
    if not running():
        return False
    try:
        request("POST", "/v1/service/stop", timeout=5.0)
    except (ServiceNotRunning, ServiceError):
        pid = _pid()
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while running():
        if time.monotonic() > deadline:
            raise ServiceError(f"the service did not stop within {timeout:g} s")
        time.sleep(0.05)
    return True
