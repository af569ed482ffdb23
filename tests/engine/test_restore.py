"""Restores obey the safety contract: only covered paths, safety snapshot first, verified."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctrlz import PathOutsideWorkspace, RestoreError, Workspace
from ctrlz.session.config import Config
from tests.conftest import Link, make_tree, tree_state

BASE = {
    "README.md": "# project\n",
    "src": {"app.py": "print('v1')\n", "util.py": "def f():\n    return 1\n",
            "pkg": {"__init__.py": ""}},
    "docs": {"guide.md": "guide\n"},
    "run.sh": "#!/bin/sh\necho hi\n",
    "link": Link("src/app.py"),
    ".gitignore": "*.log\nbuild/\n",
}


@pytest.fixture
def ws(ws_dir: Path) -> Workspace:
    make_tree(ws_dir, BASE)
    os.chmod(ws_dir / "run.sh", 0o755)
    return Workspace.init(ws_dir)


def damage(root: Path) -> None:
    (root / "src" / "app.py").write_text("print('v2 is longer')\n")
    (root / "README.md").unlink()
    os.chmod(root / "run.sh", 0o600)
    (root / "new.txt").write_text("created later\n")
    (root / "newdir" / "deep").mkdir(parents=True)
    (root / "newdir" / "deep" / "x.txt").write_text("x")
    import shutil
    shutil.rmtree(root / "docs")
    os.symlink("/etc", root / "docs")  # a directory replaced by a symlink
    os.unlink(root / "link")
    (root / "link").write_text("now a file")


def test_rollback_restores_the_tree_exactly(ws: Workspace, ws_dir: Path) -> None:
    before = tree_state(ws_dir)
    snap = ws.snapshot(label="base")
    damage(ws_dir)
    result = ws.restore("base")
    assert tree_state(ws_dir) == before
    assert result.safety is not None and result.safety.type == "safety"
    assert result.plan.counts()["deleted"] >= 2
    assert ws.diff(snap.id).changes == []


def test_rollback_is_undoable_from_the_safety_snapshot(ws: Workspace, ws_dir: Path) -> None:
    ws.snapshot(label="base")
    damage(ws_dir)
    damaged = tree_state(ws_dir)
    result = ws.restore("base")
    assert result.safety is not None
    ws.restore(result.safety.id)
    assert tree_state(ws_dir) == damaged


def test_ignored_and_excluded_files_survive_every_restore(ws_dir: Path) -> None:
    make_tree(ws_dir, BASE)
    config = Config()
    config.set("exclude_patterns", ["secrets"], "test")
    ws = Workspace.init(ws_dir, config=config)
    ws.snapshot(label="base")
    (ws_dir / "debug.log").write_text("ignored, created after the snapshot")
    (ws_dir / "build").mkdir()
    (ws_dir / "build" / "out.o").write_text("ignored dir")
    (ws_dir / "secrets").mkdir()
    (ws_dir / "secrets" / "key").write_text("excluded")
    ws.restore("base")
    assert (ws_dir / "debug.log").read_text() == "ignored, created after the snapshot"
    assert (ws_dir / "build" / "out.o").exists()
    assert (ws_dir / "secrets" / "key").exists()


def test_files_ignored_by_the_snapshots_rules_survive_after_rules_change(ws_dir: Path) -> None:
    """Coverage is judged by the snapshot's own recorded rules, not today's."""
    make_tree(ws_dir, BASE)
    ws = Workspace.init(ws_dir)
    ws.snapshot(label="base")
    # later the user stops ignoring *.log; a log file now is captured by the safety snapshot,
    # but the target snapshot never covered it, so it must not be deleted
    (ws_dir / ".gitignore").write_text("build/\n")
    (ws_dir / "keep.log").write_text("precious")
    ws.restore("base")
    assert (ws_dir / "keep.log").read_text() == "precious"
    assert (ws_dir / ".gitignore").read_text() == "*.log\nbuild/\n"


def test_uncaptured_file_is_never_overwritten(ws_dir: Path) -> None:
    make_tree(ws_dir, {"data.log": "v1 (captured: not ignored yet)", "a.txt": "a"})
    ws = Workspace.init(ws_dir)
    ws.snapshot(label="base")
    (ws_dir / ".gitignore").write_text("*.log\n")
    (ws_dir / "data.log").write_text("v2: now ignored, so the safety snapshot has no copy")
    result = ws.restore("base")
    assert (ws_dir / "data.log").read_text().startswith("v2")
    assert any(s.path == b"0/data.log" for s in result.skipped)


def test_nested_gitignore_is_relative_to_its_own_directory(ws_dir: Path) -> None:
    make_tree(ws_dir, {"sub": {".gitignore": "/local.txt\n", "local.txt": "ignored",
                               "deeper": {"local.txt": "kept"}}, "local.txt": "kept too"})
    ws = Workspace.init(ws_dir)
    snap = ws.snapshot()
    names = {os.fsdecode(c.path) for c in ws.diff(None, snap.id).changes}
    assert names == set()
    from tests.engine.test_snapshot import entries
    got = entries(ws)
    assert "sub/local.txt" not in got
    assert "sub/deeper/local.txt" in got and "local.txt" in got


def test_directories_created_later_are_removed_unless_they_hold_uncovered_files(
        ws: Workspace, ws_dir: Path) -> None:
    ws.snapshot(label="base")
    (ws_dir / "gen" / "a").mkdir(parents=True)
    (ws_dir / "gen" / "a" / "f.txt").write_text("covered")
    (ws_dir / "gen2").mkdir()
    (ws_dir / "gen2" / "f.txt").write_text("covered")
    (ws_dir / "gen2" / "trace.log").write_text("ignored: must survive")
    result = ws.restore("base")
    assert not (ws_dir / "gen").exists()
    assert (ws_dir / "gen2" / "trace.log").exists()
    assert not (ws_dir / "gen2" / "f.txt").exists()
    assert any(s.path == b"0/gen2" for s in result.skipped)


def test_partial_restore_touches_only_the_named_paths(ws: Workspace, ws_dir: Path) -> None:
    ws.snapshot(label="base")
    (ws_dir / "src" / "app.py").write_text("edited")
    (ws_dir / "src" / "util.py").write_text("edited too")
    (ws_dir / "README.md").write_text("edited readme")
    ws.restore("base", paths=[ws_dir / "src" / "app.py"])
    assert (ws_dir / "src" / "app.py").read_text() == "print('v1')\n"
    assert (ws_dir / "src" / "util.py").read_text() == "edited too"
    assert (ws_dir / "README.md").read_text() == "edited readme"


def test_partial_restore_of_a_path_absent_in_the_snapshot_deletes_it(
        ws: Workspace, ws_dir: Path) -> None:
    ws.snapshot(label="base")
    (ws_dir / "src" / "new.py").write_text("new")
    ws.restore("base", paths=[str(ws_dir / "src" / "new.py")])
    assert not (ws_dir / "src" / "new.py").exists()
    # and the safety snapshot has it
    ws.restore("latest", paths=[str(ws_dir / "src" / "new.py")])
    assert (ws_dir / "src" / "new.py").read_text() == "new"


def test_partial_restore_recreates_missing_parents(ws: Workspace, ws_dir: Path) -> None:
    import shutil
    ws.snapshot(label="base")
    shutil.rmtree(ws_dir / "src")
    ws.restore("base", paths=["src/pkg/__init__.py"])
    assert (ws_dir / "src" / "pkg" / "__init__.py").exists()
    assert not (ws_dir / "src" / "app.py").exists()


def test_paths_outside_the_workspace_are_refused(ws: Workspace, ws_dir: Path) -> None:
    ws.snapshot(label="base")
    for bad in ["../escape", str(ws_dir.parent / "other"), "/etc/passwd", "src/../../x"]:
        with pytest.raises(PathOutsideWorkspace):
            ws.restore("base", paths=[bad])
    # a name that merely contains two dots is fine
    assert ws.relpath(str(ws_dir / "a..b.txt")) == b"a..b.txt"


def dir_replaced_by_link_out(ws_dir: Path, outside: Path) -> Workspace:
    """A workspace whose snapshot has dir/f.txt, where an agent then replaced ``dir`` with a
    symlink pointing outside the workspace."""
    import shutil
    outside.mkdir()
    make_tree(ws_dir, {"dir": {"f.txt": "inside"}})
    ws = Workspace.init(ws_dir)
    ws.snapshot(label="base")
    shutil.rmtree(ws_dir / "dir")
    os.symlink(outside, ws_dir / "dir")
    return ws


def test_symlinked_parent_is_never_written_through(ws_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    ws = dir_replaced_by_link_out(ws_dir, outside)
    ws.restore("base")
    assert list(outside.iterdir()) == []  # nothing written outside
    assert (ws_dir / "dir").is_dir() and not (ws_dir / "dir").is_symlink()
    assert (ws_dir / "dir" / "f.txt").read_text() == "inside"


def test_symlinked_parent_with_partial_restore_is_refused(ws_dir: Path, tmp_path: Path) -> None:
    """Never written through, and the request fails rather than succeed without the path."""
    outside = tmp_path / "outside"
    ws = dir_replaced_by_link_out(ws_dir, outside)
    with pytest.raises(RestoreError, match="dir: the snapshot has a directory there"):
        ws.restore("base", paths=["dir/f.txt"])
    assert list(outside.iterdir()) == []


def test_restore_to_requires_a_new_or_empty_directory(ws: Workspace, tmp_path: Path) -> None:
    ws.snapshot(label="base")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("do not touch")
    with pytest.raises(RestoreError, match="not empty"):
        ws.restore_to("base", busy)
    assert (busy / "x").read_text() == "do not touch"
    out = tmp_path / "fresh"
    ws.restore_to("base", out)
    assert tree_state(out) == tree_state(ws.root, skip=())


def test_dry_run_changes_nothing(ws: Workspace, ws_dir: Path) -> None:
    ws.snapshot(label="base")
    damage(ws_dir)
    before = tree_state(ws_dir)
    n = len(ws.snapshots())
    result = ws.restore("base", dry_run=True)
    assert result.plan.actions and result.safety is None
    assert tree_state(ws_dir) == before
    assert len(ws.snapshots()) == n


def test_modes_and_mtimes_are_restored(ws: Workspace, ws_dir: Path) -> None:
    ws.snapshot(label="base")
    st = os.stat(ws_dir / "run.sh")
    os.chmod(ws_dir / "run.sh", 0o600)
    os.utime(ws_dir / "src" / "util.py", (1, 1))
    ws.restore("base")
    assert os.stat(ws_dir / "run.sh").st_mode & 0o777 == 0o755
    assert os.stat(ws_dir / "run.sh").st_mtime_ns == st.st_mtime_ns


def test_file_directory_swaps(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a": {"inner.txt": "i"}, "b": "file b"})
    ws = Workspace.init(ws_dir)
    before = tree_state(ws_dir)
    ws.snapshot(label="base")
    import shutil
    shutil.rmtree(ws_dir / "a")
    (ws_dir / "a").write_text("now a file")
    (ws_dir / "b").unlink()
    (ws_dir / "b").mkdir()
    (ws_dir / "b" / "x").write_text("x")
    ws.restore("base")
    assert tree_state(ws_dir) == before


def test_mtime_only_change_is_restored_and_not_counted(ws: Workspace, ws_dir: Path) -> None:
    ws.snapshot(label="base")
    before = os.stat(ws_dir / "README.md").st_mtime_ns
    os.utime(ws_dir / "README.md", ns=(1, 1))
    result = ws.restore("base")
    assert os.stat(ws_dir / "README.md").st_mtime_ns == before
    assert result.plan.counts() == {"created": 0, "modified": 0, "deleted": 0,
                                    "permissions_changed": 0}
