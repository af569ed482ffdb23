"""`ctrlz fork`: a new workspace at a snapshot or tool call, with its own store and lineage."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from ..conftest import tree_state
from .conftest import run
from .schemas import FORK, SCHEMAS

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=True, env={**os.environ, **GIT_ENV}).stdout.strip()


def test_plain_fork_from_a_snapshot(ws: Path, tmp_path: Path) -> None:
    run("snapshot", "-m", "base", cwd=ws)
    expected = tree_state(ws)
    (ws / "README.md").write_text("later\n")
    (ws / "new.txt").write_text("new\n")
    parent_now = tree_state(ws)
    dest = tmp_path / "fork"
    r = run("fork", "base", str(dest), cwd=ws)
    assert f"New workspace:  {dest}" in r.out and "Store:" in r.out
    assert tree_state(dest) == expected
    assert tree_state(ws) == parent_now  # the parent is untouched

    base = run("show", "base", "--json", cwd=ws).json()["id"]
    status = run("status", "--json", cwd=dest).json()
    jsonschema.validate(status, SCHEMAS["status"])
    assert status["workspace"] == str(dest)
    assert status["store"] != run("status", "--json", cwd=ws).json()["store"]
    assert Path(status["store"]).is_dir() and not Path(status["store"]).is_relative_to(dest)
    assert status["forked_from"] == {"workspace": str(ws), "snapshot": base,
                                     "tool_call": None, "session_id": None}
    assert status["snapshots"] == 1 and f"fork of {ws} at {base}" in status["last"]["label"]
    assert f"\nForked:    from {ws} at {base}\n" in run("status", cwd=dest).out
    assert f"\nforked:   from {ws} at {base}\n" in run("show", "latest", cwd=dest).out
    shown = run("show", "latest", "--json", cwd=dest).json()
    jsonschema.validate(shown, SCHEMAS["show"])
    assert shown["forked_from"]["workspace"] == str(ws)
    assert run("status", "--json", cwd=ws).json()["forked_from"] is None
    assert run("show", "latest", "--json", cwd=ws).json()["forked_from"] is None


def test_fork_json(ws: Path, tmp_path: Path) -> None:
    run("snapshot", cwd=ws)
    data = run("fork", "latest", str(tmp_path / "f"), "--json", cwd=ws).json()
    jsonschema.validate(data, FORK)
    assert data["git"] is False and data["branch"] is None and data["resume"] is None


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_fork_is_a_worktree_on_a_new_branch(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "kept.txt").write_text("v1\n")
    (root / "gone.txt").write_text("tracked\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    run("init", cwd=root)
    (root / "kept.txt").write_text("v2\n")
    (root / "gone.txt").unlink()
    (root / "added.txt").write_text("new\n")
    run("snapshot", "-m", "try", cwd=root)
    expected = tree_state(root, skip=(".git",))
    parent_status = git(root, "status", "--porcelain")
    (root / "kept.txt").write_text("v3, after the snapshot\n")

    dest = tmp_path / "alt"
    r = run("fork", "try", str(dest), "--branch", "try/alt", cwd=root)
    assert "git worktree on branch try/alt" in r.out
    assert git(dest, "rev-parse", "--abbrev-ref", "HEAD") == "try/alt"
    assert tree_state(dest, skip=(".git",)) == expected
    assert (dest / ".git").is_file()  # the worktree's own pointer, not the parent's .git
    assert git(dest, "status", "--porcelain") == parent_status  # the snapshot against HEAD
    assert git(root, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (root / "kept.txt").read_text() == "v3, after the snapshot\n"
    assert git(root, "status", "--porcelain") == parent_status
    assert run("status", "--json", cwd=dest).json()["forked_from"]["workspace"] == str(root)

    # the default branch name, and a branch that exists already
    data = run("fork", "try", str(tmp_path / "alt2"), "--json", cwd=root).json()
    assert data["git"] and data["branch"].startswith("ctrlz/fork-")
    r = run("fork", "try", str(tmp_path / "alt3"), "--branch", "main", cwd=root, ok=False)
    assert "branch 'main' already exists" in r.err
    assert not (tmp_path / "alt3").exists()


def test_errors(ws: Path, tmp_path: Path) -> None:
    run("snapshot", "-m", "base", cwd=ws)
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("mine\n")
    r = run("fork", "base", str(full), cwd=ws, ok=False)
    assert "not empty" in r.err and len(r.err.strip().splitlines()) == 1
    assert (full / "mine.txt").read_text() == "mine\n"
    r = run("fork", "base", str(ws / "sub"), cwd=ws, ok=False)
    assert "inside the workspace" in r.err and not (ws / "sub").exists()
    r = run("fork", "nope", str(tmp_path / "x"), cwd=ws, ok=False)
    assert "'nope' is neither a snapshot" in r.err and not (tmp_path / "x").exists()
    r = run("fork", "base", str(tmp_path / "y"), "--branch", "b", cwd=ws, ok=False)
    assert "needs a git repository" in r.err


def test_fork_from_a_shell_tool_call_prints_the_resume_command(
        ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ctrlz.toolcalls as tc
    from ctrlz import Workspace
    from ctrlz.toolcalls.shell import shell_call

    monkeypatch.setenv("CTRLZ_DAEMON", "0")
    (ws / "x").mkdir()
    (ws / "x" / "f.txt").write_text("doomed\n")
    with Workspace.open(ws) as w:
        tc.start_session("sess-1", workspace=w, agent="claude")
        tc.begin_turn("sess-1", workspace=w)
        with tc.tool_call("sess-1", "toolu_a", workspace=w):
            tc.write_file(ws / "edited.txt", "by a file tool call\n")
        shell_call("sess-1", "toolu_b", "rm -rf x", workspace=w)
    expected = tree_state(ws)
    shutil.rmtree(ws / "x")

    dest = tmp_path / "from-call"
    r = run("fork", "toolu_b", str(dest), cwd=ws)
    assert "before tool call toolu_b" in r.out
    assert f"cd {dest} && claude --resume sess-1 --fork-session" in r.out
    assert tree_state(dest) == expected and (dest / "x" / "f.txt").exists()
    lineage = run("status", "--json", cwd=dest).json()["forked_from"]
    assert lineage["tool_call"] == "toolu_b" and lineage["session_id"] == "sess-1"

    data = run("fork", "toolu_b", str(tmp_path / "again"), "--session", "sess-1", "--json",
               cwd=ws).json()
    jsonschema.validate(data, FORK)
    assert data["resume"] == f"cd {tmp_path / 'again'} && claude --resume sess-1 --fork-session"

    # a file tool call has no workspace snapshot: refused, naming what to fork from instead
    r = run("fork", "toolu_a", str(tmp_path / "z"), cwd=ws, ok=False)
    assert "file tool call" in r.err and "toolu_b" in r.err
    r = run("fork", "toolu_b", str(tmp_path / "z"), "--session", "other", cwd=ws, ok=False)
    assert "no agent session 'other'" in r.err
