"""A rollback in a git repository names what it does to the history, and lets the user choose.

Issue 41, section 6: `ctrlz snapshot -m A`, two commits, `ctrlz rollback A` used to answer
"0 created, 6 modified, 7 deleted" and take the two commits out of `.git` without a word. Now
every plan and result names the ref moves and the commits made unreachable, `--git=keep` rolls
back the working tree only, `--git=restore` puts `.git` back too, and the default refuses a
rollback that drops commits. Real git repositories, the real console script, `git fsck` after
each step.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import needs_watcher

from .conftest import run
from .test_json import check

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent)}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True,
                          text=True).stdout


def fsck(root: Path) -> None:
    """`git fsck --full` exits 0 and reports nothing missing, broken or dangling by ref."""
    out = subprocess.run(["git", "fsck", "--full", "--no-dangling"], cwd=root,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "missing" not in out.stdout + out.stderr and "broken" not in out.stdout + out.stderr


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository with one commit, snapshot A of it, then two more commits (a.txt changed,
    b.txt added): (root, main at A, main now)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("one\n")
    git(root, "add", "a.txt")
    git(root, "commit", "-qm", "one")
    at_a = head(root)
    run("init", cwd=root)
    run("snapshot", "-m", "A", cwd=root)
    (root / "a.txt").write_text("two\n")
    git(root, "commit", "-qam", "two")
    (root / "b.txt").write_text("bee\n")
    git(root, "add", "b.txt")
    git(root, "commit", "-qm", "three")
    return root, at_a, head(root)


def test_the_dry_run_names_the_branch_move_and_the_commits_made_unreachable(repo) -> None:
    root, at_a, now = repo
    text = run("rollback", "A", "--dry-run", cwd=root).out
    assert f"git: branch main moves {now[:7]} → {at_a[:7]}; 2 commits made since become " \
           "unreachable (ctrlz undo brings them back)" in text
    data = run("rollback", "A", "--dry-run", "--json", cwd=root).json()
    check("rollback", data)
    [change] = data["git"]
    assert change["repository"] == "." and change["mode"] == "restore"
    assert change["refs"] == [{"ref": "refs/heads/main", "before": now, "after": at_a}]
    assert change["unreachable_commits"] == 2 and change["at_risk"]
    assert change["before"]["head"] == change["after"]["head"] == "refs/heads/main"
    assert head(root) == now  # a dry run changes nothing


def test_by_default_a_rollback_that_drops_commits_is_refused_and_changes_nothing(repo) -> None:
    root, at_a, now = repo
    listed = len(run("list", "--json", cwd=root).json())
    r = run("rollback", "A", cwd=root, ok=False)
    assert r.code == 2
    [line] = [x for x in r.err.splitlines() if x.strip()]
    assert f"branch main moves {now[:7]} → {at_a[:7]}" in line
    assert "2 commits made since become unreachable" in line
    assert "--git=keep" in line and "--git=restore" in line and "nothing was changed" in line
    # the same refusal through the click-free door's --json form
    assert run("rollback", "A", "--json", cwd=root, ok=False).code == 2
    assert head(root) == now and (root / "b.txt").exists()
    assert (root / "a.txt").read_text() == "two\n"
    assert len(run("list", "--json", cwd=root).json()) == listed  # no stray safety snapshot
    fsck(root)


def test_git_keep_rolls_back_the_files_and_leaves_the_history(repo) -> None:
    root, at_a, now = repo
    r = run("rollback", "A", "--git=keep", cwd=root)
    assert f"git: .git left as it is (--git=keep), branch main at {now[:7]}" in r.out
    assert "left alone: .git: kept as it is (--git=keep)" in r.err
    assert (root / "a.txt").read_text() == "one\n" and not (root / "b.txt").exists()
    assert head(root) == now
    assert git(root, "log", "--format=%s").split() == ["three", "two", "one"]
    assert sorted(git(root, "status", "--porcelain").splitlines()) == [" D b.txt", " M a.txt"]
    fsck(root)
    # the JSON says the same; the plan of a keep never touches .git
    run("undo", cwd=root)
    data = run("rollback", "A", "--git=keep", "--json", cwd=root).json()
    assert [g["mode"] for g in data["git"]] == ["keep"]
    assert not data["git"][0]["refs"] and not data["git"][0]["at_risk"]
    assert not any(a["path"].startswith(".git") for a in data["actions"])
    fsck(root)


def test_git_restore_moves_the_branch_and_undo_brings_the_commits_back(repo) -> None:
    root, at_a, now = repo
    r = run("rollback", "A", "--git=restore", cwd=root)
    assert f"git: branch main moves {now[:7]} → {at_a[:7]}; 2 commits made since become " \
           "unreachable (ctrlz undo brings them back)" in r.out
    assert head(root) == at_a and git(root, "log", "--format=%s").split() == ["one"]
    assert (root / "a.txt").read_text() == "one\n" and not (root / "b.txt").exists()
    fsck(root)
    # undo needs no choice: it drops no commit, it brings two back
    u = run("undo", cwd=root)
    assert f"git: branch main moves {at_a[:7]} → {now[:7]}" in u.out
    assert "unreachable" not in u.out
    assert head(root) == now and git(root, "log", "--format=%s").split() == ["three", "two",
                                                                              "one"]
    assert (root / "b.txt").read_text() == "bee\n"
    fsck(root)
    # and the redo, which drops them again, must be chosen
    assert "--git=restore" in run("redo", cwd=root, ok=False).err
    data = run("redo", "--git=restore", "--json", cwd=root).json()
    assert data["restore"]["git"][0]["unreachable_commits"] == 2
    assert head(root) == at_a
    fsck(root)


def test_after_rm_rf_git_the_default_rollback_brings_the_repository_back(repo) -> None:
    root, at_a, now = repo
    run("snapshot", "-m", "B", cwd=root)
    shutil.rmtree(root / ".git")
    r = run("rollback", "B", cwd=root)
    assert f"git: .git comes back (it is missing now), branch main at {now[:7]}" in r.out
    assert head(root) == now
    fsck(root)


def test_after_a_reset_hard_the_default_rollback_moves_the_branch_forward_again(repo) -> None:
    root, at_a, now = repo
    run("snapshot", "-m", "B", cwd=root)
    git(root, "reset", "-q", "--hard", at_a)
    r = run("rollback", "B", cwd=root)
    assert f"git: branch main moves {at_a[:7]} → {now[:7]}" in r.out
    assert "unreachable" not in r.out
    assert head(root) == now and (root / "b.txt").read_text() == "bee\n"
    fsck(root)


def test_without_git_the_moves_are_named_and_the_default_refuses(repo, tmp_path) -> None:
    root, at_a, now = repo
    bare = tmp_path / "bin"  # a PATH with no git on it (ctrlz itself is run by its path)
    bare.mkdir()
    env = {"PATH": str(bare)}
    data = run("rollback", "A", "--dry-run", "--json", cwd=root, env=env).json()
    [change] = data["git"]
    assert change["refs"] == [{"ref": "refs/heads/main", "before": now, "after": at_a}]
    assert change["unreachable_commits"] is None and change["at_risk"]
    assert "could not be counted" in change["summary"]
    assert run("rollback", "A", cwd=root, env=env, ok=False).code == 2
    run("rollback", "A", "--git=restore", cwd=root, env=env)
    assert head(root) == at_a
    fsck(root)


def test_a_rollback_of_some_paths_outside_git_says_nothing_about_git(repo) -> None:
    root, _, now = repo
    data = run("rollback", "A", "a.txt", "--json", cwd=root).json()
    assert data["git"] == [] and head(root) == now
    assert (root / "a.txt").read_text() == "one\n"


def test_the_workspace_daemon_honours_the_choice_and_reports_the_consequences(repo) -> None:
    """A rollback handed to the daemon carries ``--git`` (wire version 3; a daemon of version
    2 would have put .git back) and brings the ``git`` records back; the refusal crosses too,
    as its own class (exit 2)."""
    root, at_a, now = repo
    needs_watcher()
    env = {"CTRLZ_DAEMON": "1"}
    run("daemon", "start", "--wait", cwd=root, env=env)
    try:
        refused = run("rollback", "A", cwd=root, env=env, ok=False)
        assert refused.code == 2 and "--git=keep" in refused.err
        kept = run("rollback", "A", "--git=keep", "--json", cwd=root, env=env).json()
        assert [g["mode"] for g in kept["git"]] == ["keep"] and head(root) == now
        done = run("rollback", "A", "--git=restore", "--json", cwd=root, env=env).json()
        assert done["git"][0]["unreachable_commits"] == 2 and head(root) == at_a
        served = run("daemon", "status", "--json", cwd=root, env=env).json()["served"]
        assert served["restores"] >= 2  # the daemon ran them, not this process
        fsck(root)
    finally:
        run("daemon", "stop", cwd=root, env=env)


def test_a_workspace_that_excludes_git_rolls_back_its_files_and_says_nothing_of_git(
        tmp_path: Path) -> None:
    """.git left out by the user's own rules is neither judged nor touched: the check before
    the capture used to read its absence from the snapshot as "`.git` is removed" and refuse."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".ctrlz.toml").write_text('exclude_patterns = [".git"]\n')
    (root / "a.txt").write_text("one\n")
    git(root, "add", "a.txt")
    git(root, "commit", "-qm", "one")
    run("init", cwd=root)
    run("snapshot", "-m", "A", cwd=root)
    (root / "a.txt").write_text("two\n")
    git(root, "commit", "-qam", "two")
    now = head(root)
    data = run("rollback", "A", "--json", cwd=root).json()
    assert data["git"] == [] and head(root) == now
    assert (root / "a.txt").read_text() == "one\n"
    fsck(root)
