"""The launchd agent (``service/launchd.py``), the macOS twin of the systemd unit.

No launchd runs here: the plist's text is parsed back with :mod:`plistlib` and checked field
by field, and install/start/stop/uninstall run against a stand-in ``launchctl`` on PATH that
records what it is asked (as test_cli.py does for systemctl). Nothing of this ran on a Mac.
"""

from __future__ import annotations

import os
import plistlib
import stat
import sys
from pathlib import Path

import pytest

from ctrlz.service import launchd, manager, systemd


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_plist_keeps_the_service_alive(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTRLZ_HOME", "/stores/here")
    monkeypatch.setenv("CTRLZ_GATEWAY_PORT", "0")
    agent = plistlib.loads(launchd.unit_text().encode())
    assert agent["Label"] == launchd.LABEL == "dev.ctrlz.service"
    assert agent["ProgramArguments"] == [sys.executable, "-m", "ctrlz.service"]
    assert agent["KeepAlive"] is True and agent["RunAtLoad"] is True
    assert agent["EnvironmentVariables"] == {"CTRLZ_HOME": "/stores/here",
                                             "CTRLZ_GATEWAY_PORT": "0"}
    assert agent["StandardErrorPath"] == str(home / "Library" / "Logs" / "ctrlz" / "service.log")
    assert launchd.unit_path() == home / "Library" / "LaunchAgents" / "dev.ctrlz.service.plist"
    text = launchd.unit_text()
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist')


def test_the_plist_forwards_only_what_is_set(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTRLZ_HOME", raising=False)
    monkeypatch.delenv("CTRLZ_GATEWAY_PORT", raising=False)
    assert "EnvironmentVariables" not in plistlib.loads(launchd.unit_text().encode())


def test_install_and_uninstall_through_launchctl(home: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "launchctl.log"
    fake = bin_dir / "launchctl"
    # `print` answers "not loaded" (exit 113, as launchctl does) until a bootstrap
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"
                    f"case \"$1\" in print) grep -q '^bootstrap' {log} && exit 0; exit 113;; "
                    "esac\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert launchd.available() == (True, "")
    path = launchd.install()
    assert plistlib.loads(path.read_bytes())["KeepAlive"] is True
    domain = f"gui/{os.getuid()}"
    assert f"bootstrap {domain} {path}" in log.read_text().splitlines()
    assert launchd.installed() and launchd.active()
    launchd.stop()
    launchd.start()
    calls = log.read_text().splitlines()
    assert f"bootout {domain}/dev.ctrlz.service" in calls
    assert f"kickstart {domain}/dev.ctrlz.service" in calls
    assert launchd.uninstall() is True and not path.exists()
    assert launchd.uninstall() is False


def test_without_launchctl_it_says_so(home: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert launchd.available() == (False, "launchctl is not installed")
    assert launchd.manual_steps() == systemd.manual_steps()


def test_the_manager_follows_the_platform() -> None:
    """launchd where it is the init system (macOS: never seen here), systemd elsewhere."""
    from ctrlz import platform

    expected = launchd if platform.service_manager() == "launchd" else systemd
    assert manager.manager() is expected
