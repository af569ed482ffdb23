"""The SnapshotManager API, as seed 002 documents it, including where the seed was wrong."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from ctrlz import (
    Change,
    ContentHash,
    CtrlzError,
    ExclusionConfig,
    FileState,
    SessionMetadata,
    SnapshotManager,
    SnapshotManifest,
)
from tests.conftest import Link, make_tree


@pytest.fixture
def tracked(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    make_tree(root, {"a.txt": "alpha\n", "src": {"m.py": "x = 1\n"}, ".gitignore": "*.tmp\n",
                     "skip.tmp": "ignored"})
    return root


def test_baseline_manifest(tracked: Path, tmp_path: Path) -> None:
    mgr = SnapshotManager(str(tmp_path / "session"), [str(tracked)])
    m = mgr.create_baseline()
    assert isinstance(m, SnapshotManifest)
    assert m.number == 0 and m.parent is None
    assert isinstance(m.merkle_root, ContentHash) and len(m.merkle_root.hex()) == 64
    a = str(tracked / "a.txt")
    assert set(m.files) == {a, str(tracked / "src" / "m.py"), str(tracked / ".gitignore")}
    fs = m.files[a]
    assert isinstance(fs, FileState)
    assert fs.hash.hex() == hashlib.sha256(b"alpha\n").hexdigest()
    assert fs.size == 6 and fs.permissions == stat.S_IFREG | 0o644
    assert fs.mtime == int(os.stat(a).st_mtime)
    assert mgr.snapshot_count() == 1
    assert m.timestamp.endswith("Z") and "T" in m.timestamp


def test_incremental_requires_baseline(tracked: Path, tmp_path: Path) -> None:
    mgr = SnapshotManager(str(tmp_path / "session"), [str(tracked)])
    with pytest.raises(RuntimeError, match="create_baseline"):
        mgr.create_incremental()


def test_incremental_changes(tracked: Path, tmp_path: Path) -> None:
    mgr = SnapshotManager(str(tmp_path / "session"), [str(tracked)])
    mgr.create_baseline()
    (tracked / "a.txt").write_text("ALPHA\n")  # same size: caught by content
    (tracked / "new.txt").write_text("new")
    (tracked / "src" / "m.py").unlink()
    m1, changes = mgr.create_incremental()
    assert m1.number == 1 and m1.parent == 0
    got = {(c.path, c.change_type, c.size_delta) for c in changes}
    assert got == {(str(tracked / "a.txt"), "modified", 0),
                   (str(tracked / "new.txt"), "created", 3),
                   (str(tracked / "src" / "m.py"), "deleted", -6)}
    assert all(isinstance(c, Change) for c in changes)
    _, none = mgr.create_incremental()
    assert none == []


def test_restore_to_and_dry_run(tracked: Path, tmp_path: Path) -> None:
    mgr = SnapshotManager(str(tmp_path / "session"), [str(tracked)])
    mgr.create_baseline()
    (tracked / "a.txt").write_text("changed a lot\n")
    (tracked / "created.txt").write_text("later")
    os.chmod(tracked / "src" / "m.py", 0o600)
    (tracked / "later.tmp").write_text("ignored: must survive")
    diff = mgr.compute_restore_diff(0)
    kinds = {(Path(c.path).name, c.change_type) for c in diff}
    assert kinds == {("a.txt", "modified"), ("created.txt", "deleted"),
                     ("m.py", "permissions_changed")}
    assert (tracked / "created.txt").exists()  # dry run
    applied = mgr.restore_to(0)
    assert {(Path(c.path).name, c.change_type) for c in applied} == kinds
    assert (tracked / "a.txt").read_text() == "alpha\n"
    assert not (tracked / "created.txt").exists()
    assert os.stat(tracked / "src" / "m.py").st_mode & 0o777 == 0o644
    assert (tracked / "later.tmp").read_text() == "ignored: must survive"
    assert mgr.snapshot_count() == 1  # the safety snapshot is kept outside the numbering


def test_resume_from_existing_session(tracked: Path, tmp_path: Path) -> None:
    session = str(tmp_path / "session")
    mgr = SnapshotManager(session, [str(tracked)])
    base = mgr.create_baseline()
    mgr.close()
    again = SnapshotManager(session, [str(tracked)])
    assert again.snapshot_count() == 1
    (tracked / "a.txt").write_text("x")
    m, changes = again.create_incremental()
    assert m.number == 1 and len(changes) == 1
    assert again.load_manifest(0).merkle_root == base.merkle_root
    assert (tmp_path / "session" / "catalog.db").exists()  # everything under session_dir


def test_multiple_tracked_paths(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    make_tree(one, {"x.txt": "1"})
    make_tree(two, {"y.txt": "2", "link": Link("y.txt")})
    mgr = SnapshotManager(str(tmp_path / "s"), [str(one), str(two)])
    m = mgr.create_baseline()
    assert set(m.files) == {str(one / "x.txt"), str(two / "y.txt")}
    assert m.symlinks == {str(two / "link"): "y.txt"}
    (two / "y.txt").write_text("changed")
    mgr.restore_to(0)
    assert (two / "y.txt").read_text() == "2"


def test_exclusion_config(tracked: Path, tmp_path: Path) -> None:
    ex = ExclusionConfig(exclude_patterns=["src"], exclude_globs=["*.txt"],
                         force_include=["a.txt"])
    assert ex.use_gitignore and ex.exclude_globs == ["*.txt"]
    mgr = SnapshotManager(str(tmp_path / "s"), [str(tracked)], exclusion=ex)
    m = mgr.create_baseline()
    assert set(m.files) == {str(tracked / "a.txt"), str(tracked / ".gitignore")}


def test_patterns_never_match_folders_above_the_root(tmp_path: Path) -> None:
    root = tmp_path / "build" / "proj"
    make_tree(root, {"main.c": "int main;", "build": {"out.o": "obj"}})
    mgr = SnapshotManager(str(tmp_path / "s"), [str(root)],
                          exclusion=ExclusionConfig(exclude_patterns=["build"]))
    assert set(mgr.create_baseline().files) == {str(root / "main.c")}


def test_session_dir_inside_tracked_path_is_never_captured(tracked: Path) -> None:
    mgr = SnapshotManager(str(tracked / ".session"), [str(tracked)])
    m = mgr.create_baseline()
    assert not any(".session" in p for p in m.files)


def test_limits(tracked: Path, tmp_path: Path) -> None:
    mgr = SnapshotManager(str(tmp_path / "s"), [str(tracked)], max_entries=2)
    with pytest.raises(CtrlzError, match="max_entries"):
        mgr.create_baseline()


def test_session_metadata_round_trip(tracked: Path, tmp_path: Path) -> None:
    meta = SessionMetadata("sess-1", ["claude", "--yes"], [str(tracked)])
    assert meta.started and meta.ended is None and meta.exit_code is None
    assert meta.merkle_roots == [] and meta.network_events == []
    mgr = SnapshotManager(str(tmp_path / "s"), [str(tracked)])
    meta.add_merkle_root(mgr.create_baseline().merkle_root)
    meta.set_network_events([{"target": "pypi.org", "decision": "allow"}])
    meta.exit_code = 3
    meta.snapshot_count = 1
    mgr.save_session_metadata(meta)
    loaded = SnapshotManager.load_session_metadata(str(tmp_path / "s"))
    assert loaded.to_json() == meta.to_json()
    assert loaded.merkle_roots[0] == meta.merkle_roots[0]
    with pytest.raises(CtrlzError):
        SessionMetadata.from_json("{not json")
    assert issubclass(CtrlzError, RuntimeError)


def test_content_hash_is_hashable_and_immutable() -> None:
    h = ContentHash(hashlib.sha256(b"x").digest())
    assert {h: 1}[ContentHash.from_hex(h.hex())] == 1
    assert repr(h) == f"ContentHash({h.hex()})"
    with pytest.raises(AttributeError):
        h.digest = b""  # type: ignore[misc]
