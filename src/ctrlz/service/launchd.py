"""``ctrlz service install|uninstall`` on macOS: a launchd agent that keeps the service running.

The twin of :mod:`.systemd`, with the same functions, chosen by :mod:`.manager` where
:mod:`ctrlz.platform` says launchd is the init system. The agent
(``~/Library/LaunchAgents/dev.ctrlz.service.plist``) runs ``<this python> -m ctrlz.service``
with ``KeepAlive``, so a crashed or killed service comes back, as systemd's ``Restart=always``
brings it back on Linux; ``RunAtLoad`` starts it at login. It is loaded into the user's GUI
domain with ``launchctl bootstrap gui/<uid>`` and removed with ``bootout``.

Written from launchd.plist(5) and launchctl(1); the plist's text is tested (parsed back with
:mod:`plistlib`) and the launchctl calls against a stand-in, but never on a Mac.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

LABEL = "dev.ctrlz.service"
#: forwarded to the agent when set, as the systemd unit forwards them
FORWARDED = ("CTRLZ_HOME", "CTRLZ_GATEWAY_PORT")


def unit_path() -> Path:
    """Where the agent's plist goes (the name :mod:`.systemd` gives its unit's path)."""
    return Path(os.path.expanduser("~/Library/LaunchAgents")) / f"{LABEL}.plist"


def log_path() -> Path:
    return Path(os.path.expanduser("~/Library/Logs/ctrlz")) / "service.log"


def plist() -> dict[str, Any]:
    """The agent, as launchd.plist(5) reads it."""
    env = {name: os.environ[name] for name in FORWARDED if os.environ.get(name)}
    agent: dict[str, Any] = {
        "Label": LABEL,
        "ProgramArguments": [sys.executable, "-m", "ctrlz.service"],
        "KeepAlive": True,  # restarted whenever it exits, as Restart=always
        "RunAtLoad": True,  # and started at login
        "ProcessType": "Background",
        "StandardOutPath": str(log_path()),
        "StandardErrorPath": str(log_path()),
    }
    if env:
        agent["EnvironmentVariables"] = env
    return agent


def unit_text() -> str:
    """The plist's XML text (what :func:`install` writes)."""
    return plistlib.dumps(plist(), sort_keys=True).decode("utf-8")


def _domain() -> str:
    return f"gui/{os.getuid()}"


def _launchctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["launchctl", *args], capture_output=True, text=True, timeout=30)


def available() -> tuple[bool, str]:
    """Whether launchctl is there to load the agent, and if not, why (one line)."""
    if shutil.which("launchctl") is None:
        return False, "launchctl is not installed"
    return True, ""


def manual_steps() -> list[str]:
    """How to keep the service running without launchd."""
    from .systemd import manual_steps

    return manual_steps()


def installed() -> bool:
    return unit_path().is_file()


def active() -> bool:
    """Whether launchd has the agent loaded now (then start/stop go through launchctl)."""
    if not installed() or shutil.which("launchctl") is None:
        return False
    try:
        return _launchctl("print", f"{_domain()}/{LABEL}").returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    from ..errors import CtrlzError

    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[0]
        raise CtrlzError(f"launchctl {what} failed: {reason}")


def install() -> Path:
    """Write the plist and load it (which starts the service: ``RunAtLoad``). A plist loaded
    before is booted out first, so that the new text is the one launchd runs."""
    path = unit_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    log_path().parent.mkdir(parents=True, exist_ok=True)
    if active():
        _launchctl("bootout", f"{_domain()}/{LABEL}")
    path.write_text(unit_text(), encoding="utf-8")
    _check(_launchctl("bootstrap", _domain(), str(path)), f"bootstrap {_domain()} {path}")
    return path


def uninstall() -> bool:
    """Unload and remove the agent; whether there was one."""
    path = unit_path()
    if not path.is_file():
        return False
    if shutil.which("launchctl") is not None:
        _launchctl("bootout", f"{_domain()}/{LABEL}")
    path.unlink()
    return True


def start() -> None:
    """Load the agent if it is not (``ctrlz service stop`` unloads it), then start it now."""
    if not active():
        _check(_launchctl("bootstrap", _domain(), str(unit_path())), f"bootstrap {_domain()}")
    _check(_launchctl("kickstart", f"{_domain()}/{LABEL}"), f"kickstart {LABEL}")


def stop() -> None:
    """Unload the agent: with ``KeepAlive``, a killed service would be started again."""
    _check(_launchctl("bootout", f"{_domain()}/{LABEL}"), f"bootout {LABEL}")
