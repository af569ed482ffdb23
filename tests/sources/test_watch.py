"""The file watcher on real inotify and real files. No timing assertions: tests either call
``sync()`` (every change made before it is delivered when it returns) or poll for a condition
with a bound. Most watchers get a 60 s coalescing window, so only ``sync()`` flushes and the
grouping of events never depends on how fast the machine is."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctrlz.sources.changes import NAMES_MAX, FileEvent, combine, git_paths
from ctrlz.sources.watch import Watcher

from .conftest import Recorder, Watching, never_excluded, wait_for

MAX_QUEUED = Path("/proc/sys/fs/inotify/max_queued_events")
AT_FDCWD = -100


@pytest.fixture
def start(watching: Watching) -> Callable[..., tuple[Watcher, Recorder, Path]]:
    def make(is_excluded: Callable[[bytes, bool], bool] = never_excluded,
             coalesce_seconds: float = 60, setup: Callable[[Path], None] | None = None,
             on_events: Callable[[list[FileEvent]], None] | None = None,
             ) -> tuple[Watcher, Recorder, Path]:
        return watching(lambda root, rec: Watcher(
            root, is_excluded, on_events or rec.on_events, coalesce_seconds=coalesce_seconds,
            on_overflow=rec.on_overflow, on_git_change=rec.on_git_change), setup)

    return make


def test_coalescing_rules() -> None:
    assert combine("created", "modified") == "created"
    assert combine("created", "deleted") is None
    assert combine("modified", "deleted") == "deleted"
    assert combine("deleted", "created") == "modified"
    assert combine("modified", "modified") == "modified"
    assert combine("created", "created") == "created"


def test_git_path_classification() -> None:
    assert git_paths(b".git/objects/ab/cdef") == (True, False)
    assert git_paths(b"sub/.git/objects/pack") == (True, False)
    assert git_paths(b".git/refs/heads/main") == (False, True)
    assert git_paths(b".git/refs/heads/main.lock") == (False, False)
    assert git_paths(b".git/HEAD") == (False, True)
    assert git_paths(b".git/logs/HEAD") == (False, True)
    assert git_paths(b".git/packed-refs") == (False, True)
    assert git_paths(b".git/index") == (False, False)
    assert git_paths(b"src/git/HEAD") == (False, False)


def test_create_modify_delete(start) -> None:
    w, rec, root = start(coalesce_seconds=0.05, setup=lambda r: (r / "old.txt").write_text("old"))
    (root / "new.txt").write_text("hello")
    assert wait_for(lambda: b"new.txt" in rec.actions())  # delivered without sync()
    (root / "old.txt").write_text("changed!")
    (root / "new.txt").unlink()
    assert w.sync()
    acts = rec.actions()
    assert acts[b"new.txt"] == ["created", "deleted"]
    assert set(acts[b"old.txt"]) == {"modified"}
    assert rec.last(b"old.txt").size == 8
    assert rec.last(b"new.txt").size is None
    first = [e for e in rec.events if e.path == b"new.txt"][0]
    assert first.size == 5 and not first.is_dir
    dirty = w.take_dirty()
    assert dirty.dirs == {b""} and not dirty.rescan_all
    assert w.take_dirty().dirs == set()


def test_dirty_names_say_what_changed_in_a_directory(start) -> None:
    """A directory in which events named only a few entries is reported with those names, so
    a scan stats just them; a new directory, or one with too many changed names, is whole."""
    def setup(r: Path) -> None:
        (r / "big").mkdir()
        for i in range(NAMES_MAX + 5):
            (r / "big" / f"f{i}").write_text("x")
        (r / "sub").mkdir()

    w, _rec, root = start(setup=setup)
    (root / "big/f1").write_text("edited")
    (root / "big/f2").unlink()
    os.rename(root / "big/f3", root / "big/renamed")
    os.chmod(root / "sub", 0o700)  # the directory's own mode: a name in its parent
    os.mkdir(root / "new")
    (root / "new/inside").write_text("x")
    taken = w.take_dirty()
    # sub's own mode changed too: whether it can be listed may have, so it is listed whole
    assert taken.dirs == {b"", b"big", b"new", b"sub"} and not taken.rescan_all
    assert taken.names == {b"": {b"sub", b"new"}, b"big": {b"f1", b"f2", b"f3", b"renamed"}}
    for i in range(NAMES_MAX + 1):
        (root / "big" / f"f{i + 4}").write_text("again")
    (root / "new/inside").write_text("y")  # known since the last take: a name now
    taken = w.take_dirty()
    assert taken.dirs == {b"big", b"new"} and taken.names == {b"new": {b"inside"}}


def test_new_nested_dirs_filled_immediately(start) -> None:
    """mkdir -p a/b && echo x > a/b/c: the files land before the watch on a/b can exist."""
    w, rec, root = start()
    subprocess.run("mkdir -p a/b/d && echo x > a/b/c && echo y > a/b/d/e", shell=True,
                   cwd=root, check=True)
    assert w.sync()
    acts = rec.actions()
    for path in (b"a", b"a/b", b"a/b/d", b"a/b/c", b"a/b/d/e"):
        assert acts.get(path) == ["created"], (path, acts)
    assert rec.last(b"a").is_dir and rec.last(b"a/b/c").size == 2
    assert {b"", b"a", b"a/b", b"a/b/d"} <= w.take_dirty().dirs
    (root / "a/b/d/f").write_text("later")  # the new directories are watched now
    assert w.sync()
    assert rec.actions()[b"a/b/d/f"] == ["created"]


def test_rename_in_and_out(start, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "tree/sub").mkdir(parents=True)
    (outside / "tree/sub/f").write_text("f")
    (outside / "file").write_text("x")
    w, rec, root = start(setup=lambda r: ((r / "leaving").mkdir(), (r / "gone.txt").touch()))
    os.rename(outside / "file", root / "file")
    os.rename(outside / "tree", root / "tree")
    os.rename(root / "gone.txt", outside / "gone.txt")
    os.rename(root / "leaving", outside / "leaving")
    os.rename(root / "file", root / "renamed")
    assert w.sync()
    acts = rec.actions()
    assert acts[b"renamed"] == ["created"]
    assert b"file" not in acts  # created + deleted in one window: nothing
    for path in (b"tree", b"tree/sub", b"tree/sub/f"):
        assert acts[path] == ["created"]
    assert acts[b"gone.txt"] == ["deleted"] and acts[b"leaving"] == ["deleted"]
    assert rec.last(b"leaving").is_dir
    # the moved-in tree is watched; the moved-out one is not any more
    (root / "tree/sub/g").write_text("g")
    (outside / "leaving/ghost").write_text("boo")
    assert w.sync()
    acts = rec.actions()
    assert acts[b"tree/sub/g"] == ["created"]
    assert not any(p.startswith(b"leaving/") or p == b"ghost" for p in acts)


def test_excluded_trees_and_globs(start) -> None:
    def excluded(rel: bytes, is_dir: bool) -> bool:
        return rel.split(b"/")[0] == b"build" or rel.endswith(b".log")

    w, rec, root = start(excluded, setup=lambda r: (r / "build").mkdir())
    before = w.watched_dirs
    (root / "build/out.o").write_text("obj")
    (root / "app.log").write_text("log")
    (root / "build2").mkdir()
    (root / "build2/x.log").write_text("log")
    (root / "kept.txt").write_text("kept")
    assert w.sync()
    acts = rec.actions()
    assert acts == {b"build2": ["created"], b"kept.txt": ["created"]}
    assert w.watched_dirs == before + 1  # build2 only, never build
    assert b"build" not in w.take_dirty().dirs


def test_writes_coalesce_into_one_event(start) -> None:
    w, rec, root = start(setup=lambda r: (r / "existing").touch())
    for i in range(100):
        (root / "hot").write_text(str(i))
        (root / "existing").write_text(str(i))
    (root / "tmp").write_text("t")
    (root / "tmp").unlink()
    assert w.sync()
    assert rec.actions() == {b"hot": ["created"], b"existing": ["modified"]}
    assert rec.last(b"hot").size == 2


def test_deleted_directory(start) -> None:
    def setup(r: Path) -> None:
        (r / "d/e").mkdir(parents=True)
        (r / "d/e/f").write_text("f")

    w, rec, root = start(setup=setup)
    watched = w.watched_dirs
    subprocess.run(["rm", "-rf", "d"], cwd=root, check=True)
    assert w.sync()
    acts = rec.actions()
    assert acts == {b"d": ["deleted"], b"d/e": ["deleted"], b"d/e/f": ["deleted"]}
    assert rec.last(b"d").is_dir and not rec.last(b"d/e/f").is_dir
    assert wait_for(lambda: w.watched_dirs == watched - 2)


def test_symlink_reported_not_followed(start, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    w, rec, root = start()
    os.symlink(target, root / "link")
    assert w.sync()
    ev = rec.last(b"link")
    assert ev.action == "created" and not ev.is_dir and ev.size == len(os.fsencode(target))
    (target / "inside").write_text("x")
    assert w.sync()
    assert set(rec.actions()) == {b"link"}
    assert w.watched_dirs == 1


def test_non_utf8_names(start) -> None:
    w, rec, root = start()
    name = b"caf\xe9-\xff.txt"
    fd = os.open(os.fsencode(root) + b"/" + name, os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"abc")
    os.close(fd)
    os.mkdir(os.fsencode(root) + b"/dir\xfe")
    with open(os.fsencode(root) + b"/dir\xfe/inner", "wb") as f:
        f.write(b"z")
    assert w.sync()
    acts = rec.actions()
    assert acts[name] == ["created"] and rec.last(name).size == 3
    assert acts[b"dir\xfe/inner"] == ["created"]


def test_git_refs_fire_trigger_objects_stay_quiet(start) -> None:
    def setup(r: Path) -> None:
        (r / ".git/refs/heads").mkdir(parents=True)
        (r / ".git/objects").mkdir()
        (r / ".git/HEAD").write_text("ref: refs/heads/main\n")

    w, rec, root = start(setup=setup)
    (root / ".git/objects/ab").mkdir()
    (root / ".git/objects/ab/cdef").write_bytes(b"blob")
    lock = root / ".git/refs/heads/main.lock"  # the way git updates a ref
    lock.write_text("0" * 40 + "\n")
    os.rename(lock, root / ".git/refs/heads/main")
    assert w.sync()
    acts = rec.actions()
    assert acts[b".git/refs/heads/main"] == ["created"]
    assert not any(p.startswith(b".git/objects") for p in acts)
    assert rec.git == [b".git/refs/heads/main"]
    dirty = w.take_dirty().dirs
    assert {b".git/objects", b".git/objects/ab", b".git/refs/heads"} <= dirty


@pytest.fixture
def small_queue() -> Iterator[Callable[[], None]]:
    """Lower fs.inotify.max_queued_events (read when an inotify instance is created) and give
    back a function that restores it; restored at teardown at the latest. The setting is
    global, so concurrent test runs take turns under a file lock: otherwise one could save the
    other's lowered value and "restore" it forever."""
    lock = open("/tmp/ctrlz-test-max-queued-events.lock", "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        saved = MAX_QUEUED.read_text()
        MAX_QUEUED.write_text("64\n")
    except OSError:
        lock.close()
        pytest.skip("cannot lower fs.inotify.max_queued_events (needs root)")

    def restore() -> None:
        MAX_QUEUED.write_text(saved)

    try:
        yield restore
    finally:
        restore()
        lock.close()


def test_overflow_means_rescan_all(start, small_queue) -> None:
    """Hold the watcher thread inside a callback while 600 files appear: the 64-event queue
    overflows. The watcher must say so (rescan_all, on_overflow, counter) and keep working."""
    entered, gate = threading.Event(), threading.Event()
    rec_events: list[FileEvent] = []

    def blocking(events: list[FileEvent]) -> None:
        rec_events.extend(events)
        entered.set()
        gate.wait(10)

    w, rec, root = start(coalesce_seconds=0.05, on_events=blocking)
    small_queue()  # the watcher's instance has its limit; restore for everyone else
    try:
        (root / "first").touch()
        assert entered.wait(5)
        for i in range(600):
            (root / f"f{i}").touch()
    finally:
        gate.set()
    assert wait_for(lambda: w.overflowed >= 1)
    assert w.take_dirty().rescan_all
    assert rec.overflows and "overflow" in rec.overflows[0]
    assert not w.take_dirty().rescan_all  # taken: the session reconciled
    (root / "after").touch()  # still watching
    assert w.sync()
    assert any(e.path == b"after" for e in rec_events)


def test_stop_flushes_everything(tmp_path: Path) -> None:
    rec = Recorder()
    w = Watcher(tmp_path, never_excluded, rec.on_events, coalesce_seconds=60)
    with w:
        (tmp_path / "x").write_text("x")
    assert rec.actions() == {b"x": ["created"]}
    w.stop()  # idempotent


ENOSPC_SCRIPT = r"""
import json, sys
from pathlib import Path
from ctrlz.sources.watch import Watcher

LIMIT = Path("/proc/sys/user/max_inotify_watches")  # this user namespace's own limit
root = Path(sys.argv[1])
for d in ("a", "b", "c", "d", "e"):
    (root / d).mkdir()
LIMIT.write_text("3\n")
reasons, events = [], []
w = Watcher(root, lambda rel, is_dir: False, events.extend, coalesce_seconds=60,
            on_overflow=reasons.append)
w.start()
out = {"reasons": reasons[:], "watched": w.watched_dirs}
def take():
    t = w.take_dirty()
    return [t.rescan_all, sorted(d.decode() for d in t.unwatched),
            sorted(d.decode() for d in t.dirs)]
out["take1"] = take()  # the first loss: one rescan for what went unseen before it
out["take2"] = take()  # then the unwatched folders, at every take, to be listed whole
LIMIT.write_text("100\n")
out["take3"] = take()  # watches added now: those folders dirty once, whole
out["take4"] = take()
for d in ("a", "b", "c", "d", "e"):
    (root / d / "x").touch()
w.sync()
out["seen"] = sorted(e.path.decode() for e in events)
out["reasons_after"] = len(reasons)
w.stop()
print(json.dumps(out))
"""


def test_watch_limit_exhausted_means_rescan_all_once_then_the_unwatched_folders(
        tmp_path: Path) -> None:
    """ENOSPC from inotify_add_watch (max_user_watches reached) must not go unnoticed: one full
    rescan, then every take names the folders without a watch (a snapshot lists them whole),
    until watches can be added again. The limit is lowered inside a throwaway user namespace,
    so the host's limit is never touched."""
    root = tmp_path / "ws"
    root.mkdir()
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", sys.executable, "-c", ENOSPC_SCRIPT, root],
        capture_output=True, text=True, timeout=30)
    if proc.returncode != 0 and "Traceback" not in proc.stderr:
        pytest.skip(f"no user namespaces here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["watched"] == 3
    assert len(out["reasons"]) == 1 and "max_user_watches" in out["reasons"][0]
    unwatched = out["take1"][1]  # the root and two folders hold the three watches
    assert out["take1"][0] is True and len(unwatched) == 3
    assert out["take2"] == [False, unwatched, []]
    assert out["take3"] == [False, [], unwatched]
    assert out["take4"] == [False, [], []]
    assert out["seen"] == ["a/x", "b/x", "c/x", "d/x", "e/x"]
    assert out["reasons_after"] == 1


def test_ignore_file_changes_mean_rescan_all_and_new_watches(tmp_path: Path) -> None:
    """A .gitignore decides what is captured below it: when it changes, the dirty set cannot
    be trusted, the owner is told (to rebuild its rules), and directories the new rules
    include get watches."""
    root = tmp_path / "ws"
    (root / "build" / "deep").mkdir(parents=True)
    (root / ".gitignore").write_text("build/\n")
    rules = {"ignored": True}
    changed: list[bytes] = []

    def excluded(rel: bytes, is_dir: bool) -> bool:
        return rules["ignored"] and rel.split(b"/")[0] == b"build"

    def on_rules_change(rel: bytes) -> None:
        changed.append(rel)
        rules["ignored"] = b"build" in (root / ".gitignore").read_bytes()

    w = Watcher(root, excluded, lambda events: None, coalesce_seconds=60,
                on_rules_change=on_rules_change)
    w.start()
    try:
        before = w.watched_dirs
        assert not w.take_dirty().rescan_all
        (root / ".gitignore").write_text("*.log\n")
        assert w.sync()
        assert changed and changed[0] == b".gitignore"
        assert w.take_dirty().rescan_all
        assert w.watched_dirs == before + 2  # build and build/deep
        (root / "build" / "deep" / "x.o").write_text("obj")
        assert w.sync()
        taken = w.take_dirty()
        assert not taken.rescan_all and b"build/deep" in taken.dirs
        (root / ".git" / "info").mkdir(parents=True)
        (root / ".git" / "info" / "exclude").write_text("*.tmp\n")
        assert w.sync()
        assert changed[-1] == b".git/info/exclude" and w.take_dirty().rescan_all
    finally:
        w.stop()


def test_pending_events_coalesce_per_path_in_arrival_order() -> None:
    from ctrlz.sources.changes import Pending

    p = Pending(quiet_s=60, max_delay_s=600)
    assert not p and p.timeout_ms() == -1 and not p.due()
    p.add(b"a", "created", False)
    p.add(b"b", "modified", False)
    p.add(b".git/objects/ab/cdef", "created", False)  # never recorded
    p.add(b"a", "modified", False)  # still created
    p.add(b"c", "created", False)
    p.add(b"c", "deleted", False)  # came and went: nothing
    p.add(b"b", "deleted", False)
    assert p and p.timeout_ms() > 0 and not p.due()
    taken = p.take()
    assert [(rel, action) for rel, (action, _, _) in taken.items()] == [
        (b"a", "created"), (b"b", "deleted")]
    assert not p and p.take() == {}


def _exchange(a: Path, b: Path) -> None:
    from ctrlz.engine.dirs import RENAME_EXCHANGE, renameat2

    renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)


@pytest.mark.parametrize("move", ["replace", "exchange", "replace-nested", "exchange-nested"])
def test_a_folder_renamed_over_or_swapped_with_another_stays_watched(start, move: str) -> None:
    """A folder renamed over an existing one (``os.replace``, ``mv -T``) or swapped with one
    (``renameat2(RENAME_EXCHANGE)``, ``mv --exchange``) is watched at its new place, and so is
    every folder under it: the watcher once dropped the new watch with the old one, by path,
    and went blind there until it restarted."""
    nested = move.endswith("-nested")

    def setup(r: Path) -> None:
        for name in ("out", "build.tmp"):
            (r / name / "sub").mkdir(parents=True)
            (r / name / "sub" / "f").write_text(name)
    w, rec, root = start(setup=setup)
    if move.startswith("replace"):
        shutil.rmtree(root / "out" / "sub")
        os.replace(root / "build.tmp", root / "out")
        moved = ["out"]
    else:
        _exchange(root / "build.tmp", root / "out")
        moved = ["out", "build.tmp"]
    assert w.sync()
    w.take_dirty()
    for name in moved:
        target = root / name / "sub" if nested else root / name
        (target / "late.txt").write_text("v2")
        assert w.sync()
        taken = w.take_dirty()
        rel = os.fsencode(target.relative_to(root))
        assert rel in taken.dirs, (name, taken)
        assert not taken.rescan_all


def test_the_watch_map_keeps_a_path_that_names_another_descriptor_now() -> None:
    """The bookkeeping behind the rename-over case, without the kernel: the late IN_IGNORED of
    the folder that was replaced must not take the new folder's entry with it."""
    from ctrlz.sources.watch_map import WatchMap

    m = WatchMap()
    m.put(1, b"out")
    m.put(2, b"build.tmp")
    m.drop_tree(b"build.tmp", moved=True)  # MOVED_FROM build.tmp
    m.put(2, b"out")  # MOVED_TO out: the same inode, the same descriptor
    m.forget(1, b"out")  # IN_IGNORED for the old out
    assert m.path(2) == b"out" and b"out" in m and m.path(1) is None
    assert m.take_unmapped() == set()  # descriptor 2 is mapped again: nothing to remove
    m.drop_tree(b"out", moved=True)  # moved out of the workspace
    assert m.take_unmapped() == {2} and len(m) == 0


def test_placing_the_watches_calls_pace_as_it_goes_and_misses_nothing(tmp_path: Path) -> None:
    """``place(pace=...)`` lets its caller wait every PACE_EVERY folders (the daemon's
    start-up waits there for a command's walk); a folder made while it waits is watched."""
    from ctrlz.sources.watch import PACE_EVERY

    for i in range(2 * PACE_EVERY):
        (tmp_path / f"d{i:04}").mkdir()
    made: list[int] = []

    def pace() -> None:  # a folder made during the pause, among those not yet watched
        made.append(len(made))
        (tmp_path / f"d{2 * PACE_EVERY - 1:04}" / f"during{len(made)}").mkdir()

    rec = Recorder()
    w = Watcher(tmp_path, never_excluded, rec.on_events, coalesce_seconds=60)
    w.place(pace=pace)
    w.start_reader()
    try:
        assert len(made) == (2 * PACE_EVERY + 1) // PACE_EVERY
        last = f"d{2 * PACE_EVERY - 1:04}"
        for n in range(1, len(made) + 1):  # listed after it was made, or seen made
            (tmp_path / last / f"during{n}" / "f").write_text("x")
        assert w.sync()
        assert w.watched_dirs == 2 * PACE_EVERY + 1 + len(made)
        actions = rec.actions()
        for n in range(1, len(made) + 1):
            assert "created" in actions.get(f"{last}/during{n}/f".encode(), []), actions
    finally:
        w.stop()
