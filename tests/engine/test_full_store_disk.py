"""A store on a disk that is full, for real: a 4 MiB tmpfs (root only; skipped otherwise).

Issue 41: a snapshot that does not fit fails cleanly, and must also take its partial pack
with it, or the disk stays full until the next snapshot or ``ctrlz gc``. And on the day the
store's disk is full, every command that only reads the store (``restore --to`` a directory
elsewhere, ``diff``, ``show``, ``export`` to another disk, ``verify``, ``list``, ``status``)
still gets the user's files out: nothing it writes into the store is needed, and a write that
only saves time (the stat cache, the daemon) fails quietly.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import make_tree, mounted
from tests.engine.test_restore_crash import CTRLZ, worker_env

TREE = {"README": "read me\n", "src": {f"m{i}.py": f"print({i})\n" for i in range(5)},
        "docs": {"a.md": "# a\n" * 50}}


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs for the store (root only)."""
    yield from mounted(tmp_path / "disk", "-t", "tmpfs", "-o", "size=4m", "tmpfs")


def ctrlz(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    """The real console script, against the store under ``home``."""
    env = {**worker_env(home), "CTRLZ_DAEMON": "0"}
    return subprocess.run([CTRLZ, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(disk: Path) -> None:
    """Fill the disk to its last byte with a file of its own (as anything else would)."""
    with open(disk / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        except OSError:
            pass
    assert free_bytes(disk) == 0


@pytest.fixture
def store_on_disk(disk: Path, tmp_path: Path, ctrlz_home: Path) -> tuple[Path, Path, str]:
    """A workspace (on the ordinary disk) whose store is on ``disk``, with one snapshot; the
    workspace, the store home and the snapshot's id."""
    root = tmp_path / "ws"
    make_tree(root, TREE)
    home = disk / "home"
    ok(ctrlz(root, home, "init"))
    ok(ctrlz(root, home, "snapshot", "-m", "base"))
    snap = ok(ctrlz(root, home, "list", "--json")).split('"id": "')[1].split('"')[0]
    return root, home, snap


@pytest.fixture
def full(store_on_disk: tuple[Path, Path, str], disk: Path) -> tuple[Path, Path, str]:
    """:func:`store_on_disk`, then the disk filled, and the working tree changed."""
    root = store_on_disk[0]
    (root / "README").write_text("changed since\n")
    (root / "new.txt").write_text("new\n")
    fill(disk)
    return store_on_disk


def test_a_snapshot_that_fills_the_disk_removes_its_partial_pack(
        store_on_disk: tuple[Path, Path, str], disk: Path) -> None:
    root, home, _ = store_on_disk
    store = next((home / "workspaces").iterdir())
    packs = set((store / "packs").iterdir())
    free = free_bytes(disk)
    rng = random.Random(41)
    for i in range(8):  # 8 MB that does not compress, on a 4 MiB disk
        (root / f"big{i}.bin").write_bytes(rng.randbytes(1 << 20))
    proc = ctrlz(root, home, "snapshot", "-m", "too big")
    assert proc.returncode == 6, (proc.stdout, proc.stderr)
    assert "no space left" in proc.stderr and "Traceback" not in proc.stderr
    assert set((store / "packs").iterdir()) == packs, "the partial pack stayed"
    assert not (store / "writing").exists()
    assert free_bytes(disk) >= free - (64 << 10), "the disk stays full"
    status = ok(ctrlz(root, home, "status"))
    assert "left files" not in status
    assert "orphaned" not in ok(ctrlz(root, home, "verify"))
