"""A sandboxed run's refusals, recorded and shown: a real session under real strace over a
real bubblewrap sandbox, then the session DB, ``ctrlz session show`` (JSON and text), the run's
summary line and the service's session view. The session's tracer is the one ``ctrlz run
--sandbox`` makes (``Tracer(..., denials=True)``); the sandbox here is bwrap itself, so that
this holds whatever launcher the run uses."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ctrlz.cli.sessions import refused_line
from ctrlz.session.protected import ProtectedWorkspace
from ctrlz.session.run.run import Session
from ctrlz.sources.trace import Tracer, strace_available
from ctrlz.state.db.sessiondb import SessionDB
from tests.cli.schemas import SESSION_SHOW
from tests.service.conftest import Service, browser, needs_chromium, shoot  # noqa: F401

CTRLZ = str(Path(sys.executable).with_name("ctrlz"))


def _bwrap() -> str:
    if strace_available() is None:
        pytest.skip("strace is not installed")
    bwrap = shutil.which("bwrap")
    if bwrap is None or subprocess.run([bwrap, "--unshare-user", "--ro-bind", "/", "/", "true"],
                                       capture_output=True).returncode:
        pytest.skip("bubblewrap is missing or cannot make a user namespace here")
    return bwrap


def sandboxed_session(root: Path, outside: Path) -> tuple[Session, object]:
    """A session whose command writes inside (allowed) and outside (refused) under bwrap."""
    bwrap = _bwrap()
    ws = ProtectedWorkspace.open(root)
    script = (f"echo ok > {root}/inside.txt; echo no > {outside}/a 2>/dev/null; "
              f"mkdir {outside}/d 2>/dev/null; rm -f {outside}/keep 2>/dev/null; exit 0")
    argv = [bwrap, "--unshare-user", "--ro-bind", "/", "/", "--bind", str(root), str(root),
            "--dev", "/dev", "--proc", "/proc", "--", "sh", "-c", script]
    session = Session(ws, argv, None, True)
    session.tracer = Tracer.detect(denials=True, writable=[root])
    if not session.tracer.enabled:
        pytest.skip(f"tracing unavailable here: {session.tracer.reason}")
    # the proxy's record callback, as the sandbox's proxy calls it from its own thread
    session.record_network({"time": "2026-11-28T10:00:00.000+00:00", "host": "denied.test",
                            "port": 443, "method": "CONNECT", "allowed": False,
                            "reason": "not in the allow-list", "address": None})
    session.record_network({"time": "2026-11-28T10:00:01.000+00:00", "host": "allowed.test",
                            "port": 443, "method": "CONNECT", "allowed": True,
                            "reason": "matches allowed.test", "address": "127.0.0.1"})
    result = session.run(lambda m: None)
    return session, result


def test_refusals_are_rows_and_are_shown(ws_dir: Path, tmp_path: Path) -> None:
    (ws_dir / "README.md").write_text("hi\n")
    subprocess.run([CTRLZ, "init"], cwd=ws_dir, check=True, capture_output=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept\n")
    session, result = sandboxed_session(ws_dir, outside)
    assert result.exit_code == 0 and (ws_dir / "inside.txt").exists()  # type: ignore[attr-defined]
    assert (outside / "keep").read_text() == "kept\n"

    rows = session.db.denials(session.id)
    fs = {(r["syscall"], r["path"], r["errno"]) for r in rows if r["kind"] == "fs"}
    assert {("openat", f"{outside}/a", "EROFS"), ("mkdir", f"{outside}/d", "EROFS"),
            ("unlinkat", f"{outside}/keep", "EROFS")} <= fs
    assert all(r["path"].startswith(str(outside)) for r in rows if r["kind"] == "fs")
    net = [r for r in rows if r["kind"] == "net"]
    assert [(r["path"], r["syscall"]) for r in net] == [("denied.test:443", "CONNECT")]
    assert result.denials == rows  # type: ignore[attr-defined]
    db = SessionDB(session.db.path)  # a second reader: the rows are committed
    try:
        assert len(db.denials(session.id)) == len(rows)
        network = next(s for s in db.db.execute("SELECT network_events FROM sessions "
                                                "WHERE id = ?", (session.id,)))[0]
        assert "allowed.test" in network and "denied.test" in network  # every decision
    finally:
        db.close()

    line = refused_line(rows, session.id)
    assert line.startswith(f"ctrlz: the sandbox refused {len(rows) - 1} writes outside the "
                           "workspace (3 paths: ")
    assert "1 connection (1 host: denied.test:443)" in line and session.id in line

    shown = subprocess.run([CTRLZ, "session", "show", session.id, "--json"], cwd=ws_dir,
                           capture_output=True, text=True, check=True)
    import json

    data = json.loads(shown.stdout)
    jsonschema.validate(data, SESSION_SHOW)
    assert data["denials"] == rows
    text = subprocess.run([CTRLZ, "session", "show", session.id], cwd=ws_dir,
                          capture_output=True, text=True, check=True).stdout
    assert f"the sandbox refused {len(rows)}:" in text
    assert f"mkdir {outside}/d (EROFS)" in text and "connect denied.test:443" in text


def test_a_database_from_before_gains_the_table(tmp_path: Path) -> None:
    """An older session.db (no ``denials`` table) opens, gets it, and reads as empty."""
    path = tmp_path / "session.db"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, started TEXT NOT NULL, ended TEXT, "
                "label TEXT, command TEXT NOT NULL, tracked_paths TEXT NOT NULL, exit_code "
                "INTEGER, snapshot_count INTEGER NOT NULL DEFAULT 0, merkle_roots TEXT NOT NULL "
                "DEFAULT '[]', network_events TEXT NOT NULL DEFAULT '[]', traced INTEGER NOT "
                "NULL DEFAULT 0, trace_note TEXT, first_fs_event_id INTEGER NOT NULL DEFAULT 0, "
                "last_fs_event_id INTEGER)")
    old.commit()
    old.close()
    db = SessionDB(path)
    try:
        assert db.denials("sess_x") == []
        db.add_denials("sess_x", [{"timestamp": "t", "path": "/etc/hosts", "kind": "fs",
                                   "errno": "EACCES", "syscall": "openat", "pid": 3,
                                   "exe": "sh"}])
        assert db.denials("sess_x")[0]["path"] == "/etc/hosts"
    finally:
        db.close()


@needs_chromium
def test_the_dashboard_session_view_shows_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              browser: object) -> None:  # noqa: F811
    """The service's session view has them, and the dashboard's session page lists them
    (a real headless Chromium, as tests/service/test_browser.py drives it)."""
    _bwrap()
    svc = Service(tmp_path / "svc").start()
    try:
        root, wid = svc.workspace("w")
        monkeypatch.setenv("CTRLZ_HOME", str(svc.home))
        outside = tmp_path / "outside"
        outside.mkdir()
        session, _ = sandboxed_session(root, outside)
        view = svc.ok("GET", f"/v1/workspaces/{wid}/sessions/{session.id}")
        assert view["denials"] == session.db.denials(session.id)
        assert any(d["path"] == f"{outside}/a" for d in view["denials"])

        login = svc.ok("POST", "/v1/ui/login")
        page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(login["url"])
        page.wait_for_selector(f"[data-testid=workspace][data-id='{wid}']")
        page.click("[data-testid=tab-sessions]")
        page.click(f"#session-list li[data-key='run:{session.id}']")
        shown = page.locator("[data-testid=denials]")
        shown.wait_for()
        text = shown.inner_text()
        assert f"{outside}/a" in text and "EROFS" in text and "denied.test:443" in text
        assert page.locator("[data-testid=denials] > div").count() == len(view["denials"])
        shoot(page, tmp_path, "dashboard-denials")
        assert not errors, errors
        page.close()
    finally:
        svc.stop()
