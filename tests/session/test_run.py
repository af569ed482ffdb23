"""`ctrlz run` end to end: a scripted agent under real inotify, real strace, real processes."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.state.db.sessiondb import CHANGE_COUNT_QUERY
from tests.conftest import make_tree, tree_state

CTRLZ = str(Path(sys.executable).with_name("ctrlz"))
AGENT = r"""#!/bin/sh
set -e
echo "new module" > src/new.py
echo "edited" >> src/app.py
git add -A
git -c user.name=agent -c user.email=agent@example.com commit -q -m "agent commit"
make -s
sleep 2.5
rm -rf docs
exit 7
"""


@pytest.fixture
def project(ws_dir: Path) -> Path:
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.skip("needs git and make")
    make_tree(ws_dir, {"src": {"app.py": "print('hi')\n"}, "docs": {"a.md": "a", "b.md": "b"},
                       "Makefile": "all:\n\techo built > build.txt\n", "agent.sh": AGENT})
    os.chmod(ws_dir / "agent.sh", 0o755)
    subprocess.run(["git", "init", "-q"], cwd=ws_dir, check=True)
    subprocess.run(["git", "add", "-A"], cwd=ws_dir, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit",
                    "-q", "-m", "init"], cwd=ws_dir, check=True)
    subprocess.run([CTRLZ, "init"], cwd=ws_dir, check=True, capture_output=True)
    return ws_dir


def run_agent(project: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CTRLZ_IDLE_THRESHOLD_SECONDS": "1", "CTRLZ_AUTO_INTERVAL": "3600"}
    return subprocess.run([CTRLZ, "run", *extra, "--", "./agent.sh"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)


def test_scripted_agent_session(project: Path) -> None:
    original = tree_state(project)
    proc = run_agent(project)
    assert proc.returncode == 7, proc.stderr
    assert "ctrlz rollback snap_" in proc.stderr  # the one command that undoes it all

    ws = Workspace.open(project)
    db = ws.session_db
    session = db.sessions()[-1]
    assert session.exit_code == 7 and session.traced and session.ended
    kinds = [row[3] for row in db.snapshot_events(session.id)]
    assert kinds[0] == "pre-run" and kinds[-1] == "post-run"
    for kind in ("git", "build", "idle"):
        assert kind in kinds, kinds
    assert kinds.count("git") == 1  # trace and watcher saw one commit: debounced to one
    pre = ws.resolve(db.snapshot_events(session.id)[0][8])
    assert pre.pinned and pre.type == "pre-run"
    assert len(session.merkle_roots) == len(kinds)

    events = {(r[2], r[3]) for r in db.fs_events(session.first_fs_event_id)}
    assert ("created", "src/new.py") in events
    assert ("modified", "src/app.py") in events
    assert ("created", "build.txt") in events
    assert ("deleted", "docs/a.md") in events and ("deleted", "docs/b.md") in events
    assert not any(p.startswith(".git/objects") for _, p in events)

    execs = db.exec_events(session.id)
    commits = [e for e in execs if e["command"] == "git" and "commit" in e["args"]]
    assert commits and commits[0]["exit_code"] == 0 and commits[0]["cwd"] == str(project)
    makes = [e for e in execs if e["command"] == "make"]
    assert makes and makes[0]["exit_code"] == 0
    top = [e for e in execs if e["command"] == "agent.sh"]
    assert top and top[0]["exit_code"] == 7
    assert all(e["pid"] and e["duration"] is not None for e in execs)
    lines = (ws.store_path / "sessions" / session.id / "exec.jsonl").read_text().splitlines()
    assert len(lines) == len(execs) and json.loads(lines[0])["pid"]

    # Capsem's change-count query runs unchanged on the database, with real numbers
    con = sqlite3.connect(ws.store_path / "session.db")
    counts = con.execute(CHANGE_COUNT_QUERY).fetchall()
    assert sum(c[0] for c in counts) >= 2 and sum(c[2] for c in counts) >= 2

    # and rolling back to the pre-run snapshot restores the original tree, .git included (the
    # agent's commit goes: that takes asking for it)
    back = subprocess.run([CTRLZ, "rollback", pre.id, "--git=restore"], cwd=project,
                          capture_output=True, text=True)
    assert back.returncode == 0, back.stderr
    assert tree_state(project) == original
    restored = [r for r in ws.session_db.fs_events() if r[2] == "restored"]
    assert any(r[3] == f"docs/a.md (from {pre.id})" for r in restored)


def test_session_commands(project: Path) -> None:
    run_agent(project)
    show = subprocess.run([CTRLZ, "session", "show", "--json"], cwd=project,
                          capture_output=True, text=True)
    data = json.loads(show.stdout)
    assert {i["kind"] for i in data["timeline"]} == {"snapshot", "file", "exec"}
    trace = subprocess.run([CTRLZ, "trace", "--grep", "^git ", "--json"], cwd=project,
                           capture_output=True, text=True)
    assert all(e["command"] == "git" for e in json.loads(trace.stdout))
    failed = subprocess.run([CTRLZ, "trace", "--failed", "--json"], cwd=project,
                            capture_output=True, text=True)
    assert [e["command"] for e in json.loads(failed.stdout)] == ["agent.sh"]
    events = subprocess.run([CTRLZ, "events", "--path", "docs/*", "--json"], cwd=project,
                            capture_output=True, text=True)
    assert {e["action"] for e in json.loads(events.stdout)} == {"deleted"}
    listing = subprocess.run([CTRLZ, "sessions", "--json"], cwd=project, capture_output=True,
                             text=True)
    assert json.loads(listing.stdout)[0]["exit_code"] == 7
    # the tables people read, not only the JSON
    table = subprocess.run([CTRLZ, "sessions"], cwd=project, capture_output=True, text=True)
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("SESSION") and "agent.sh" in table.stdout
    assert table.stderr == "1 session\n"
    traced = subprocess.run([CTRLZ, "trace"], cwd=project, capture_output=True, text=True)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout.startswith("TIME") and "agent.sh" in traced.stdout


def test_untraced_session_says_so_once(project: Path) -> None:
    proc = run_agent(project, "--no-trace")
    assert proc.returncode == 7
    assert proc.stderr.count("untraced") == 1
    ws = Workspace.open(project)
    assert not ws.session_db.sessions()[-1].traced


def test_exit_code_and_stdio_pass_through(ws_dir: Path) -> None:
    subprocess.run([CTRLZ, "init"], cwd=ws_dir, check=True, capture_output=True)
    proc = subprocess.run([CTRLZ, "run", "--", "sh", "-c", "read x; echo got $x; exit 0"],
                          cwd=ws_dir, input="hello\n", capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "got hello\n" and proc.stderr == ""
    killed = subprocess.run([CTRLZ, "run", "--", "sh", "-c", "kill -TERM $$"], cwd=ws_dir,
                            capture_output=True, text=True)
    assert killed.returncode == -15
    # SIGKILL has no handler to reset: ctrlz still dies of it, as the shell reports it
    killed = subprocess.run([CTRLZ, "run", "--", "sh", "-c", "kill -KILL $$"], cwd=ws_dir,
                            capture_output=True, text=True)
    assert killed.returncode == -9 and "error" not in killed.stderr, killed.stderr
    # and the signal is named where a person reads it, as `ctrlz trace` names a process's
    table = subprocess.run([CTRLZ, "sessions"], cwd=ws_dir, capture_output=True, text=True)
    assert [line.split()[3] for line in table.stdout.splitlines()[1:]] == [
        "SIGKILL", "SIGTERM", "0"], table.stdout
    assert Workspace.open(ws_dir).snapshots()[-1].label == "after sh -c kill -KILL $$ " \
        "(killed by SIGKILL)"


def test_long_commands_are_cut_with_an_ellipsis(ws_dir: Path) -> None:
    """A label or a line that shortens a command says so: it never reads as the whole."""
    subprocess.run([CTRLZ, "init"], cwd=ws_dir, check=True, capture_output=True)
    long = "x" * 100
    proc = subprocess.run([CTRLZ, "run", "--", "sh", "-c", f"echo {long} >/dev/null"],
                          cwd=ws_dir, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    labels = [s.label for s in Workspace.open(ws_dir).snapshots()]
    assert labels == [f"before sh -c echo {'x' * 46}...",
                      f"after sh -c echo {'x' * 46}... (exit 0)"], labels
    table = subprocess.run([CTRLZ, "sessions"], cwd=ws_dir, capture_output=True, text=True)
    assert table.stdout.splitlines()[1].endswith(f"sh -c echo {'x' * 46}...")


def test_arguments_and_labels_that_are_not_utf8(ws_dir: Path) -> None:
    """A command's arguments may be any bytes: it runs, and the automatic labels show them
    escaped. A label given with -m must be UTF-8 text: a usage error, and no session left
    behind "running"."""
    subprocess.run([CTRLZ, "init"], cwd=ws_dir, check=True, capture_output=True)
    name = b"caf\xe9.txt"
    proc = subprocess.run([os.fsencode(CTRLZ), b"run", b"--", b"sh", b"-c", b'echo 1 > "$1"',
                           b"sh", name], cwd=ws_dir, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert (os.fsencode(ws_dir) + b"/" + name) in [
        os.path.join(os.fsencode(ws_dir), n) for n in os.listdir(os.fsencode(ws_dir))]
    labels = [s.label for s in Workspace.open(ws_dir).snapshots()]
    assert labels == ['before sh -c echo 1 > "$1" sh caf\\xe9.txt',
                      'after sh -c echo 1 > "$1" sh caf\\xe9.txt (exit 0)'], labels
    refused = subprocess.run([os.fsencode(CTRLZ), b"run", b"-m", b"caf\xe9", b"--", b"true"],
                             cwd=ws_dir, capture_output=True)
    assert refused.returncode == 2
    assert refused.stderr == (b"ctrlz: error: the label caf\\xe9 is not UTF-8 text; give it "
                              b"in UTF-8\n")
    listing = subprocess.run([CTRLZ, "sessions", "--json"], cwd=ws_dir, capture_output=True)
    rows = json.loads(listing.stdout.decode("utf-8", "surrogateescape"))
    assert [r["exit_code"] for r in rows] == [0]  # the refused run left no row
    assert os.fsencode(rows[0]["command"][-1]) == name  # the arguments as they were


def test_missing_command_is_a_clear_error(ws_dir: Path) -> None:
    """Nothing to run (not on PATH, no such file, a directory, a file without x): one line
    in ctrlz's words, exit 2, and no session, snapshot or session directory left behind."""
    subprocess.run([CTRLZ, "init"], cwd=ws_dir, check=True, capture_output=True)
    (ws_dir / "plain.sh").write_text("echo hi\n")
    cases = {"no-such-command-xyz": "no-such-command-xyz: command not found on $PATH; give "
                                    "the program's name or a path to it",
             "./missing.sh": "./missing.sh: no such file; give the program's name or a path "
                             "to it",
             "/tmp": "/tmp: not an executable file; chmod +x it or run it with its "
                     "interpreter (ctrlz run -- sh SCRIPT)",
             "./plain.sh": "./plain.sh: not an executable file; chmod +x it or run it with "
                           "its interpreter (ctrlz run -- sh SCRIPT)"}
    for program, message in cases.items():
        proc = subprocess.run([CTRLZ, "run", "--", program], cwd=ws_dir, capture_output=True,
                              text=True)
        assert (proc.returncode, proc.stderr) == (2, f"ctrlz: error: {message}\n")
    ws = Workspace.open(ws_dir)
    assert ws.session_db.sessions() == [] and ws.snapshots() == []
    assert not (ws.store_path / "sessions").exists() or not any(
        (ws.store_path / "sessions").iterdir())
    ws.close()


def test_a_session_that_cannot_start_is_over_not_running(ws_dir: Path) -> None:
    """The pre-run snapshot fails (an I/O error as it commits): the error reaches the
    caller, the command never runs, and the session's row says it ended with 127 (could not
    run) instead of "running" for ever."""
    from ctrlz.session.run.run import run_session
    from ctrlz.state import failpoints

    ws = Workspace.init(ws_dir)
    failpoints.arm_error("before-commit")
    try:
        with pytest.raises(OSError):
            run_session(ws, ["sh", "-c", "echo ran > ran.txt"], trace=False)
    finally:
        failpoints.disarm_all()
    assert not (ws_dir / "ran.txt").exists()
    [row] = ws.session_db.sessions()
    assert row.ended is not None and row.exit_code == 127
    ws.close()
