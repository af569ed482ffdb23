"""Hostile input: odd names, special files, unreadable and growing files, a full disk,
concurrent writers. Nothing is lost and every failure is one clear error."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz import RestoreError, StoreFull, StoreLocked, UsageError, Workspace
from ctrlz.state.store.lock import StoreLock
from tests.conftest import is_root, make_tree, mounted, tree_state


def test_non_utf8_names_round_trip(ws_dir: Path) -> None:
    base = os.fsencode(ws_dir)
    for name in (b"caf\xe9.txt", b"\xff\xfe", b"new\nline", b"sp ace", b"tab\tname"):
        with open(base + b"/" + name, "wb") as f:
            f.write(name * 3)
    os.mkdir(base + b"/d\x80ir")
    with open(base + b"/d\x80ir/inner\xc3", "wb") as f:
        f.write(b"inner")
    before = tree_state(ws_dir)
    ws = Workspace.init(ws_dir)
    ws.snapshot(label="base")
    shutil.rmtree(base + b"/d\x80ir")
    os.unlink(base + b"/caf\xe9.txt")
    ws.restore("base")
    assert tree_state(ws_dir) == before


def test_fifo_in_the_way_is_never_opened_or_deleted(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "a"})
    ws = Workspace.init(ws_dir)
    ws.snapshot(label="base")
    os.unlink(ws_dir / "a.txt")
    os.mkfifo(ws_dir / "a.txt")  # a FIFO where the file was: the scan skips it
    result = ws.restore("base")  # must not block on open(), must not delete it
    assert (ws_dir / "a.txt").is_fifo()
    assert any(s.path == b"0/a.txt" for s in result.skipped)


def _without_dac_override() -> list[str]:
    """A command prefix that runs as this user but without root's power to ignore file
    permissions, so permission bits bite even in a root CI container."""
    if not is_root():
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to drop CAP_DAC_OVERRIDE as root")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}"]


def test_unreadable_files_are_reported_not_fatal(ws_dir: Path, tmp_path: Path) -> None:
    make_tree(ws_dir, {"ok.txt": "fine", "secret.txt": "nope", "sub": {"x": "x"}})
    os.chmod(ws_dir / "secret.txt", 0o000)
    os.chmod(ws_dir / "sub", 0o000)
    code = ("from ctrlz import Workspace; "
            f"ws = Workspace.init({str(ws_dir)!r}); s = ws.snapshot(); "
            "print(s.files, sorted((k.path.decode(), k.reason) for k in s.skipped))")
    try:
        proc = subprocess.run([*_without_dac_override(), sys.executable, "-c", code],
                              capture_output=True, text=True)
    finally:
        os.chmod(ws_dir / "sub", 0o755)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("1 [('0/secret.txt', 'unreadable: Permission denied'), "
                                   "('0/sub', 'directory unreadable: Permission denied')]")
    # and a restore never deletes what it could not read
    ws = Workspace.open(ws_dir)
    ws.restore("latest")
    assert (ws_dir / "secret.txt").exists() and (ws_dir / "sub" / "x").exists()


def test_a_read_only_directory_a_rollback_put_back_does_not_stop_its_undo(
        ws_dir: Path) -> None:
    """Directory modes are set last, after every write; so the undo of a rollback that made
    `docs` read-only again (as the snapshot had it) could not write `docs/b` back, and said
    "run `ctrlz undo` again to finish it" on every try."""
    make_tree(ws_dir, {"docs": {"a": "a\n"}})
    os.chmod(ws_dir / "docs", 0o555)
    code = """if True:
        import os, sys
        from ctrlz import Workspace
        root = sys.argv[1]
        ws = Workspace.init(root)
        base = ws.snapshot(label="base")
        os.chmod(f"{root}/docs", 0o755)
        open(f"{root}/docs/b", "w").write("USERWORK\\n")
        open(f"{root}/docs/a", "w").write("a2\\n")
        ws.rollback(base.id)
        assert oct(os.stat(f"{root}/docs").st_mode & 0o777) == "0o555"
        assert not os.path.exists(f"{root}/docs/b")
        ws.undo()
        print(open(f"{root}/docs/b").read().strip(), open(f"{root}/docs/a").read().strip(),
              oct(os.stat(f"{root}/docs").st_mode & 0o777))
        ws.rollback(base.id)  # and a rollback into a read-only directory, as it is now
        print(sorted(os.listdir(f"{root}/docs")), oct(os.stat(f"{root}/docs").st_mode & 0o777))
    """
    try:
        proc = subprocess.run([*_without_dac_override(), sys.executable, "-c", code,
                               str(ws_dir)], capture_output=True, text=True)
    finally:
        os.chmod(ws_dir / "docs", 0o755)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["USERWORK a2 0o755", "['a'] 0o555"]


def test_file_growing_while_read_is_skipped_with_a_report(ws_dir: Path) -> None:
    make_tree(ws_dir, {"steady.txt": "s"})
    stop = threading.Event()
    path = ws_dir / "growing.log"
    path.write_bytes(b"")

    def grow() -> None:  # keeps growing, bounded so no size limit is ever what trips
        with open(path, "ab", buffering=0) as f:
            while not stop.is_set():
                f.write(b"x" * 65536)
                if f.tell() > 16 << 20:
                    f.truncate(0)

    t = threading.Thread(target=grow)
    t.start()
    try:
        time.sleep(0.05)
        ws = Workspace.init(ws_dir)
        snap = ws.snapshot()
    finally:
        stop.set()
        t.join()
    # either it was caught in a stable instant or it is reported; never a torn object
    reasons = {s.path: s.reason for s in snap.skipped}
    if b"0/growing.log" in reasons:
        assert "changing while being read" in reasons[b"0/growing.log"]
    assert ws.verify().ok


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs (root only)."""
    yield from mounted(tmp_path / "small", "-t", "tmpfs", "-o", "size=3m", "tmpfs")


def test_full_store_disk_is_a_clear_error_and_loses_nothing(ws_dir: Path, small_disk: Path) -> None:
    make_tree(ws_dir, {"small.txt": "small"})
    ws = Workspace.init(ws_dir, home=small_disk / "home")
    ws.snapshot(label="base")
    (ws_dir / "big.bin").write_bytes(os.urandom(6 << 20))
    with pytest.raises(StoreFull, match="no space left"):
        ws.snapshot(label="too big")
    assert [s.label for s in ws.snapshots()] == ["base"]
    (ws_dir / "big.bin").unlink()
    assert ws.verify().ok
    ws.snapshot(label="fits again")
    assert ws.verify().ok and ws.verify().orphans == 0


@pytest.mark.parametrize("first", ["rm", "gc"])
def test_removing_snapshots_on_a_store_a_failed_snapshot_filled_works(
        ws_dir: Path, small_disk: Path, first: str) -> None:
    """A snapshot that ran out of space takes its partial pack back with it (only a killed
    writer leaves files for the next one to sweep); `ctrlz rm`, what a user runs to make room,
    used to fail with "the store's catalog is unreadable: cannot rollback - no transaction is
    active" (SQLite had rolled back by itself), and `ctrlz gc` must work there too."""
    make_tree(ws_dir, {"small.txt": "small"})
    env = {**os.environ, "CTRLZ_HOME": str(small_disk / "home"), "CTRLZ_DAEMON": "0"}
    ctrlz = str(Path(sys.executable).parent / "ctrlz")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ctrlz, *args], cwd=ws_dir, env=env, capture_output=True,
                              text=True, timeout=120)

    assert run("init").returncode == 0 and run("snapshot", "-m", "base").returncode == 0
    for n in range(1, 20):
        (ws_dir / "big.bin").write_bytes(os.urandom(600_000))
        failed = run("snapshot", "-m", f"r{n}")
        if failed.returncode:
            break
    assert failed.returncode == 6 and "no space left" in failed.stderr
    assert "left files in the store" not in run("status").stdout  # the failed write cleaned up
    if first == "gc":
        collected = run("gc")
        assert collected.returncode == 0, collected.stderr
        assert "files a failed or killed write had left" not in collected.stdout
    removed = run("rm", "r1", "r2")
    assert removed.returncode == 0, removed.stderr
    assert "unreadable" not in removed.stderr
    assert run("verify").returncode == 0
    assert "left files in the store" not in run("status").stdout


def open_packs(under: Path) -> list[str]:
    """Packs under ``under`` this process holds open (other tests' readers may cache theirs)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under)) and target.endswith((".pack", ".pack (deleted)")):
            found.append(target)
    return found


@pytest.fixture
def disk_40m(tmp_path: Path) -> Iterator[Path]:
    yield from mounted(tmp_path / "disk", "-t", "tmpfs", "-o", "size=40m", "tmpfs")


def test_a_disk_full_at_the_commit_lets_go_of_the_pack(ws_dir: Path, disk_40m: Path) -> None:
    """The disk fills as the queue of files compressed behind the walk is written out, at the
    commit: the writer used to keep its pack open, and in a long-lived process (the daemon)
    that descriptor kept the pack's blocks after the next recovery deleted it, so the next
    snapshot failed for a full disk too, after the user had made room."""
    disk = disk_40m
    ws = Workspace.init(ws_dir, home=disk / "home")
    ws.snapshot(label="base")
    rng = random.Random(1)
    (ws_dir / "many").mkdir()
    for i in range(266):
        (ws_dir / "many" / f"f{i:04d}").write_bytes(rng.randbytes(100_000))
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(bytes(free - (256 * 100_000 + 600_000)))
    with pytest.raises(StoreFull, match="no space left"):
        ws.snapshot(label="fails")
    assert open_packs(disk) == []
    (disk / "filler").unlink()
    ws.snapshot(label="after")
    assert [s.label for s in ws.snapshots()] == ["base", "after"]
    assert open_packs(disk) == []
    assert ws.verify().ok and ws.verify().orphans == 0
    ws.close()


def test_full_workspace_disk_during_restore(small_disk: Path, tmp_path: Path) -> None:
    root = small_disk / "ws"
    make_tree(root, {"a.bin": os.urandom(1 << 20), ".gitignore": "*.log\n"})
    ws = Workspace.init(root, home=tmp_path / "home")
    ws.snapshot(label="base")
    os.unlink(root / "a.bin")
    # an ignored file fills the disk: the restore may not delete it to make room
    (root / "filler.log").write_bytes(os.urandom((2 << 20) + (512 << 10)))
    with pytest.raises(RestoreError, match="no space left.*`ctrlz undo` puts it back"):
        ws.restore("base")
    # nothing the user had is gone, no temp files are left, and the undo path exists
    assert (root / "filler.log").stat().st_size == (2 << 20) + (512 << 10)
    assert not [p for p in root.iterdir() if p.name.startswith(".ctrlz-tmp-")]
    assert any(s.type == "safety" for s in ws.snapshots())
    op = ws.oplog.next_undo()
    assert op is not None and op.status == "failed"


def test_concurrent_writers_are_serialised_and_readers_are_not_blocked(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "a"})
    ws = Workspace.init(ws_dir)
    ws.snapshot(label="base")
    holder = StoreLock(ws.store_path / "lock")
    holder.acquire()
    try:
        # readers work while a writer holds the lock
        assert [s.label for s in ws.snapshots()] == ["base"]
        assert ws.diff().changes == []
        other = StoreLock(ws.store_path / "lock", timeout=0.2)
        with pytest.raises(StoreLocked, match="another ctrlz process"):
            other.acquire()
    finally:
        holder.release()


def test_parallel_snapshot_processes_never_corrupt(ws_dir: Path, tmp_path: Path) -> None:
    make_tree(ws_dir, {f"f{i}.txt": f"{i}" * 100 for i in range(200)})
    Workspace.init(ws_dir).close()
    code = ("import sys; from ctrlz import Workspace\n"
            "ws = Workspace.open(sys.argv[1])\n"
            "for i in range(5):\n"
            "    open(sys.argv[1] + f'/w{sys.argv[2]}.txt', 'w').write(str(i))\n"
            "    ws.snapshot(type='auto')\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(ws_dir), str(n)])
             for n in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    ws = Workspace.open(ws_dir)
    assert ws.verify().ok


_EXHAUST = r"""
import json, os, resource, sys
from ctrlz import CtrlzError, LimitExceeded, Workspace
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
root, many = sys.argv[1], sys.argv[2] == "many"
ws = Workspace.init(root)
def touch(round):
    if many:  # past INLINE_FIRST: most of them read in batches on the small files' threads
        for i in range(800):
            with open(f"{root}/a/f{i}.txt", "w") as f:
                f.write(f"{round} {i}\n" * 20)
        return
    for name in ("a/m0", "a/b/big0", "a/f0.txt"):  # something to read in every round
        with open(f"{root}/{name}", "ab") as f:
            f.write(b"more")
touch(-1)
ws.snapshot(label="one")  # (what it imports is imported before the descriptors run out)
outcomes = []
for spare in range(0, 12, 2) if many else range(12):
    touch(spare)
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for _ in range(spare):
        os.close(held.pop())
    try:
        snap = ws.snapshot(type="auto")
        outcome = ["ok", [k.reason for k in snap.skipped]]
    except LimitExceeded as exc:
        outcome = ["limit", str(exc)]
    except CtrlzError as exc:
        outcome = ["other", f"{type(exc).__name__}: {exc}"]
    except OSError as exc:  # a plain OSError would be a one-line error too, never a skip
        outcome = ["oserror", exc.errno]
    finally:
        for fd in held:
            os.close(fd)
    outcomes.append(outcome)
print(json.dumps({"outcomes": outcomes, "verify": ws.verify().ok,
                  "last": [k.reason for k in ws.snapshot(type="auto").skipped]}))
"""


def test_running_out_of_descriptors_fails_a_snapshot_and_never_skips_files(
        ws_dir: Path) -> None:
    """With ``ulimit -n`` all but spent, a snapshot either completes or fails with one clear
    error. It used to list readable files and a directory as skipped ("unreadable: Too many
    open files") and report success: a snapshot missing data it could have read."""
    make_tree(ws_dir, {"a": {f"f{i}.txt": f"{i}" for i in range(20)}})
    for i in range(8):  # files of 1-4 MiB are read on the reader's threads, several at once
        (ws_dir / "a" / f"m{i}").write_bytes(os.urandom(1_500_000))
    (ws_dir / "a" / "b").mkdir()
    for i in range(4):  # and files past 4 MiB become loose objects
        (ws_dir / "a" / "b" / f"big{i}").write_bytes(os.urandom(5_000_000))
    _exhaust(ws_dir, "few")


def test_a_path_past_path_max_that_is_there_is_not_refused_as_naming_nothing(
        ws_dir: Path) -> None:
    """`os.path.lexists` says False past PATH_MAX, so a rollback of such a path was refused
    as "in neither SNAP nor the working tree"."""
    ws = Workspace.init(ws_dir)
    fd = os.open(ws_dir, os.O_RDONLY)
    try:
        for _ in range(1500):  # 6,000 bytes of path: past PATH_MAX (4096)
            os.mkdir("ddd", dir_fd=fd)
            nxt = os.open("ddd", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        os.close(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        os.close(fd)
        base = ws.snapshot(label="base")
        deep = "/".join(["ddd"] * 1500)
        ws.rollback(base.id, paths=[deep])  # what the snapshot could not reach stays
        with pytest.raises(UsageError, match="in neither"):
            ws.rollback(base.id, paths=[deep + "/nothing"])
    finally:  # pytest's own clean-up of old temp directories recurses, and would fail
        subprocess.run(["rm", "-rf", str(ws_dir / "ddd")], check=True)


def test_a_path_through_a_loop_of_links_is_refused_as_naming_nothing(ws_dir: Path) -> None:
    """A path under a symlink that points at itself is no path in the working tree (as
    `os.path.lexists` says); the PATH_MAX fix above had taken its ELOOP for "it is there",
    and the rollback of nothing then said success. Found by the stateful test."""
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    os.symlink("a", ws_dir / "a")
    with pytest.raises(UsageError, match="in neither"):
        ws.rollback(base.id, paths=["a/a"])
    assert os.readlink(ws_dir / "a") == "a"


def test_running_out_of_descriptors_while_small_files_are_read_on_threads(
        ws_dir: Path) -> None:
    """The same with 800 changed small files per snapshot, most of them read in batches on
    the reader's threads (a first snapshot's way): a descriptor a thread could not get fails
    the snapshot with the limit's message, never skips the file."""
    (ws_dir / "a").mkdir()
    _exhaust(ws_dir, "many")


def _exhaust(ws_dir: Path, files: str) -> None:
    """Run :data:`_EXHAUST` on ``ws_dir``: every snapshot taken is complete, every one that
    fails says which limit to raise, and at least one met the limit."""
    import json

    proc = subprocess.run([sys.executable, "-c", _EXHAUST, str(ws_dir), files],
                          capture_output=True, text=True, env={**os.environ, "CTRLZ_DAEMON": "0"})
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    for kind, detail in res["outcomes"]:
        assert kind != "ok" or detail == [], detail  # a snapshot taken is complete
        if kind == "limit":
            assert "too many open files" in detail and "ulimit -n" in detail, detail
        if kind in ("oserror", "other"):
            pytest.fail(f"{detail} instead of the limit's message")
    assert [k for k, _ in res["outcomes"]].count("limit") > 0  # the limit was really met
    assert res["verify"] and res["last"] == []
