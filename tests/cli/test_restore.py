"""rollback, restore --to, revert, undo, redo."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .conftest import run


def state(root: Path) -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = os.lstat(p)
            if p.is_symlink():
                out[str(p.relative_to(root))] = ("l", os.readlink(p))
            elif p.is_dir():
                out[str(p.relative_to(root))] = ("d", st.st_mode & 0o7777)
            else:
                out[str(p.relative_to(root))] = ("f", st.st_mode & 0o7777, p.read_bytes())
    return out


def wreck(ws: Path) -> None:
    (ws / "README.md").write_text("broken\n")
    (ws / "logo.bin").unlink()
    os.chmod(ws / "src" / "app.py", 0o700)
    shutil.rmtree(ws / "docs")
    os.symlink("src", ws / "docs")
    (ws / "junk.txt").write_text("junk\n")


def test_rollback_restores_and_says_how_to_undo(ws: Path) -> None:
    run("snapshot", "-m", "base", cwd=ws)
    before = state(ws)
    wreck(ws)
    r = run("rollback", "base", cwd=ws)
    assert state(ws) == before
    assert "Rolled back to snap_" in r.out and "Undo with: ctrlz undo" in r.out
    safety = r.out.split("Safety snapshot: ")[1].split()[0]
    assert f"ctrlz rollback {safety}" in r.out
    assert run("show", safety, "--json", cwd=ws).json()["type"] == "safety"


def test_rollback_dry_run_changes_nothing(ws: Path) -> None:
    run("snapshot", "-m", "base", cwd=ws)
    wreck(ws)
    wrecked = state(ws)
    r = run("rollback", "base", "--dry-run", cwd=ws)
    assert state(ws) == wrecked
    assert "Would restore" in r.out and "delete   junk.txt" in r.out and "dry run" in r.err
    data = run("rollback", "base", "--dry-run", "--json", cwd=ws).json()
    assert data["dry_run"] is True and data["safety_snapshot"] is None
    assert len(run("list", "--json", cwd=ws).json()) == 1  # no safety snapshot taken


def test_rollback_of_some_paths_only(ws: Path) -> None:
    run("snapshot", cwd=ws)
    (ws / "README.md").write_text("edited\n")
    (ws / "src" / "app.py").write_text("edited\n")
    run("rollback", "latest", "src", cwd=ws)
    assert (ws / "src" / "app.py").read_text() == "print('hello')\n"
    assert (ws / "README.md").read_text() == "edited\n"


def test_undo_and_redo_many_steps(ws: Path) -> None:
    readme = ws / "README.md"
    run("snapshot", "-m", "v1", cwd=ws)
    readme.write_text("v2\n")
    run("snapshot", "-m", "v2", cwd=ws)
    readme.write_text("v3\n")
    run("rollback", "v1", cwd=ws)
    assert readme.read_text() == "# demo\n"
    run("rollback", "v2", cwd=ws)
    assert readme.read_text() == "v2\n"
    r = run("undo", cwd=ws)
    assert "Undid the rollback" in r.out and "Redo with: ctrlz redo" in r.out
    assert readme.read_text() == "# demo\n"
    run("undo", cwd=ws)
    assert readme.read_text() == "v3\n"
    r = run("undo", cwd=ws, ok=False)
    assert "nothing to undo" in r.err
    run("redo", cwd=ws)
    assert readme.read_text() == "# demo\n"
    run("redo", cwd=ws)
    assert readme.read_text() == "v2\n"
    assert "nothing to redo" in run("redo", cwd=ws, ok=False).err
    # a new operation after an undo clears the redo part
    run("undo", cwd=ws)
    run("revert", "README.md", "--from", "v2", cwd=ws)
    run("redo", cwd=ws, ok=False)


def test_restore_to_a_new_directory(ws: Path, tmp_path: Path) -> None:
    run("snapshot", "-m", "base", cwd=ws)
    expected = state(ws)
    wreck(ws)
    dest = tmp_path / "out"
    r = run("restore", "base", "--to", str(dest), cwd=ws)
    assert "Restored snap_" in r.out and state(dest) == expected
    only = tmp_path / "only"
    run("restore", "base", "src", "--to", str(only), cwd=ws)
    assert sorted(state(only)) == ["src", "src/app.py", "src/pkg", "src/pkg/mod.py"]


def test_restore_to_a_non_empty_directory_fails(ws: Path, tmp_path: Path) -> None:
    run("snapshot", cwd=ws)
    dest = tmp_path / "full"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine\n")
    r = run("restore", "latest", "--to", str(dest), cwd=ws, ok=False)
    assert "not empty" in r.err and (dest / "keep.txt").read_text() == "mine\n"
    assert len(r.err.strip().splitlines()) == 1


def test_revert_one_file_from_the_newest_snapshot_that_has_it(ws: Path) -> None:
    run("snapshot", "-m", "one", cwd=ws)
    (ws / "docs" / "guide.txt").unlink()
    run("snapshot", "-m", "two", cwd=ws)  # guide.txt absent here
    (ws / "README.md").write_text("edit\n")
    r = run("revert", "docs/guide.txt", cwd=ws)
    assert (ws / "docs" / "guide.txt").read_text() == "guide\n"
    assert "Undo with: ctrlz undo" in r.out
    assert (ws / "README.md").read_text() == "edit\n"  # untouched
    run("undo", cwd=ws)
    assert not (ws / "docs" / "guide.txt").exists()


def test_revert_deletes_a_file_created_after_the_latest_snapshot(ws: Path) -> None:
    run("snapshot", cwd=ws)
    (ws / "fresh.txt").write_text("fresh\n")
    run("revert", "fresh.txt", cwd=ws)
    assert not (ws / "fresh.txt").exists()
    run("undo", cwd=ws)
    assert (ws / "fresh.txt").read_text() == "fresh\n"


def test_revert_from_and_folder(ws: Path) -> None:
    run("snapshot", "-m", "one", cwd=ws)
    (ws / "src" / "app.py").write_text("two\n")
    (ws / "src" / "extra.py").write_text("x\n")
    run("snapshot", "-m", "two", cwd=ws)
    (ws / "src" / "app.py").write_text("three\n")
    run("revert", "src", "--from", "one", cwd=ws)
    assert (ws / "src" / "app.py").read_text() == "print('hello')\n"
    assert not (ws / "src" / "extra.py").exists()


def test_path_outside_the_workspace(ws: Path, tmp_path: Path) -> None:
    run("snapshot", cwd=ws)
    for args in (["revert", "../elsewhere.txt"], ["rollback", "latest", str(tmp_path)],
                 ["diff", "latest", "/etc/passwd"], ["history", "../x"]):
        r = run(*args, cwd=ws, ok=False)
        assert r.code == 2 and "is outside the workspace" in r.err, args


def test_a_path_in_neither_the_snapshot_nor_the_tree_is_refused(ws: Path) -> None:
    """A typo or the wrong snapshot: refused before anything happens (it used to take a
    safety snapshot and report that nothing changed, exit 0)."""
    base = run("snapshot", "--json", cwd=ws).json()["id"]
    r = run("rollback", base, "no-such-file.txt", cwd=ws, ok=False)
    assert r.code == 2 and f"in neither {base} nor the working tree" in r.err
    assert len(run("list", "--json", cwd=ws).json()) == 1  # no safety snapshot either
    (ws / "README.md").unlink()  # in the snapshot, not on disk: a path to restore
    run("rollback", base, "README.md", cwd=ws)
    assert (ws / "README.md").exists()


def test_a_path_behind_a_symlink_now_fails_and_changes_nothing(ws: Path,
                                                                tmp_path: Path) -> None:
    """Where the snapshot has a directory and the workspace now a symlink, a rollback of a
    path below it never writes through the link; the request fails (exit 7), rather than
    leave the path alone behind exit 0."""
    run("snapshot", "-m", "base", cwd=ws)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(ws / "src")
    os.symlink(outside, ws / "src")
    for extra in ([], ["--dry-run"]):
        r = run("rollback", "base", "src/app.py", *extra, cwd=ws, ok=False)
        assert r.code == 7 and "src: the snapshot has a directory there" in r.err, extra
    assert list(outside.iterdir()) == [] and (ws / "src").is_symlink()
