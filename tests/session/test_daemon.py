"""The workspace daemon, as a real background process with real inotify and a real socket.

The property that matters: a snapshot the daemon takes from its dirty set is exactly the
snapshot a full scan would take, whatever happened in between (edits, deletions, renames, an
ignore file changing what is captured, another process snapshotting, the daemon being killed).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.session import daemon_client
from ctrlz.workspace import Workspace

CTRLZ = str(Path(sys.executable).parent / "ctrlz")


def until(predicate, timeout: float = 60.0) -> bool:  # noqa: ANN001 - a test helper
    """Poll for an outcome (never a timing assertion: the timeout only bounds a hang)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "work"
    for d in range(6):
        for f in range(5):
            p = root / f"pkg{d}" / "mod" / f"f{f}.py"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"# {d}/{f}\n" * 20)
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_bytes(b"\0" * 100)
    (root / "README.md").write_text("hello\n")
    workspace = Workspace.init(root)
    workspace.snapshot(label="base")
    yield workspace
    daemon_client.stop(workspace.store_path)
    workspace.close()


@pytest.fixture
def daemon(ws: Workspace) -> Workspace:
    info = daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)
    assert info["ready"], info
    return ws


def full_root(ws: Workspace) -> bytes:
    """The root a full in-process scan computes now (nothing is written)."""
    from ctrlz.engine.snapshot import scan_working

    return scan_working(ws.repo, ws.roots, [ws.config.rules], ws.config.limits).root


def daemon_snapshot(ws: Workspace) -> dict:
    reply = daemon_client.snapshot(ws.store_path, type="tool", label="test")
    snap = ws.resolve(reply["snapshot"]["id"])
    assert snap.root == full_root(ws), "the daemon's snapshot differs from a full scan"
    return reply


def edit_randomly(root: Path, rng: random.Random) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and "build" not in p.parts)
    for _ in range(rng.randint(1, 6)):
        op = rng.choice(["modify", "create", "delete", "mkdir", "rename_dir", "chmod",
                         "same_size", "symlink"])
        target = rng.choice(files) if files else None
        if op == "modify" and target and target.exists():
            target.write_text(target.read_text() + "more\n")
        elif op == "same_size" and target and target.exists():
            st = target.stat()
            data = bytearray(target.read_bytes())
            data[0] = ord("X") if data[:1] != b"X" else ord("Y")
            target.write_bytes(bytes(data))
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # a same-size, same-mtime edit
        elif op == "create":
            d = root / f"pkg{rng.randint(0, 8)}" / "new"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"n{rng.randint(0, 99)}.txt").write_text(str(rng.random()))
        elif op == "delete" and target and target.exists():
            target.unlink()
        elif op == "mkdir":
            (root / f"deep{rng.randint(0, 3)}" / "a" / "b").mkdir(parents=True, exist_ok=True)
            (root / f"deep{rng.randint(0, 3)}" / "a" / "b" / "c.txt").parent.mkdir(
                parents=True, exist_ok=True)
        elif op == "rename_dir":
            dirs = [p for p in root.iterdir() if p.is_dir() and p.name.startswith("pkg")]
            if dirs:
                src = rng.choice(dirs)
                src.rename(root / f"pkg{rng.randint(10, 99)}")
        elif op == "chmod" and target and target.exists():
            target.chmod(0o755 if target.stat().st_mode & 0o100 == 0 else 0o644)
        elif op == "symlink":
            link = root / f"link{rng.randint(0, 5)}"
            if not link.is_symlink():
                link.symlink_to("README.md")


def test_daemon_snapshots_equal_full_scans_through_random_edits(daemon: Workspace) -> None:
    ws = daemon
    rng = random.Random(1234)
    scans = []
    for round_no in range(12):
        edit_randomly(ws.root, rng)
        if round_no == 5:  # another process snapshots in between: still exact
            subprocess.run([CTRLZ, "snapshot", "-m", "from the CLI"], cwd=ws.root, check=True,
                           capture_output=True)
            edit_randomly(ws.root, rng)
        scans.append(daemon_snapshot(ws)["scan"])
    assert scans.count("dirty") >= 10, scans  # primed: incremental from the first request


def test_an_ignore_file_change_forces_a_full_scan_and_new_watches(daemon: Workspace) -> None:
    ws = daemon
    assert daemon_snapshot(ws)["scan"] == "dirty"
    (ws.root / ".gitignore").write_text("*.log\n")  # build/ is captured from now on
    assert daemon_snapshot(ws)["scan"] == "full"
    assert ws.resolve("latest").files > 0
    (ws.root / "build" / "out.bin").write_bytes(b"\1" * 100)  # watched now
    (ws.root / "build" / "new.txt").write_text("new\n")
    reply = daemon_snapshot(ws)
    assert reply["scan"] == "dirty"
    snap_id = reply["snapshot"]["id"]
    assert ws.entry_at(snap_id, "build/new.txt") is not None
    assert ws.entry_at(snap_id, "build/out.bin").size == 100
    nested = ws.root / "pkg1" / ".gitignore"
    nested.write_text("mod/\n")  # a nested ignore file excludes a captured subtree
    assert daemon_snapshot(ws)["scan"] == "full"


def test_a_cache_older_than_the_dirty_set_is_not_trusted(ws: Workspace) -> None:
    (ws.root / "README.md").write_text("changed before the daemon started\n")
    os.utime(ws.root / "README.md", ns=(0, 0))
    info = daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)
    assert info["ready"] and not info["primed"]  # the tree differs from the newest snapshot
    assert daemon_snapshot(ws)["scan"] == "full"
    (ws.root / "README.md").write_text("and again\n")
    assert daemon_snapshot(ws)["scan"] == "dirty"


def test_a_configuration_change_is_refused_and_the_daemon_steps_down(daemon: Workspace
                                                                      ) -> None:
    ws = daemon
    (ws.root / ".ctrlz.toml").write_text('exclude_patterns = ["pkg0"]\n')
    with pytest.raises(daemon_client.DaemonUnavailable, match="configuration changed"):
        daemon_client.snapshot(ws.store_path, type="tool")
    assert until(lambda: not daemon_client.running(ws.store_path))


def test_a_killed_daemon_leaves_a_stale_socket_that_nobody_trips_over(daemon: Workspace
                                                                       ) -> None:
    ws = daemon
    pid = daemon_client.status(ws.store_path)["pid"]
    os.kill(pid, signal.SIGKILL)
    assert until(lambda: not daemon_client.running(ws.store_path))
    assert (ws.store_path / daemon_client.SOCKET_NAME).exists()  # left behind
    with pytest.raises(daemon_client.DaemonUnavailable):
        daemon_client.snapshot(ws.store_path, type="tool")
    (ws.root / "README.md").write_text("changed while no daemon ran\n")
    info = daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)
    assert info["ready"] and info["pid"] != pid
    assert daemon_snapshot(ws)["scan"] == "full"  # its cache is from before: not trusted


def test_bad_requests_get_an_error_and_the_daemon_keeps_serving(daemon: Workspace) -> None:
    ws = daemon
    for raw in (b"not json\n", b"[1, 2]\n", b'{"op": "explode"}\n', b"\n",
                b'{"op": "\xff"}\n', b"[" * 200_000 + b"\n"):  # not UTF-8; nested too deep
        with daemon_client.socket_address(ws.store_path) as address, \
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(address)
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)
            reply = json.loads(s.makefile("rb").readline())
        assert reply["ok"] is False and reply["error"]
    with pytest.raises(daemon_client.DaemonUnavailable, match="unknown snapshot type"):
        daemon_client.snapshot(ws.store_path, type="no-such-type")
    assert daemon_snapshot(ws)["scan"] == "dirty"


def test_it_stops_when_idle(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTRLZ_DAEMON_IDLE_SECONDS", "1")
    assert daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)["ready"]
    assert until(lambda: not daemon_client.running(ws.store_path))
    assert "idle for 1 s" in (ws.store_path / daemon_client.LOG_NAME).read_text()


def test_a_long_store_path_uses_the_proc_fd_address(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / ("h" * 60) / ("o" * 60)
    monkeypatch.setenv("CTRLZ_HOME", str(home))
    root = tmp_path / "w"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    with Workspace.init(root) as ws:
        ws.snapshot()
        assert len(os.fsencode(ws.store_path / daemon_client.SOCKET_NAME)) > 108
        try:
            assert daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)["ready"]
            (root / "a.txt").write_text("b\n")
            assert daemon_snapshot(ws)["scan"] == "dirty"
        finally:
            daemon_client.stop(ws.store_path)


def test_a_failed_start_is_recorded_and_holds_hooks_back(ws: Workspace, tmp_path: Path
                                                         ) -> None:
    other = tmp_path / "other"
    other.mkdir()
    with Workspace.init(other) as ows:
        wrong_store = ows.store_path
    # the daemon is told a store that is not this workspace's: it refuses to serve it
    code = subprocess.run([sys.executable, "-m", "ctrlz.session.daemon.daemon_process",
                           str(ws.root),
                           str(wrong_store)], timeout=60).returncode
    assert code == 1
    failure = daemon_client.recent_failure(wrong_store)
    assert failure is not None and "uses the store" in failure["reason"]
    assert daemon_client.spawn(ws.root, wrong_store) is False


def test_cli_daemon_start_status_stop(ws: Workspace) -> None:
    def ctrlz(*args: str) -> str:
        proc = subprocess.run([CTRLZ, "daemon", *args], cwd=ws.root, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert "not running" in ctrlz("status")
    assert "daemon: running" in ctrlz("start", "--wait")
    info = json.loads(ctrlz("status", "--json"))
    assert info["type"] == "daemon" and info["running"] and info["ready"]
    assert info["watched_dirs"] >= 10 and info["served"] == {"dirty": 0, "full": 0, "handed": 0,
                                                            "restores": 0}
    assert info["root"] == str(ws.root)
    status = subprocess.run([CTRLZ, "status", "--json"], cwd=ws.root, capture_output=True,
                            text=True, timeout=120)
    assert json.loads(status.stdout)["daemon"] == {"running": True, "last_failure": None,
                                                    "unwatched_count": 0, "unwatched": []}
    assert "daemon stopped" in ctrlz("stop")
    assert json.loads(ctrlz("stop", "--json")) == {"type": "daemon", "stopped": False}


def test_hooks_start_the_daemon_and_shell_snapshots_go_through_it(ws: Workspace,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    monkeypatch.setenv("CTRLZ_DAEMON", "1")

    def hook(event: str, **fields: object) -> None:
        payload = {"session_id": "sess-daemon-1", "transcript_path": "/dev/null",
                   "cwd": str(ws.root), "hook_event_name": event, **fields}
        proc = subprocess.run([CTRLZ, "hook", "claude"], input=json.dumps(payload).encode(),
                              cwd=ws.root, capture_output=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""

    before = {p.relative_to(ws.root): p.read_bytes() for p in ws.root.rglob("*")
              if p.is_file()}
    hook("SessionStart", source="startup")
    assert daemon_client.wait_ready(ws.store_path, 60) is not None
    (ws.root / "pkg2" / "mod" / "f1.py").write_text("edited before the command\n")
    hook("PreToolUse", tool_name="Bash", tool_input={"command": "rm -rf pkg0 pkg1"},
         tool_use_id="toolu_daemon_rm")
    shutil.rmtree(ws.root / "pkg0")
    shutil.rmtree(ws.root / "pkg1")
    served = daemon_client.status(ws.store_path)["served"]
    assert served["dirty"] == 1 and served["full"] == 0
    proc = subprocess.run([CTRLZ, "rewind", "toolu_daemon_rm"], cwd=ws.root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    after = {p.relative_to(ws.root): p.read_bytes() for p in ws.root.rglob("*") if p.is_file()}
    before[Path("pkg2/mod/f1.py")] = b"edited before the command\n"
    assert after == before
    errors = ws.store_path / "toolcalls" / "hook-errors.jsonl"
    assert not errors.exists() or errors.read_text() == ""


def test_the_pools_run_after_the_daemon_answers(ws: Workspace) -> None:
    """The daemon answers a snapshot before retention runs, and runs it before the next
    request: the tool ring never holds more than one snapshot over ``tool_max``."""
    (ws.root / ".ctrlz.toml").write_text("tool_max = 2\n")
    info = daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)
    assert info["ready"], info
    for i in range(5):
        (ws.root / "README.md").write_text(f"edit {i}\n")
        daemon_client.snapshot(ws.store_path, type="tool", label=f"t{i}")
        daemon_client.status(ws.store_path)  # the next request: the pools ran before it
        tools = [s for s in ws.snapshots() if s.type == "tool"]
        assert [s.label for s in tools] == [f"t{j}" for j in range(max(0, i - 1), i + 1)]
