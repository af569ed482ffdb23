"""Taking snapshots: what is captured, what is skipped, and what is trusted without reading."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ctrlz import LimitExceeded, Workspace
from ctrlz.session.config import Config
from ctrlz.state.db.catalog import WAL_KEEP
from ctrlz.state.trees import DIR, FILE, SYMLINK
from tests.conftest import Link, make_tree


def entries(ws: Workspace, snap_ref: str = "latest") -> dict[str, tuple[str, int]]:
    """path -> (kind, size) of everything in a snapshot."""
    snap = ws.resolve(snap_ref)
    out: dict[str, tuple[str, int]] = {}
    stack = [(b"", e) for e in ws.repo.tree(snap.root)]
    while stack:
        prefix, e = stack.pop()
        path = prefix + b"/" + e.name if prefix else e.name
        out[os.fsdecode(path)] = (e.kind, e.size)
        if e.kind == DIR:
            stack += [(path, c) for c in ws.repo.tree(e.oid)]
    return {k[2:]: v for k, v in out.items() if k.startswith("0/")}


def test_first_snapshot_captures_files_dirs_and_symlinks(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "alpha", "src": {"m.py": "x = 1\n", "empty": {}},
                       "link": Link("a.txt"), "dangling": Link("/nowhere/at/all")})
    ws = Workspace.init(ws_dir)
    snap = ws.snapshot(label="first")
    assert (snap.files, snap.symlinks, snap.dirs) == (2, 2, 2)
    assert snap.bytes == len("alpha") + len("x = 1\n")
    assert snap.number == 0 and snap.parent is None and snap.created == 4
    got = entries(ws)
    assert got["link"][0] == SYMLINK and got["src/empty"][0] == DIR
    assert got["a.txt"] == (FILE, 5)
    assert ws.resolve("first").id == snap.id


def test_no_change_snapshot_reuses_every_tree(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a": {"b": {"c.txt": "c"}}, "d.txt": "d"})
    ws = Workspace.init(ws_dir)
    first = ws.snapshot()
    second = ws.snapshot()
    assert second.root == first.root
    assert (second.created, second.modified, second.deleted) == (0, 0, 0)
    assert second.added_bytes == 0
    assert second.parent == first.id


def test_a_snapshot_leaves_no_long_catalog_log_behind(ws_dir: Path) -> None:
    """SQLite keeps its WAL while a connection is open (a library user's, the daemon's):
    the store's bytes on disk are the catalog's, not a journal's copy of them as well."""
    make_tree(ws_dir, {f"f{i}.txt": f"file {i}\n" * 20 for i in range(400)})
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    assert os.stat(f"{ws.repo.catalog.path}-wal").st_size <= WAL_KEEP
    assert ws.repo.catalog.object_count() >= 400


def test_stat_cache_skips_reading_unchanged_files(ws_dir: Path) -> None:
    make_tree(ws_dir, {f"f{i}.txt": f"file {i}" for i in range(20)})
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    time.sleep(0.1)  # let every file leave the racy window of the cache (50 ms)
    ws.snapshot()  # re-hashes the racily clean files once, then trusts them
    ws.snapshot()
    assert ws.last_scan.hashed == 0
    assert ws.last_scan.reused_trees >= 1
    (ws_dir / "f3.txt").write_text("changed")
    ws.snapshot()
    assert ws.last_scan.hashed == 1


def test_edit_keeping_size_and_mtime_is_caught(ws_dir: Path) -> None:
    """The racy-clean case: same size, mtime put back; only ctime/inode or content tell."""
    make_tree(ws_dir, {"same.txt": "aaaa"})
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    before = os.stat(ws_dir / "same.txt")
    (ws_dir / "same.txt").write_text("bbbb")
    os.utime(ws_dir / "same.txt", ns=(before.st_atime_ns, before.st_mtime_ns))
    snap = ws.snapshot()
    assert snap.modified == 1


def test_edit_after_cache_is_trusted_still_caught(ws_dir: Path) -> None:
    make_tree(ws_dir, {"same.txt": "aaaa"})
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    time.sleep(0.1)
    ws.snapshot()
    ws.snapshot()  # now trusted by stat
    before = os.stat(ws_dir / "same.txt")
    (ws_dir / "same.txt").write_text("bbbb")
    os.utime(ws_dir / "same.txt", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert ws.snapshot().modified == 1


def test_racily_clean_file_is_reread_even_when_its_stat_is_identical(ws_dir: Path) -> None:
    """An edit in the same clock tick as the scan's read can leave every stat field as it
    was. The cache entry of a file stamped that recently is not trusted, so the next scan
    reads the file: here the cache is made to hold the edited file's exact stat, as such an
    edit would, and the edit is still caught."""
    from ctrlz.state.db.statcache import Listing, trusted

    make_tree(ws_dir, {"same.txt": "aaaa"})
    ws = Workspace.init(ws_dir)
    soon = time.time_ns() + 10**9  # stamped as if written in the scan's own tick, or later
    os.utime(ws_dir / "same.txt", ns=(soon, soon))
    ws.snapshot()
    (ws_dir / "same.txt").write_text("bbbb")
    os.utime(ws_dir / "same.txt", ns=(soon, soon))
    cache = ws.repo.load_statcache()
    key, oid, trust = cache.root(0)[b""][1][b"same.txt"]
    assert not trust and not trusted(key, cache.scan_ns)
    tree_oid, listing, totals = cache.root(0)[b""]
    rows = listing.decode()
    rows[b"same.txt"] = (_stat_key(ws_dir / "same.txt"), oid, trust)
    cache.root(0)[b""] = (tree_oid, Listing.pack(rows.items()), totals)
    ws.repo.save_statcache(cache)
    assert ws.snapshot().modified == 1


def test_old_files_are_trusted_and_never_reread(ws_dir: Path) -> None:
    """Racy means stamped within the timestamp granularity of the scan's start, not within
    a second of it: a big file written well before a scan is read once, then never again."""
    make_tree(ws_dir, {"big.bin": os.urandom(4 << 20), "small.txt": "s"})
    time.sleep(0.1)
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    assert ws.last_scan.hashed == 2
    ws.snapshot()
    assert ws.last_scan.hashed == 0


def test_racy_rule_follows_timestamp_granularity() -> None:
    from ctrlz.state.db.statcache import trusted

    second, scan = 1_000_000_000, 1_700_000_000_123_456_789

    def key(mtime: int, ctime: int) -> tuple[int, int, int, int, int]:
        return (0o100644, 1, mtime, ctime, 1)

    assert trusted(key(scan - 60_000_000, scan - 60_000_000), scan)
    assert not trusted(key(scan - 10_000_000, scan - 60_000_000), scan)  # same tick
    assert not trusted(key(scan - 60_000_000, scan + 5), scan)  # changed during the scan
    whole = scan - scan % second  # a whole-second stamp: coarse file system, 2 s window
    assert not trusted(key(whole, whole), scan)
    assert not trusted(key(whole - second, whole - second), scan)
    assert trusted(key(whole - 2 * second, whole - 2 * second), scan)


def _stat_key(path: Path) -> tuple[int, int, int, int, int]:
    s = os.lstat(path)
    return (s.st_mode, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino)


def test_special_files_are_skipped_and_reported(ws_dir: Path) -> None:
    make_tree(ws_dir, {"ok.txt": "ok"})
    os.mkfifo(ws_dir / "pipe")
    ws = Workspace.init(ws_dir)
    snap = ws.snapshot()
    assert [(s.path, s.reason) for s in snap.skipped] == [
        (b"0/pipe", "special file skipped (FIFO)")]
    assert "pipe" not in entries(ws)


def test_large_new_file_is_skipped_and_listed(ws_dir: Path) -> None:
    make_tree(ws_dir, {"small.txt": "s", "big.bin": b"x" * 5000})
    config = Config()
    config.set("max_file_size", 1000, "test")
    ws = Workspace.init(ws_dir, config=config)
    snap = ws.snapshot()
    assert [s.path for s in snap.skipped] == [b"0/big.bin"]
    assert "max_file_size" in snap.skipped[0].reason
    assert "big.bin" not in entries(ws)


def test_max_entries_is_a_clear_error(ws_dir: Path) -> None:
    make_tree(ws_dir, {f"f{i}": "x" for i in range(10)})
    config = Config()
    config.set("max_entries", 5, "test")
    ws = Workspace.init(ws_dir, config=config)
    with pytest.raises(LimitExceeded, match="max_entries=5.*exclude_patterns"):
        ws.snapshot()
    assert ws.snapshots() == []


def test_max_bytes_refuses_only_when_asked(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a": b"x" * 600, "b": b"y" * 600})
    config = Config()
    config.set("max_bytes", 1000, "test")
    config.set("refuse_over_max_bytes", True, "test")
    ws = Workspace.init(ws_dir, config=config)
    with pytest.raises(LimitExceeded, match="max_bytes"):
        ws.snapshot()


def test_over_max_bytes_the_largest_new_files_are_left_out(ws_dir: Path,
                                                           tmp_path: Path) -> None:
    """A workspace that outgrew max_bytes is still snapshotted: the largest new files are
    left out, largest first, until the rest fits, and each is reported; a restore of that
    snapshot leaves them alone."""
    mib = 1 << 20
    make_tree(ws_dir, {"src.txt": "code", "a.bin": b"a" * (3 * mib),
                       "b.bin": b"b" * (2 * mib), "c.bin": b"c" * (mib + mib // 2)})
    config = Config()
    config.set("max_bytes", 4 * mib, "test")
    ws = Workspace.init(ws_dir, config=config)
    snap = ws.snapshot()
    assert sorted(entries(ws)) == ["b.bin", "c.bin", "src.txt"]
    assert [k.path for k in snap.skipped] == [b"0/a.bin"]
    assert snap.skipped[0].reason == (
        "new or changed file of 3,145,728 bytes, left out: the workspace holds 6,815,748 "
        "bytes, over max_bytes=4,194,304 (largest first); raise max_bytes or exclude it")
    assert snap.bytes == 2 * mib + mib + mib // 2 + 4
    # a new 10 MiB file: this one is left out, the rest (stored already) stays
    (ws_dir / "new.bin").write_bytes(os.urandom(10 * mib))
    snap2 = ws.snapshot()
    assert sorted(k.path for k in snap2.skipped) == [b"0/a.bin", b"0/new.bin"]
    assert sorted(entries(ws)) == ["b.bin", "c.bin", "src.txt"]
    # a diff stores nothing, so nothing is left out of it: what the snapshot left out is
    # on disk and not in the snapshot, and everything else is unchanged
    changed = {c.path: c.change_type for c in ws.diff(snap2.id).changes}
    assert changed == {b"a.bin": "created", b"new.bin": "created"}
    (ws_dir / "src.txt").write_text("edited")
    ws.rollback(snap2.id)
    assert (ws_dir / "new.bin").stat().st_size == 10 * mib  # kept: never captured
    assert (ws_dir / "src.txt").read_text() == "code"


def test_a_dirty_scan_weighs_what_max_bytes_left_out_again(ws_dir: Path) -> None:
    """Whether a file left out for max_bytes fits depends on the rest of the tree: a scan
    from a watcher's dirty set (the daemon's) weighs it again as a full scan does, so that
    it is taken once it fits, and listed with the others, largest first, when it does not
    (an independent check found old figures carried over, and the order lost)."""
    from ctrlz.state.scan import DirtyDirs

    mib = 1 << 20
    make_tree(ws_dir, {"src.txt": "code", "big": {"b3.bin": os.urandom(3 * mib),
                                                  "b5.bin": os.urandom(5 * mib)}})
    config = Config()
    config.set("max_bytes", 6 * mib, "test")
    ws = Workspace.init(ws_dir, config=config)
    assert [k.path for k in ws.snapshot().skipped] == [b"0/big/b5.bin"]
    # the watcher saw only b6 arrive: both big ones are weighed, with one total
    (ws_dir / "big" / "b6.bin").write_bytes(os.urandom(6 * mib))
    snap = ws.snapshot(dirty=DirtyDirs({b"big"}, {b"big": frozenset({b"b6.bin"})}))
    assert [k.path for k in snap.skipped] == [b"0/big/b6.bin", b"0/big/b5.bin"]
    assert all("the workspace holds 14,680,068 bytes" in k.reason for k in snap.skipped)
    # the watcher saw only b3 and b6 go: b5 fits now, and is taken
    (ws_dir / "big" / "b3.bin").unlink()
    (ws_dir / "big" / "b6.bin").unlink()
    snap = ws.snapshot(dirty=DirtyDirs({b"big"},
                                       {b"big": frozenset({b"b3.bin", b"b6.bin"})}))
    assert snap.skipped == () and sorted(entries(ws)) == ["big", "big/b5.bin", "src.txt"]


def test_large_files_become_loose_objects_and_round_trip(ws_dir: Path, tmp_path: Path) -> None:
    big = os.urandom(5 << 20)
    text = b"line of a log file\n" * 400_000  # compressible, stored zstd
    make_tree(ws_dir, {"big.bin": big, "log.txt": text})
    ws = Workspace.init(ws_dir)
    snap = ws.snapshot()
    assert snap.added_bytes >= len(big) + len(text)
    loose = list((ws.store_path / "objects").rglob("*"))
    assert sum(1 for p in loose if p.is_file()) == 2
    ws.restore_to(snap.id, tmp_path / "out")
    assert (tmp_path / "out" / "big.bin").read_bytes() == big
    assert (tmp_path / "out" / "log.txt").read_bytes() == text


def test_identical_content_is_stored_once(ws_dir: Path) -> None:
    make_tree(ws_dir, {f"copy{i}.txt": "same content " * 100 for i in range(50)})
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    logical, _stored = ws.store_usage()
    assert logical < 2 * len("same content " * 100) + 10_000  # one blob plus trees


def test_store_inside_workspace_is_refused(ws_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctrlz import WorkspaceError
    monkeypatch.setenv("CTRLZ_HOME", str(ws_dir / ".ctrlz"))
    with pytest.raises(WorkspaceError, match="inside the workspace"):
        Workspace.init(ws_dir)
    assert not (ws_dir / ".ctrlz").exists()


def test_home_may_be_given_as_a_string(ws_dir: Path, tmp_path: Path) -> None:
    make_tree(ws_dir, {"a.txt": "a"})
    home = str(tmp_path / "elsewhere")
    ws = Workspace.init(ws_dir, home=home)
    ws.snapshot(label="one")
    ws.close()
    again = Workspace.open(ws_dir, home=home)
    assert [s.label for s in again.snapshots()] == ["one"]
    again.close()


def test_git_directory_is_captured(ws_dir: Path) -> None:
    make_tree(ws_dir, {".git": {"HEAD": "ref: refs/heads/main\n", "config": "[core]\n"},
                       ".gitignore": ".*\n", "a.txt": "a"})
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    got = entries(ws)
    assert ".git/HEAD" in got and ".git/config" in got


def test_dirty_set_rescans_only_the_directories_that_changed(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a": {"x.txt": "x", "deep": {"y.txt": "y"}}, "b": {"z.txt": "z"},
                       "top.txt": "t"})
    ws = Workspace.init(ws_dir)
    first = ws.snapshot()
    assert ws.snapshot(dirty=set()).root == first.root  # nothing changed: nothing listed
    (ws_dir / "a" / "deep" / "y.txt").write_text("changed")
    (ws_dir / "b" / "new.txt").write_text("new")
    snap = ws.snapshot(dirty={b"a/deep", b"b"})
    assert (snap.created, snap.modified, snap.deleted) == (1, 1, 0)
    assert (snap.files, snap.dirs, snap.bytes) == (5, 3, first.bytes + len("changed") - 1 + 3)
    # the dirty set is trusted: a change the watcher did not report waits for a full scan
    (ws_dir / "b" / "z.txt").write_text("unreported")
    assert ws.snapshot(dirty={b"a"}).modified == 0
    assert ws.snapshot().modified == 1


def test_dirty_set_keeps_skipped_paths_of_unlisted_directories(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a": {"x.txt": "x"}, "b": {"y.txt": "y"}})
    os.mkfifo(ws_dir / "pipe")
    os.mkfifo(ws_dir / "b" / "pipe")
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    (ws_dir / "a" / "x.txt").write_text("changed")
    snap = ws.snapshot(dirty={b"a"})
    assert snap.modified == 1
    assert sorted(k.path for k in snap.skipped) == [b"0/b/pipe", b"0/pipe"]


def test_ring_drops_defer_collection_to_gc(ws_dir: Path) -> None:
    """Dropping the oldest auto snapshot must not walk the whole store every time; its
    objects wait for `gc` (or the byte cap), and nothing live is lost meanwhile."""
    config = Config()
    config.set("auto_max", 1, "test")
    ws = Workspace.init(ws_dir, config=config)
    (ws_dir / "gone.bin").write_bytes(os.urandom(50_000))
    ws.snapshot(type="auto")
    (ws_dir / "gone.bin").unlink()
    (ws_dir / "kept.txt").write_text("kept")
    ws.snapshot(type="auto")  # the ring drops the first one
    assert [s.type for s in ws.snapshots()] == ["auto"]
    assert ws.verify().ok
    assert ws.gc().removed_bytes >= 50_000
    assert ws.verify().ok


def test_a_snapshot_returns_what_it_captured(ws_dir: Path) -> None:
    """What a restore goes on with comes back from the snapshot itself: the trees its scan
    decoded (the whole captured tree, with no read of the store), the stat cache it wrote,
    and the stat key of each path it read by name though the rules exclude it. Nothing is
    left in a dict the caller passed or in the repository's decoded-tree cache."""
    from ctrlz.engine.snapshot import take_snapshot, writing

    make_tree(ws_dir, {"src": {"m.py": "x = 1\n"}, "build": {"out.o": "obj"}})
    config = Config()
    config.set("exclude_patterns", ["build"], "test")
    ws = Workspace.init(ws_dir, config=config)
    with writing(ws.repo):
        taken = take_snapshot(ws.repo, ws.roots, [ws.config.rules], type="safety",
                              include=[b"0/build/out.o"])
    snap = taken.snapshot
    assert ws.resolve(snap.id) == snap and taken.stats.files == 2  # the graft counts
    assert taken.cache.snapshot_id == snap.id
    assert list(taken.keys) == [b"0/build/out.o"]
    stat_key, oid = taken.keys[b"0/build/out.o"]
    assert stat_key[1] == len("obj") and ws.repo.objects.read(oid) == b"obj"
    top = {e.name: e for e in taken.trees[snap.root]}
    workspace = {e.name: e for e in taken.trees[top[b"0"].oid]}
    assert set(workspace) == {b"build", b"src"}  # the graft is among the decoded trees
    assert [e.name for e in taken.trees[workspace[b"src"].oid]] == [b"m.py"]
    assert snap.root not in ws.repo._trees


def test_a_snapshot_runs_inside_one_hold_on_the_store(ws_dir: Path) -> None:
    """The lock and the clean-up after a crashed writer belong to the operation that owns
    the snapshot (:func:`writing`): ``take_snapshot`` takes neither, and refuses to run
    without the lock rather than write unlocked."""
    from ctrlz.engine.snapshot import take_snapshot, writing

    make_tree(ws_dir, {"a.txt": "a"})
    ws = Workspace.init(ws_dir)
    with pytest.raises(AssertionError, match="writing"):
        take_snapshot(ws.repo, ws.roots, [ws.config.rules])
    assert ws.snapshots() == []
    with writing(ws.repo):
        assert ws.repo.lock.held
        take_snapshot(ws.repo, ws.roots, [ws.config.rules])
    assert not ws.repo.lock.held and len(ws.snapshots()) == 1
