"""``ctrlz service …`` and ``ctrlz ui`` as a user runs them (the real console script)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ctrlz import platform

from .conftest import Service


def test_start_status_ui_stop(fresh_svc: Service) -> None:
    svc = fresh_svc
    assert json.loads(svc.ctrlz("service", "status", "--json").stdout)["running"] is False
    started = json.loads(svc.ctrlz("service", "start", "--json").stdout)
    assert started["running"] and started["gateway"]["port"]
    again = svc.ctrlz("service", "start")  # idempotent
    assert f"pid {started['pid']}" in again.stdout and again.stderr == ""
    moved = svc.ctrlz("service", "start", "--port", "1")  # says the port did not change
    assert f"pid {started['pid']}" in moved.stdout
    assert moved.stderr == (f"ctrlz: the service already runs ({started['gateway']['url']}); "
                            "--port 1 applies when it starts: `ctrlz service stop` first\n")
    text = svc.ctrlz("service", "status").stdout
    assert "running" in text and started["gateway"]["url"] in text
    ui = json.loads(svc.ctrlz("ui", "--json").stdout)
    assert ui["url"].startswith(started["gateway"]["url"] + "/login?code=")
    assert svc.gw("GET", ui["url"].removeprefix(svc.url), auth=False).status_code == 303
    plain = svc.ctrlz("ui").stdout.strip()
    assert plain.startswith("http://127.0.0.1:") and plain != ui["url"]
    assert json.loads(svc.ctrlz("service", "stop", "--json").stdout)["stopped"] is True
    assert not (svc.run_dir / "service.sock").exists()
    assert not (svc.run_dir / "gateway.token").exists()
    assert "not running" in svc.ctrlz("service", "stop").stdout


def test_ui_starts_the_service(fresh_svc: Service) -> None:
    svc = fresh_svc
    r = svc.ctrlz("ui")
    assert "started the ctrlz service" in r.stderr and r.stdout.startswith("http://127.0.0.1:")
    svc.ctrlz("service", "stop")


def test_second_service_refuses(svc: Service) -> None:
    r = svc.ctrlz("service", "run", ok=False)
    assert r.returncode == 2 and "already running" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_register_unregister_without_the_service(tmp_path: Path) -> None:
    svc = Service(tmp_path / "s")
    root = tmp_path / "proj"
    root.mkdir()
    out = json.loads(svc.ctrlz("service", "register", str(root), "--json").stdout)
    assert out["registered"] is True and out["root"] == str(root)
    assert (svc.home / "registry.json").is_file()
    back = json.loads(svc.ctrlz("service", "unregister", out["id"], "--json").stdout)
    assert back["registered"] is False
    r = svc.ctrlz("service", "unregister", "nope", ok=False)
    assert r.returncode == 3 and "no protected workspace" in r.stderr


def test_install_without_systemd_says_how(tmp_path: Path) -> None:
    svc = Service(tmp_path / "s")
    svc.env["PATH"] = str(tmp_path / "empty-path") + ":/usr/bin:/bin"
    r = svc.ctrlz("service", "install", ok=False)
    assert r.returncode == 1
    assert "ctrlz service start" in r.stderr and "ctrlz service run" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("ctrlz: error: cannot install")
    j = svc.ctrlz("service", "install", "--json", ok=False)
    data = json.loads(j.stdout)
    assert data["installed"] is False and data["by_hand"]
    unit = Path(svc.env["XDG_CONFIG_HOME"]) / "systemd" / "user" / "ctrlz.service"
    assert not unit.exists()


@pytest.mark.skipif(platform.portable(), reason="portable mode has no service manager "
                    "(launchd's twin: test_launchd.py)")
def test_install_with_a_user_systemd(tmp_path: Path) -> None:
    """A stand-in ``systemctl`` on PATH records what it is asked (no systemd runs here)."""
    svc = Service(tmp_path / "s")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "systemctl.log"
    fake = bin_dir / "systemctl"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"
                    "case \"$*\" in *is-active*) exit 3;; esac\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    svc.env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    out = json.loads(svc.ctrlz("service", "install", "--json").stdout)
    unit = Path(out["unit"])
    text = unit.read_text()
    assert "Restart=always" in text and "-m ctrlz.service" in text
    assert f"CTRLZ_HOME={svc.home}" in text
    calls = log.read_text().splitlines()
    assert "--user daemon-reload" in calls and "--user enable --now ctrlz.service" in calls
    gone = json.loads(svc.ctrlz("service", "uninstall", "--json").stdout)
    assert gone["removed"] is True and not unit.exists()
    assert "--user disable --now ctrlz.service" in log.read_text()
