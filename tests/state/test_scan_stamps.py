"""Folder stamps (git's untracked cache): a scan without a watcher does not read a folder whose
own stat is the one the stat cache keeps for it, and stats the names it knows instead.

The shortcut must never miss a change. Each test below makes a change a stamp could hide if the
rule were wrong (a name added behind a folder's mtime put back, a file or folder replaced under
the same name, bytes edited with size and mtime kept, rules that changed while the folder did
not, a file system mounted over a folder) and checks that a scan trusting the cache gives what
a scan from scratch gives, and that the change is in it. A property test then runs random edits
against the same oracle.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctrlz import Workspace
from ctrlz.engine.snapshot import WorkingState
from ctrlz.state.scan.blind import fs_type
from ctrlz.state.scan.walk import STAMPED_FS
from tests.conftest import mounted
from tests.state.test_scan_same import _hostile_tree, _same_as_scratch, _trusted_snapshot


@pytest.fixture(autouse=True)
def _stamped_fs(tmp_path: Path) -> None:
    kind = fs_type(os.fsencode(os.path.realpath(tmp_path)))
    if kind not in STAMPED_FS:
        pytest.skip(f"the temporary folder is on {kind!r}, where folders are not stamped")


def _ws(tmp_path: Path) -> tuple[Workspace, Path]:
    root = tmp_path / "ws"
    _hostile_tree(root)
    (root / "wide" / "sub").mkdir()
    (root / "wide" / "sub" / "inner").write_bytes(b"inner")
    ws = Workspace.init(root, home=tmp_path / "home")
    _trusted_snapshot(ws)  # takes the stamps
    _trusted_snapshot(ws)  # and lists by them
    return ws, root


def _names(state: WorkingState, rel: bytes) -> set[bytes]:
    return set(state.scans[0].cache[rel][1])


def test_a_no_change_rescan_reads_no_stamped_folder(tmp_path: Path) -> None:
    ws, _root = _ws(tmp_path)
    stamps = ws.repo.load_statcache().stamps[0]
    # the root holds a FIFO, which is left out: its listing is not whole, so it has no stamp
    assert b"" not in stamps
    assert {b"wide", b"wide/sub", b"deep", b"odd"} <= set(stamps)
    state = _same_as_scratch(ws)
    assert state.stats.stamped == len(stamps)
    assert state.stats.hashed == 0


def test_a_name_added_behind_a_folder_mtime_put_back_is_seen(tmp_path: Path) -> None:
    ws, root = _ws(tmp_path)
    wide = root / "wide"
    before = wide.stat()
    (wide / "sneaked-in").write_bytes(b"new")
    (wide / "f00003").unlink()
    os.utime(wide, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert wide.stat().st_mtime_ns == before.st_mtime_ns  # only the ctime tells
    state = _same_as_scratch(ws)
    assert b"sneaked-in" in _names(state, b"wide")
    assert b"f00003" not in _names(state, b"wide")


def test_a_file_replaced_by_rename_with_its_size_and_mtime_is_read(tmp_path: Path) -> None:
    ws, root = _ws(tmp_path)
    target = root / "wide" / "f00042"
    before = target.stat()
    other = root / "deep" / "replacement"
    other.write_bytes(b"XX")  # the same size as "42"
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(other, target)
    state = _same_as_scratch(ws)
    assert state.stats.hashed == 1
    oid = state.scans[0].cache[b"wide"][1][b"f00042"][1]
    assert oid == ws.repo.objects.digest(b"XX")


def test_a_file_edited_in_place_with_its_size_and_mtime_is_read(tmp_path: Path) -> None:
    ws, root = _ws(tmp_path)
    edited = root / "wide" / "sub" / "inner"
    before = edited.stat()
    dir_before = edited.parent.stat()
    with open(edited, "r+b") as f:
        f.write(b"INNER")
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert edited.parent.stat().st_mtime_ns == dir_before.st_mtime_ns  # the folder kept its stamp
    state = _same_as_scratch(ws)
    assert state.stats.stamped > 0 and state.stats.hashed == 1
    oid = state.scans[0].cache[b"wide/sub"][1][b"inner"][1]
    assert oid == ws.repo.objects.digest(b"INNER")


def test_a_folder_replaced_by_a_copy_with_the_same_name_and_times_is_listed(
        tmp_path: Path) -> None:
    ws, root = _ws(tmp_path)
    sub = root / "wide" / "sub"
    copy = root / "wide" / "sub.new"
    shutil.copytree(sub, copy)  # copy2: the file times are kept
    (copy / "extra").write_bytes(b"extra")
    st_ = sub.stat()
    os.utime(copy, ns=(st_.st_atime_ns, st_.st_mtime_ns))  # and the folder's mtime
    shutil.rmtree(sub)
    os.rename(copy, sub)
    state = _same_as_scratch(ws)
    assert _names(state, b"wide/sub") == {b"inner", b"extra"}


def test_a_folder_deleted_and_made_again_in_its_place_is_listed(tmp_path: Path) -> None:
    ws, root = _ws(tmp_path)
    sub = root / "wide" / "sub"
    st_ = sub.stat()
    shutil.rmtree(sub)
    sub.mkdir()
    (sub / "other").write_bytes(b"other")
    os.utime(sub, ns=(st_.st_atime_ns, st_.st_mtime_ns))
    state = _same_as_scratch(ws)
    assert _names(state, b"wide/sub") == {b"other"}


def test_rules_that_change_while_a_stamped_folder_does_not(tmp_path: Path) -> None:
    """A stamped folder has nothing left out, but a rule written since may leave a name out;
    and a folder with a name left out has no stamp, so a rule that lets it back in is seen."""
    root = tmp_path / "ws"
    (root / "a").mkdir(parents=True)
    (root / "a" / "keep.txt").write_bytes(b"keep")
    (root / "a" / "debug.log").write_bytes(b"log")
    (root / "b").mkdir()
    (root / "b" / "x.tmp").write_bytes(b"tmp")
    (root / "b" / "y.txt").write_bytes(b"y")
    (root / ".gitignore").write_bytes(b"*.log\n")
    ws = Workspace.init(root, home=tmp_path / "home")
    _trusted_snapshot(ws)
    stamps = ws.repo.load_statcache().stamps[0]
    assert b"a" not in stamps and b"b" in stamps
    (root / ".gitignore").write_bytes(b"*.tmp\n")  # in place: the folders a and b keep theirs
    state = _same_as_scratch(ws)
    assert _names(state, b"a") == {b"keep.txt", b"debug.log"}
    assert _names(state, b"b") == {b"y.txt"}


def test_a_racily_changed_folder_gets_no_stamp(tmp_path: Path) -> None:
    ws, root = _ws(tmp_path)
    (root / "wide" / "sub" / "now").write_bytes(b"now")
    ws.snapshot(type="auto")  # within the racy window of the folder's new mtime
    stamps = ws.repo.load_statcache().stamps[0]
    assert b"wide/sub" not in stamps and b"wide" in stamps
    (root / "wide" / "sub" / "now").unlink()
    assert b"now" not in _names(_same_as_scratch(ws), b"wide/sub")


def test_a_hard_link_in_a_stamped_folder_is_still_noted(tmp_path: Path) -> None:
    ws, root = _ws(tmp_path)
    os.link(root / "target", root / "deep" / "linked")  # "deep" changes: it is listed
    state = _same_as_scratch(ws)
    assert b"target" in state.scans[0].linked  # found by its stat in a stamped folder
    _trusted_snapshot(ws)
    with open(root / "deep" / "linked", "r+b") as f:  # written through the other name
        f.write(b"TARGET")
    state = _same_as_scratch(ws)
    assert state.stats.hashed == 2


@pytest.fixture
def mount_in_ws(tmp_path: Path) -> Iterator[tuple[Workspace, Path]]:
    ws, root = _ws(tmp_path)
    yield from ((ws, m) for m in mounted(root / "wide" / "sub", "-t", "tmpfs", "-o", "size=1m",
                                           "tmpfs"))


def test_a_file_system_mounted_over_a_stamped_folder_is_listed(
        mount_in_ws: tuple[Workspace, Path]) -> None:
    ws, where = mount_in_ws
    (where / "on-the-mount").write_bytes(b"mounted")
    state = _same_as_scratch(ws)
    assert _names(state, b"wide/sub") == {b"on-the-mount"}
    # the mounted folder is on another device: never listed by a stamp
    _trusted_snapshot(ws)
    assert b"wide/sub" not in ws.repo.load_statcache().stamps[0] or \
        _same_as_scratch(ws).stats.stamped < len(ws.repo.load_statcache().stamps[0])


#: four mounts: the root, an NFS mount with an XFS one on top of it, a name with a space
_MOUNTINFO = (b"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
              b"30 22 0:40 / /home/u/nfs rw shared:9 - nfs4 srv:/x rw\n"
              b"31 22 0:41 / /home/u/my\\040dir rw - tmpfs tmpfs rw\n"
              b"32 30 0:42 / /home/u/nfs rw - xfs /dev/sdb rw\n")


@pytest.mark.parametrize(("path", "kind"), [
    (b"/home/u/w", b"ext4"), (b"/home/u/nfs/w", b"xfs"), (b"/home/u/nfsx", b"ext4"),
    (b"/home/u/my dir/w", b"tmpfs")])
def test_fs_type_is_that_of_the_mount_on_top(tmp_path: Path, path: bytes, kind: bytes) -> None:
    (tmp_path / "mountinfo").write_bytes(_MOUNTINFO)
    assert fs_type(path, str(tmp_path / "mountinfo")) == kind
    assert fs_type(path, str(tmp_path / "none")) is None


# -- random edits against a scan from scratch ------------------------------------------------

_NAMES = ("a", "b", "c", "d", "e")  # folders a and b, files c and d, e not there
_edit = st.tuples(
    st.sampled_from(("write", "edit-keep-times", "delete", "mkdir", "rmtree", "rename", "rename",
                     "rename", "rename-dir", "utime-dir", "chmod")),
    st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3),
    st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3),
    st.binary(max_size=3))


def _apply(root: Path, edit: tuple[str, list[str], list[str], bytes]) -> None:
    """One edit at paths made of the drawn names; an edit that does not apply is passed over."""
    op, here, there, data = edit
    p, q = root.joinpath(*here), root.joinpath(*there)
    try:
        if op == "write" and not p.is_dir():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        elif op == "edit-keep-times" and p.is_file():
            before = p.stat()
            p.write_bytes(data.ljust(before.st_size, b"!")[:before.st_size])
            os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))
        elif op == "delete" and p.is_file():
            p.unlink()
        elif op == "mkdir":
            p.mkdir(parents=True, exist_ok=True)
        elif op == "rmtree" and p.is_dir():
            shutil.rmtree(p)
        elif op in ("rename", "rename-dir") and (p.is_file() if op == "rename" else p.is_dir()) \
                and not q.is_relative_to(p) and not (q.exists() and q.is_dir()):
            q.parent.mkdir(parents=True, exist_ok=True)
            times = [(d, d.stat()) for d in {p.parent, q.parent}]
            os.replace(p, q)
            for d, was in times:  # the folders' mtimes put back: only their ctimes tell
                os.utime(d, ns=(was.st_atime_ns, was.st_mtime_ns))
        elif op == "utime-dir" and p.is_dir():
            os.utime(p, ns=(0, 1_000_000_000))
        elif op == "chmod" and p.exists():
            os.chmod(p, 0o700 if p.is_dir() else 0o600)
    except OSError:
        pass


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_edit, max_size=3), st.lists(_edit, min_size=1, max_size=6))
def test_random_edits_after_stamped_scans_match_a_scan_from_scratch(
        tmp_path_factory: pytest.TempPathFactory, before: list, after: list) -> None:
    base = tmp_path_factory.mktemp("edits")
    root = base / "ws"
    for rel in ("a/b/a", "b/a"):
        (root / rel).mkdir(parents=True)
    for folder in (p for p in [root, *root.rglob("*")] if p.is_dir()):
        for name in "cd":
            (folder / name).write_bytes(os.fsencode(folder) + name.encode())
    ws = Workspace.init(root, home=base / "home")
    for edit in before:
        _apply(root, edit)
    time.sleep(0.06)  # past the racy window: every folder gets its stamp
    ws.snapshot(type="auto")
    for edit in after:
        _apply(root, edit)
    _same_as_scratch(ws)
    subprocess.run(["rm", "-rf", str(base)], check=True)


def test_a_dirty_scan_keeps_the_stamps_of_the_folders_it_did_not_touch(tmp_path: Path) -> None:
    """A dirty scan (the daemon's: it copies the old cache and lists only what the watcher
    saw change) copies the old stamps too: those of a folder whose entry it made anew or
    dropped go, every other one stays as it was."""
    from ctrlz.engine.snapshot import _scan_all
    from ctrlz.state.scan import DirtyDirs, HashSink, Limits

    root = tmp_path / "ws"
    for rel in ("a/b/c", "a/x", "d", "e/f"):
        (root / rel).mkdir(parents=True)
        (root / rel / "file").write_bytes(rel.encode())
    ws = Workspace.init(root, home=tmp_path / "home")
    _trusted_snapshot(ws)
    old = ws.repo.load_statcache()
    before = old.stamps[0]
    assert {b"a/b", b"a/b/c", b"a/x", b"d", b"e", b"e/f"} <= set(before)
    shutil.rmtree(root / "a" / "b")  # a/b and a/b/c dropped, a listed anew
    (root / "d" / "new").write_bytes(b"new")  # d listed anew, and so the root
    repo = ws.repo
    state = _scan_all(repo, ws.roots, [ws.config.rules],
                      HashSink(repo.objects.digest, repo.objects.new_hasher), Limits(), old,
                      time.time_ns(), dirty=[DirtyDirs({b"a", b"d"}, {})])
    stamps = state.scans[0].stamps
    assert stamps == {rel: s for rel, s in before.items()
                      if rel not in (b"", b"a", b"a/b", b"a/b/c", b"d")}
    assert all(stamps[rel] is before[rel] for rel in stamps)  # kept, not taken again
    assert set(stamps) <= set(state.scans[0].cache)
