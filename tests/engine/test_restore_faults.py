"""OS errors in the middle of an in-place restore: injected at the apply points, and for real
(a low open-file limit over hundreds of packs, a file-size limit, a full tmpfs, a read-only
folder as an unprivileged user).

Whatever fails, the restore either completes with the exact tree or raises a
:class:`~ctrlz.errors.RestoreError` whose one-line message says what failed and that ``ctrlz undo``
puts the previous state back; it never returns normally with a partial tree. Afterwards there is
no temp file in the workspace and no journal in the store, the undo stack holds the restore with
status ``failed``, and ``undo`` brings back the exact tree from before. Through the CLI the same
failure exits with 7 and one ``ctrlz: error: …`` line, without a traceback.
"""

from __future__ import annotations

import errno
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz import toolcalls as tc
from ctrlz.engine.restore import journal
from ctrlz.errors import RestoreError
from ctrlz.state import failpoints
from tests.conftest import NOBODY, OtherUser, make_tree, mounted, tree_state
from tests.engine.test_restore_crash import (
    CTRLZ,
    SESSION,
    WORKER,
    Case,
    loose,
    prepare,
    temp_files,
    worker_env,
)

HINTS = {
    errno.EIO: "I/O error",
    errno.ENOSPC: "no space left",
    errno.EMFILE: "too many open files",
    errno.EACCES: "permission denied",
}


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    failpoints.disarm_all()
    yield
    failpoints.disarm_all()


def one_line_error(proc: subprocess.CompletedProcess, code: int = 7) -> str:
    """A failed CLI run: the exit code, one line on stderr, no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(("ctrlz:", "error:")), lines[0]
    return lines[0]


def assert_clean(root: Path, store: Path) -> None:
    assert temp_files(root) == []
    assert not journal.pending(store)


def assert_failed_entry(ws: Workspace, kind: str) -> None:
    op = ws.oplog.next_undo()
    assert op is not None and op.kind == kind and op.status == "failed", op


def restore_call(op: str) -> Callable[[Workspace], object]:
    return {
        "rollback": lambda ws: ws.rollback("base"),
        "revert": lambda ws: ws.revert("lib"),
        "undo": lambda ws: ws.undo(),
        "redo": lambda ws: ws.redo(),
        "rewind": lambda ws: tc.rewind(ws, "t1", session_id=SESSION),
        "fs_restore": lambda ws: tc.fs_restore(SESSION, "t1", workspace=ws),
    }[op]


def fail_with(case: Case, op: str, point: str, code: int, after: int) -> tuple[Workspace, str]:
    """Run the restore with an OSError armed; it must raise RestoreError and clean up."""
    ws = Workspace.open(case.root, home=case.home)
    failpoints.arm_error(point, code, after=after)
    try:
        with pytest.raises(RestoreError) as info:
            restore_call(op)(ws)
    finally:
        failpoints.disarm_all()
    message = str(info.value)
    assert "\n" not in message
    assert HINTS[code] in message, message
    assert_clean(case.root, case.store)
    assert ws.verify().ok
    return ws, message


# -- injected at the apply points --------------------------------------------------------------

# (point, after): rollback makes 8 removals, then 16 writes in one batch (temp files first,
# then each placed; 9 of them replace a file), then the directory modes, then the sync
APPLY_POINTS = [("restore-remove", 3), ("restore-temp-written", 5), ("restore-place", 5),
                ("restore-exchanged", 2), ("restore-before-sync", 0)]


@pytest.mark.parametrize("code", list(HINTS), ids=[errno.errorcode[c] for c in HINTS])
@pytest.mark.parametrize(("point", "after"), APPLY_POINTS, ids=[p for p, _ in APPLY_POINTS])
def test_injected_error_during_rollback(point: str, after: int, code: int,
                                        tmp_path: Path) -> None:
    case = prepare("rollback", tmp_path)
    ws, message = fail_with(case, "rollback", point, code, after)
    with ws:
        assert "ctrlz undo" in message
        if point != "restore-before-sync":  # there every change was made, none made durable
            assert tree_state(case.root) != case.target
        assert_failed_entry(ws, "rollback")
        ws.undo()
        assert tree_state(case.root) == case.before
        assert_clean(case.root, case.store)
        ws.rollback("base")  # once the disk is well again, the restore goes through
        assert tree_state(case.root) == case.target


@pytest.mark.parametrize("point", ["restore-journal-written", "restore-before-commit"])
def test_injected_error_right_after_the_journal_or_before_the_commit(point: str,
                                                                     tmp_path: Path) -> None:
    case = prepare("rollback", tmp_path)
    ws, message = fail_with(case, "rollback", point, errno.EIO, 0)
    with ws:
        assert "ctrlz undo" in message
        assert_failed_entry(ws, "rollback")
        ws.undo()
        assert tree_state(case.root) == case.before


@pytest.mark.parametrize(("op", "point", "after"), [
    ("revert", "restore-place", 3),
    ("revert", "restore-temp-written", 2),
    ("rewind", "restore-place", 4),
    ("rewind", "restore-remove", 0),
    ("fs_restore", "restore-place", 1),
])
def test_injected_eio_during_other_restores(op: str, point: str, after: int,
                                            tmp_path: Path) -> None:
    case = prepare("rewind" if op == "fs_restore" else op, tmp_path)
    before = tree_state(case.root)
    ws, message = fail_with(case, op, point, errno.EIO, after)
    with ws:
        assert "ctrlz undo" in message
        assert_failed_entry(ws, "toolcall" if op == "fs_restore" else op)
        ws.undo()
        assert tree_state(case.root) == before
        restore_call(op)(ws)
        if op == "rewind":
            assert loose(tree_state(case.root)) == case.target
        elif op == "revert":
            assert tree_state(case.root) == case.target


@pytest.mark.parametrize("op", ["undo", "redo"])
@pytest.mark.parametrize("point", ["restore-remove", "restore-place"])
def test_injected_eio_during_undo_or_redo_is_finished_by_running_it_again(
        op: str, point: str, tmp_path: Path) -> None:
    case = prepare(op, tmp_path)
    ws, message = fail_with(case, op, point, errno.EIO, 4)
    with ws:
        assert f"ctrlz {op}" in message
        assert tree_state(case.root) != case.target
        restore_call(op)(ws)
        assert tree_state(case.root) == case.target
        assert_clean(case.root, case.store)


def test_redo_after_a_failed_then_finished_undo_brings_back_the_rollback(tmp_path: Path) -> None:
    case = prepare("undo", tmp_path)  # before: the tree the rollback produced
    ws, _ = fail_with(case, "undo", "restore-place", errno.EIO, 4)
    with ws:
        ws.undo()
        assert tree_state(case.root) == case.target
        ws.redo()
        assert tree_state(case.root) == case.before


# -- the CLI over an injected error ------------------------------------------------------------

def run_cli_in_worker(case: Case, args: str, point: str, code: int,
                      after: int) -> subprocess.CompletedProcess:
    """``ctrlz ARGS`` through the CLI's own main, in a process in which ``point`` is armed."""
    return subprocess.run([sys.executable, str(WORKER), str(case.home), str(case.root),
                           f"cli:{args}", "error", point, str(after), str(code)],
                          cwd=case.root, env=worker_env(case.home), capture_output=True,
                          text=True, timeout=120)


def ctrlz(root: Path, home: Path, *args: str,
          preexec: Callable[[], None] | None = None) -> subprocess.CompletedProcess:
    """The real console script, in the workspace, against the store under ``home``."""
    return subprocess.run([CTRLZ, *args], cwd=root, env=worker_env(home), capture_output=True,
                          text=True, timeout=120, preexec_fn=preexec)


def test_cli_rollback_with_eio_exits_7_with_one_line(tmp_path: Path) -> None:
    case = prepare("rollback", tmp_path)
    proc = run_cli_in_worker(case, "rollback base", "restore-place", errno.EIO, 3)
    line = one_line_error(proc)
    assert "I/O error" in line and "ctrlz undo" in line
    assert_clean(case.root, case.store)
    with Workspace.open(case.root, home=case.home) as ws:
        assert_failed_entry(ws, "rollback")
    undo = ctrlz(case.root, case.home, "undo")
    assert undo.returncode == 0 and "Traceback" not in undo.stderr, undo.stderr
    assert tree_state(case.root) == case.before


# -- for real: a low open-file limit over a few hundred packs ---------------------------------

def limited(nofile: int | None = None, fsize: int | None = None) -> Callable[[], None]:
    def apply() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return apply


def test_rollback_under_ulimit_n_64_over_hundreds_of_packs(ws_dir: Path, ctrlz_home: Path) -> None:
    names = [f"f{i:03d}.txt" for i in range(200)]
    for name in names:
        (ws_dir / name).write_text(f"v0 {name}\n")
    with Workspace.init(ws_dir, home=ctrlz_home) as ws:
        for name in names:  # every snapshot writes its objects to a pack of its own
            (ws_dir / name).write_text(f"v1 {name}\n" * 3)
            snap = ws.snapshot(type="auto")
        packs = list((ws.store_path / "packs").glob("*.pack"))
        assert len(packs) >= 200
        store = ws.store_path
    target = tree_state(ws_dir)
    for name in names:
        (ws_dir / name).write_text(f"v2 {name}\n")
    before = tree_state(ws_dir)
    proc = ctrlz(ws_dir, ctrlz_home, "rollback", snap.id, preexec=limited(64))
    assert proc.returncode == 0, proc.stderr  # pack fds are an LRU: it fits in 64
    assert tree_state(ws_dir) == target
    assert_clean(ws_dir, store)
    proc = ctrlz(ws_dir, ctrlz_home, "undo", preexec=limited(64))
    assert proc.returncode == 0, proc.stderr
    assert tree_state(ws_dir) == before


# -- for real: a file-size limit (EFBIG) -----------------------------------------------------

def test_rollback_of_a_file_larger_than_rlimit_fsize(ws_dir: Path, ctrlz_home: Path) -> None:
    make_tree(ws_dir, {"big.bin": random.Random(1).randbytes(3 << 20),
                       "a.txt": "a\n", "b.txt": "b\n", "dir": {"c.txt": "c\n"}})
    with Workspace.init(ws_dir, home=ctrlz_home) as ws:
        ws.snapshot(label="base")
        store = ws.store_path
    target = tree_state(ws_dir)
    (ws_dir / "big.bin").write_text("small now\n")
    (ws_dir / "a.txt").write_text("a changed\n")
    (ws_dir / "dir" / "c.txt").unlink()
    before = tree_state(ws_dir)
    line = one_line_error(ctrlz(ws_dir, ctrlz_home, "rollback", "base",
                                preexec=limited(fsize=1 << 20)))
    assert "file too large" in line and "ctrlz undo" in line
    assert_clean(ws_dir, store)
    with Workspace.open(ws_dir, home=ctrlz_home) as ws:
        assert_failed_entry(ws, "rollback")
        ws.undo()
        assert tree_state(ws_dir) == before
        ws.rollback("base")  # without the limit it goes through
        assert tree_state(ws_dir) == target


# -- for real: a full disk ---------------------------------------------------------------------

@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (root only)."""
    yield from mounted(tmp_path / "mnt", "-t", "tmpfs", "-o", "size=4m", "tmpfs")


def test_rollback_that_does_not_fit_on_the_disk(small_fs: Path, ctrlz_home: Path) -> None:
    root = small_fs / "ws"
    make_tree(root, {"big.bin": random.Random(2).randbytes(int(2.5 * (1 << 20))),
                     "a.txt": "a\n", "src": {f"m{i}.py": f"m{i}\n" for i in range(5)}})
    with Workspace.init(root, home=ctrlz_home) as ws:  # the store is on another disk
        ws.snapshot(label="base")
        store = ws.store_path
    target = tree_state(root)
    (root / "a.txt").write_text("a changed\n")
    (root / "src" / "m1.py").unlink()
    (root / "src" / "m2.py").write_text("m2 changed\n")
    (root / "big.bin").write_bytes(random.Random(3).randbytes(int(2.5 * (1 << 20))))
    before = tree_state(root)
    # the old and the new big.bin do not both fit: the temp file hits ENOSPC
    line = one_line_error(ctrlz(root, ctrlz_home, "rollback", "base"))
    assert "no space left" in line and "ctrlz undo" in line
    assert_clean(root, store)
    with Workspace.open(root, home=ctrlz_home) as ws:
        assert_failed_entry(ws, "rollback")
        ws.undo()
        assert tree_state(root) == before
        with pytest.raises(RestoreError, match="no space left") as info:
            ws.rollback("base")  # the same through the API
        assert "\n" not in str(info.value) and "ctrlz undo" in str(info.value)
        assert_clean(root, store)
        assert_failed_entry(ws, "rollback")
        ws.undo()
        assert tree_state(root) == before
        assert ws.verify().ok
        (root / "big.bin").unlink()  # make room: now it fits
        ws.rollback("base")
        assert tree_state(root) == target


# -- for real: permission denied -------------------------------------------------------------

def test_rollback_into_a_read_only_folder(other_user: OtherUser) -> None:
    """As an unprivileged user (as root: uid 65534 through setpriv), a restore that must write
    into a read-only folder of another user fails with EACCES. (One of the user's own is opened
    up while the restore writes in it: see test_hostile.py's read-only directory test.)"""
    base = Path(tempfile.mkdtemp(prefix="ctrlz-eacces-"))  # tmp_path is root's alone
    os.chmod(base, 0o755)
    try:
        root, home = base / "ws", base / "home"
        make_tree(root, {"ro": {"a.txt": "a\n", "b.txt": "b\n"},
                         "rw": {"c.txt": "c\n", "d.txt": "d\n"}, "top.txt": "top\n"})
        with Workspace.init(root, home=home) as ws:
            ws.snapshot(label="base")
            store = ws.store_path
        (root / "ro" / "a.txt").write_text("a changed\n")
        (root / "rw" / "c.txt").write_text("c changed\n")
        (root / "rw" / "new.txt").write_text("new\n")
        (root / "top.txt").unlink()
        os.chmod(root / "ro", 0o555)
        env = {**os.environ, "CTRLZ_HOME": str(home), "HOME": str(base),
               "XDG_CONFIG_HOME": str(base / "config"), "XDG_DATA_HOME": str(base / "data")}
        for dirpath, dirnames, filenames in os.walk(base):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.lchown(name, NOBODY, NOBODY)
        os.lchown(root / "ro", 0, 0)  # root's: the restore may not open it up
        before = tree_state(root)

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(other_user.ctrlz_command(*args), cwd=root, env=env,
                                  capture_output=True, text=True, timeout=120)

        line = one_line_error(cli("rollback", "base"))
        assert "permission denied" in line and "ctrlz undo" in line
        assert_clean(root, store)
        undo = cli("undo")
        assert undo.returncode == 0 and "Traceback" not in undo.stderr, undo.stderr
        assert tree_state(root) == before
        assert_clean(root, store)
        with Workspace.open(root, home=home) as ws:
            [op] = ws.oplog.operations()
            assert (op.kind, op.status, op.undone) == ("rollback", "failed", True)
    finally:
        if (base / "ws" / "ro").exists():
            os.chmod(base / "ws" / "ro", 0o755)
        shutil.rmtree(base, ignore_errors=True)
