"""The watchdog-backed watcher (``sources/observe.py``) on real files, with watchdog's polling
observer (portable mode's, no inotify under it) and its inotify one (Linux's native observer,
standing in here for FSEvents and kqueue: the same cookie-file barrier). As in
``test_watch.py``: no timing assertions; ``sync()`` is the barrier, and a 60 s coalescing
window means only a sync delivers."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ctrlz.sources.changes import FileEvent
from ctrlz.sources.observe import COOKIE, ObserverWatcher

from .conftest import Recorder, Watching, never_excluded, wait_for

BACKENDS = ["polling", "inotify"]


@pytest.fixture(params=BACKENDS)
def start(request: pytest.FixtureRequest, watching: Watching
          ) -> Callable[..., tuple[ObserverWatcher, Recorder, Path]]:
    def make(is_excluded: Callable[[bytes, bool], bool] = never_excluded,
             setup: Callable[[Path], None] | None = None,
             on_events: Callable[[list[FileEvent]], None] | None = None,
             rules: list[bytes] | None = None) -> tuple[ObserverWatcher, Recorder, Path]:
        return watching(lambda root, rec: ObserverWatcher(
            root, is_excluded, on_events or rec.on_events, backend=request.param,
            coalesce_seconds=60, on_overflow=rec.on_overflow, on_git_change=rec.on_git_change,
            on_rules_change=rules.append if rules is not None else None), setup)

    return make


def test_create_modify_delete_and_the_dirty_set(start) -> None:
    def setup(r: Path) -> None:
        (r / "old.txt").write_text("old")
        (r / "gone.txt").write_text("gone")
        (r / "sub").mkdir()

    w, rec, root = start(setup=setup)
    (root / "new.txt").write_text("hello")
    (root / "old.txt").write_text("changed!")
    (root / "gone.txt").unlink()
    (root / "sub/inner").write_text("in")
    taken = w.take_dirty()
    assert not taken.rescan_all
    assert taken.dirs == {b"", b"sub"}
    assert {b"new.txt", b"old.txt", b"gone.txt"} <= taken.names[b""]
    assert taken.names[b"sub"] == {b"inner"}
    acts = rec.actions()
    assert acts[b"new.txt"] == ["created"] and acts[b"gone.txt"] == ["deleted"]
    assert acts[b"old.txt"] == ["modified"] and acts[b"sub/inner"] == ["created"]
    assert rec.last(b"old.txt").size == 8
    assert not w.take_dirty().dirs  # nothing since


def test_renames_settle_both_sides(start, tmp_path: Path) -> None:
    """A file and a folder renamed: the old name is dirty in its folder, the new one in its
    own; a folder that arrives is dirty whole, every folder under it too."""
    def setup(r: Path) -> None:
        (r / "a").mkdir()
        (r / "b").mkdir()
        (r / "a/f").write_text("f")
        (r / "tree/sub").mkdir(parents=True)
        (r / "tree/sub/x").write_text("x")

    w, rec, root = start(setup=setup)
    os.rename(root / "a/f", root / "b/g")
    os.rename(root / "tree", root / "b/moved")
    outside = tmp_path / "outside"
    (outside / "in/deep").mkdir(parents=True)
    (outside / "in/deep/y").write_text("y")
    os.rename(outside / "in", root / "in")
    taken = w.take_dirty()
    assert not taken.rescan_all
    assert b"f" in taken.names[b"a"]
    assert b"tree" in taken.names[b""] and b"in" in taken.names[b""]
    assert {b"b/moved", b"b/moved/sub", b"in", b"in/deep"} <= taken.dirs
    for whole in (b"b/moved", b"b/moved/sub", b"in", b"in/deep"):
        assert whole not in taken.names  # listed whole
    acts = rec.actions()
    assert acts[b"a/f"] == ["deleted"] and acts[b"b/g"] == ["created"]
    assert acts[b"in/deep/y"] == ["created"] and acts[b"b/moved/sub/x"] == ["created"]
    (root / "b/moved/sub/z").write_text("z")  # the moved folder is still watched
    assert w.take_dirty().names[b"b/moved/sub"] == {b"z"}


def test_a_rewrite_that_keeps_size_and_mtime_is_seen(start) -> None:
    w, _rec, root = start(setup=lambda r: (r / "f").write_text("aaaa"))
    st = os.stat(root / "f")
    (root / "f").write_text("bbbb")
    os.utime(root / "f", ns=(st.st_atime_ns, st.st_mtime_ns))  # as cp -p leaves it
    taken = w.take_dirty()
    assert b"f" in taken.names.get(b"", set()) or taken.rescan_all


def test_excluded_paths_are_neither_reported_nor_dirty(start) -> None:
    def excluded(rel: bytes, is_dir: bool) -> bool:
        return rel.split(b"/")[0] == b"build"

    w, rec, root = start(excluded, setup=lambda r: (r / "build").mkdir())
    (root / "build/out.o").write_text("obj")
    (root / "kept").write_text("kept")
    taken = w.take_dirty()
    assert taken.dirs == {b""} and taken.names[b""] == {b"kept"}
    assert rec.actions() == {b"kept": ["created"]}


def test_no_cookie_is_left_or_reported(start) -> None:
    w, rec, root = start(setup=lambda r: (r / ".git").mkdir())
    for _ in range(3):
        assert w.sync()
    assert not [p for p in root.rglob("*") if p.name.startswith(COOKIE)]
    assert not [p for p in rec.actions() if COOKIE.encode() in p]


def test_an_ignore_file_change_means_rescan_all(start) -> None:
    rules: list[bytes] = []
    w, _rec, root = start(rules=rules)
    (root / ".gitignore").write_text("*.log\n")
    assert w.take_dirty().rescan_all
    assert set(rules) == {b".gitignore"}  # once per event that named it


def test_what_watchdog_says_it_lost_means_rescan_all(start) -> None:
    """watchdog tells of lost events (an inotify overflow, a poll that failed) in a warning
    on its logger: each one is a full scan and an ``on_overflow``."""
    w, rec, _root = start()
    assert not w.take_dirty().rescan_all
    logging.getLogger("watchdog.observers.inotify_c").warning(
        "Inotify queue overflowed; filesystem events were lost")
    assert w.take_dirty().rescan_all
    assert wait_for(lambda: any("overflowed" in r for r in rec.overflows))
    assert not w.take_dirty().rescan_all  # once: the next take is trusted again


def test_a_callback_that_fails_means_rescan_all(start) -> None:
    def broken(events: list[FileEvent]) -> None:
        raise RuntimeError("consumer lost these")

    w, rec, root = start(on_events=broken)
    (root / "x").write_text("x")
    assert w.sync()
    assert w.take_dirty().rescan_all


def test_the_root_going_away_means_every_take_is_a_full_scan(start, tmp_path: Path) -> None:
    w, rec, root = start()
    subprocess.run(["rm", "-rf", str(root)], check=True)
    assert wait_for(lambda: w.take_dirty().rescan_all)
    assert w.take_dirty().rescan_all  # and stays so: nothing watches any more


def test_a_missing_root_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        ObserverWatcher(tmp_path / "nope", never_excluded, lambda e: None).start()
