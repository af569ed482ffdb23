"""Who starts the workspace daemon: the command line after a walk of the whole tree, agent
hooks (tests/session/test_daemon.py), never a library call, never with ``daemon = false``.

A started daemon is in ``/proc`` the moment the spawning process returns (``Popen`` returns
once the child's exec has begun), so "no daemon was started" is checked without waiting; its
command line, which names it, shows a moment later (``seen``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.session import daemon_client
from ctrlz.workspace import Workspace

CTRLZ = str(Path(sys.executable).parent / "ctrlz")


def daemon_processes(store: Path) -> list[int]:
    """Pids of daemon processes for ``store``, starting or running."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if daemon_client.DAEMON_PROGRAM.encode() in argv and os.fsencode(store) in argv:
            pids.append(int(entry.name))
    return pids


def seen(store: Path) -> list[int]:
    """The daemon processes once they show: ``Popen`` returns when the child's exec closed
    its error pipe, a moment before the kernel has set up the new program's command line."""
    deadline = time.monotonic() + 60  # bounds a hang; never a timing assertion
    while not (pids := daemon_processes(store)):
        assert time.monotonic() < deadline, "no daemon process"
        time.sleep(0.01)
    return pids


def gone(store: Path) -> None:
    deadline = time.monotonic() + 60  # bounds a hang; never a timing assertion
    while daemon_processes(store):
        assert time.monotonic() < deadline, "the daemon is still there"
        time.sleep(0.05)


def ctrlz(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([CTRLZ, *args], cwd=ws, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def ready(store: Path) -> dict:
    deadline = time.monotonic() + 60  # bounds a hang; never a timing assertion
    while not daemon_client.running(store):
        assert time.monotonic() < deadline, "no daemon started"
        time.sleep(0.05)
    info = daemon_client.wait_ready(store, 60)
    assert info is not None, (store / "daemon.log").read_text()
    return daemon_client.status(store)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("CTRLZ_DAEMON", "1")
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    for i in range(5):
        (root / "src" / f"m{i}.py").write_text(f"x = {i}\n")
    workspace = Workspace.init(root)
    yield workspace
    daemon_client.stop(workspace.store_path)
    workspace.close()


def test_a_cli_snapshot_starts_the_daemon_and_the_next_one_is_served_by_it(ws: Workspace
                                                                           ) -> None:
    first = json.loads(ctrlz(ws.root, "snapshot", "--json").stdout)
    assert ready(ws.store_path)["served"]["dirty"] == 0
    (ws.root / "src" / "m1.py").write_text("x = 'edited'\n")
    second = json.loads(ctrlz(ws.root, "snapshot", "-m", "after", "--json").stdout)
    served = daemon_client.status(ws.store_path)["served"]
    assert served["dirty"] + served["full"] == 1
    assert second["parent"] == first["id"] and second["label"] == "after"
    assert [c.path for c in ws.diff(first["id"], second["id"]).changes] == [b"src/m1.py"]
    assert len(daemon_processes(ws.store_path)) == 1  # and only one, however often asked


def test_a_cli_rollback_starts_the_daemon_after_restoring(ws: Workspace) -> None:
    base = ws.snapshot(label="base")
    assert daemon_processes(ws.store_path) == []  # the library call started none
    (ws.root / "src" / "m2.py").write_text("broken\n")
    ctrlz(ws.root, "rollback", "base")
    assert (ws.root / "src" / "m2.py").read_text() == "x = 2\n"
    ready(ws.store_path)
    (ws.root / "src" / "m2.py").write_text("broken again\n")
    ctrlz(ws.root, "rollback", base.id)
    assert (ws.root / "src" / "m2.py").read_text() == "x = 2\n"
    assert daemon_client.status(ws.store_path)["served"]["restores"] == 1


def test_library_calls_never_start_a_daemon(ws: Workspace) -> None:
    base = ws.snapshot()
    (ws.root / "src" / "m3.py").write_text("edited\n")
    ws.snapshot()
    ws.restore(base.id)
    with Workspace.open(ws.root) as again:
        again.snapshot()
    assert daemon_processes(ws.store_path) == []


def test_ctrlz_run_watches_the_tree_itself_and_starts_no_daemon(ws: Workspace) -> None:
    ctrlz(ws.root, "run", "--no-trace", "--", sys.executable, "-c",
          "open('src/m4.py', 'w').write('changed by the command')")
    assert (ws.root / "src" / "m4.py").read_text() == "changed by the command"
    assert daemon_processes(ws.store_path) == []


def test_daemon_false_keeps_the_cli_from_starting_one(ws: Workspace,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTRLZ_DAEMON")
    (ws.root / ".ctrlz.toml").write_text("daemon = false\n")
    ctrlz(ws.root, "snapshot")
    ctrlz(ws.root, "rollback", "latest")
    assert daemon_processes(ws.store_path) == []
    status = json.loads(ctrlz(ws.root, "daemon", "status", "--json").stdout)
    assert status["running"] is False
    assert "Daemon:    off (daemon = false)" in ctrlz(ws.root, "status").stdout


def test_a_stop_right_after_the_start_stops_the_daemon_still_starting(ws: Workspace) -> None:
    """The daemon a command starts counts as running from the moment that command returns,
    though its interpreter is still importing: a stop then stops it, never answers "not
    running" and leaves it to run (and to idle for half an hour)."""
    ctrlz(ws.root, "snapshot")  # walked the tree, started one in the background
    assert daemon_client.running(ws.store_path)  # though it may not have locked anything yet
    assert seen(ws.store_path)
    assert daemon_client.stop(ws.store_path)
    assert not daemon_client.running(ws.store_path)
    gone(ws.store_path)  # (it frees the lock as it exits, a moment before it is gone)


def test_commands_that_start_a_daemon_at_once_start_one(ws: Workspace) -> None:
    assert daemon_client.spawn(ws.root, ws.store_path)
    assert not daemon_client.spawn(ws.root, ws.store_path)  # the first still starting
    assert len(seen(ws.store_path)) == 1
    assert ready(ws.store_path)["running"]
    assert len(daemon_processes(ws.store_path)) == 1
