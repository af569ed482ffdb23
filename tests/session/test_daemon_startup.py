"""A daemon that is starting up (``session/daemon/daemon_startup.py``) holds nobody up: ``ctrlz
daemon
start`` answers before it is ready, ``ctrlz daemon status`` shows how far it got, and a
command issued meanwhile works in-process, with the right content, instead of waiting.

The daemon is held in its start-up by a failpoint (``daemon-before-prime``: its watches are
placed, its prime not begun), so "does not wait for it" is shown by structure: the command
finishes while the daemon is still held, not ready. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.session import daemon_client
from ctrlz.session.daemon.daemon_startup import HOLD_POINT
from ctrlz.workspace import Workspace
from tests.conftest import needs_watcher
from tests.session.test_daemon import until

CTRLZ = str(Path(sys.executable).parent / "ctrlz")


class Held:
    """The workspace, its first snapshot taken, and a daemon held before its prime."""

    def __init__(self, ws: Workspace, gate: Path) -> None:
        self.ws, self.gate = ws, gate

    def ctrlz(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "CTRLZ_DOOR_TRACE": "1"}
        proc = subprocess.run([CTRLZ, *args], cwd=self.ws.root, capture_output=True,
                              text=True, timeout=300, env=env)
        if ok:
            assert proc.returncode == 0, proc.stderr
        return proc

    def still_held(self) -> bool:
        """The daemon runs and is not ready: its start-up has not gone past the hold."""
        info = daemon_client.status(self.ws.store_path)
        return bool(info["running"]) and info["ready"] is False \
            and info["phase"] == "priming the stat cache"

    def release(self) -> None:
        self.gate.touch()


@pytest.fixture
def held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    needs_watcher()
    root = tmp_path / "work"
    for d in range(5):
        for f in range(4):
            p = root / f"pkg{d}" / f"f{f}.txt"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"{d}/{f}\n")
    ws = Workspace.init(root)
    ws.snapshot(label="base")
    gate = tmp_path / "go"
    monkeypatch.setenv("CTRLZ_TEST_FAILPOINTS", f"{HOLD_POINT}@{gate}")
    h = Held(ws, gate)
    try:
        yield h
    finally:
        h.release()  # a held daemon cannot stop before its start-up step ends
        daemon_client.stop(ws.store_path)
        ws.close()


def test_daemon_start_answers_before_the_daemon_is_ready_and_status_shows_progress(
        held: Held) -> None:
    out = held.ctrlz("daemon", "start").stdout
    assert "daemon: starting" in out and "ctrlz daemon status" in out
    assert until(lambda: Path(f"{held.gate}.held").exists())
    assert held.still_held()
    info = json.loads(held.ctrlz("daemon", "status", "--json").stdout)
    assert info["running"] and info["ready"] is False
    assert info["phase"] == "priming the stat cache"
    assert info["progress"]["watched_dirs"] == 6  # the root and its 5 folders: all placed
    text = held.ctrlz("daemon", "status").stdout
    assert "daemon: starting, pid" in text and "priming the stat cache" in text
    # a second start is idempotent and does not wait either
    again = json.loads(held.ctrlz("daemon", "start", "--json").stdout)
    assert again["pid"] == info["pid"] and again["ready"] is False
    held.release()
    ready = daemon_client.wait_ready(held.ws.store_path, 60)
    assert ready is not None and ready["ready"] and ready["primed"]
    assert "daemon: running" in held.ctrlz("daemon", "status").stdout


def test_daemon_start_wait_waits_until_ready(held: Held) -> None:
    """``--wait`` (for scripts) returns only once the daemon is ready: here, after the test
    let it go, which it can only do once the daemon reached its hold."""
    waiting = subprocess.Popen([CTRLZ, "daemon", "start", "--wait", "--json"], cwd=held.ws.root,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert until(lambda: Path(f"{held.gate}.held").exists())
        assert waiting.poll() is None  # still waiting: the daemon is held
        held.release()
        out, _ = waiting.communicate(timeout=120)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0
    assert json.loads(out)["ready"] is True


def test_a_snapshot_while_the_daemon_starts_is_taken_in_process_and_is_right(
        held: Held) -> None:
    from ctrlz.engine.snapshot import scan_working

    ws = held.ws
    assert daemon_client.start(ws.root, ws.store_path, wait=False)["running"]
    assert until(lambda: Path(f"{held.gate}.held").exists())
    (ws.root / "pkg1" / "f1.txt").write_text("changed while the daemon starts\n")
    (ws.root / "pkg4" / "new.txt").write_text("new\n")
    assert (ws.store_path / daemon_client.STARTING_NAME).exists()
    done = held.ctrlz("snapshot", "--json")
    # the command saw the daemon starting and did not even ask it (the daemon's own decline
    # names its phase)
    assert "the workspace daemon is starting; work in-process" in done.stderr
    assert held.still_held()  # so the command did not wait for it
    snap = ws.resolve(json.loads(done.stdout)["id"])
    assert snap.root == scan_working(ws.repo, ws.roots, [ws.config.rules],
                                     ws.config.limits).root
    assert snap.created == 1 and snap.modified == 1

    # changed after that snapshot, the daemon watching but not ready: its first snapshot
    # must have it, whether it combines its dirty set with the command's stat cache or not
    (ws.root / "pkg2" / "f2.txt").write_text("changed after the in-process snapshot\n")
    (ws.root / "pkg3" / "f0.txt").unlink()
    held.release()
    assert daemon_client.wait_ready(ws.store_path, 60) is not None
    reply = daemon_client.snapshot(ws.store_path, type="tool", label="served")
    served = ws.resolve(reply["snapshot"]["id"])
    assert served.parent == snap.id
    assert served.root == scan_working(ws.repo, ws.roots, [ws.config.rules],
                                       ws.config.limits).root
    assert served.modified == 1 and served.deleted == 1


def test_a_rollback_while_the_daemon_starts_runs_in_process(held: Held) -> None:
    ws = held.ws
    daemon_client.start(ws.root, ws.store_path, wait=False)
    assert until(lambda: Path(f"{held.gate}.held").exists())
    before = (ws.root / "pkg0" / "f0.txt").read_text()
    (ws.root / "pkg0" / "f0.txt").write_text("to be undone\n")
    held.ctrlz("rollback", "base", "--json")
    assert held.still_held()
    assert (ws.root / "pkg0" / "f0.txt").read_text() == before


def test_a_daemon_stopped_while_starting_records_no_failure(held: Held) -> None:
    ws = held.ws
    daemon_client.start(ws.root, ws.store_path, wait=False)
    assert until(lambda: Path(f"{held.gate}.held").exists())
    assert daemon_client.request(ws.store_path, {"op": "stop"})["ok"]
    held.release()
    assert until(lambda: not daemon_client.running(ws.store_path))
    assert daemon_client.recent_failure(ws.store_path) is None
    assert "stopping: asked to stop" in (ws.store_path / "daemon.log").read_text()


def test_a_starting_daemon_yields_the_cores_and_takes_them_back_once_ready(
        held: Held) -> None:
    """The daemon runs in a session (an autogroup) of its own, where only the group's nice
    value weighs against a command: it is 10 while the daemon starts, 0 once it is ready,
    and the marker that keeps commands from asking it is gone."""
    if not Path("/proc/self/autogroup").exists():
        pytest.skip("no scheduler autogroups here")
    ws = held.ws
    pid = daemon_client.start(ws.root, ws.store_path, wait=False)["pid"]
    assert until(lambda: Path(f"{held.gate}.held").exists())
    assert Path(f"/proc/{pid}/autogroup").read_text().split()[-1] == "10"
    assert (ws.store_path / daemon_client.STARTING_NAME).exists()
    held.release()
    assert daemon_client.wait_ready(ws.store_path, 60) is not None
    assert until(lambda: not (ws.store_path / daemon_client.STARTING_NAME).exists())
    assert until(lambda: Path(f"/proc/{pid}/autogroup").read_text().split()[-1] == "0")
    reply = daemon_client.snapshot(ws.store_path, type="tool", label="served")  # asked again
    assert reply["ok"]
