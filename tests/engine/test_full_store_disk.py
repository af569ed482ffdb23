"""A store on a disk that is full, for real: a 4 MiB tmpfs (root only; skipped otherwise).

Issue 41: a snapshot that does not fit fails cleanly, and must also take its partial pack
with it, or the disk stays full until the next snapshot or ``ctrlz gc``. And on the day the
store's disk is full, every command that only reads the store (``restore --to`` a directory
elsewhere, ``diff``, ``show``, ``export`` to another disk, ``verify``, ``list``, ``status``)
still gets the user's files out: nothing it writes into the store is needed, and a write that
only saves time (the stat cache, the daemon) fails quietly.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from ctrlz import Workspace
from ctrlz.engine.restore import journal
from ctrlz.errors import RestoreError
from ctrlz.state import failpoints
from tests.conftest import make_tree, mounted, tree_state
from tests.engine.test_restore_crash import CTRLZ, WORKER, temp_files, worker_env


class Setup(NamedTuple):
    root: Path  # the workspace, on the ordinary disk
    home: Path  # the store home, on the small disk
    snap: str  # the one snapshot's id
    base: dict  # the workspace's state in it


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
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    assert free_bytes(disk) == 0


@pytest.fixture
def store_on_disk(disk: Path, tmp_path: Path, ctrlz_home: Path) -> Setup:
    """A workspace (on the ordinary disk) whose store is on ``disk``, with one snapshot."""
    root = tmp_path / "ws"
    make_tree(root, TREE)
    home = disk / "home"
    ok(ctrlz(root, home, "init"))
    ok(ctrlz(root, home, "snapshot", "-m", "base"))
    snap = ok(ctrlz(root, home, "list", "--json")).split('"id": "')[1].split('"')[0]
    return Setup(root, home, snap, tree_state(root))


@pytest.fixture
def full(store_on_disk: Setup, disk: Path) -> Setup:
    """:func:`store_on_disk`, then the disk filled, and the working tree changed."""
    root = store_on_disk[0]
    (root / "README").write_text("changed since\n")
    (root / "new.txt").write_text("new\n")
    fill(disk)
    return store_on_disk


def test_a_snapshot_that_fills_the_disk_removes_its_partial_pack(
        store_on_disk: Setup, disk: Path) -> None:
    root, home, _, _ = store_on_disk
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


# -- a full store disk: the read-only commands ---------------------------------------------------

def store_files(home: Path) -> dict[str, int]:
    """Every file under the store home, with its size: what a command wrote there shows
    (but SQLite's own -wal and -shm, which its failed attempts to open leave, empty)."""
    return {str(p): p.stat().st_size for p in home.rglob("*")
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def test_restore_to_another_disk_works_on_a_full_store_disk(
        full: Setup, tmp_path: Path) -> None:
    root, home, snap, _ = full
    before = store_files(home)
    out = tmp_path / "out" / "restored"
    assert "Restored" in ok(ctrlz(root, home, "restore", snap, "--to", str(out)))
    assert tree_state(out) == full.base
    assert not (out / journal.INCOMPLETE).exists() and temp_files(out) == []
    one = tmp_path / "out" / "one"
    ok(ctrlz(root, home, "restore", snap, "README", "--to", str(one)))
    assert (one / "README").read_text() == "read me\n"
    assert store_files(home) == before


def test_diff_works_on_a_full_store_disk(full: Setup) -> None:
    root, home, snap, _ = full
    names = ok(ctrlz(root, home, "diff", "--name-status"))
    assert "M\tREADME" in names and "A\tnew.txt" in names
    patch = ok(ctrlz(root, home, "diff", snap))
    assert "-read me" in patch and "+changed since" in patch


def test_show_works_on_a_full_store_disk(full: Setup) -> None:
    root, home, snap, _ = full
    assert snap in ok(ctrlz(root, home, "show", snap))
    assert snap in ok(ctrlz(root, home, "list"))


def test_export_to_another_disk_works_on_a_full_store_disk(
        full: Setup, tmp_path: Path) -> None:
    root, home, snap, _ = full
    archive = tmp_path / "app.ctrlz"
    ok(ctrlz(root, home, "export", snap, "-o", str(archive)))
    elsewhere = tmp_path / "elsewhere"
    ok(ctrlz(tmp_path, tmp_path / "home2", "import", str(archive), "--to", str(elsewhere)))
    assert tree_state(elsewhere) == full.base


def test_verify_works_on_a_full_store_disk(full: Setup) -> None:
    root, home, _, _ = full
    assert ok(ctrlz(root, home, "verify")).splitlines()[-1] == "ok"


def test_status_says_the_store_disk_is_full_and_writes_fail_in_one_line(
        full: Setup) -> None:
    root, home, _, _ = full
    status = ok(ctrlz(root, home, "status"))
    assert "disk is full" in status and "restore --to" in status
    ok(ctrlz(root, home, "sessions"))
    proc = ctrlz(root, home, "snapshot", "-m", "no room")
    assert proc.returncode == 6 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and ("full" in lines[0] or "no space" in lines[0]), lines


# -- restore --to keeps its crash record in the destination ---------------------------------------

def test_a_failed_restore_to_cleans_up_and_writes_nothing_into_the_store(
        store_on_disk: Setup, tmp_path: Path) -> None:
    """A failure cleans up as it goes (temp files, its record) and says what it left."""
    root, home, snap, _ = store_on_disk
    out = tmp_path / "out"
    with Workspace.open(root, home=home) as ws:
        failpoints.arm_error("restore-place", errno.EIO, after=2)
        try:
            with pytest.raises(RestoreError, match="I/O error"):
                ws.restore_to(snap, out)
        finally:
            failpoints.disarm_all()
        assert not journal.pending(ws.store_path)
        assert ws.oplog.next_undo() is None
    assert temp_files(out) == [] and not (out / journal.INCOMPLETE).exists()


def test_a_killed_restore_to_marks_its_destination_incomplete(
        store_on_disk: Setup, tmp_path: Path) -> None:
    """Its record is in the destination, not in the store (see ``ctrlz.engine.restore.journal``):
    the directory says it is incomplete, and a retry into it is refused until it is removed."""
    root, home, snap, _ = store_on_disk
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(WORKER), str(home), str(root), f"cli:restore {snap} --to {out}",
         "kill", "restore-place", "2"], cwd=root, env=worker_env(home), capture_output=True,
        text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (out / journal.INCOMPLETE).is_file()
    store = next((home / "workspaces").iterdir())
    assert not journal.pending(store)
    proc = ctrlz(root, home, "restore", snap, "--to", str(out))
    assert proc.returncode != 0 and "interrupted restore" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_rows_committed_to_the_wal_only_are_read_on_a_full_disk(
        store_on_disk: Setup, disk: Path) -> None:
    """A process killed right after its commit leaves committed rows in the WAL alone; with
    SQLite's shared-memory index gone too, the catalog is read from a copy on another disk
    (``ctrlz.state.db.frozen_catalog``), and those rows are there."""
    root, home, snap, _ = store_on_disk
    catalog = next((home / "workspaces").iterdir()) / "catalog.db"
    killed = subprocess.run([sys.executable, "-c", f"""
import os, signal, sqlite3
db = sqlite3.connect({str(catalog)!r}, isolation_level=None)
db.execute("PRAGMA wal_autocheckpoint = 0")
db.execute("UPDATE snapshots SET label = 'only in the wal' WHERE id = {snap!r}")
os.kill(os.getpid(), signal.SIGKILL)
"""], capture_output=True, text=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert os.path.getsize(f"{catalog}-wal") > 0
    os.unlink(f"{catalog}-shm")
    fill(disk)
    assert "only in the wal" in ok(ctrlz(root, home, "show", snap))
    from ctrlz.state.db.catalog import Catalog

    frozen = Catalog(catalog)
    try:
        assert frozen.frozen and frozen._frozen_copy is not None
        copy = Path(frozen._frozen_copy)
        assert copy.is_dir()
    finally:
        frozen.close()
    assert not copy.exists()


def test_a_stat_cache_that_cannot_be_written_costs_only_speed(
        store_on_disk: Setup, disk: Path) -> None:
    """The stat cache is written after the snapshot committed. On a disk filled to the page
    by the snapshot itself, that write fails; the snapshot must still be reported (it is
    there), not fail. Made to fail for real: a directory stands where the file goes."""
    root, home, _, _ = store_on_disk
    store = next((home / "workspaces").iterdir())
    (store / "statcache").unlink()
    (store / "statcache" / "in the way").mkdir(parents=True)
    (root / "README").write_text("changed again\n")
    assert "+0 ~1 -0" in ok(ctrlz(root, home, "snapshot", "-m", "second"))
    assert "second" in ok(ctrlz(root, home, "list"))
    (root / "src" / "m1.py").write_text("and again\n")
    assert "+0 ~1 -0" in ok(ctrlz(root, home, "snapshot", "-m", "third"))
