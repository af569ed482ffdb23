"""Where the running service keeps its files, and how they are made private.

The run directory is ``$XDG_RUNTIME_DIR/ctrlz/`` (a per-user tmpfs the login manager makes
0700), else ``$CTRLZ_HOME/run/``; either way it is created 0700 and refused when another user
owns it or others may enter it, because everything in it is a credential:

- ``service.sock`` — the HTTP API (mode 0600; only its owner may connect);
- ``service.lock`` — an ``flock`` held for the service's whole life: one service per user;
- ``service.pid`` — its pid, for ``ctrlz service status`` and ``stop``;
- ``gateway.port`` — the TCP port the web gateway listens on (127.0.0.1);
- ``gateway.token`` — the gateway's bearer token (mode 0600), new at every start;
- ``ui-sessions.json`` — the dashboard's browser logins, hashed (mode 0600), kept across
  restarts (:class:`ctrlz.service.context.Logins`).

A Unix socket path is limited to ~108 bytes; a deeper run directory is reached through
``/proc/self/fd/<fd of the directory>/service.sock`` (:func:`socket_address`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from ..errors import UsageError
from ..platform import user_dir

SOCKET = "service.sock"
LOCK = "service.lock"
PID = "service.pid"
PORT = "gateway.port"
TOKEN = "gateway.token"
LOG = "service.log"


def run_dir() -> Path:
    """The run directory (not created here; :func:`ensure_run_dir` makes it): the user's
    runtime directory, else ``run/`` in the store home."""
    try:
        return Path(user_dir("runtime"))
    except LookupError:
        from ..session.locator import default_home

        return default_home() / "run"


def log_path() -> Path:
    """The log of a service started in the background: kept with the stores (a runtime dir is
    emptied at logout, and the log is wanted after a crash)."""
    from ..session.locator import default_home

    return default_home() / LOG


def ensure_run_dir() -> Path:
    """Create the run directory 0700, or check that an existing one is ours and private."""
    path = run_dir()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise UsageError(f"{path} is not a directory owned by this user; remove it")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def write_private(path: Path, text: str) -> None:
    """Write a small file readable by its owner only (0600 from its creation on: never a
    moment in which the token is world-readable)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def new_token() -> str:
    return secrets.token_urlsafe(32)


def read(name: str) -> str | None:
    """One of the runtime files' content, stripped; None when absent or unreadable."""
    try:
        return (run_dir() / name).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def gateway_url() -> str | None:
    port = read(PORT)
    return f"http://127.0.0.1:{port}" if port and port.isdigit() else None


@contextlib.contextmanager
def socket_address(directory: Path | None = None) -> Iterator[str]:
    """The service socket's address, short enough for ``bind``/``connect``."""
    from ..session.daemon_client import unix_address

    with unix_address(directory or run_dir(), SOCKET) as address:
        yield address
