"""The promise, item by item: each test is one way a restore used to lose data or lie about
success (issue "Restores you can trust"), reproduced on real files and shown fixed.

Crash loops and fault injection live in test_restore_crash.py and test_restore_faults.py, the
stateful model in test_restore_stateful.py, pack and budget hardening under tests/state/."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ctrlz import RestoreError, RestoreIncomplete, Workspace
from ctrlz import toolcalls as tc
from ctrlz.state import failpoints
from ctrlz.toolcalls.restore.rewinds import rewind
from tests.conftest import is_root, make_tree, tree_state


@pytest.fixture(autouse=True)
def _disarm() -> None:
    yield
    failpoints.disarm_all()


def temp_files(root: Path) -> list[str]:
    return [os.path.join(d, n) for d, dirs, files in os.walk(root) for n in dirs + files
            if n.startswith(".ctrlz-tmp-")]


# -- 1. metadata-only changes ----------------------------------------------------------------

def test_mode_and_mtime_both_come_back_when_the_bytes_did_not_change(ws_dir: Path) -> None:
    make_tree(ws_dir, {"fmt.py": "x = 1\n"})
    os.chmod(ws_dir / "fmt.py", 0o644)
    os.utime(ws_dir / "fmt.py", ns=(1_600_000_000_000_000_000,) * 2)
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    before = tree_state(ws_dir)
    # a formatter rewrites the file with the same bytes: new mode and a new mtime
    (ws_dir / "fmt.py").write_text("x = 1\n")
    os.chmod(ws_dir / "fmt.py", 0o755)
    result = ws.rollback(base.id)
    assert tree_state(ws_dir) == before
    assert [a.op for a in result.applied] == ["chmod"]
    assert ws.oplog.next_undo() is not None


def test_an_mtime_only_change_is_put_back_too(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "same"})
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    before = tree_state(ws_dir)
    os.utime(ws_dir / "a.txt", ns=(5, 5))
    ws.rollback(base.id)
    assert tree_state(ws_dir) == before


# -- 2. a rewind never destroys a later edit, even of an ignored file ----------------------------

def _agent_writes_env(ws_dir: Path, post: bool) -> None:
    tc.begin_turn("s1", workspace=ws_dir)
    with tc.tool_call("s1", "toolu_env", workspace=ws_dir):
        tc.write_file(ws_dir / ".env", "TOKEN=placeholder\n")
    if post:
        tc.finish_tool_call("s1", "toolu_env", workspace=ws_dir)


def test_rewind_keeps_a_later_hand_edit_of_an_ignored_file(ws_dir: Path) -> None:
    make_tree(ws_dir, {".gitignore": ".env\n", "app.py": "pass\n"})
    ws = Workspace.init(ws_dir)
    _agent_writes_env(ws_dir, post=True)
    (ws_dir / ".env").write_text("TOKEN=the real secret\n")  # the user, by hand
    result = rewind(ws, "toolu_env")
    assert (ws_dir / ".env").read_text() == "TOKEN=the real secret\n"
    assert [s["path"] for s in result.skipped] == [".env"]
    assert "later edit" in result.skipped[0]["reason"]


def test_forced_rewind_captures_the_ignored_file_first_so_undo_brings_it_back(
        ws_dir: Path) -> None:
    make_tree(ws_dir, {".gitignore": ".env\n", "app.py": "pass\n"})
    ws = Workspace.init(ws_dir)
    _agent_writes_env(ws_dir, post=True)
    (ws_dir / ".env").write_text("TOKEN=the real secret\n")
    rewind(ws, "toolu_env", force=True)
    assert not (ws_dir / ".env").exists()
    ws.undo()
    assert (ws_dir / ".env").read_text() == "TOKEN=the real secret\n"


def test_rewind_without_a_recorded_result_still_leaves_the_secret_recoverable(
        ws_dir: Path) -> None:
    make_tree(ws_dir, {".gitignore": ".env\n", "app.py": "pass\n"})
    ws = Workspace.init(ws_dir)
    _agent_writes_env(ws_dir, post=False)  # no PostToolUse: nothing to compare with
    (ws_dir / ".env").write_text("TOKEN=the real secret\n")
    rewind(ws, "toolu_env")
    ws.undo()
    assert (ws_dir / ".env").read_text() == "TOKEN=the real secret\n"


def test_a_tool_call_restore_is_undoable_for_ignored_paths(ws_dir: Path) -> None:
    make_tree(ws_dir, {".gitignore": "*.log\n"})
    ws = Workspace.init(ws_dir)
    (ws_dir / "run.log").write_text("before the tool\n")
    tc.fs_snapshot("s1", "t1", [ws_dir / "run.log"], workspace=ws)
    (ws_dir / "run.log").write_text("the tool wrote this\n")
    out = tc.fs_restore("s1", "t1", workspace=ws)
    assert out["restored_paths"] == ["run.log"] and out["safety_snapshot"]
    assert (ws_dir / "run.log").read_text() == "before the tool\n"
    ws.undo()
    assert (ws_dir / "run.log").read_text() == "the tool wrote this\n"


def tool_wrote_an_ignored_log(ws_dir: Path) -> tuple[Workspace, Path]:
    """A tool call (``s1``/``t1``) rewrote ``run.log``, which the rules ignore."""
    make_tree(ws_dir, {".gitignore": "*.log\n"})
    ws = Workspace.init(ws_dir)
    log = ws_dir / "run.log"
    log.write_text("before the tool\n")
    tc.fs_snapshot("s1", "t1", [log], workspace=ws)
    log.write_text("the tool wrote this\n")
    return ws, log


def test_a_write_while_the_capture_reads_a_tool_call_path_is_in_the_safety_snapshot(
        ws_dir: Path) -> None:
    """The capture of an explicit path pairs the file's stat with its bytes; a write landing
    during the read used to pair the stat after it with the bytes before it, so the apply step
    took the file as captured and overwrote the write, which no snapshot held."""
    ws, log = tool_wrote_an_ignored_log(ws_dir)

    def the_user_appends() -> None:  # once (a call point runs once)
        with open(log, "a") as f:
            f.write("typed during the restore\n")

    failpoints.arm_call("capture-read", the_user_appends)
    out = tc.fs_restore("s1", "t1", workspace=ws)
    assert out["restored_paths"] == ["run.log"]
    assert log.read_text() == "before the tool\n"
    ws.undo()
    assert log.read_text() == "the tool wrote this\ntyped during the restore\n"


def test_a_path_that_never_holds_still_stops_the_restore_before_it_starts(ws_dir: Path
                                                                          ) -> None:
    ws, log = tool_wrote_an_ignored_log(ws_dir)
    writes = iter(range(100))

    def a_busy_writer() -> None:
        with open(log, "a") as f:
            f.write(f"line {next(writes)}\n")
        failpoints.arm_call("capture-read", a_busy_writer)  # and again, every time

    failpoints.arm_call("capture-read", a_busy_writer)
    with pytest.raises(RestoreError, match="run.log kept changing"):
        tc.fs_restore("s1", "t1", workspace=ws)
    failpoints.disarm_all()
    assert log.read_text() == "the tool wrote this\nline 0\nline 1\nline 2\n"
    assert temp_files(ws_dir) == []
    assert ws.oplog.next_undo() is None


def test_an_undo_after_a_redo_keeps_what_the_user_did_between(ws_dir: Path) -> None:
    """A redo's undo restored the state before the operation's first run, so an edit (and a
    new file) made after the undo and before the redo was gone from the workspace and from
    the undo stack, held only by a safety snapshot that retention may drop."""
    make_tree(ws_dir, {"a.txt": "A1\n"})
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    (ws_dir / "a.txt").write_text("A2\n")
    ws.rollback(base.id)
    ws.undo()
    assert (ws_dir / "a.txt").read_text() == "A2\n"
    (ws_dir / "a.txt").write_text("the user's edit after the undo\n")
    (ws_dir / "other.txt").write_text("and a new file\n")
    ws.redo()
    assert (ws_dir / "a.txt").read_text() == "A1\n" and not (ws_dir / "other.txt").exists()
    ws.undo()
    assert (ws_dir / "a.txt").read_text() == "the user's edit after the undo\n"
    assert (ws_dir / "other.txt").read_text() == "and a new file\n"
    ws.redo()
    assert (ws_dir / "a.txt").read_text() == "A1\n"


# -- 3. an OS error is an error, and leaves an undo path -------------------------------------

def test_an_io_error_half_way_is_an_error_with_an_undo_path(ws_dir: Path) -> None:
    make_tree(ws_dir, {f"f{i}.txt": f"v1 {i}\n" for i in range(40)})
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    for i in range(40):
        (ws_dir / f"f{i}.txt").write_text(f"v2 {i}\n")
    before = tree_state(ws_dir)
    failpoints.arm_error("restore-place", 5, after=10)  # EIO on the 11th rename
    with pytest.raises(Exception, match="I/O error.*`ctrlz undo` puts it back"):
        ws.rollback(base.id)
    failpoints.disarm_all()
    assert temp_files(ws_dir) == []
    assert not (ws.store_path / "restore-journal").exists()
    assert ws.oplog.next_undo().status == "failed"
    ws.undo()
    assert tree_state(ws_dir) == before


# -- 5. deep trees ---------------------------------------------------------------------------

DEPTH = 1000


def _make_chain(root: Path, depth: int) -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"at the bottom\n")
        os.close(leaf)
    finally:
        os.close(fd)


def _read_leaf(root: Path, depth: int) -> bytes | None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            try:
                nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            except FileNotFoundError:
                return None
            os.close(fd)
            fd = nxt
        leaf = os.open("leaf.txt", os.O_RDONLY, dir_fd=fd)
        try:
            return os.read(leaf, 100)
        finally:
            os.close(leaf)
    finally:
        os.close(fd)


@pytest.fixture
def chain_removed(ws_dir: Path):  # noqa: ANN201
    """pytest removes old temp dirs with shutil.rmtree, which recurses once per level."""
    yield
    subprocess.run(["rm", "-rf", str(ws_dir / "d")], check=False)


def test_a_thousand_levels_deep_roll_back_and_forth(ws_dir: Path, chain_removed: None) -> None:
    _make_chain(ws_dir, DEPTH)
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="deep")
    assert base.dirs == DEPTH
    subprocess.run(["rm", "-rf", str(ws_dir / "d")], check=True)
    ws.rollback(base.id)
    assert _read_leaf(ws_dir, DEPTH) == b"at the bottom\n"
    ws.undo()
    assert _read_leaf(ws_dir, DEPTH) is None
    ws.redo()
    assert _read_leaf(ws_dir, DEPTH) == b"at the bottom\n"
    assert [c.path for c in ws.diff(base.id).changes] == []
    assert ws.verify().ok


# -- 6. a concurrent writer keeping size and mtime -------------------------------------------

def _rewrite_keeping_size_and_mtime(path: Path, data: bytes) -> None:
    s = path.stat()
    assert len(data) == s.st_size
    path.write_bytes(data)
    os.utime(path, ns=(s.st_atime_ns, s.st_mtime_ns))  # as cp -p, rsync -t, tar x do


@pytest.mark.parametrize("instant", ["restore-journal-written", "restore-temp-written"])
def test_an_editor_writing_during_the_rollback_keeps_its_bytes(ws_dir: Path,
                                                               instant: str) -> None:
    make_tree(ws_dir, {"a.txt": "version 1\n", "b.txt": "version 1\n"})
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    (ws_dir / "a.txt").write_text("version 2\n")
    (ws_dir / "b.txt").write_text("version 2\n")
    failpoints.arm_call(instant, lambda: _rewrite_keeping_size_and_mtime(
        ws_dir / "a.txt", b"EDITOR!!!\n"))
    with pytest.raises(RestoreIncomplete, match="a.txt changed while it ran"):
        ws.rollback(base.id)
    assert (ws_dir / "a.txt").read_bytes() == b"EDITOR!!!\n"  # never overwritten blind
    assert (ws_dir / "b.txt").read_text() == "version 1\n"  # the rest was restored
    assert temp_files(ws_dir) == []
    ws.undo()
    assert (ws_dir / "b.txt").read_text() == "version 2\n"


def rollback_while_others_write(ws_dir: Path, during: Callable[[int], None]) -> None:
    """Roll ``a.txt`` back from version 2 to 1 while a build tool holds it open: ``during``
    (given that descriptor) runs just after the swap. The rollback must stop, incomplete."""
    make_tree(ws_dir, {"a.txt": "version 1\n"})
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    (ws_dir / "a.txt").write_text("version 2\n")
    held = os.open(ws_dir / "a.txt", os.O_WRONLY)
    failpoints.arm_call("restore-exchanged", lambda: during(held))
    try:
        with pytest.raises(RestoreIncomplete):
            ws.rollback(base.id)
    finally:
        os.close(held)
    assert temp_files(ws_dir) == []


def test_a_write_in_the_instant_after_the_swap_is_swapped_back(ws_dir: Path) -> None:
    """The replaced inode is checked after RENAME_EXCHANGE; a write that lands on it between
    the check and the swap is not lost: the swap is undone."""
    rollback_while_others_write(ws_dir, lambda held: os.pwrite(held, b"EDIT", 0))
    assert (ws_dir / "a.txt").read_text() == "EDITion 2\n"


def test_an_atomic_save_during_the_swap_back_keeps_every_version(ws_dir: Path) -> None:
    """The swap back after a write on the replaced inode used to delete whatever then stood
    under the temp name; when an editor had renamed a new save over the path meanwhile, that
    was the newest save. Only ctrlz's own inode is ever deleted now."""

    def two_writers(held: int) -> None:
        os.pwrite(held, b"EDIT", 0)  # through its descriptor, on the swapped-out inode
        (ws_dir / ".a.swp").write_text("the newest save\n")
        os.rename(ws_dir / ".a.swp", ws_dir / "a.txt")  # and an editor's atomic save

    rollback_while_others_write(ws_dir, two_writers)
    assert (ws_dir / "a.txt").read_text() == "the newest save\n"
    rescued = [p for p in ws_dir.iterdir() if p.name.startswith("ctrlz-rescued-")]
    assert [p.read_text() for p in rescued] == ["EDITion 2\n"]


def test_a_file_that_appears_during_the_restore_is_never_clobbered(ws_dir: Path) -> None:
    make_tree(ws_dir, {"keep.txt": "k"})
    ws = Workspace.init(ws_dir)
    (ws_dir / "new.txt").write_text("from the snapshot\n")
    base = ws.snapshot(label="base")
    os.unlink(ws_dir / "new.txt")
    failpoints.arm_call("restore-journal-written",
                        lambda: (ws_dir / "new.txt").write_text("someone else\n"))
    with pytest.raises(RestoreIncomplete, match="new.txt"):
        ws.rollback(base.id)
    assert (ws_dir / "new.txt").read_text() == "someone else\n"


# -- 8. setuid and setgid files as root ---------------------------------------------------------

@pytest.mark.skipif(not is_root(), reason="needs root to own and chown files")
@pytest.mark.parametrize("owner", [0, 65534])
def test_s_bits_are_never_restored(ws_dir: Path, owner: int) -> None:
    make_tree(ws_dir, {"tool": "#!/bin/sh\necho hi\n", "grp": "g"})
    for name, bits in (("tool", 0o4755), ("grp", 0o2755)):
        os.chown(ws_dir / name, owner, owner)
        os.chmod(ws_dir / name, bits)
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    os.unlink(ws_dir / "tool")  # deleted: the rollback recreates it (owned by root)
    (ws_dir / "grp").write_text("changed")  # re-written: a new inode owned by root
    ws.rollback(base.id)
    for name in ("tool", "grp"):
        s = (ws_dir / name).stat()
        assert not s.st_mode & (stat.S_ISUID | stat.S_ISGID), name
        assert stat.S_IMODE(s.st_mode) == 0o755
    assert (ws_dir / "tool").read_text() == "#!/bin/sh\necho hi\n"


# -- 10. hard links and several filesystems ---------------------------------------------------

def test_hard_links_come_back_as_separate_files(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "shared\n"})
    os.link(ws_dir / "a.txt", ws_dir / "b.txt")
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    os.unlink(ws_dir / "a.txt")
    os.unlink(ws_dir / "b.txt")
    ws.rollback(base.id)
    a, b = (ws_dir / "a.txt").stat(), (ws_dir / "b.txt").stat()
    assert (ws_dir / "a.txt").read_text() == (ws_dir / "b.txt").read_text() == "shared\n"
    assert a.st_ino != b.st_ino  # documented: links are not recorded, so not recreated


@pytest.mark.skipif(not is_root(), reason="needs root to mount a tmpfs")
def test_a_restore_across_two_filesystems(tmp_path: Path) -> None:
    from ctrlz import SnapshotManager

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("this machine refuses to mount a tmpfs")
    try:
        disk = tmp_path / "disk"
        make_tree(disk, {"a.txt": "on disk\n"})
        make_tree(mnt, {"b.txt": "on tmpfs\n"})
        sm = SnapshotManager(str(tmp_path / "session"), [str(disk), str(mnt)])
        sm.create_baseline()
        before = (tree_state(disk), tree_state(mnt))
        (disk / "a.txt").write_text("changed\n")
        (mnt / "b.txt").write_text("changed\n")
        sm.restore_to(0)
        assert (tree_state(disk), tree_state(mnt)) == before
        sm.close()
    finally:  # lazily: a process that still holds it must not leave the mount behind
        subprocess.run(["umount", "-l", str(mnt)], check=False)


# -- 11. tool-call restores never write through a symlinked parent ----------------------------

def test_a_tool_call_restore_refuses_a_parent_replaced_by_a_symlink(ws_dir: Path,
                                                                    tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    make_tree(ws_dir, {"sub": {"a.txt": "inside\n"}})
    ws = Workspace.init(ws_dir)
    tc.fs_snapshot("s1", "t1", [ws_dir / "sub" / "a.txt"], workspace=ws)
    subprocess.run(["rm", "-rf", str(ws_dir / "sub")], check=True)
    os.symlink(outside, ws_dir / "sub")  # planted: the restore must not follow it
    try:
        tc.fs_restore("s1", "t1", force=True, workspace=ws)
    except Exception as exc:  # refusing loudly is fine too
        assert "Traceback" not in str(exc)
    assert list(outside.iterdir()) == []
    assert temp_files(ws_dir) == []


# -- the journal: the next command cleans up after a crash ----------------------------------------

def test_the_next_command_cleans_up_after_a_killed_rollback(ws_dir: Path, tmp_path: Path) -> None:
    make_tree(ws_dir, {f"f{i}.txt": f"v1 {i}\n" for i in range(30)})
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    for i in range(30):
        (ws_dir / f"f{i}.txt").write_text(f"v2 {i}\n")
    before = tree_state(ws_dir)
    code = ("import sys; from ctrlz import Workspace; from ctrlz.state import failpoints\n"
            "failpoints.arm('restore-place', after=12)\n"
            "Workspace.open(sys.argv[1]).rollback(sys.argv[2])\n")
    proc = subprocess.run([sys.executable, "-c", code, str(ws_dir), base.id],
                          capture_output=True, env=os.environ)
    assert proc.returncode == -9
    assert (ws.store_path / "restore-journal").exists()
    cli = Path(sys.executable).parent / "ctrlz"
    status = subprocess.run([str(cli), "status"], cwd=ws_dir, capture_output=True, text=True)
    assert status.returncode == 0, status.stderr
    assert "interrupted rollback" in status.stderr
    assert temp_files(ws_dir) == []
    assert not (ws.store_path / "restore-journal").exists()
    ws = Workspace.open(ws_dir)
    assert ws.verify().ok
    ws.undo()
    assert tree_state(ws_dir) == before


# -- many entries in one directory --------------------------------------------------------------

@pytest.mark.parametrize("count", [20_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_a_huge_directory_restores_only_what_changed(ws_dir: Path, count: int) -> None:
    big = ws_dir / "big"
    big.mkdir()
    for i in range(count):
        (big / f"{i:06d}").write_bytes(b"%d\n" % i)
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    for i in range(0, count, count // 10):
        (big / f"{i:06d}").write_text("changed\n")
    os.unlink(big / "000001")
    result = ws.rollback(base.id)
    assert len(result.applied) == 11
    assert (big / "000000").read_bytes() == b"0\n" and (big / "000001").exists()
    assert len(os.listdir(big)) == count


# -- a file whose place a directory holds ------------------------------------------------------

@pytest.mark.parametrize("paths", [None, ["cfg"]])
def test_a_file_that_a_kept_directory_stands_in_for_is_reported_not_counted(
        ws_dir: Path, paths: list[str] | None) -> None:
    """The snapshot has a file `cfg`; now `cfg/` is a directory that also holds an ignored
    file, so it cannot be removed. The rollback used to drop the write, count "1 created" and
    succeed."""
    make_tree(ws_dir, {".gitignore": "*.log\n", "cfg": "setting=1\n"})
    ws = Workspace.init(ws_dir)
    base = ws.snapshot(label="base")
    (ws_dir / "cfg").unlink()
    make_tree(ws_dir, {"cfg": {"a.txt": "tracked\n", "run.log": "debug\n"}})
    with pytest.raises(RestoreIncomplete, match="cfg could not be put in place") as info:
        ws.rollback(base.id, paths=paths)
    result = info.value.result
    assert result.counts()["created"] == 0 and result.counts()["deleted"] == 1
    assert [c.reason for c in result.conflicts] == [
        "not restored: a directory stands there holding files the restore leaves alone; "
        "move them away and run it again"]
    assert (ws_dir / "cfg" / "run.log").read_text() == "debug\n"
    ws.undo()
    assert (ws_dir / "cfg" / "a.txt").read_text() == "tracked\n"
