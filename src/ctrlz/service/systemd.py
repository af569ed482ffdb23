"""``ctrlz service install|uninstall``: a systemd *user* unit that keeps the service running.

The unit runs ``<this python> -m ctrlz.service`` with ``Restart=always``, so a crashed or
killed service comes back (and with it the watchers). It is written to
``$XDG_CONFIG_HOME/systemd/user/ctrlz.service`` only when a user systemd answers
(``systemctl --user`` talks to it); otherwise nothing is written and the caller is told how to
run the service by hand.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .. import platform

UNIT = "ctrlz.service"


def unit_path() -> Path:
    """Where a user unit goes: systemd's own, below the XDG config directory (not ctrlz's)."""
    base = platform.xdg_base("config")
    assert base is not None
    return Path(base) / "systemd" / "user" / UNIT


def unit_text() -> str:
    env = ""
    if os.environ.get("CTRLZ_HOME"):
        env += f'Environment="CTRLZ_HOME={os.environ["CTRLZ_HOME"]}"\n'
    if os.environ.get("CTRLZ_GATEWAY_PORT"):
        env += f'Environment="CTRLZ_GATEWAY_PORT={os.environ["CTRLZ_GATEWAY_PORT"]}"\n'
    return f"""[Unit]
Description=ctrlz service: API, dashboard and workspace watchers (undo for AI agents)

[Service]
Type=simple
ExecStart={sys.executable} -m ctrlz.service
Restart=always
RestartSec=2
{env}
[Install]
WantedBy=default.target
"""


def _systemctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True,
                          timeout=30)


def available() -> tuple[bool, str]:
    """Whether a user systemd answers, and if not, why (one line)."""
    if platform.portable():
        return False, f"no service manager in portable mode ({platform.ENV}=portable)"
    if shutil.which("systemctl") is None:
        return False, "systemctl is not installed"
    try:
        proc = _systemctl("show-environment")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"systemctl --user failed: {exc}"
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no user systemd instance"])[0]
        return False, f"no user systemd answers ({reason})"
    return True, ""


def manual_steps() -> list[str]:
    """How to keep the service running without systemd."""
    return ["ctrlz service start            # now, in the background",
            "ctrlz service run              # or in the foreground (Ctrl+C stops it)",
            "add `ctrlz service start` to your login script (~/.profile) to start it at login"]


def installed() -> bool:
    return unit_path().is_file()


def active() -> bool:
    """Whether systemd runs the unit now (then start/stop go through systemctl)."""
    if not installed() or shutil.which("systemctl") is None:
        return False
    try:
        return _systemctl("is-active", "--quiet", UNIT).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    from ..errors import CtrlzError

    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[0]
        raise CtrlzError(f"systemctl --user {what} failed: {reason}")


def install() -> Path:
    path = unit_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(unit_text(), encoding="utf-8")
    _check(_systemctl("daemon-reload"), "daemon-reload")
    _check(_systemctl("enable", "--now", UNIT), f"enable --now {UNIT}")
    return path


def uninstall() -> bool:
    """Disable and remove the unit; whether there was one."""
    path = unit_path()
    if not path.is_file():
        return False
    if shutil.which("systemctl") is not None:
        _systemctl("disable", "--now", UNIT)
    path.unlink()
    if shutil.which("systemctl") is not None:
        _systemctl("daemon-reload")
    return True


def start() -> None:
    _check(_systemctl("start", UNIT), f"start {UNIT}")


def stop() -> None:
    _check(_systemctl("stop", UNIT), f"stop {UNIT}")
