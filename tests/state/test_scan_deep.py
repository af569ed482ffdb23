"""A directory chain deeper than Python's recursion limit scans like any other tree.

The scanner walks with an explicit stack and finishes directories from a list; these tests
pin that for every path through it: a first (full) scan, a scan against the stat cache, a
dirty scan that patches the cached tree of every ancestor, and a dirty scan that drops a
vanished chain from the copied stat cache. Restoring deep trees is tested with the restore
engine, not here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz import Workspace

DEPTH = 1_000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def make_chain(root: Path, depth: int, name: str = "d") -> None:
    """``root/d/d/…/d`` (``depth`` directories) with a file at every 100th level and at the
    bottom, created through directory fds, one level at a time."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for level in range(1, depth + 1):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
            if level % 100 == 0 or level == depth:
                write_at(fd, f"level{level}.txt", f"level {level}\n")
    finally:
        os.close(fd)


def write_at(dir_fd: int, name: str, text: str) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644,
                 dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def rel_chain(depth: int, name: str = "d") -> bytes:
    return b"/".join([name.encode()] * depth)


def remove_chain(top: Path) -> None:
    """Remove a chain bottom-up without recursion (``shutil.rmtree`` recurses per level)."""
    paths = [os.fsencode(top)]
    while True:
        with os.scandir(paths[-1]) as it:
            sub = [e.path for e in it if e.is_dir(follow_symlinks=False)]
        if not sub:
            break
        paths.append(sub[0])
    for path in reversed(paths):
        with os.scandir(path) as it:
            for e in it:
                if not e.is_dir(follow_symlinks=False):
                    os.unlink(e.path)
        os.rmdir(path)


@pytest.fixture
def deep(ws_dir: Path, tmp_path: Path) -> Iterator[Path]:
    (ws_dir / "top.txt").write_text("top\n")
    (ws_dir / "other").mkdir()
    (ws_dir / "other" / "x.txt").write_text("x\n")
    make_chain(ws_dir, DEPTH)
    yield ws_dir
    for top in (ws_dir / "d", tmp_path / "gone"):
        if top.exists():
            remove_chain(top)


def test_a_chain_of_a_thousand_directories_is_snapshotted(deep: Path, tmp_path: Path) -> None:
    ws = Workspace.init(deep, home=tmp_path / "home")
    try:
        first = ws.snapshot()
        # the chain, plus other/; ten files in the chain, plus top.txt and other/x.txt
        assert (first.dirs, first.files, first.symlinks) == (DEPTH + 1, DEPTH // 100 + 2, 0)
        assert not first.skipped
        assert first.bytes == sum(len(f"level {n}\n") for n in range(100, DEPTH + 1, 100)) + 6

        # a scan against the stat cache: nothing changed
        again = ws.snapshot()
        assert again.root == first.root
        assert (again.dirs, again.files) == (first.dirs, first.files)
        assert (again.created, again.modified, again.deleted) == (0, 0, 0)

        # a change at the bottom: every ancestor's tree is re-encoded
        bottom = deep / os.fsdecode(rel_chain(DEPTH))
        os.utime(bottom, ns=(1, 1))  # a different mtime, so the stat cache cannot trust it
        fd = os.open(bottom, _DIR_FLAGS)
        try:
            write_at(fd, f"level{DEPTH}.txt", "changed at the bottom\n")
            write_at(fd, "new.txt", "new\n")
        finally:
            os.close(fd)
        changed = ws.snapshot()
        assert changed.root != first.root
        assert (changed.dirs, changed.files) == (first.dirs, first.files + 1)
        assert (changed.created, changed.modified, changed.deleted) == (1, 1, 0)
    finally:
        ws.close()


def test_a_dirty_scan_patches_a_thousand_ancestors(deep: Path, tmp_path: Path) -> None:
    ws = Workspace.init(deep, home=tmp_path / "home")
    try:
        first = ws.snapshot()
        fd = os.open(deep / os.fsdecode(rel_chain(DEPTH)), _DIR_FLAGS)
        try:
            write_at(fd, "new.txt", "new\n")
        finally:
            os.close(fd)
        dirty = ws.snapshot(dirty={rel_chain(DEPTH)})
        assert (dirty.dirs, dirty.files) == (first.dirs, first.files + 1)
        assert (dirty.created, dirty.modified, dirty.deleted) == (1, 0, 0)
        # the same tree as a full scan finds
        assert ws.snapshot().root == dirty.root
    finally:
        ws.close()


def test_a_vanished_chain_is_dropped_from_the_stat_cache(deep: Path, tmp_path: Path) -> None:
    ws = Workspace.init(deep, home=tmp_path / "home")
    try:
        first = ws.snapshot()
        os.rename(deep / "d", tmp_path / "gone")
        gone = ws.snapshot(dirty={b""})  # other/ is reused unlisted, so the cache is copied
        assert (gone.dirs, gone.files) == (1, 2)
        assert (gone.created, gone.modified, gone.deleted) == (0, 0, first.files - 2)
        cache = ws.repo.load_statcache()
        assert set(cache.root(0)) == {b"", b"other"}
        assert ws.snapshot().root == gone.root
    finally:
        ws.close()
