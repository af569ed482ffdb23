"""The "writing" marker: strays are swept only when a writer may have died, so a snapshot's
cost does not grow with the number of packs in the store, and nothing a crash leaves stays.

See ``ObjectStore`` on strays: a writer creates the marker before its first file and removes
it once its rows are committed; a sweep that finds it removes every file no index row names.
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.state import failpoints
from ctrlz.state.store.strays import WRITING
from tests.engine.test_crash import run_worker, setup_ws


def marker(ws: Workspace) -> Path:
    return ws.store_path / WRITING


def packs(ws: Workspace) -> set[str]:
    return {p.name for p in (ws.store_path / "packs").iterdir()}


def test_a_committed_snapshot_leaves_no_marker(ws_dir: Path, tmp_path: Path) -> None:
    ws, _ = setup_ws(ws_dir, tmp_path / "home")
    (ws_dir / "README").write_text("changed\n")
    ws.snapshot(label="second")
    assert not marker(ws).exists()
    ws.close()


def test_a_writer_killed_mid_pack_leaves_the_marker_and_the_next_snapshot_sweeps(
        ws_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws, _ = setup_ws(ws_dir, home)
    before = packs(ws)
    ws.close()
    (ws_dir / "src" / "m1.py").write_text("doomed\n")
    proc = run_worker(home, ws_dir, "pack-append", "snapshot")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ws = Workspace.open(ws_dir, home=home)
    assert marker(ws).exists() and packs(ws) - before, "the crash left a pack and the marker"
    ws.snapshot(label="after")
    assert not marker(ws).exists()
    assert ws.verify().orphans == 0
    ws.close()


def test_a_writer_that_failed_before_its_commit_removes_its_pack_and_the_marker(
        ws_dir: Path, tmp_path: Path) -> None:
    """A failure (not a kill) cleans up before it returns: the partial pack is often what
    filled the disk (issue 41)."""
    ws, _ = setup_ws(ws_dir, tmp_path / "home")
    before = packs(ws)
    (ws_dir / "src" / "m2.py").write_text("never committed\n")
    failpoints.arm_error("before-commit", errno.EIO)
    try:
        with pytest.raises(OSError):
            ws.snapshot(label="fails")
    finally:
        failpoints.disarm_all()
    assert packs(ws) == before
    assert not marker(ws).exists()
    assert ws.verify().orphans == 0
    assert not any("left files" in p for p in ws.status().problems)
    ws.snapshot(label="after")
    assert not marker(ws).exists() and ws.verify().orphans == 0
    ws.close()


def test_a_stray_without_a_marker_waits_for_gc(ws_dir: Path, tmp_path: Path) -> None:
    """As after a power cut that lost the marker but not the file: snapshots leave it (they
    no longer list the store), `ctrlz gc` always sweeps."""
    ws, _ = setup_ws(ws_dir, tmp_path / "home")
    stray = ws.store_path / "packs" / ("pack-" + "0" * 16 + ".pack")
    stray.write_bytes(b"CTZPACK1 half a pack")
    (ws_dir / "README").write_text("changed\n")
    ws.snapshot(label="leaves it")
    assert stray.exists() and ws.verify().orphans == 1
    assert ws.gc().strays_removed == 1
    assert not stray.exists() and ws.verify().orphans == 0
    ws.close()


def test_the_marker_is_a_plain_file_in_the_store(ws_dir: Path, tmp_path: Path) -> None:
    ws, _ = setup_ws(ws_dir, tmp_path / "home")
    ws.repo.objects.writer_started()
    ws.repo.objects.writer_done(aborted=True)  # as if it gave up: the marker stays
    assert marker(ws).is_file() and oct(marker(ws).stat().st_mode & 0o777) == "0o600"
    with ws.repo.lock:
        assert ws.repo.recover() == []  # nothing to remove, and the marker is gone
    assert not os.path.exists(marker(ws))
    ws.close()
