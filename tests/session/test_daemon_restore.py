"""Restores handed to the workspace daemon: a real daemon process, real inotify, a real socket.

What must hold: the daemon's restore is the restore the caller would have run (same files, a
safety snapshot, an undo entry); a request it declines is run in-process instead; once it has
the request, its outcome is the caller's, failure included, and never run a second time.
"""

# ruff: noqa: F811 - the daemon fixture comes from test_daemon

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.errors import RestoreError
from ctrlz.session import daemon_client
from ctrlz.workspace import Workspace
from tests.conftest import tree_state

from .test_daemon import daemon  # noqa: F401 - started on this module's own ws fixture


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "work"
    for d in range(4):
        for f in range(4):
            p = root / f"pkg{d}" / f"f{f}.py"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"# {d}/{f}\n" * 20)
    (root / ".gitignore").write_text("*.log\n")
    (root / "run.log").write_text("ignored\n")
    workspace = Workspace.init(root)
    workspace.snapshot(label="base")
    yield workspace
    daemon_client.stop(workspace.store_path)
    workspace.close()


def served(ws: Workspace) -> int:
    return int(daemon_client.status(ws.store_path)["served"]["restores"])


def wait_dead(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` has exited (gone, or a zombie: its files are closed by then)
    within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except FileNotFoundError:
            return True
        if stat.rpartition(b")")[2].split()[0] in (b"Z", b"X"):
            return True
        time.sleep(0.05)
    return False


def edit(root: Path) -> None:
    (root / "pkg0" / "f0.py").write_text("changed\n")
    (root / "pkg1" / "f1.py").unlink()
    (root / "pkg2" / "new.py").write_text("new\n")
    shutil.rmtree(root / "pkg3")
    (root / "run.log").write_text("still ignored, never touched\n")


def test_the_daemon_runs_the_rollback_and_it_is_undoable(daemon: Workspace) -> None:
    ws = daemon
    before = tree_state(ws.root)
    edit(ws.root)
    edited = tree_state(ws.root)
    result = ws.rollback("base")
    assert served(ws) == 1
    after = tree_state(ws.root)
    assert after.keys() == before.keys()
    assert all(after[p][:3] == before[p][:3] for p in before if p != "run.log")
    assert (ws.root / "run.log").read_text() == "still ignored, never touched\n"
    assert result.safety is not None and result.safety.type == "safety"
    assert result.plan.counts() == {"created": 1 + 4, "modified": 1, "deleted": 1,
                                    "permissions_changed": 0}
    assert {a.path.partition(b"/")[2] for a in result.applied} >= {b"pkg0/f0.py",
                                                                  b"pkg2/new.py"}
    undone = ws.undo()  # the undo stack is the store's, whoever ran the restore
    assert undone.restore.safety is not None
    now = tree_state(ws.root)
    assert {p: v[:3] for p, v in now.items()} == {p: v[:3] for p, v in edited.items()}


def test_the_daemon_sees_edits_made_right_before_the_rollback(daemon: Workspace) -> None:
    """The capture scans what the watcher saw change: an edit the instant before the request
    is in the safety snapshot, so undo brings it back."""
    ws = daemon
    for i in range(5):
        (ws.root / "pkg0" / "f0.py").write_text(f"edit {i}\n")
        ws.rollback("base")
        assert (ws.root / "pkg0" / "f0.py").read_text() == "# 0/0\n" * 20
        ws.undo()
        assert (ws.root / "pkg0" / "f0.py").read_text() == f"edit {i}\n"
    assert served(ws) == 5


def test_a_declined_request_is_run_in_process(daemon: Workspace) -> None:
    ws = daemon
    (ws.root / ".ctrlz.toml").write_text('exclude_patterns = ["pkg3"]\n')  # daemon steps down
    (ws.root / "pkg0" / "f0.py").write_text("changed\n")
    ws.rollback("base")
    assert (ws.root / "pkg0" / "f0.py").read_text() == "# 0/0\n" * 20


def test_a_failure_in_the_daemon_is_raised_here_and_not_retried(daemon: Workspace) -> None:
    ws = daemon
    (ws.root / "pkg0" / "f0.py").write_text("changed\n")
    (ws.root / "pkg1" / "f1.py").write_text("changed too\n")
    locked = ws.root / "pkg1" / "f1.py"
    if subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available on this file system")
    try:
        safeties = len([s for s in ws.snapshots() if s.type == "safety"])
        with pytest.raises(RestoreError, match="ctrlz undo"):
            ws.rollback("base")
        assert len([s for s in ws.snapshots() if s.type == "safety"]) == safeties + 1
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)
    assert locked.read_text() == "changed too\n"
    ws.undo()  # the failed rollback's undo entry returns what it changed
    assert (ws.root / "pkg0" / "f0.py").read_text() == "changed\n"


def test_a_daemon_that_dies_holding_the_request_is_an_error_not_a_second_restore(
        ws: Workspace) -> None:
    """A peer on the daemon's socket that takes the request and closes without a word, as a
    daemon killed mid-restore does: the caller must report it, not restore again."""
    (ws.root / "pkg0" / "f0.py").write_text("changed\n")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    got: list[bytes] = []
    with daemon_client.socket_address(ws.store_path) as address:
        listener.bind(address)
    listener.listen(1)

    def take_and_die() -> None:
        conn, _ = listener.accept()
        with conn:
            got.append(conn.makefile("rb").readline())

    peer = threading.Thread(target=take_and_die)
    peer.start()
    try:
        with pytest.raises(RestoreError,
                           match="stopped during the rollback without answering .* `ctrlz status`"):
            ws.rollback("base")
    finally:
        peer.join(30)
        listener.close()
        (ws.store_path / daemon_client.SOCKET_NAME).unlink()
    assert b'"op": "restore"' in got[0]
    assert (ws.root / "pkg0" / "f0.py").read_text() == "changed\n"  # not run here as well
    assert [s.type for s in ws.snapshots()] == ["manual"]


def test_long_lived_processes_restore_themselves(daemon: Workspace,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from ctrlz.session.protected import ProtectedWorkspace

    ws = daemon
    monkeypatch.setattr(ProtectedWorkspace, "restore_by_daemon", False)
    (ws.root / "pkg0" / "f0.py").write_text("changed\n")
    ws.rollback("base")
    assert (ws.root / "pkg0" / "f0.py").read_text() == "# 0/0\n" * 20
    assert served(ws) == 0


def test_ctrl_c_while_the_daemon_restores_says_it_goes_on(ws: Workspace) -> None:
    """``ctrlz rollback`` (a real CLI process) interrupted while a daemon holds its request:
    exit 7 with a line that says the daemon goes on, not "interrupted" as if nothing ran."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with daemon_client.socket_address(ws.store_path) as address:
        listener.bind(address)
    listener.listen(1)
    got = threading.Event()
    held: list[socket.socket] = []

    def take_and_hold() -> None:
        conn, _ = listener.accept()
        conn.makefile("rb").readline()
        held.append(conn)
        got.set()

    peer = threading.Thread(target=take_and_hold)
    peer.start()
    ctrlz = str(Path(sys.executable).parent / "ctrlz")
    # a test run started in the background (``make test &``, nohup, some CI runners) has
    # SIGINT ignored, and an ignored signal stays ignored across exec: give the CLI the
    # default a person's terminal gives it (a handler is reset to the default on exec)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen([ctrlz, "rollback", "base"], cwd=ws.root,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        assert got.wait(60), "the CLI never sent its request"
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # say where it hangs, and how it takes signals
            status = [line for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                      if line.startswith(("SigBlk", "SigIgn", "SigCgt"))]
            proc.send_signal(signal.SIGABRT)  # faulthandler prints its stack
            _, err = proc.communicate(timeout=30)
            raise AssertionError("the CLI did not stop on Ctrl+C ({}):\n{}".format(
                ", ".join(status), err)) from None
    finally:
        peer.join(30)
        for conn in held:
            conn.close()
        listener.close()
        (ws.store_path / daemon_client.SOCKET_NAME).unlink()
    assert proc.returncode == 7, err
    assert err.startswith("ctrlz: error: interrupted; the workspace daemon goes on with the "
                          "rollback"), err
    assert "Traceback" not in err


@pytest.mark.parametrize(("point", "after"), [("restore-journal-written", 0),
                                              ("restore-place", 2),
                                              ("restore-before-commit", 0)])
def test_a_daemon_killed_mid_restore_leaves_what_undo_takes_back(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch, point: str, after: int) -> None:
    """SIGKILL inside the daemon's restore, at a named point: the caller gets the error (no
    second restore), the next opening recovers the journal, and ``undo`` returns the edits."""
    from ctrlz.engine.restore import journal

    edit(ws.root)
    edited = tree_state(ws.root)
    monkeypatch.setenv("CTRLZ_TEST_FAILPOINTS", f"{point}:{after}")
    started = daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)
    assert started["ready"]
    monkeypatch.delenv("CTRLZ_TEST_FAILPOINTS")
    with pytest.raises(RestoreError, match="stopped during the rollback without answering"):
        ws.rollback("base")
    # dead, not only off its daemon lock: the kernel lets go of a killed process's files one
    # by one, so its daemon lock may be free while it still holds the store lock, and an
    # opening then leaves the journal to "its owner" (engine.journal.recover)
    assert wait_dead(int(started["pid"]), 60), "the daemon outlived its kill point"
    assert journal.pending(ws.store_path), "the killed restore left no journal"
    again = Workspace.open(ws.root)
    try:
        assert again.recovered, "the interrupted restore's journal was not there to recover"
        assert not journal.pending(ws.store_path)
        again.undo()
        now = tree_state(again.root)
        assert {p: v[:3] for p, v in now.items()} == {p: v[:3] for p, v in edited.items()}
    finally:
        again.close()


def test_random_edits_rollbacks_and_undos_through_the_daemon(daemon: Workspace) -> None:
    """Random edits (including same-size, same-mtime ones the stat cache cannot see), then a
    rollback the daemon runs to a random earlier snapshot: the tree is exactly that snapshot,
    and undo brings back exactly the edited tree (compared by full in-process scans)."""
    from tests.session.test_daemon import edit_randomly, full_root

    ws = daemon
    rng = random.Random(4242)
    for _ in range(8):
        edit_randomly(ws.root, rng)
        ws.snapshot(type="auto")
        edit_randomly(ws.root, rng)
        edited = full_root(ws)
        target = rng.choice(ws.snapshots())
        before = served(ws)
        result = ws.rollback(target.id)
        assert served(ws) == before + 1
        assert result.safety is not None and result.safety.root == edited
        assert full_root(ws) == target.root
        ws.undo()
        assert full_root(ws) == edited


def test_non_utf8_names_and_a_revert_cross_the_socket_intact(daemon: Workspace) -> None:
    """Paths travel as hex: a name that is not UTF-8 is restored by the daemon byte for byte,
    and a one-file revert leaves every other path alone."""
    ws = daemon
    name = os.fsencode(ws.root) + b"/pkg0/caf\xe9 \xff.txt"
    with open(name, "wb") as f:
        f.write(b"original\n")
    ws.snapshot(label="with odd name")
    with open(name, "wb") as f:
        f.write(b"changed\n")
    (ws.root / "pkg1" / "f1.py").write_text("keep this edit\n")
    before = served(ws)
    result = ws.revert(b"pkg0/caf\xe9 \xff.txt")
    assert served(ws) == before + 1
    with open(name, "rb") as f:
        assert f.read() == b"original\n"
    assert (ws.root / "pkg1" / "f1.py").read_text() == "keep this edit\n"
    assert [a.path.partition(b"/")[2] for a in result.applied] == [b"pkg0/caf\xe9 \xff.txt"]


def test_a_restore_whose_report_is_megabytes_comes_back_whole(daemon: Workspace) -> None:
    """Thousands of paths make a reply far larger than a snapshot's: the caller must read it
    all, not take a long reply for a daemon that died."""
    ws = daemon
    many = ws.root / "many"
    many.mkdir()
    for i in range(10_000):
        (many / f"file-with-a-longish-name-{i:05d}.txt").write_text(f"{i}\n")
    ws.snapshot(label="many")
    shutil.rmtree(many)
    from ctrlz.session import restore_wire

    result = ws.rollback("many")
    assert len(json.dumps(restore_wire.encode_result(result))) > 2 * daemon_client.MAX_MESSAGE
    assert len(result.applied) >= 10_000
    assert sorted(p.name for p in many.iterdir()) == sorted(
        f"file-with-a-longish-name-{i:05d}.txt" for i in range(10_000))


def test_a_request_in_another_wire_version_is_declined_and_run_here(
        daemon: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """As from a daemon left running across an upgrade: it declines before starting, and
    the caller restores in its own process."""
    from ctrlz.session import restore_wire

    ws = daemon
    monkeypatch.setattr(restore_wire, "VERSION", restore_wire.VERSION + 1)
    (ws.root / "pkg0" / "f0.py").write_text("changed\n")
    ws.rollback("base")
    assert (ws.root / "pkg0" / "f0.py").read_text() == "# 0/0\n" * 20
    assert served(ws) == 0


def test_a_rollback_the_daemon_serves_never_opens_the_store_here(daemon: Workspace) -> None:
    """The caller sends the ref as the user gave it and gets the snapshots' records back:
    it loads neither SQLite nor the object store, and its result names the same snapshots,
    field for field, as the catalog does."""
    ws = daemon
    edit(ws.root)
    code = ("import sys, json\nfrom ctrlz import Workspace\n"
            "with Workspace.open('.') as ws:\n"
            "    r = ws.rollback('base')\n"
            "    opened = sorted(m for m in ('sqlite3', 'ctrlz.state.db.catalog', "
            "'ctrlz.state.store.objects', 'blake3') if m in sys.modules)\n"
            "from ctrlz.state.interchange.portable import to_record\n"
            "print(json.dumps({'opened': opened, 'applied': len(r.applied),"
            " 'target': [to_record(r.target), r.target.number],"
            " 'safety': [to_record(r.safety), r.safety.number]}))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ws.root, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["opened"] == []
    assert served(ws) == 1
    assert got["applied"] > 0
    from ctrlz.state.interchange.portable import to_record

    target, safety = ws.resolve("base"), ws.resolve("latest")
    assert safety.type == "safety"
    assert got["target"] == [to_record(target), target.number]
    assert got["safety"] == [to_record(safety), safety.number]


def test_a_ref_the_daemon_cannot_resolve_is_the_callers_own_error(daemon: Workspace) -> None:
    """The daemon declines before starting; the caller resolves the ref itself and meets the
    error it always met, and nothing is restored."""
    from ctrlz.errors import SnapshotNotFound

    ws = daemon
    (ws.root / "pkg0" / "f0.py").write_text("changed\n")
    with pytest.raises(SnapshotNotFound, match="no snapshot matches 'nope'"):
        ws.rollback("nope")
    assert (ws.root / "pkg0" / "f0.py").read_text() == "changed\n"
    assert served(ws) == 0
    assert [s.type for s in ws.snapshots()] == ["manual"]


def test_a_snapshot_the_daemon_takes_comes_back_as_the_catalog_has_it(
        daemon: Workspace) -> None:
    ws = daemon
    (ws.root / "pkg0" / "f0.py").write_text("changed\n")
    snap = ws.snapshot(label="by the daemon")
    assert int(daemon_client.status(ws.store_path)["served"]["dirty"]) + int(
        daemon_client.status(ws.store_path)["served"]["full"]) >= 1
    assert snap == ws.repo.catalog.snapshot(snap.id)
    assert snap.number is not None and snap.label == "by the daemon"


def test_what_a_restore_replaced_is_freed_once_the_daemon_has_answered(
        daemon: Workspace) -> None:
    """The daemon keeps the replaced and removed inodes open across their unlink, and closes
    them after its reply (``engine.restore.durable.let_go``): once it answers the next request,
    it holds none, and no name of them is left in the tree."""
    ws = daemon
    edit(ws.root)
    ws.rollback("base")
    assert served(ws) == 1
    pid = int(daemon_client.status(ws.store_path)["pid"])  # answered after the housekeeping
    held = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(ws.root)) and target.endswith(" (deleted)"):
            held.append(target)
    assert held == []
    assert not [p for p in ws.root.rglob("*") if p.name.startswith(".ctrlz-tmp-")]
