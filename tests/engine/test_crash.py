"""kill -9 at every commit point (and at random moments): the store stays readable, the last
committed snapshot stays intact, `verify` stays clean, and the next writer cleans up."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.state.fsio.direct_io import ObjectFile
from tests.conftest import make_tree, tree_state

WORKER = Path(__file__).with_name("crash_worker.py")
REPO = Path(__file__).resolve().parents[2]


def run_worker(home: Path, root: Path, point: str, op: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(WORKER), str(home), str(root), point, op],
                          env=env, capture_output=True, text=True, timeout=120)


def setup_ws(root: Path, home: Path) -> tuple[Workspace, dict]:
    make_tree(root, {"src": {f"m{i}.py": f"print({i})\n" * 20 for i in range(30)},
                     "big.bin": os.urandom(5 << 20), "README": "read me\n"})
    ws = Workspace.init(root, home=home)
    ws.snapshot(label="base")
    return ws, tree_state(root)


def mutate(root: Path) -> None:
    for i in range(0, 30, 3):
        (root / "src" / f"m{i}.py").write_text(f"changed {i}\n")
    (root / "src" / "new.py").write_text("new\n")
    (root / "big.bin").write_bytes(os.urandom(5 << 20))
    (root / "README").unlink()


def assert_store_sound(home: Path, root: Path, base_state: dict, tmp: Path) -> Workspace:
    ws = Workspace.open(root, home=home)
    report = ws.verify()
    assert report.ok, report.errors
    out = tmp / f"check-{time.monotonic_ns()}"
    ws.restore_to("base", out)
    assert tree_state(out) == base_state
    return ws


#: direct-write: a large object's stage, on its writer thread, past the page cache
SNAPSHOT_POINTS = ["pack-append", "direct-write", "before-index-commit", "before-commit",
                   "after-commit"]


@pytest.mark.parametrize("point", SNAPSHOT_POINTS)
def test_kill_during_snapshot(point: str, ws_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    if point == "direct-write":
        with ObjectFile(tmp_path / "probe") as probe:
            if not probe.direct:
                pytest.skip("the store's filesystem has no O_DIRECT")
    ws, base_state = setup_ws(ws_dir, home)
    ws.close()
    mutate(ws_dir)
    proc = run_worker(home, ws_dir, point, "snapshot")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ws = assert_store_sound(home, ws_dir, base_state, tmp_path)
    committed = [s.label for s in ws.snapshots()]
    assert committed == (["base", "doomed"] if point == "after-commit" else ["base"])
    # the next writer recovers: strays removed, snapshot works, verify reports no orphans
    ws.snapshot(label="after")
    report = ws.verify()
    assert report.ok and report.orphans == 0


@pytest.mark.parametrize("point", ["restore-remove", "restore-place"])
def test_kill_during_restore_leaves_an_undo_path(point: str, ws_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws, base_state = setup_ws(ws_dir, home)
    ws.close()
    mutate(ws_dir)
    damaged = tree_state(ws_dir)
    proc = run_worker(home, ws_dir, point, "restore")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ws = assert_store_sound(home, ws_dir, base_state, tmp_path)
    safety = [s for s in ws.snapshots() if s.type == "safety"]
    assert len(safety) == 1  # taken before anything was touched
    ws.restore(safety[0].id)  # undo the half-done restore
    assert tree_state(ws_dir) == damaged
    ws.restore("base")  # and the restore itself can simply be run again
    assert tree_state(ws_dir) == base_state


@pytest.mark.parametrize("point", ["gc-before-commit", "gc-after-commit"])
def test_kill_during_gc(point: str, ws_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws, base_state = setup_ws(ws_dir, home)
    mutate(ws_dir)
    ws.snapshot(label="doomed-ok")
    ws.close()
    proc = run_worker(home, ws_dir, point, "gc")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ws = assert_store_sound(home, ws_dir, base_state, tmp_path)
    ws.snapshot(label="next")  # the next writer cleans up: no gc asked for
    report = ws.verify()
    assert report.ok and report.orphans == 0


@pytest.mark.slow
def test_kill_at_random_moments(ws_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws, base_state = setup_ws(ws_dir, home)
    ws.close()
    rng = random.Random(1234)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(12):
        proc = subprocess.Popen([sys.executable, str(WORKER), str(home), str(ws_dir), "none",
                                 "loop"], env=env, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.3, 1.5))
        proc.kill()
        proc.wait()
        ws = assert_store_sound(home, ws_dir, base_state, tmp_path)
        ws.close()
