"""Other processes using a running daemon: snapshots it takes for them, and the dirty set it
hands to a restore's capture step (the fsmonitor query).

The property that matters is the same as for the daemon itself: whatever route a snapshot
takes, it is exactly the snapshot a full scan would take, and a restore's safety snapshot holds
every later edit, so ``undo`` brings it back. A capture that fails after the hand-out must not
lose the changes it was told about.

The restores here run in this process, as a long-lived one's do (the service, the MCP server):
that is the path which asks the daemon for its dirty set. A short-lived process hands the whole
restore to the daemon instead; that is ``test_daemon_restore.py``.
"""

# ruff: noqa: F811 - the daemon and ws fixtures come from test_daemon

from __future__ import annotations

import errno
import json
import os
import random
import subprocess

import pytest

from ctrlz.session import daemon_client
from ctrlz.session.config import Config, load_config
from ctrlz.state import failpoints
from ctrlz.workspace import Workspace

from .test_daemon import CTRLZ, daemon, edit_randomly, full_root, until, ws  # noqa: F401


@pytest.fixture(autouse=True)
def restores_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctrlz.session.protected import ProtectedWorkspace

    monkeypatch.setattr(ProtectedWorkspace, "restore_by_daemon", False)


def served(ws: Workspace) -> dict[str, int]:
    return daemon_client.status(ws.store_path)["served"]


def test_a_library_snapshot_is_taken_by_the_running_daemon(daemon: Workspace) -> None:
    ws = daemon
    before = served(ws)
    (ws.root / "pkg1" / "mod" / "f1.py").write_text("edited\n")
    (ws.root / "pkg2" / "new.txt").write_text("new\n")
    snap = ws.snapshot(type="auto", label="through the daemon")
    after = served(ws)
    assert after["dirty"] == before["dirty"] + 1
    assert snap.label == "through the daemon" and snap.type == "auto"
    assert snap.root == full_root(ws)
    assert ws.entry_at(snap.id, "pkg2/new.txt") is not None


def test_the_cli_snapshot_is_taken_by_the_running_daemon(daemon: Workspace) -> None:
    ws = daemon
    before = served(ws)
    (ws.root / "README.md").write_text("from the CLI\n")
    out = subprocess.run([CTRLZ, "snapshot", "-m", "cli", "--json"], cwd=ws.root, check=True,
                         capture_output=True, text=True).stdout
    assert served(ws)["dirty"] == before["dirty"] + 1
    assert json.loads(out)["label"] == "cli"
    assert ws.resolve("latest").root == full_root(ws)


def test_a_caller_with_its_own_settings_is_not_served_by_the_daemon(daemon: Workspace) -> None:
    ws = daemon
    values = dict(load_config(ws.root).values)
    values["exclude_patterns"] = ["pkg0"]
    own = Workspace.init(ws.root, config=Config(values, {k: "test" for k in values}))
    try:
        before = served(ws)
        snap = own.snapshot(type="auto")
        assert served(ws) == before
        assert own.entry_at(snap.id, "pkg0") is None
        assert own.entry_at(snap.id, "pkg1") is not None
    finally:
        own.close()


def test_a_refused_snapshot_fails_in_the_callers_process_with_the_real_error(
        daemon: Workspace) -> None:
    from ctrlz.errors import LimitExceeded

    ws = daemon
    manual = sum(1 for s in ws.snapshots() if s.type == "manual")
    for _ in range(ws.config["manual_max"] - manual):
        ws.snapshot()
    with pytest.raises(LimitExceeded, match="manual pool is full"):
        ws.snapshot()


def test_a_rollback_captures_through_the_daemon_and_undo_brings_edits_back(
        daemon: Workspace) -> None:
    ws = daemon
    base = ws.resolve("latest")
    rng = random.Random(99)
    for _ in range(6):
        edit_randomly(ws.root, rng)
        edited = full_root(ws)
        handed = served(ws)["handed"]
        result = ws.rollback(base.id)
        assert served(ws)["handed"] == handed + 1
        assert result.safety is not None and result.safety.root == edited
        assert full_root(ws) == base.root
        ws.undo()
        assert full_root(ws) == edited, "undo did not bring back the edits made after base"


def test_the_daemons_unwritten_stat_cache_is_written_before_the_hand_out(
        daemon: Workspace) -> None:
    """The daemon writes its stat cache only when idle; a dirty set is relative to its newest
    one, so the caller must scan from that one, not from an older file."""
    ws = daemon
    base = ws.resolve("latest")
    (ws.root / "pkg0" / "mod" / "f0.py").write_text("seen by a daemon snapshot\n")
    daemon_client.snapshot(ws.store_path, type="tool")  # its cache is now only in memory
    (ws.root / "pkg4" / "mod" / "f4.py").write_text("seen only through the hand-out\n")
    edited = full_root(ws)
    result = ws.rollback(base.id)
    assert result.safety is not None and result.safety.root == edited
    assert full_root(ws) == base.root
    ws.undo()
    assert (ws.root / "pkg0" / "mod" / "f0.py").read_text() == "seen by a daemon snapshot\n"


def test_a_capture_that_fails_after_the_hand_out_loses_nothing(daemon: Workspace) -> None:
    ws = daemon
    base = ws.resolve("latest")
    (ws.root / "pkg3" / "mod" / "f2.py").write_text("a later edit\n")
    failpoints.arm_error("before-commit", errno.EIO)
    try:
        with pytest.raises(OSError):
            ws.rollback(base.id)
    finally:
        failpoints.disarm_all()
    assert served(ws)["handed"] == 1
    assert (ws.root / "pkg3" / "mod" / "f2.py").read_text() == "a later edit\n"
    reply = daemon_client.snapshot(ws.store_path, type="tool")
    assert reply["scan"] == "full"  # the handed-out set was never confirmed by a stat cache
    snap = ws.resolve(reply["snapshot"]["id"])
    assert snap.root == full_root(ws)
    assert ws.entry_at(snap.id, "pkg3/mod/f2.py").size == len("a later edit\n")
    (ws.root / "pkg3" / "mod" / "f2.py").write_text("and another\n")
    assert daemon_client.snapshot(ws.store_path, type="tool")["scan"] == "dirty"


def test_without_a_daemon_everything_is_taken_in_process(ws: Workspace) -> None:
    (ws.root / "README.md").write_text("no daemon\n")
    snap = ws.snapshot(type="auto")
    assert snap.root == full_root(ws)
    assert ws.last_scan is not None  # the scan ran here
    ws.rollback(ws.snapshots()[0].id)
    assert (ws.root / "README.md").read_text() == "hello\n"


def test_a_daemon_stuck_behind_the_callers_lock_does_not_stall_its_restore(
        daemon: Workspace) -> None:
    """The daemon serves one request at a time: while it waits for the store lock that a
    restore holds, it cannot answer that restore's question. The restore scans fully instead
    of waiting for the daemon's lock timeout, and the late answer is never trusted."""
    import threading

    ws = daemon
    base = ws.resolve("latest")
    (ws.root / "pkg5" / "mod" / "f3.py").write_text("edited while the daemon waits\n")
    edited = full_root(ws)
    pid = daemon_client.status(ws.store_path)["pid"]
    lock = os.path.realpath(ws.store_path / "lock")

    def daemon_waits_for_the_lock() -> bool:  # it opens the lock file only to take it
        fds = f"/proc/{pid}/fd"
        return any(os.path.realpath(os.path.join(fds, fd)) == lock for fd in os.listdir(fds))

    with ws.repo.lock:
        waiting = threading.Thread(target=lambda: daemon_client.snapshot(ws.store_path,
                                                                         type="tool"))
        waiting.start()
        assert until(daemon_waits_for_the_lock)
        result = ws.rollback(base.id)
    waiting.join(timeout=120)
    assert result.safety is not None and result.safety.root == edited
    assert full_root(ws) == base.root
    reply = daemon_client.snapshot(ws.store_path, type="tool")
    assert ws.resolve(reply["snapshot"]["id"]).root == full_root(ws)


def test_a_snapshot_handed_to_the_daemon_loads_no_scanning_code(daemon: Workspace) -> None:
    """What keeps that path cheap for a fresh process: it opens the workspace and asks; the
    walk, the exclusion rules and the snapshot engine stay unloaded."""
    import sys

    code = ("import sys\nfrom ctrlz import Workspace\n"
            f"ws = Workspace.open({str(daemon.root)!r})\nws.snapshot(type='auto')\n"
            "print(sorted(m for m in sys.modules if m.startswith('ctrlz')))")
    before = served(daemon)["dirty"]
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env={**os.environ}).stdout
    loaded = eval(out.strip().splitlines()[-1])  # noqa: S307 - ours
    assert served(daemon)["dirty"] == before + 1
    for heavy in ("ctrlz.engine.snapshot", "ctrlz.state.ignore.exclude", "ctrlz.state.scan",
                  "ctrlz.engine.retention", "ctrlz.engine.restore.restore"):
        assert heavy not in loaded, f"{heavy} was loaded"


def test_the_hand_out_names_what_changed_in_each_directory(daemon: Workspace) -> None:
    """The fsmonitor answer carries, per directory, the names that changed (a capture then
    stats those alone); a directory new since the last take is named whole."""
    ws = daemon
    (ws.root / "pkg2" / "mod" / "f1.py").write_text("edited\n")
    (ws.root / "pkg2" / "mod" / "f4.py").unlink()
    (ws.root / "fresh").mkdir()
    (ws.root / "fresh" / "x.py").write_text("new\n")
    with ws.repo.lock:  # as a capture asks: under the store lock, a snapshot right after
        handed = daemon_client.dirty(ws.store_path, ws.config.values)
        assert handed == {b"", b"pkg2/mod", b"fresh"}
        assert handed.names == {b"": {b"fresh"}, b"pkg2/mod": {b"f1.py", b"f4.py"}}
        snap = ws.snapshot(label="from the hand-out", dirty=handed)
    assert snap.root == full_root(ws)
    assert (snap.created, snap.modified, snap.deleted) == (1, 1, 1)
