"""Errors are one line on stderr, a documented exit code, and never a traceback."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .conftest import CTRLZ, run

COMMANDS = ["init", "snapshot", "list", "show", "diff", "changes", "history", "rollback",
            "restore", "revert", "undo", "redo", "rm", "pin", "unpin", "prune", "gc", "verify",
            "status", "config", "completion", "run", "sessions", "session", "trace", "events",
            "mcp", "hook", "install", "uninstall", "rewind", "daemon", "fork", "acp",
            "service", "ui", "export", "import", "remote", "push", "pull", "clone",
            "doctor", "sandbox"]


def test_no_workspace(tmp_path: Path) -> None:
    for args in (["list"], ["undo"]):
        r = run(*args, cwd=tmp_path, ok=False)
        assert r.code == 3 and "not inside a protected workspace" in r.err
        assert "ctrlz init" in r.err


@pytest.mark.parametrize("args", [["list"], ["snapshot"], ["snapshot", "--json"],
                                  ["status"], ["rollback", "latest"]])
def test_a_deleted_current_directory_is_one_line_that_says_what_to_do(
        tmp_path: Path, args: list[str]) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh",
                           str(gone), CTRLZ, *args], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr == ("ctrlz: error: the current directory no longer exists (it was "
                           "deleted or moved); cd into the workspace again and rerun the "
                           "command\n")


def test_unknown_snapshot(ws: Path) -> None:
    assert run("show", "latest", cwd=ws, ok=False).code == 4  # none yet
    run("snapshot", cwd=ws)
    for args in (["show", "nope"], ["rollback", "nope"], ["diff", "nope"],
                 ["revert", "README.md", "--from", "nope"]):
        r = run(*args, cwd=ws, ok=False)
        assert r.code == 4 and "no snapshot matches 'nope'" in r.err, args


def test_ambiguous_prefix(ws: Path) -> None:
    for _ in range(3):
        run("snapshot", cwd=ws)
    r = run("show", "snap_", cwd=ws, ok=False)
    assert r.code == 4 and "matches 3 snapshots" in r.err and "type more" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_unreadable_store(ws: Path, tmp_path: Path) -> None:
    run("snapshot", cwd=ws)
    catalogs = list((tmp_path / "home").rglob("catalog.db"))
    assert len(catalogs) == 1
    for extra in catalogs[0].parent.glob("catalog.db-*"):
        extra.unlink()
    catalogs[0].write_bytes(b"this is not sqlite" * 100)
    for args in (["list"], ["snapshot"]):
        r = run(*args, cwd=ws, ok=False)
        assert r.code == 6 and "catalog" in r.err, (args, r.err)
        assert len(r.err.strip().splitlines()) == 1


def test_store_replaced_by_a_directory_is_reported(ws: Path, tmp_path: Path) -> None:
    run("snapshot", cwd=ws)
    catalog = next((tmp_path / "home").rglob("catalog.db"))
    for extra in catalog.parent.glob("catalog.db*"):
        extra.unlink()
    catalog.mkdir()
    r = run("list", cwd=ws, ok=False)
    assert r.code == 6 and "unreadable" in r.err


def test_bad_arguments_are_usage_errors(ws: Path) -> None:
    r = run("snapshot", "--type", "weird", cwd=ws, ok=False)
    assert r.code == 2
    assert run("restore", "latest", cwd=ws, ok=False).code == 2  # --to is required
    assert run("-C", str(ws / "missing"), "list", cwd=ws, ok=False).code == 2


def test_every_command_has_help_with_examples(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ctrlz.cli.app import cli

    for command in COMMANDS:  # in-process: 21 interpreter starts would add seconds
        r = CliRunner().invoke(cli, [command, "--help"], prog_name="ctrlz")
        assert r.exit_code == 0 and "Examples:" in r.output, command
        assert f"Usage: ctrlz {command}" in r.output
    assert "Usage: ctrlz rollback" in run("rollback", "--help", cwd=tmp_path).out


def test_top_level_help_lists_every_command(tmp_path: Path) -> None:
    out = run("--help", cwd=tmp_path).out
    listed = re.findall(r"^  (\w+)\s{2,}", out.split("Commands:")[1], re.M)
    assert sorted(listed) == sorted(COMMANDS)
    assert "Examples:" in out


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str, tmp_path: Path) -> None:
    assert "_CTRLZ_COMPLETE" in run("completion", shell, cwd=tmp_path).out


def test_click_completion_mechanism(tmp_path: Path) -> None:
    proc = subprocess.run([CTRLZ], cwd=tmp_path, capture_output=True, text=True,
                          env={**__import__("os").environ, "_CTRLZ_COMPLETE": "bash_complete",
                               "COMP_WORDS": "ctrlz rol", "COMP_CWORD": "1"})
    assert "rollback" in proc.stdout
