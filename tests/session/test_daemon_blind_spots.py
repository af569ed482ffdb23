"""Changes the daemon's watcher does not see by itself, through a real daemon process.

Each case once ended in a snapshot that said "+0 ~0 -0" while the file had changed, and a
rollback to it that put the old bytes back with exit 0: the new ones were in no snapshot.
Every snapshot here is checked against a full in-process scan (``daemon_snapshot``).
"""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz import platform
from ctrlz.session import daemon_client
from ctrlz.workspace import Workspace

from ..conftest import inotify_watched
from .test_daemon import daemon_snapshot, full_root, until

AT_FDCWD = -100


@pytest.fixture
def make(tmp_path: Path) -> Iterator:
    """A workspace laid out by ``setup``, its first snapshot taken, and its daemon started."""
    made: list[Workspace] = []

    def start(setup) -> Workspace:  # noqa: ANN001 - a test helper
        root = tmp_path / "work"
        root.mkdir()
        setup(root)
        ws = Workspace.init(root)
        ws.snapshot(label="base")
        made.append(ws)
        info = daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)
        assert info["ready"], info
        return ws

    yield start
    for ws in made:
        daemon_client.stop(ws.store_path)
        ws.close()


def content_at(ws: Workspace, snap_id: str, rel: str) -> bytes:
    entry = ws.entry_at(snap_id, rel)
    assert entry is not None, rel
    return ws.repo.objects.read(entry.oid)


def test_a_folder_renamed_over_another_is_still_watched(make) -> None:  # noqa: ANN001
    """The issue's first case: ``os.replace('build.tmp', 'out')`` over an existing folder."""
    ws = make(lambda r: (r / "out").mkdir())
    (ws.root / "build.tmp").mkdir()
    (ws.root / "build.tmp" / "report.txt").write_text("v1\n")
    os.replace(ws.root / "build.tmp", ws.root / "out")
    daemon_snapshot(ws)
    (ws.root / "out" / "report.txt").write_text("v2 hand edits\n")
    (ws.root / "out" / "notes.txt").write_text("n\n")
    reply = daemon_snapshot(ws)  # asserts the daemon's root equals a full scan's
    snap = reply["snapshot"]["id"]
    assert content_at(ws, snap, "out/report.txt") == b"v2 hand edits\n"
    assert content_at(ws, snap, "out/notes.txt") == b"n\n"


def test_two_folders_swapped_are_both_still_watched(make) -> None:  # noqa: ANN001
    from ctrlz.engine.dirs import RENAME_EXCHANGE, Unsupported, renameat2

    def setup(r: Path) -> None:
        for name in ("a", "b"):
            (r / name / "deep").mkdir(parents=True)
            (r / name / "deep" / "f.txt").write_text(name)
    ws = make(setup)
    try:
        renameat2(AT_FDCWD, os.fsencode(ws.root / "a"), AT_FDCWD, os.fsencode(ws.root / "b"),
                  RENAME_EXCHANGE)
    except Unsupported:
        pytest.skip("this filesystem cannot exchange two names (renameat2)")
    daemon_snapshot(ws)
    for name in ("a", "b"):
        (ws.root / name / "deep" / "f.txt").write_text(f"{name} edited after the swap")
        (ws.root / name / "new.txt").write_text("new")
        daemon_snapshot(ws)


def test_a_file_written_through_a_hard_link_outside_the_workspace_is_captured(
        make, tmp_path: Path) -> None:  # noqa: ANN001
    """The issue's second case: the write never reaches a watched folder."""
    outside = tmp_path / "elsewhere"

    def setup(r: Path) -> None:
        (r / "notes.txt").write_text("v1\n")
        os.link(r / "notes.txt", outside)
    ws = make(setup)
    with open(outside, "r+b") as f:  # the same inode, the same size: only the bytes differ
        f.write(b"v2\n")
    outside.unlink()
    reply = daemon_snapshot(ws)
    assert content_at(ws, reply["snapshot"]["id"], "notes.txt") == b"v2\n"


def test_a_hard_link_between_two_folders_of_the_workspace_is_captured(make) -> None:  # noqa: ANN001
    """One name in an excluded folder, one in a captured one: the write through the excluded
    name raises its event in a folder nobody watches."""
    def setup(r: Path) -> None:
        (r / ".gitignore").write_text("scratch/\n")
        (r / "src").mkdir()
        (r / "scratch").mkdir()
        (r / "src" / "main.py").write_text("print(1)\n")
        os.link(r / "src" / "main.py", r / "scratch" / "main.py")
    ws = make(setup)
    (ws.root / "scratch" / "main.py").write_text("print(2)\n")
    reply = daemon_snapshot(ws)
    assert content_at(ws, reply["snapshot"]["id"], "src/main.py") == b"print(2)\n"


def test_a_link_made_from_outside_after_the_daemon_started_is_found_by_its_audit(
        make, tmp_path: Path) -> None:  # noqa: ANN001
    """No scan saw this file with two links, and no event says it got one: the daemon's idle
    audit re-stats the tree and puts what changed unseen into the next snapshot."""
    ws = make(lambda r: (r / "notes.txt").write_text("v1\n"))
    outside = tmp_path / "late-link"
    os.link(ws.root / "notes.txt", outside)
    with open(outside, "r+b") as f:
        f.write(b"v2\n")
    assert until(lambda: daemon_client.status(ws.store_path)["missed"] >= 1)
    reply = daemon_snapshot(ws)
    assert content_at(ws, reply["snapshot"]["id"], "notes.txt") == b"v2\n"


def test_a_tool_snapshot_samples_the_tree_and_rescans_when_the_watch_missed_a_change(
        make, tmp_path: Path) -> None:  # noqa: ANN001
    """The same unseen write, caught before a snapshot a rewind depends on (a ``tool``
    snapshot checks a sample of the tree first) rather than by the audit."""
    ws = make(lambda r: (r / "only.txt").write_text("v1\n"))
    outside = tmp_path / "late-link"
    os.link(ws.root / "only.txt", outside)
    with open(outside, "r+b") as f:
        f.write(b"v2\n")
    reply = daemon_client.snapshot(ws.store_path, type="tool")
    assert content_at(ws, reply["snapshot"]["id"], "only.txt") == b"v2\n"
    if platform.watcher() == "inotify":  # polling sees the new ctime: nothing is missed
        assert reply["scan"] == "full"  # one file in the tree: the sample cannot miss it
        assert daemon_client.status(ws.store_path)["missed"] >= 1


def test_writes_through_a_shared_mapping_are_captured_before_a_pre_run_snapshot(
        make) -> None:  # noqa: ANN001
    """``mmap`` writes raise no event; a process still holds the mapping. Before a ``pre-run``
    snapshot (and a restore's capture) the daemon looks for such mappings and stats their
    files: found there, not by the sample (which would count a miss)."""
    ws = make(lambda r: (r / "db.bin").write_bytes(b"\0" * 4096))
    script = ("import mmap, sys\n"
              "f = open(sys.argv[1], 'r+b')\n"
              "m = mmap.mmap(f.fileno(), 4096)\n"
              "m[:7] = b'mmapped'\n"
              "print('written', flush=True)\n"
              "sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(ws.root / "db.bin")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"written\n"
        with open(ws.root / "db.bin", "rb") as f:
            assert mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ)[:7] == b"mmapped"
        reply = daemon_client.snapshot(ws.store_path, type="pre-run")
        assert ws.resolve(reply["snapshot"]["id"]).root == full_root(ws)
        assert content_at(ws, reply["snapshot"]["id"], "db.bin")[:7] == b"mmapped"
        assert reply["scan"] == "dirty" and daemon_client.status(ws.store_path)["missed"] == 0
    finally:
        proc.communicate(b"")


needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                                reason="mounting needs root and mount(8)")


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")


@needs_root
def test_a_tmpfs_mounted_over_a_folder_is_listed_whole(make) -> None:  # noqa: ANN001
    def setup(r: Path) -> None:
        (r / "cache").mkdir()
        (r / "cache" / "old.txt").write_text("under the mount\n")
    ws = make(setup)
    _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(ws.root / "cache"))
    try:
        (ws.root / "cache" / "sub").mkdir()
        (ws.root / "cache" / "sub" / "new.txt").write_text("on the tmpfs\n")
        daemon_snapshot(ws)
        (ws.root / "cache" / "sub" / "new.txt").write_text("edited on the tmpfs\n")
        reply = daemon_snapshot(ws)
        assert content_at(ws, reply["snapshot"]["id"], "cache/sub/new.txt") == \
            b"edited on the tmpfs\n"
    finally:
        subprocess.run(["umount", "-l", str(ws.root / "cache")], check=False)


@needs_root
def test_a_file_bind_mounted_and_edited_through_its_source_is_captured(
        make, tmp_path: Path) -> None:  # noqa: ANN001
    source = tmp_path / "source.conf"
    source.write_text("a = 1\n")
    ws = make(lambda r: (r / "app.conf").write_text("placeholder\n"))
    _mount("--bind", str(source), str(ws.root / "app.conf"))
    try:
        daemon_snapshot(ws)
        with open(source, "r+") as f:
            f.write("a = 2\n")
        reply = daemon_snapshot(ws)
        assert content_at(ws, reply["snapshot"]["id"], "app.conf") == b"a = 2\n"
    finally:
        subprocess.run(["umount", "-l", str(ws.root / "app.conf")], check=False)


def test_a_hard_link_made_inside_while_the_daemon_runs_brings_its_other_name(
        make) -> None:  # noqa: ANN001
    """``ln src/a.txt copy/a.txt`` and a write through the new name: the event names only
    ``copy/``, yet ``src/a.txt`` changed too, in the same snapshot."""
    def setup(r: Path) -> None:
        (r / "src").mkdir()
        (r / "copy").mkdir()
        (r / "src" / "a.txt").write_text("v1\n")
    ws = make(setup)
    os.link(ws.root / "src" / "a.txt", ws.root / "copy" / "a.txt")
    with open(ws.root / "copy" / "a.txt", "r+b") as f:
        f.write(b"v2\n")
    reply = daemon_snapshot(ws)
    assert content_at(ws, reply["snapshot"]["id"], "src/a.txt") == b"v2\n"


def test_a_tree_copied_as_hard_links_is_watched_through_both_names(make) -> None:  # noqa: ANN001
    """``cp -al``: a new folder full of links, which the watcher reports as one new folder."""
    def setup(r: Path) -> None:
        (r / "pkg" / "sub").mkdir(parents=True)
        for n in range(5):
            (r / "pkg" / "sub" / f"m{n}.py").write_text(f"{n}\n")
    ws = make(setup)
    subprocess.run(["cp", "-al", str(ws.root / "pkg"), str(ws.root / "pkg.bak")], check=True)
    daemon_snapshot(ws)
    (ws.root / "pkg.bak" / "sub" / "m3.py").write_text("edited through the copy\n")
    reply = daemon_snapshot(ws)
    assert content_at(ws, reply["snapshot"]["id"], "pkg/sub/m3.py") == \
        b"edited through the copy\n"


def test_mount_points_are_read_from_mountinfo_with_their_escapes(tmp_path: Path) -> None:
    from ctrlz.state.scan.blind import mount_points

    info = tmp_path / "mountinfo"
    info.write_bytes(
        b"22 1 0:21 / / rw - ext4 /dev/sda1 rw\n"
        b"40 22 0:40 / /w/ws/cache rw - tmpfs tmpfs rw\n"
        b"41 22 0:41 / /w/ws/with\\040space rw - tmpfs tmpfs rw\n"
        b"42 22 0:42 / /w/wsx rw - tmpfs tmpfs rw\n"  # a sibling that shares the prefix
        b"43 22 0:43 / /w/ws rw - tmpfs tmpfs rw\n")  # the root itself: not inside
    assert mount_points(b"/w/ws", str(info)) == [b"cache", b"with space"]
    assert mount_points(b"/w/ws", str(tmp_path / "none")) == []


UNREADABLE_SCRIPT = """
import json, os, sys
from pathlib import Path
from ctrlz.engine.snapshot import scan_working
from ctrlz.session import daemon_client
from ctrlz.workspace import Workspace

root = Path(sys.argv[1])
ws = Workspace.init(root)
ws.snapshot(label="base")
info = daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)
assert info["ready"], info
out = {}
for step, mode in (("locked", 0o000), ("opened", 0o755)):
    os.chmod(root / "nox", mode)
    reply = daemon_client.snapshot(ws.store_path, type="tool")
    snap = ws.resolve(reply["snapshot"]["id"])
    full = scan_working(ws.repo, ws.roots, [ws.config.rules], ws.config.limits)
    out[step] = {"equal": snap.root == full.root, "scan": reply["scan"],
                 "skipped": sorted(os.fsdecode(k.path) for k in snap.skipped)}
daemon_client.stop(ws.store_path)
print(json.dumps(out))
"""


def test_a_folder_that_became_unreadable_gives_the_daemon_the_same_root_as_a_full_scan(
        other_user) -> None:  # noqa: ANN001
    """The daemon kept a folder's old entries from its cache where a full scan could not list
    it and marked it skipped: two roots for one tree. As a plain user (root reads anything)."""
    import json
    import tempfile

    from ..conftest import NOBODY

    base = Path(tempfile.mkdtemp(prefix="ctrlz-nox-"))
    try:
        os.chmod(base, 0o755)
        root = base / "ws"
        (root / "nox").mkdir(parents=True)
        (root / "nox" / "a.txt").write_text("a\n")
        (root / "top.txt").write_text("top\n")
        for dirpath, dirnames, filenames in os.walk(base):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.lchown(name, NOBODY, NOBODY)
        env = {**os.environ, "CTRLZ_HOME": str(base / "home"), "HOME": str(base),
               "XDG_CONFIG_HOME": str(base / "config"), "XDG_DATA_HOME": str(base / "data"),
               "XDG_RUNTIME_DIR": str(base / "run")}
        done = subprocess.run(other_user.python_command("-c", UNREADABLE_SCRIPT, str(root)),
                              cwd=base, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["locked"]["equal"] and out["opened"]["equal"], out
        assert out["locked"]["skipped"] == ["0/nox"] or \
            any(p.endswith("nox") for p in out["locked"]["skipped"]), out
        assert out["opened"]["skipped"] == [], out
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)


@inotify_watched
def test_past_the_watch_limit_the_daemon_scans_what_it_cannot_watch(
        make, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """Out of inotify watches (here ``daemon_max_watches``, which runs out the same way as
    ``fs.inotify.max_user_watches``), the daemon watches what fits, says which folders it
    could not, and lists those at every snapshot: incremental, and exact."""
    monkeypatch.setenv("CTRLZ_DAEMON_MAX_WATCHES", "5")  # the daemon and this process alike

    def setup(r: Path) -> None:
        for d in range(12):
            (r / f"pkg{d}" / "sub").mkdir(parents=True)
            (r / f"pkg{d}" / "sub" / "m.py").write_text(f"{d}\n")
    ws = make(setup)
    info = daemon_client.status(ws.store_path)
    assert info["watched_dirs"] == 5 and info["unwatched_count"] >= 1, info
    first = daemon_snapshot(ws)  # the first take after the loss: a full scan
    assert first["scan"] == "full"
    for d in range(12):
        (ws.root / f"pkg{d}" / "sub" / "m.py").write_text(f"{d} edited\n")
        reply = daemon_snapshot(ws)  # equal to a full scan, watched or not
        assert reply["scan"] == "dirty", reply
        assert content_at(ws, reply["snapshot"]["id"], f"pkg{d}/sub/m.py") == \
            f"{d} edited\n".encode()
    shown = subprocess.run([sys.executable, "-c", "import sys; from ctrlz.cli import main; "
                            "sys.exit(main())", "daemon", "status"], cwd=ws.root,
                           capture_output=True, text=True)
    assert "without a watch" in shown.stdout, shown.stdout + shown.stderr
    status = subprocess.run([sys.executable, "-c", "import sys; from ctrlz.cli import main; "
                             "sys.exit(main())", "status"], cwd=ws.root,
                            capture_output=True, text=True)
    assert f"{info['unwatched_count']:,} folder(s) without a watch" in status.stdout, \
        status.stdout + status.stderr
