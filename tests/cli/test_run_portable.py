"""``ctrlz run`` and the daemon where there is no strace and no inotify
(``CTRLZ_PLATFORM=portable``, as on a Mac): the run says once that exec tracing is off and
still snapshots before and after; the daemon watches through watchdog's polling observer."""

from __future__ import annotations

import os
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


def test_run_without_strace_records_the_command_and_samples_what_it_starts(ws: Path) -> None:
    """No strace: the run still snapshots before and after, says once that exec tracing is
    off, and records the command (with psutil, the processes it saw under it)."""
    env = {platform.ENV: platform.PORTABLE}
    r = run("run", "--", "sh", "-c", "echo x > f; sleep 0.3", cwd=ws, env=env)
    assert r.err.count("exec tracing is off") == 1, r.err
    assert "process starts are sampled (psutil)" in r.err, r.err  # psutil is a test extra
    snaps = run("list", "--json", cwd=ws, env=env).json()
    assert [s["type"] for s in snaps[:2]] == ["post-run", "pre-run"]
    changed = run("diff", snaps[1]["id"], snaps[0]["id"], "--name-status", cwd=ws, env=env)
    assert changed.out == "A\tf\n"
    execs = run("trace", "--json", cwd=ws, env=env).json()
    assert [e["command"] for e in execs if e["args"][:1] == ["-c"]] == ["sh"], execs
    assert [e["exit_code"] for e in execs if e["command"] == "sh"] == [0]


def test_the_daemon_watches_by_polling_and_serves_snapshots_and_restores(ws: Path) -> None:
    """Portable mode has no inotify: the daemon watches through watchdog's polling observer
    (``sources/observe.py``), and what it serves equals what a walk would find."""
    env = {platform.ENV: platform.PORTABLE, "CTRLZ_DAEMON": "1"}
    started = run("daemon", "start", "--wait", "--json", cwd=ws, env=env).json()
    assert started["ready"] and started["watcher"] == "watchdog:polling", started
    try:
        run("snapshot", "-m", "base", cwd=ws, env=env)
        (ws / "README.md").write_text("# edited\n")  # an edit
        (ws / "new.txt").write_text("new\n")  # a create
        (ws / "docs" / "guide.txt").unlink()  # a delete
        os.rename(ws / "src" / "app.py", ws / "src" / "main.py")  # a rename
        run("snapshot", "-m", "after", cwd=ws, env=env)
        changed = run("diff", "base", "after", "--name-status", cwd=ws, env=env).out
        assert sorted(changed.splitlines()) == ["A\tnew.txt", "A\tsrc/main.py",
                                                "D\tdocs/guide.txt", "D\tsrc/app.py",
                                                "M\tREADME.md"], changed
        run("rollback", "base", cwd=ws, env=env)
        assert (ws / "README.md").read_text() == "# demo\n"
        assert (ws / "docs" / "guide.txt").read_text() == "guide\n"
        assert (ws / "src" / "app.py").exists() and not (ws / "src" / "main.py").exists()
        assert not (ws / "new.txt").exists()
        status = run("daemon", "status", "--json", cwd=ws, env=env).json()
        # "after" came from the watcher's dirty set (the first, with no cache yet, was full)
        assert status["running"] and status["served"]["dirty"] >= 1, status
        assert status["served"]["restores"] >= 1, status  # the daemon ran it
        assert "watchdog:polling" in run("daemon", "status", cwd=ws, env=env).out
    finally:
        run("daemon", "stop", cwd=ws, env=env)
