"""The walk's usual case, a file or link whose stat matches its trusted stat-cache entry, is
kept as that cache entry (``DirNode.same``) and becomes a tree entry only if its folder is
rebuilt. Whatever the tree, a scan that trusts the cache must give what a scan from scratch
gives: the same root, totals, skipped paths, files with more than one link and cache listings.

These trees are the hostile ones: deep, wide, names that are not UTF-8, links of every kind,
a FIFO, and edits that keep a file's size and mtime.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ctrlz import Workspace
from ctrlz.engine.snapshot import WorkingState, _scan_all
from ctrlz.state.db.statcache import StatCache
from ctrlz.state.scan import HashSink, Limits

DEEP = 150  # below Python's recursion limit would not prove much, above it costs time
WIDE = 1500


def _scan(ws: Workspace, cache: StatCache) -> WorkingState:
    repo = ws.repo
    return _scan_all(repo, ws.roots, [ws.config.rules],
                     HashSink(repo.objects.digest, repo.objects.new_hasher), Limits(), cache,
                     time.time_ns())


def _outcome(state: WorkingState) -> tuple[Any, ...]:
    s = state.stats
    listings = {rel: (oid, {name: e[1] for name, e in mapping.items()}, totals)
                for rel, (oid, mapping, totals) in state.scans[0].cache.items()}
    return (state.root, (s.files, s.dirs, s.symlinks, s.bytes),
            sorted((k.path, k.reason) for k in state.skipped), sorted(state.scans[0].linked),
            listings)


def _same_as_scratch(ws: Workspace) -> WorkingState:
    """Scan with the stored stat cache and from scratch; assert they agree."""
    cached = _scan(ws, ws.repo.load_statcache())
    scratch = _scan(ws, StatCache(algorithm=ws.repo.algorithm))
    assert _outcome(cached) == _outcome(scratch)
    return cached


def _hostile_tree(root: Path) -> None:
    deep = root / "deep"
    deep.mkdir(parents=True)
    chain = os.fsencode(deep)
    for _ in range(DEEP):
        chain += b"/d"
        os.mkdir(chain)
    with open(chain + b"/bottom", "wb") as f:
        f.write(b"bottom")
    wide = root / "wide"
    wide.mkdir()
    for i in range(WIDE):
        (wide / f"f{i:05}").write_bytes(b"%d" % i)
    odd = os.fsencode(root / "odd")
    os.mkdir(odd)
    for name in (b"caf\xe9", b"\xff\xfe", b"line\nbreak", b"sp ace"):
        with open(odd + b"/" + name, "wb") as f:
            f.write(name)
    os.mkdir(odd + b"/dir\xe9")
    with open(odd + b"/dir\xe9/in", "wb") as f:
        f.write(b"in")
    (root / "target").write_bytes(b"target")
    os.symlink("target", root / "link")
    os.symlink("nowhere", root / "dangling")
    (root / "one").write_bytes(b"one")
    os.link(root / "one", root / "one-again")  # two links: noted in every scan
    os.mkfifo(root / "fifo")  # skipped and reported, never cached
    (root / "empty").mkdir()


def _trusted_snapshot(ws: Workspace) -> None:
    """A snapshot whose stat cache trusts everything: its scan starts after the racy window
    of every timestamp in the tree."""
    time.sleep(0.1)
    ws.snapshot(type="auto")


def test_a_cached_rescan_of_a_hostile_tree_equals_a_scan_from_scratch(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _hostile_tree(root)
    ws = Workspace.init(root, home=tmp_path / "home")
    _trusted_snapshot(ws)
    state = _same_as_scratch(ws)
    assert state.stats.hashed == 0  # every file came from the cache: the case under test
    assert sorted(state.scans[0].linked) == [b"one", b"one-again"]
    assert any(k.path.endswith(b"fifo") for k in state.skipped)


def test_edits_the_cache_cannot_vouch_for_are_read_again(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _hostile_tree(root)
    ws = Workspace.init(root, home=tmp_path / "home")
    _trusted_snapshot(ws)
    # same size and mtime, other bytes: only the ctime tells
    edited = root / "wide" / "f00007"
    before = edited.stat()
    edited.write_bytes(b"X")
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
    # a second link to a file the cache holds with one: both names become linked
    os.link(root / "target", root / "wide" / "target-again")
    os.chmod(root / "odd" / "sp ace", 0o600)
    os.unlink(os.fsencode(root / "odd") + b"/caf\xe9")
    os.mkdir(os.fsencode(root / "odd") + b"/caf\xe9")  # a file became a folder
    (root / "deep" / "d" / "d" / "new").write_bytes(b"new")
    state = _same_as_scratch(ws)
    assert state.stats.hashed >= 3
    assert {b"target", b"wide/target-again"} <= set(state.scans[0].linked)
    # and once the new state is cached and trusted, a rescan reads nothing again
    _trusted_snapshot(ws)
    assert _same_as_scratch(ws).stats.hashed == 0


def test_a_file_that_vanishes_or_appears_between_scans(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _hostile_tree(root)
    ws = Workspace.init(root, home=tmp_path / "home")
    _trusted_snapshot(ws)
    for i in range(0, WIDE, 7):
        (root / "wide" / f"f{i:05}").unlink()
    (root / "wide" / "late").write_bytes(b"late")
    (root / "one-again").unlink()  # "one" has one link again
    state = _same_as_scratch(ws)
    assert b"one" not in state.scans[0].linked
