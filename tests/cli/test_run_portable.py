"""``ctrlz run`` and the daemon where there is no strace and no inotify
(``CTRLZ_PLATFORM=portable``, as on a Mac): the run says once that exec tracing is off and
still snapshots before and after; no daemon starts, and commands walk the tree."""

from __future__ import annotations

from pathlib import Path

from ctrlz import platform

from .conftest import run


def test_run_without_strace_or_a_watcher_snapshots_before_and_after(ws: Path) -> None:
    env = {platform.ENV: platform.PORTABLE}
    r = run("run", "--", "sh", "-c", "echo made > made.txt; rm README.md", cwd=ws, env=env)
    assert r.err.count("exec tracing is off") == 1, r.err
    assert (ws / "made.txt").read_text() == "made\n"
    snaps = run("list", "--json", cwd=ws, env=env).json()
    assert [s["type"] for s in snaps[:2]] == ["post-run", "pre-run"]
    run("rollback", snaps[1]["id"], cwd=ws, env=env)  # the run's changes are undoable
    assert not (ws / "made.txt").exists() and (ws / "README.md").read_text() == "# demo\n"


def test_no_daemon_starts_without_a_watcher_and_commands_walk(ws: Path) -> None:
    env = {platform.ENV: platform.PORTABLE, "CTRLZ_DAEMON": "1"}
    r = run("daemon", "start", cwd=ws, env=env, ok=False)
    assert r.code == 1 and "cannot start the daemon: no file watcher" in r.err, r.err
    run("snapshot", "-m", "walked", cwd=ws, env=env)  # would start one; walks instead
    (ws / "README.md").write_text("changed\n")
    run("rollback", "walked", cwd=ws, env=env)
    assert (ws / "README.md").read_text() == "# demo\n"
    assert not run("daemon", "status", "--json", cwd=ws, env=env).json()["running"]
