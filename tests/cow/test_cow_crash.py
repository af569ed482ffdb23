"""kill -9 in the middle of a snapshot or a restore that clones: the store stays sound, the next
ctrlz process cleans up (temp clones, a frozen btrfs copy), and every undo path still works."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz import Workspace, platform
from ctrlz.state.scan import btrfs as native
from ctrlz.state.store.packs import CLONE
from tests.conftest import make_tree, tree_state

from .conftest import delete_subvolumes, subvolume

WORKER = Path(__file__).with_name("crash_worker.py")
REPO = Path(__file__).resolve().parents[2]


def run_worker(home: Path, root: Path, point: str, op: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(WORKER), str(home), str(root), point, op],
                          env=env, capture_output=True, text=True, timeout=120)


def base(ws_dir: Path, home: Path) -> dict:  # type: ignore[type-arg]
    make_tree(ws_dir, {"src": {f"m{i}.py": f"print({i})\n" for i in range(10)},
                       "big.bin": os.urandom(5 << 20), "log.csv": "a,b,c\n" * 1_000_000})
    ws = Workspace.init(ws_dir, home=home)
    ws.snapshot(label="base")
    # clones where the platform makes them; copies in portable mode, with the same kills
    cloned = any(r[5] == CLONE for r in ws.repo.catalog.object_rows())
    assert cloned == platform.can_ficlone()
    ws.close()
    return tree_state(ws_dir)


def mutate(ws_dir: Path) -> None:
    with open(ws_dir / "big.bin", "r+b") as f:
        f.seek(12345)
        f.write(b"mutated" * 50)
    (ws_dir / "log.csv").write_bytes(os.urandom(6 << 20))
    (ws_dir / "src" / "m1.py").write_text("changed\n")


def sound(ws_dir: Path, home: Path, state: dict, out: Path) -> Workspace:  # type: ignore[type-arg]
    ws = Workspace.open(ws_dir, home=home)
    report = ws.verify()
    assert report.ok, report.errors
    ws.restore_to("base", out)
    assert tree_state(out) == state
    return ws


@pytest.mark.parametrize("point", ["pack-append", "before-index-commit", "before-commit"])
def test_kill_during_a_cloning_snapshot(point: str, cow: Path) -> None:
    ws_dir, home = cow / "ws", cow / "home"
    state = base(ws_dir, home)
    mutate(ws_dir)
    proc = run_worker(home, ws_dir, point, "snapshot")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ws = sound(ws_dir, home, state, cow / "out")
    assert [s.label for s in ws.snapshots()] == ["base"]
    ws.snapshot(label="after")  # the next writer removes the stray clones
    report = ws.verify()
    assert report.ok and report.orphans == 0
    ws.close()


@pytest.mark.parametrize("point", ["restore-temp-written", "restore-place"])
def test_kill_during_a_cloning_restore(point: str, cow: Path) -> None:
    ws_dir, home = cow / "ws", cow / "home"
    state = base(ws_dir, home)
    mutate(ws_dir)
    damaged = tree_state(ws_dir)
    proc = run_worker(home, ws_dir, point, "restore")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ws = sound(ws_dir, home, state, cow / "out")
    safety = [s for s in ws.snapshots() if s.type == "safety"]
    assert len(safety) == 1
    ws.restore(safety[0].id)  # back to where the restore started
    assert tree_state(ws_dir) == damaged
    ws.restore("base")  # and the restore runs again to its end
    assert tree_state(ws_dir) == state
    assert not [n for n in os.listdir(ws_dir) if n.startswith(".ctrlz-tmp")]
    ws.close()


def test_a_cloned_file_taken_aside_by_a_killed_restore_is_not_kept_as_rescued(cow: Path
                                                                              ) -> None:
    """The replaced inode sits under a temp name when the kill comes; its bytes are in the
    safety snapshot as a clone (no hash to look up), so recovery finds it by its blocks and
    deletes it rather than keeping a 5 MB ``ctrlz-rescued-…`` copy in the workspace."""
    ws_dir, home = cow / "ws", cow / "home"
    state = base(ws_dir, home)
    with open(ws_dir / "big.bin", "r+b") as f:  # the only change: one write, one swap
        f.write(b"only change")
    damaged = tree_state(ws_dir)
    proc = run_worker(home, ws_dir, "restore-exchanged", "restore")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ws = sound(ws_dir, home, state, cow / "out")
    assert not [n for n in os.listdir(ws_dir) if n.startswith(("ctrlz-rescued", ".ctrlz-tmp"))]
    safety = [s for s in ws.snapshots() if s.type == "safety"][0]
    ws.restore(safety.id)
    assert tree_state(ws_dir) == damaged
    ws.close()


def test_kill_during_a_frozen_snapshot(btrfs: Path) -> None:
    ws_dir, home = subvolume(btrfs / "ws"), btrfs / "home"
    state = base(ws_dir, home)
    ws = Workspace.open(ws_dir, home=home)
    native.enable(ws.repo, ws.roots)
    frozen = ws.repo.path / native.FROZEN
    ws.close()
    mutate(ws_dir)
    # more than a group's worth of new small files: a group fills, and is appended, while
    # the scan still reads the frozen copy (a few small files wait for the commit)
    make_tree(ws_dir / "bulk", {f"f{i}.txt": os.urandom(16 << 10).hex() for i in range(48)})
    proc = run_worker(home, ws_dir, "pack-append", "snapshot")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert len(os.listdir(frozen)) == 1  # the crash left its frozen copy
    ws = sound(ws_dir, home, state, btrfs / "out")
    ws.snapshot(label="after")  # deletes the frozen copy the crash left
    assert os.listdir(ws.repo.path / native.FROZEN) == []
    assert ws.verify().orphans == 0
    ws.close()
    delete_subvolumes(ws_dir)
