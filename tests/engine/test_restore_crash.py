"""kill -9 in the middle of an in-place restore, at many instants, for every kind of restore.

Each case builds a fresh workspace of ~40 files in a few folders, puts it in a state that the
restore will change with deletions, creations, modifications, a mode-only change, a symlink,
and a file and a link that changed kind (for rewind: an agent session with file tool calls, one
of them on an ignored ``.env``, and a shell call that deletes a folder), then runs the restore
in a child process (restore_crash_worker) that SIGKILLs itself at the (N+1)-th pass of a named
fault point. Afterwards:

* before anything reopens the store: the journal is there exactly when the kill came after it was
  written, and every temp file in the workspace carries that journal's token;
* the next ctrlz process that opens the store (``Workspace.open``, or ``ctrlz status``) cleans
  up: no journal, no ``.ctrlz-tmp-*`` anywhere in the workspace, ``verify`` clean;
* the tree is a mix of the two states (every file and link as it was before or as the target has
  it), and:
  - rollback / revert / rewind: either nothing was recorded and the tree is untouched, or the
    undo stack holds the interrupted restore and ``undo`` brings back exactly the tree before it;
    running the restore again then completes it;
  - undo / redo: running it again completes it.

The default run kills at a representative slice of ~55 instants plus a few kills from outside at
seeded-random moments; the ``slow`` sweep kills at every pass of every point.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz import toolcalls as tc
from ctrlz.engine.restore import journal
from ctrlz.toolcalls.shell import shell_call
from tests.conftest import Link, make_tree, tree_state

WORKER = Path(__file__).with_name("restore_crash_worker.py")
REPO = Path(__file__).resolve().parents[2]
CTRLZ = str(Path(sys.executable).parent / "ctrlz")
SESSION = "crash-session"  # the worker's SESSION
OPS = ("rollback", "revert", "undo", "redo", "rewind")
TEMP = ".ctrlz-tmp-"


# -- the workspace and the states the restores go between --------------------------------------

def base_spec() -> dict:
    rng = random.Random(7)
    return {
        "src": {f"m{i}.py": f"print({i})\n" * (i + 1) for i in range(14)},
        "lib": {**{f"l{i}.txt": f"lib {i}\n" * 10 for i in range(8)},
                "sub": {f"s{i}.txt": f"sub {i}\n" for i in range(5)}},
        "docs": {f"d{i}.md": f"# doc {i}\n" for i in range(6)},
        "README": "read me\n",
        "run.sh": "#!/bin/sh\necho hi\n",
        "link": Link("README"),
        "was_file": "a file, then a link\n",
        "was_link": Link("README"),
        ".gitignore": ".env\n",
        ".env": "SECRET=1\n",  # ignored by the rules
        "big.bin": rng.randbytes(300_000),
    }


def mutate(root: Path) -> None:
    """What the rollback (and revert) has to undo."""
    for i in (0, 3, 6, 9, 12):
        (root / "src" / f"m{i}.py").write_text(f"changed {i}\n")
    for i in (0, 1):
        (root / "lib" / f"l{i}.txt").write_text(f"lib changed {i}\n")
    shutil.rmtree(root / "lib" / "sub")
    for i in (0, 1):
        (root / "docs" / f"d{i}.md").unlink()
    (root / "newdir").mkdir()
    for i in range(4):
        (root / "newdir" / f"n{i}.txt").write_text(f"new {i}\n")
    (root / "src" / "new.py").write_text("new\n")
    (root / "lib" / "l_new.txt").write_text("x\n")
    os.chmod(root / "run.sh", 0o644)  # mode only
    (root / "link").unlink()
    os.symlink("docs/d2.md", root / "link")  # a symlink retargeted
    os.symlink("src", root / "newlink")  # and one created
    (root / "was_file").unlink()  # a file that became a link, a link that became a file:
    os.symlink("README", root / "was_file")  # no kill may find either missing
    (root / "was_link").unlink()
    (root / "was_link").write_text("a link, then a file\n")
    (root / ".env").write_text("SECRET=2\n")  # ignored: a rollback leaves it alone
    (root / "big.bin").write_bytes(random.Random(8).randbytes(300_000))


def agent_session(ws: Workspace, root: Path) -> None:
    """Turn 1: a file tool call t1 (one of its paths ignored), then a shell call t2 that deletes
    a folder. Turn 2: a file tool call t3. Then some edits by hand. Rewinding to t1 undoes all
    of it."""
    tc.begin_turn(SESSION, workspace=ws)
    with tc.tool_call(SESSION, "t1", workspace=ws):
        tc.write_file(root / "src" / "m0.py", "t1 edit\n")
        tc.write_file(root / ".env", "SECRET=2\n")
        tc.write_file(root / "newdir" / "n0.txt", "new\n")
        tc.delete_file(root / "docs" / "d0.md")
    shell_call(SESSION, "t2", "rm -rf lib/sub", workspace=ws)  # the hook runs first
    shutil.rmtree(root / "lib" / "sub")  # then the command
    tc.begin_turn(SESSION, workspace=ws)
    with tc.tool_call(SESSION, "t3", workspace=ws):
        tc.write_file(root / "src" / "m3.py", "t3\n", mode=0o600)
        tc.write_file(root / "src" / "m0.py", "t3 edit\n")
    os.chmod(root / "run.sh", 0o644)
    (root / "link").unlink()
    os.symlink("docs/d2.md", root / "link")
    (root / "big.bin").write_bytes(random.Random(8).randbytes(300_000))


def loose(state: dict[str, tuple]) -> dict[str, tuple]:
    """Files (kind, mode, bytes) and links, without mtimes or directories: what a rewind is
    compared by (it gives the files it puts back from pre-images the time of the rewind)."""
    return {k: v[:3] if v[0] == "f" else v for k, v in state.items() if v[0] != "d"}


@dataclass
class Case:
    op: str
    root: Path
    home: Path
    store: Path
    before: dict[str, tuple]  # the tree just before the restore that gets killed
    target: dict[str, tuple]  # what it leaves when it completes (for rewind: loose)
    ops: int  # entries in the operation log before it


def prepare(op: str, where: Path) -> Case:
    root, home = where / "ws", where / "home"
    make_tree(root, base_spec())
    os.chmod(root / "run.sh", 0o755)
    ws = Workspace.init(root, home=home)
    try:
        ws.snapshot(label="base")
        base = tree_state(root)
        if op == "rewind":
            agent_session(ws, root)
            before, target = tree_state(root), loose(base)
        else:
            mutate(root)
            changed = tree_state(root)
            if op == "rollback":
                before, target = changed, {**base, ".env": changed[".env"]}
            elif op == "revert":
                before = changed
                target = {k: v for k, v in changed.items() if not k.startswith("lib/")}
                target.update({k: v for k, v in base.items() if k.startswith("lib/")})
            else:
                ws.rollback("base")
                rolled = tree_state(root)
                assert rolled == {**base, ".env": changed[".env"]}
                if op == "undo":
                    before, target = rolled, changed
                else:
                    ws.undo()
                    assert tree_state(root) == changed
                    before, target = changed, rolled
        return Case(op, root, home, ws.store_path, before, target, len(ws.oplog.operations()))
    finally:
        ws.close()


# -- running the restore in a child, and the checks after the crash -----------------------------

def worker_env(home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "CTRLZ_HOME": str(home)}


def run_worker(case: Case, mode: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(WORKER), str(case.home), str(case.root), case.op,
                           mode, *args], env=worker_env(case.home), capture_output=True,
                          text=True, timeout=120)


def temp_files(root: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        found += [os.path.join(dirpath, n) for n in dirnames + filenames if n.startswith(TEMP)]
    return found


def rescued_files(root: Path) -> list[str]:
    return [os.path.join(d, n) for d, _, files in os.walk(root) for n in files
            if n.startswith("ctrlz-rescued-")]


def matches(op: str, now: dict[str, tuple], expected: dict[str, tuple]) -> bool:
    return (loose(now) if op == "rewind" else now) == expected


def assert_raw_state(case: Case, journal_expected: bool | None) -> None:
    """What the crash left, before any ctrlz process has opened the store again."""
    intent = journal.read(case.store)
    if journal_expected is not None:
        assert (intent is not None) == journal_expected, intent
    if intent is None:
        assert temp_files(case.root) == []  # nothing is written before the journal is
        return
    assert intent.kind == case.op
    assert intent.safety is not None
    # -a<n>o: the replaced inode's second name where there is no exchange (aside.py)
    token = re.compile(rf"{re.escape(TEMP)}{intent.token}-a?\d+o?")
    for path in temp_files(case.root):
        assert token.fullmatch(os.path.basename(path)), path


def reopen(case: Case, opener: str) -> Workspace:
    """The next ctrlz process that opens the store recovers; then the contract holds."""
    if opener == "cli":
        proc = subprocess.run([CTRLZ, "status"], cwd=case.root, env=worker_env(case.home),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        assert not journal.pending(case.store), "`ctrlz status` did not recover"
        assert temp_files(case.root) == []
    ws = Workspace.open(case.root, home=case.home)
    assert not journal.pending(case.store)
    assert temp_files(case.root) == []
    assert rescued_files(case.root) == []  # the safety snapshot holds every byte taken aside
    report = ws.verify()
    assert report.ok, report.errors
    return ws


def assert_mix(case: Case, now: dict[str, tuple]) -> None:
    """Every file and link is as it was before the restore or as the target has it."""
    before = loose(case.before) if case.op == "rewind" else case.before
    current = loose(now) if case.op == "rewind" else now
    for path in sorted(set(current) | set(before) | set(case.target)):
        got = current.get(path)
        if (got or before.get(path) or case.target.get(path) or ("d",))[0] == "d":
            continue  # a directory may be left empty, or not yet given its final mode
        assert got in (before.get(path), case.target.get(path)), (path, got)


def run_op(ws: Workspace, op: str) -> None:
    if op == "rollback":
        ws.rollback("base")
    elif op == "revert":
        ws.revert("lib")
    elif op == "rewind":
        tc.rewind(ws, "t1", session_id=SESSION)
    else:
        raise AssertionError(op)


def check_after_crash(case: Case, opener: str = "api") -> None:
    ws = reopen(case, opener)
    try:
        now = tree_state(case.root)
        assert_mix(case, now)
        if case.op in ("undo", "redo"):
            # an interrupted undo or redo left the stack as it was: running it again finishes it
            pending = ws.oplog.next_undo() if case.op == "undo" else ws.oplog.next_redo()
            if pending is not None:
                ws.undo() if case.op == "undo" else ws.redo()
            assert tree_state(case.root) == case.target
        else:
            new = ws.oplog.operations()[case.ops:]
            if not new:  # killed before the journal: nothing was touched
                assert now == case.before
            else:
                assert {o.kind for o in new} == {case.op}
                assert new[-1].status in ("interrupted", "done"), new[-1]
                assert ws.oplog.next_undo() == new[-1]
                ws.undo()
                assert tree_state(case.root) == case.before
            run_op(ws, case.op)  # and the restore itself can simply be run again
            assert matches(case.op, tree_state(case.root), case.target)
        assert temp_files(case.root) == [] and not journal.pending(case.store)
        assert ws.verify().ok
    finally:
        ws.close()


def crash_at(case: Case, point: str, after: int, opener: str = "api") -> None:
    proc = run_worker(case, "kill", point, str(after))
    assert proc.returncode == -signal.SIGKILL, (
        f"{case.op} was not killed at pass {after + 1} of {point} (did the plan change?): "
        f"exit {proc.returncode}\n{proc.stderr}")
    assert_raw_state(case, journal_expected=point.startswith("restore-"))
    check_after_crash(case, opener)


# -- the default slice: ~55 instants across the five kinds of restore ---------------------------

# (op, point, after, opener): the passes a restore of this workspace makes, for reference —
# rollback and redo/undo: 8 removals, 16 writes (in one batch: all temp files first), 9 of them
# replacing a file; revert (lib only): 1 removal, 7 writes, each fsynced and placed in turn;
# rewind: 1 removal, 11 writes, 5 replacing; every safety snapshot: 1 before-commit.
SLICE = [
    ("rollback", "pack-append", 0, "api"),  # the safety snapshot's one group of new objects
    ("rollback", "before-index-commit", 0, "api"),
    ("rollback", "before-commit", 0, "api"),
    ("rollback", "after-commit", 0, "cli"),
    ("rollback", "restore-journal-written", 0, "api"),
    ("rollback", "restore-remove", 0, "cli"),
    ("rollback", "restore-remove", 4, "api"),
    ("rollback", "restore-remove", 7, "api"),
    ("rollback", "restore-temp-written", 0, "api"),
    ("rollback", "restore-temp-written", 9, "cli"),
    ("rollback", "restore-temp-written", 15, "api"),
    ("rollback", "restore-place", 0, "api"),
    ("rollback", "restore-place", 8, "api"),
    ("rollback", "restore-place", 15, "cli"),
    ("rollback", "restore-exchanged", 0, "api"),
    ("rollback", "restore-exchanged", 8, "api"),
    ("rollback", "restore-before-sync", 0, "api"),
    ("rollback", "restore-before-commit", 0, "cli"),
    ("revert", "before-commit", 0, "api"),
    ("revert", "restore-journal-written", 0, "api"),
    ("revert", "restore-remove", 0, "api"),
    ("revert", "restore-temp-written", 0, "cli"),
    ("revert", "restore-temp-written", 6, "api"),
    ("revert", "restore-place", 0, "api"),
    ("revert", "restore-place", 3, "api"),
    ("revert", "restore-place", 6, "api"),
    ("revert", "restore-exchanged", 1, "api"),
    ("revert", "restore-before-sync", 0, "api"),
    ("revert", "restore-before-commit", 0, "api"),
    ("undo", "after-commit", 0, "api"),
    ("undo", "restore-journal-written", 0, "api"),
    ("undo", "restore-remove", 2, "api"),
    ("undo", "restore-remove", 7, "cli"),
    ("undo", "restore-temp-written", 5, "api"),
    ("undo", "restore-temp-written", 15, "api"),
    ("undo", "restore-place", 0, "api"),
    ("undo", "restore-place", 11, "api"),
    ("undo", "restore-exchanged", 4, "api"),
    ("undo", "restore-before-sync", 0, "api"),
    ("undo", "restore-before-commit", 0, "cli"),
    ("redo", "restore-journal-written", 0, "api"),
    ("redo", "restore-remove", 5, "api"),
    ("redo", "restore-temp-written", 12, "api"),
    ("redo", "restore-place", 3, "cli"),
    ("redo", "restore-place", 15, "api"),
    ("redo", "restore-exchanged", 6, "api"),
    ("redo", "restore-before-commit", 0, "api"),
    ("rewind", "pack-append", 0, "api"),
    ("rewind", "before-index-commit", 1, "api"),  # building the target, after the capture
    ("rewind", "restore-journal-written", 0, "api"),
    ("rewind", "restore-remove", 0, "cli"),
    ("rewind", "restore-temp-written", 3, "api"),
    ("rewind", "restore-temp-written", 10, "api"),
    ("rewind", "restore-place", 0, "api"),
    ("rewind", "restore-place", 10, "api"),
    ("rewind", "restore-exchanged", 2, "api"),
    ("rewind", "restore-before-sync", 0, "api"),
    ("rewind", "restore-before-commit", 0, "cli"),
]


@pytest.mark.parametrize(("op", "point", "after", "opener"), SLICE,
                         ids=[f"{o}-{p}-{n}-{w}" for o, p, n, w in SLICE])
def test_kill_during_restore(op: str, point: str, after: int, opener: str,
                             tmp_path: Path) -> None:
    case = prepare(op, tmp_path)
    crash_at(case, point, after, opener)


def kill_from_outside(case: Case, rng: random.Random) -> None:
    """SIGKILL the restore at a seeded-random moment: counted from the worker's ``ready`` (the
    store is open, the capture about to start), or from the journal's appearance (the apply)."""
    from_journal = rng.random() < 0.6
    delay = rng.uniform(0.0, 0.03 if from_journal else 0.2)
    proc = subprocess.Popen([sys.executable, str(WORKER), str(case.home), str(case.root),
                             case.op, "ready"], env=worker_env(case.home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "ready", proc.stderr.read() if proc.stderr else line
        if from_journal:
            while proc.poll() is None and not journal.pending(case.store):
                time.sleep(0.0005)
        time.sleep(delay)
        proc.kill()
    finally:
        proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
    assert proc.returncode in (0, -signal.SIGKILL)
    assert_raw_state(case, journal_expected=None)
    check_after_crash(case)


def test_kill_from_outside_at_random_moments(tmp_path: Path) -> None:
    rng = random.Random(20240611)
    for i, op in enumerate(("rollback", "undo", "rewind", "redo", "revert")):
        kill_from_outside(prepare(op, tmp_path / f"run{i}"), rng)


def test_uninterrupted_restores_journal_nothing_and_leave_an_undo_entry(tmp_path: Path) -> None:
    """The baseline the crash cases are compared with: a restore that completes."""
    for op in OPS:
        case = prepare(op, tmp_path / op)
        proc = run_worker(case, "count")
        assert proc.returncode == 0, proc.stderr
        passes = json.loads(proc.stdout.strip().splitlines()[-1])
        assert passes["restore-journal-written"] == 1 and passes["before-commit"] >= 1
        assert not journal.pending(case.store) and temp_files(case.root) == []
        assert matches(op, tree_state(case.root), case.target)
        with Workspace.open(case.root, home=case.home) as ws:
            new = ws.oplog.operations()[case.ops:]
            if op in ("undo", "redo"):
                assert new == [] and ws.oplog.operations()[0].undone == (op == "undo")
            else:
                assert [(o.kind, o.status) for o in new] == [(op, "done")]
                safety = ws.repo.catalog.snapshot(new[0].before)
                assert safety is not None and safety.type == "safety"


# -- what the sweep does not check -------------------------------------------------------------

@pytest.mark.parametrize(("point", "after"), [("restore-place", 8), ("restore-remove", 3)])
def test_redo_after_an_interrupted_then_finished_undo_brings_back_the_rollback(
        point: str, after: int, tmp_path: Path) -> None:
    case = prepare("undo", tmp_path)  # before: what the rollback produced; target: before it
    proc = run_worker(case, "kill", point, str(after))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with Workspace.open(case.root, home=case.home) as ws:
        ws.undo()  # finishes the interrupted undo
        assert tree_state(case.root) == case.target
        ws.redo()
        assert tree_state(case.root) == case.before


def concurrent_bytes_kept(root: Path) -> bool:
    from tests.engine.restore_crash_worker import CONCURRENT

    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path) and CONCURRENT in Path(path).read_bytes():
                return True
    return False


def test_a_write_to_the_replaced_inode_during_the_swap_is_kept(tmp_path: Path) -> None:
    """Without a crash: someone writes to the file the restore just swapped out; the restore
    swaps it back, leaves their bytes in place and reports the path as changed."""
    from ctrlz.errors import RestoreIncomplete
    from ctrlz.state import failpoints
    from tests.engine.restore_crash_worker import CONCURRENT

    case = prepare("revert", tmp_path)

    def write() -> None:  # to the inode just swapped out, taken aside as …-a<n>
        [temp] = [t for t in temp_files(case.root) if t.rpartition("-")[2].startswith("a")]
        with open(temp, "ab") as f:
            f.write(CONCURRENT)

    with Workspace.open(case.root, home=case.home) as ws:
        failpoints.arm_call("restore-exchanged", write)
        try:
            with pytest.raises(RestoreIncomplete, match="changed while it ran"):
                ws.revert("lib")
        finally:
            failpoints.disarm_all()
    assert concurrent_bytes_kept(case.root)
    assert temp_files(case.root) == [] and not journal.pending(case.store)


def test_a_write_to_the_replaced_inode_survives_a_crash_after_the_swap(tmp_path: Path) -> None:
    case = prepare("revert", tmp_path)
    proc = run_worker(case, "write-then-kill", "restore-exchanged")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    Workspace.open(case.root, home=case.home).close()  # recovers
    assert temp_files(case.root) == [] and not journal.pending(case.store)
    assert concurrent_bytes_kept(case.root)  # at its path, or kept as ctrlz-rescued-*


# -- the full sweep --------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_kill_at_every_pass_of_every_point(op: str, tmp_path: Path) -> None:
    counted = prepare(op, tmp_path / "count")
    proc = run_worker(counted, "count")
    assert proc.returncode == 0, proc.stderr
    passes = json.loads(proc.stdout.strip().splitlines()[-1])
    runs = [(point, n) for point, total in sorted(passes.items()) for n in range(total)]
    # every instant of the restore is swept; the safety snapshot's own writes are few since
    # small objects travel in groups (one pack append for all of them; none for an undo, whose
    # safety snapshot holds only objects the store has), so count points, not passes
    assert {"restore-journal-written", "restore-temp-written", "restore-exchanged",
            "restore-place", "restore-before-sync", "restore-before-commit",
            "before-commit", "after-commit"} <= passes.keys(), passes
    assert len(runs) >= 20
    for i, (point, n) in enumerate(runs):
        case = prepare(op, tmp_path / f"run{i}")
        crash_at(case, point, n, "cli" if i % 7 == 0 else "api")
        shutil.rmtree(tmp_path / f"run{i}")


@pytest.mark.slow
def test_kill_from_outside_at_many_random_moments(tmp_path: Path) -> None:
    rng = random.Random(77)
    for i in range(25):
        op = rng.choice(OPS)
        kill_from_outside(prepare(op, tmp_path / f"run{i}"), rng)
        shutil.rmtree(tmp_path / f"run{i}")
