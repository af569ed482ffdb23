"""Incremental snapshots must equal full ones: random edits, each snapshot taken from a dirty set
(what a watcher reports: directories, or directories and the names that changed in them) or by
a full stat walk, checked against an independent scan.

For every snapshot: the root tree equals a scan from scratch (no stat cache), the
created/modified/deleted counts the scan produced equal those of a Merkle diff against the
parent, and the stat cache it leaves behind holds exactly the directories and listings a scan
from scratch would (no entry for a directory that is gone).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from ctrlz import Workspace
from ctrlz.engine import snapshot as snapshot_mod
from ctrlz.engine.diff import count_changes, diff_trees
from ctrlz.engine.snapshot import _scan_all
from ctrlz.state.db.statcache import StatCache
from ctrlz.state.scan import DirtyDirs, HashSink, Limits

NAMES = ["a", "b", "c d"]
DIRS = ["", "a", "b", "a/a", "a/b", "b/a", "a/a/a"]
PATHS = sorted({f"{d}/{n}" if d else n for d in DIRS for n in NAMES})
FILES = ["x", "a/x", "b/x", "a/a/x"]  # there from the start


def scratch_scan(ws: Workspace) -> tuple[bytes, dict[bytes, Any], list[Any], tuple[int, ...]]:
    """The top tree id, stat cache, skipped paths and totals of a scan that trusts nothing it
    has seen before."""
    repo = ws.repo
    state = _scan_all(repo, ws.roots, [ws.config.rules], HashSink(repo.objects.digest,
                      repo.objects.new_hasher), Limits(), StatCache(algorithm=repo.algorithm),
                      time.time_ns())
    return (state.root, state.scans[0].cache,
            sorted((k.path, k.reason) for k in state.skipped),
            (state.stats.files, state.stats.dirs, state.stats.symlinks, state.stats.bytes))


def cache_shape(cache: dict[bytes, Any]) -> dict[bytes, tuple[bytes, dict[bytes, bytes], Any]]:
    """What a cache says about each directory, without the stat keys and trust flags (which
    legitimately differ: a reused directory keeps its older keys)."""
    return {rel: (oid, {name: e[1] for name, e in mapping.items()}, totals)
            for rel, (oid, mapping, totals) in cache.items()}


class IncrementalMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="ctrlz-incr-"))
        self.root = self.tmp / "ws"
        self.root.mkdir()
        for d in DIRS[1:4]:
            (self.root / d).mkdir()
        for rel in FILES:
            (self.root / rel).write_bytes(rel.encode())
        self.ws = Workspace.init(self.root, home=self.tmp / "home")
        self.ws.snapshot(type="auto")
        self.dirty: set[bytes] = set()
        self.names: dict[bytes, set[bytes]] = {}  # per directory, the names a watcher saw
        self.whole: set[bytes] = set()  # directories a watcher would report whole (new ones)
        self.diffs = 0
        original = snapshot_mod.diff_trees

        def counting_diff(*args: Any, **kwargs: Any) -> Any:
            self.diffs += 1
            return original(*args, **kwargs)

        self.patch = pytest.MonkeyPatch()
        self.patch.setattr(snapshot_mod, "diff_trees", counting_diff)

    def teardown(self) -> None:
        self.patch.undo()
        self.ws.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def touched(self, rel: str, *, enter: bool = True) -> None:
        """Mark what a watcher would: the directory holding ``rel`` (and ``rel`` as a name
        in it), and, unless ``enter`` is false (a directory's own mode changed), ``rel``
        itself and everything below it when it is a directory now: a new directory is
        reported whole."""
        parent, _, name = rel.rpartition("/")
        self.saw(os.fsencode(parent), os.fsencode(name))
        path = self.root / rel
        if enter and path.is_dir() and not path.is_symlink():
            for dirpath, _dirs, _files in os.walk(path):
                d = os.fsencode(os.path.relpath(dirpath, self.root))
                self.dirty.add(d)
                self.whole.add(d)
                self.names.pop(d, None)

    def saw(self, d: bytes, name: bytes) -> None:
        self.dirty.add(d)
        if d not in self.whole:
            self.names.setdefault(d, set()).add(name)

    def enterable(self, rel: str) -> bool:
        """Every directory above ``rel`` is a real one (no edit goes through a link)."""
        parts = rel.split("/")[:-1]
        return all((self.root.joinpath(*parts[:i + 1])).is_dir()
                   and not self.root.joinpath(*parts[:i + 1]).is_symlink()
                   for i in range(len(parts)))

    def clear(self, rel: str) -> None:
        path = self.root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()

    # -- edits -----------------------------------------------------------------------------

    @rule(rel=st.sampled_from(FILES + PATHS), data=st.binary(max_size=16))
    def write_file(self, rel: str, data: bytes) -> None:
        path = self.root / rel
        if not self.enterable(rel):
            return
        self.clear(rel)
        path.write_bytes(data)
        self.touched(rel)

    @rule(rel=st.sampled_from(PATHS))
    def make_dir(self, rel: str) -> None:
        path = self.root / rel
        if not self.enterable(rel):
            return
        self.clear(rel)
        path.mkdir()
        (path / "inside").write_bytes(rel.encode())
        self.touched(rel)

    @rule(rel=st.sampled_from(PATHS), link_to=st.sampled_from(["a", "nowhere", "../b"]))
    def make_link(self, rel: str, link_to: str) -> None:
        path = self.root / rel
        if not self.enterable(rel):
            return
        self.clear(rel)
        path.symlink_to(link_to)
        self.touched(rel)

    @rule(rel=st.sampled_from(PATHS))
    def remove(self, rel: str) -> None:
        path = self.root / rel
        if self.enterable(rel) and (path.exists() or path.is_symlink()):
            self.touched(rel)
            self.clear(rel)

    @rule(rel=st.sampled_from(FILES + PATHS), executable=st.booleans())
    def chmod(self, rel: str, executable: bool) -> None:
        path = self.root / rel
        if not self.enterable(rel) or path.is_symlink() or not path.exists():
            return
        mode = 0o755 if executable or path.is_dir() else 0o644
        if path.is_dir():
            mode = 0o750 if executable else 0o755
        os.chmod(path, mode)
        self.touched(rel, enter=False)

    @rule(rel=st.sampled_from(PATHS))
    def make_fifo(self, rel: str) -> None:
        """Skipped, and recorded as such: a reused directory carries its skips over."""
        if not self.enterable(rel):
            return
        self.clear(rel)
        os.mkfifo(self.root / rel)
        self.touched(rel)

    @rule(rel=st.sampled_from(DIRS))
    def spurious_event(self, rel: str) -> None:
        """A watcher may report a directory in which nothing changed."""
        self.dirty.add(os.fsencode(rel))
        self.whole.add(os.fsencode(rel))
        self.names.pop(os.fsencode(rel), None)

    @rule(rel=st.sampled_from(FILES + PATHS))
    def spurious_name(self, rel: str) -> None:
        """Or a name in which nothing changed (an event on a file written with the same
        bytes, or on a name that came and went)."""
        parent, _, name = rel.rpartition("/")
        self.saw(os.fsencode(parent), os.fsencode(name))

    @rule()
    def forget_trees(self) -> None:
        """A process that did not write the cached trees (a fresh CLI) lists directories from
        the cache entry by entry instead of patching their trees."""
        self.ws.repo._trees.clear()
        self.ws.repo._tree_data.clear()

    # -- snapshots ---------------------------------------------------------------------------

    def check(self, dirty: set[bytes] | None) -> None:
        parent = self.ws.snapshots()[-1]
        diffs = self.diffs
        snap = self.ws.snapshot(type="auto", dirty=dirty)
        assert self.diffs == diffs, "counted by a tree diff, not by the scan"
        want = count_changes(diff_trees(self.ws.repo.tree, parent.root, self.ws.repo.tree,
                                        snap.root))
        assert (snap.created, snap.modified, snap.deleted) == want
        root, cache, skipped, totals = scratch_scan(self.ws)
        assert snap.root == root
        assert (snap.files, snap.dirs, snap.symlinks, snap.bytes) == totals
        assert sorted((k.path, k.reason) for k in snap.skipped) == skipped
        kept = self.ws.repo.load_statcache()
        assert kept.snapshot_id == snap.id
        assert cache_shape(kept.roots[0]) == cache_shape(cache)
        self.dirty = set()
        self.names = {}
        self.whole = set()

    @rule()
    def snapshot_from_dirty_set(self) -> None:
        self.check(set(self.dirty))

    @rule()
    def snapshot_from_dirty_names(self) -> None:
        self.check(DirtyDirs(self.dirty, {d: frozenset(n) for d, n in self.names.items()}))

    @rule()
    def snapshot_full(self) -> None:
        self.check(None)


IncrementalMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestIncremental = IncrementalMachine.TestCase


def test_counts_without_a_matching_cache_fall_back_to_the_diff(ws_dir: Path) -> None:
    """A cache that does not describe the parent (here: none at all) cannot count; the diff
    does, with the same result."""
    (ws_dir / "d").mkdir()
    (ws_dir / "d" / "f").write_bytes(b"one")
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    (ws_dir / "d" / "f").write_bytes(b"two")
    (ws_dir / "d" / "g").write_bytes(b"new")
    ws.repo.statcache_path.unlink()
    ws.repo._statcache_memo = None
    snap = ws.snapshot()
    assert (snap.created, snap.modified, snap.deleted) == (1, 1, 0)


def test_a_vanished_directory_leaves_the_cache(ws_dir: Path) -> None:
    """Deleting a directory below a reused sibling: its entries (and those below it) must not
    stay in the cache, which may only vouch for the objects of its own snapshot."""
    for d in ("keep/sub", "gone/deep/er"):
        (ws_dir / d).mkdir(parents=True)
        (ws_dir / d / "f").write_bytes(d.encode())
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    shutil.rmtree(ws_dir / "gone")
    snap = ws.snapshot(dirty={b""})
    assert (snap.created, snap.modified, snap.deleted) == (0, 0, 1)
    cache = ws.repo.load_statcache().roots[0]
    assert sorted(cache) == [b"", b"keep", b"keep/sub"]
    assert stat.S_ISDIR(cache[b""][1][b"keep"][0][0])


def test_skips_below_an_entered_directory_are_reported_once(ws_dir: Path) -> None:
    """A directory patched from the cache carries over the skips of the subtrees it reuses,
    not of those it enters (which find their skips again)."""
    (ws_dir / "a" / "b").mkdir(parents=True)
    os.mkfifo(ws_dir / "a" / "b" / "pipe")
    os.mkfifo(ws_dir / "top-pipe")
    ws = Workspace.init(ws_dir)
    first = ws.snapshot()
    assert len(first.skipped) == 2
    (ws_dir / "a" / "b" / "new").write_bytes(b"new")
    snap = ws.snapshot(dirty={b"a/b"})
    assert snap.created == 1
    assert sorted(k.path for k in snap.skipped) == [b"0/a/b/pipe", b"0/top-pipe"]
