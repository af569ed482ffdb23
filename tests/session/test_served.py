"""``ctrlz snapshot`` asks a running workspace daemon without opening the workspace
(:mod:`ctrlz.session.served`): the same snapshot and the same output as the full path, from a
process that loads none of what opening costs, and every case the daemon does not take whole
left to that full path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.engine.restore import journal
from ctrlz.session import daemon_client, served
from ctrlz.workspace import Workspace
from tests.conftest import served_workspace

CTRLZ = str(Path(sys.executable).parent / "ctrlz")

#: what opening a workspace loads and a served snapshot must not (milliseconds each)
OPENING = ("pathlib", "re", "json", "datetime", "sqlite3", "contextlib", "click", "rich",
           "zstandard", "blake3", "ctrlz.workspace", "ctrlz.session.protected")
#: nor, for a snapshot, the record's named tuple and the journal (the daemon checks that)
RECORDS = ("collections", "ctrlz.types", "ctrlz.engine.restore.journal")


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("CTRLZ_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    yield from served_workspace(root)


def served_count(ws: Workspace) -> int:
    served = daemon_client.status(ws.store_path)["served"]
    return served["dirty"] + served["full"]


def ctrlz(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, text=True)


def test_the_daemon_takes_the_snapshot_and_the_process_loads_none_of_opening(
        ws: Workspace) -> None:
    (ws.root / "src" / "a.py").write_text("a = 2\n")
    code = ("import sys\nfrom ctrlz.cli import main\ntry:\n    main(['snapshot', '--json'])\n"
            "except SystemExit as e:\n    sys.stderr.write(f'exit {e.code}\\n')\n"
            f"print(sorted(m for m in sys.modules if m in {OPENING + RECORDS!r}), "
            "file=sys.stderr)")
    before = served_count(ws)
    run = subprocess.run([sys.executable, "-c", code], cwd=ws.root, capture_output=True,
                         text=True)
    assert run.stderr.splitlines()[-2:] == ["exit 0", "[]"], run.stderr
    assert served_count(ws) == before + 1
    record = json.loads(run.stdout)
    snap = ws.resolve(record["id"])
    assert record == snap.to_json()  # what the catalog holds, printed as the full path would
    assert record["changes"] == {"created": 0, "modified": 1, "deleted": 0}


def test_both_doors_print_the_same_snapshot_output(ws: Workspace) -> None:
    """The plain door (served) and click's (which opens the workspace) print alike."""
    outputs = {}
    for n, args in enumerate((["snapshot"], ["snapshot", "-m", "x"], ["snapshot", "--json"],
                              ["snapshot", "--json", "-m", "x"])):
        (ws.root / "src" / "a.py").write_text(f"a = {n}\n")
        run = ctrlz(*args, cwd=ws.root)
        assert run.returncode == 0, run.stderr
        outputs[n] = run
    plain, labelled = outputs[0].stdout.split(), outputs[1].stdout.split()
    assert plain[0].startswith("snap_") and labelled[1] == '"x"'
    assert plain[1:4] == labelled[2:5] == ["+0", "~1", "-0,"]
    fast, slow = json.loads(outputs[2].stdout), json.loads(outputs[3].stdout)
    assert fast.keys() == slow.keys()
    differ = ("id", "number", "created_at", "label", "parent", "root", "added_bytes")
    assert {k: v for k, v in fast.items() if k not in differ} == \
        {k: v for k, v in slow.items() if k not in differ}
    assert [s.label for s in ws.snapshots()][-4:] == [None, "x", None, "x"]


def test_no_daemon_no_workspace_or_a_journal_leave_it_to_the_full_path(
        ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert served.snapshot(str(outside)) is None
    before = served_count(ws)
    with open(journal.path(ws.store_path), "wb"):  # what a crash mid-restore leaves
        pass
    try:
        assert served.snapshot(str(ws.root)) is None  # the daemon declines: the
        assert served.rollback(str(ws.root), "base") is None  # opened workspace recovers
        status = daemon_client.status(ws.store_path)
        assert status["served"]["dirty"] + status["served"]["full"] == before
        assert status["served"]["restores"] == 0
    finally:
        os.unlink(journal.path(ws.store_path))
    assert served.snapshot(str(ws.root)) is not None  # served again once it is gone
    daemon_client.stop(ws.store_path)
    assert served.snapshot(str(ws.root)) is None


def test_a_configuration_the_daemon_does_not_run_with_is_taken_in_process(
        ws: Workspace) -> None:
    """The daemon checks its settings against the files, declines and stops; the command
    then opens the workspace and takes the snapshot itself, with the new settings."""
    (ws.root / ".ctrlz.toml").write_text('exclude_globs = ["*.tmp"]\n')
    (ws.root / "scratch.tmp").write_text("left out\n")
    assert served.snapshot(str(ws.root)) is None
    run = ctrlz("snapshot", "--json", cwd=ws.root)
    assert run.returncode == 0, run.stderr
    snap = ws.resolve(json.loads(run.stdout)["id"])
    assert [c.path for c in ws.diff("base", snap.id).changes] == [b".ctrlz.toml"]


def test_a_broken_configuration_file_is_the_same_error_on_both_doors(ws: Workspace) -> None:
    (ws.root / ".ctrlz.toml").write_text("max_bytes = [\n")
    fast = ctrlz("snapshot", cwd=ws.root)
    slow = ctrlz("snapshot", "-m", "x", cwd=ws.root)
    assert fast.returncode == slow.returncode == 2
    assert fast.stderr == slow.stderr and "is not valid TOML" in fast.stderr


def test_a_rollback_is_handed_over_and_prints_what_the_opened_workspace_prints(
        ws: Workspace) -> None:
    """``ctrlz rollback SNAP --json`` (served: the workspace never opened) and ``ctrlz
    rollback --json SNAP`` (click: opened, then handed to the same daemon) restore alike,
    say the same, and are undone alike."""
    code = ("import sys\nfrom ctrlz.cli import main\ntry:\n"
            "    main(['rollback', 'base', '--json'])\n"
            "except SystemExit as e:\n    sys.stderr.write(f'exit {e.code}\\n')\n"
            f"print(sorted(m for m in sys.modules if m in {OPENING!r}), file=sys.stderr)")
    reports = []
    for door in ("served", "click"):
        (ws.root / "src" / "a.py").write_text(f"{door} edit\n")
        (ws.root / "src" / "new.py").write_text("new\n")
        restores = daemon_client.status(ws.store_path)["served"]["restores"]
        if door == "served":
            run = subprocess.run([sys.executable, "-c", code], cwd=ws.root,
                                 capture_output=True, text=True)
            assert run.stderr.splitlines()[-2:] == ["exit 0", "[]"], run.stderr
        else:
            run = ctrlz("rollback", "--json", "base", cwd=ws.root)
            assert run.returncode == 0, run.stderr
        assert daemon_client.status(ws.store_path)["served"]["restores"] == restores + 1
        assert (ws.root / "src" / "a.py").read_text() == "a = 1\n"
        assert not (ws.root / "src" / "new.py").exists()
        reports.append(json.loads(run.stdout))
    served_report, click_report = reports
    assert served_report.keys() == click_report.keys()
    assert served_report["actions"] == click_report["actions"]
    assert served_report["target"] == click_report["target"]
    undo = ctrlz("undo", cwd=ws.root)
    assert undo.returncode == 0, undo.stderr
    assert (ws.root / "src" / "a.py").read_text() == "click edit\n"


def test_a_rollback_the_daemon_refuses_fails_as_the_opened_workspace_fails(
        ws: Workspace) -> None:
    fast = ctrlz("rollback", "no-such-snapshot", cwd=ws.root)
    slow = ctrlz("rollback", "--json", "no-such-snapshot", cwd=ws.root)
    assert fast.returncode == slow.returncode == 4
    assert fast.stderr == slow.stderr and fast.stderr.startswith("ctrlz: error: ")


def test_a_non_utf8_root_reached_through_a_symlink_is_served(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The string locator finds the store the opened workspace would (realpath, bytes that
    are not UTF-8), so such a workspace is served, not opened."""
    monkeypatch.setenv("CTRLZ_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    root = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"caf\xe9")))
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    link = tmp_path / "link"
    link.symlink_to(root)
    with Workspace.init(root) as ws:
        ws.snapshot()
        assert daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)["ready"]
        try:
            before = served_count(ws)
            (root / "src" / "a.py").write_text("a = 2\n")
            run = ctrlz("snapshot", "--json", cwd=link / "src")
            assert run.returncode == 0, run.stderr
            assert served_count(ws) == before + 1
            assert json.loads(run.stdout)["changes"]["modified"] == 1
        finally:
            daemon_client.stop(ws.store_path)


def test_a_killed_daemons_socket_sends_the_command_the_full_way(ws: Workspace) -> None:
    """kill -9 leaves the socket file; the served door finds nobody behind it and the
    command takes the snapshot itself, then starts a daemon for the next one."""
    import signal

    pid = daemon_client.status(ws.store_path)["pid"]
    os.kill(pid, signal.SIGKILL)
    while daemon_client.running(ws.store_path):  # its lock goes with the process
        time.sleep(0.02)
    assert (ws.store_path / daemon_client.SOCKET_NAME).exists()
    (ws.root / "src" / "a.py").write_text("a = 3\n")
    assert served.snapshot(str(ws.root)) is None
    run = subprocess.run([CTRLZ, "snapshot", "--json"], cwd=ws.root, capture_output=True,
                         text=True, env={**os.environ, "CTRLZ_DAEMON": "1"})  # tests say 0
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["changes"]["modified"] == 1
    assert daemon_client.wait_ready(ws.store_path, 60) is not None  # started for next time
    assert daemon_client.status(ws.store_path)["pid"] != pid


def test_a_reply_without_the_json_form_is_read_from_the_catalog(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon of another ctrlz version may send a form this one does not print: the id is
    enough, the record comes from the catalog; an id the catalog does not hold is no answer
    (the command then takes the snapshot itself)."""
    snap = ws.snapshot(label="older daemon")
    reply = {"ok": True, "snapshot": {"id": snap.id}}
    monkeypatch.setattr(served, "_ask_snapshot", lambda *a, **k: reply)
    assert served.snapshot(str(ws.root)) == snap.to_json()
    reply["snapshot"] = {"id": "snap_notthere"}
    assert served.snapshot(str(ws.root)) is None
