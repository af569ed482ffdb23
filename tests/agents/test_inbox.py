"""The tool-call inbox: a file tool's pre-tool hook leaves its capture without opening the
catalog, and the next opener of the tool-call store indexes it exactly once.

Real hook processes, real files, real SQLite; crashes are SIGKILLs at named points in a child
process (``ctrlz.state.failpoints``).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctrlz import toolcalls as tc
from ctrlz.hooks import recent_hook_errors
from ctrlz.hooks.runner import run
from ctrlz.state.db import inbox
from ctrlz.toolcalls import UNTIL_STOP
from ctrlz.toolcalls.inbox import BODY_MAX, PENDING_MAX
from ctrlz.toolcalls.store import locate
from ctrlz.workspace import Workspace

SESSION = "inbox-session"

# a hook child that dies at a failpoint: argv = point, payload
HOOK_DIES = """
import io, sys
from ctrlz.state import failpoints
failpoints.arm(sys.argv[1])
from ctrlz.hooks.runner import run
run("claude", io.BytesIO(sys.argv[2].encode()))
"""

# a reader child that dies at a failpoint while it indexes: argv = point, workspace
READER_DIES = """
import sys
from ctrlz.state import failpoints
failpoints.arm(sys.argv[1])
from ctrlz import toolcalls
toolcalls.list_snapshots("inbox-session", workspace=sys.argv[2])
"""


@pytest.fixture
def ws(ws_dir: Path) -> Path:
    (ws_dir / "src").mkdir()
    (ws_dir / "src" / "app.py").write_text("print('hello')\n")
    Workspace.init(ws_dir).close()
    # the first capture makes the tool-call store; later ones may use the inbox
    tc.start_session(SESSION, workspace=ws_dir, agent="claude")
    return ws_dir


def payload(ws: Path, event: str, tool_id: str, path: Path | str, **extra: object) -> dict:
    return {"session_id": SESSION, "transcript_path": str(ws / ".t.jsonl"), "cwd": str(ws),
            "hook_event_name": event, "tool_name": "Edit", "tool_use_id": tool_id,
            "tool_input": {"file_path": os.fsdecode(path)}, **extra}


def pre(ws: Path, tool_id: str, path: Path | str, **extra: object) -> None:
    """A PreToolUse hook in this process, as a hook's own process runs it."""
    run("claude", io.BytesIO(json.dumps(payload(ws, "PreToolUse", tool_id, path,
                                                **extra)).encode()))


def toolcalls_dir(ws: Path) -> str:
    return os.path.join(locate(str(ws))[1], "toolcalls")


def waiting(ws: Path) -> list[str]:
    try:
        return sorted(os.listdir(inbox.inbox_dir(toolcalls_dir(ws))))
    except FileNotFoundError:
        return []


def hook_errors(ws: Path) -> list[dict]:
    with Workspace.open(ws) as w:
        return recent_hook_errors(w)


def test_a_pre_hook_leaves_its_capture_and_the_next_opener_indexes_it(ws: Path) -> None:
    app = ws / "src" / "app.py"
    pre(ws, "toolu_1", app)
    [name] = waiting(ws)
    assert name.endswith(".cap")
    app.write_text("print('edited by the agent')\n")
    snaps = tc.list_snapshots(SESSION, workspace=ws)  # the next opener: indexes first
    assert [(s["snapshot_id"], s["captured_paths"]) for s in snaps] == [
        ("toolu_1", ["src/app.py"])]
    assert waiting(ws) == []
    result = tc.fs_restore(SESSION, "toolu_1", workspace=ws)
    assert result["restored_paths"] == ["src/app.py"]
    assert app.read_text() == "print('hello')\n"
    assert hook_errors(ws) == []


def test_indexed_later_means_what_indexed_now_means(ws_dir: Path, tmp_path: Path) -> None:
    """The same hook sequence through the inbox and through direct indexing (the daemon's
    way) gives the same snapshots, turns, entries and budget evictions."""
    from ctrlz.hooks.runner import handle_recorded, parse, workspace_of

    def session(root: Path, later: bool) -> list[tuple]:
        root.mkdir()
        for i in range(4):
            (root / f"f{i}.txt").write_text(f"v{i}\n" * 50)
        Workspace.init(root).close()
        tc.start_session(SESSION, workspace=root, agent="claude")
        tc.configure_byte_cap(SESSION, 900, workspace=root)  # evicts as the session grows
        events = []
        for turn in range(3):
            events.append({"session_id": SESSION, "cwd": str(root),
                           "hook_event_name": "UserPromptSubmit", "prompt": f"p{turn}"})
            for i in range(3):
                target = root / f"f{(turn + i) % 4}.txt"
                events.append(payload(root, "PreToolUse", f"t{turn}-{i}", target))
                events.append(payload(root, "PostToolUse", f"t{turn}-{i}", target))
                target.write_text(f"turn {turn} call {i}\n" * (10 + i))
        for p in events:
            ctx = workspace_of("claude", parse(json.dumps(p).encode()), os.environ, os.getcwd)
            ctx.index_later = later
            handle_recorded(p, "", ctx)
        return [(s["snapshot_id"], s["turn"], s["captured_paths"], s["byte_count"],
                 s["kind"]) for s in tc.list_snapshots(SESSION, workspace=root)]

    assert session(tmp_path / "later", True) == session(tmp_path / "now", False)


def test_every_kind_of_path_and_a_name_that_is_not_utf8(ws: Path) -> None:
    weird = os.fsencode(ws) + b"/caf\xe9.txt"
    with open(weird, "wb") as f:
        f.write(b"latin-1 name\n")
    os.symlink("src/app.py", ws / "link")
    (ws / "adir").mkdir(mode=0o750)
    for i, path in enumerate([os.fsdecode(weird), str(ws / "link"), str(ws / "adir"),
                              str(ws / "new.txt")]):
        pre(ws, f"toolu_k{i}", path)
    assert len(waiting(ws)) == 4
    entries = {}
    for s in tc.list_snapshots(SESSION, workspace=ws):
        entries.update({p: s["snapshot_id"] for p in s["captured_paths"]})
    assert entries == {os.fsdecode(b"caf\xe9.txt"): "toolu_k0", "link": "toolu_k1",
                       "src/app.py": "toolu_k1",  # the file a write through the link changes
                       "adir": "toolu_k2", "new.txt": "toolu_k3"}
    # the bodies are the real ones: undo each change by restoring (forced: these calls have
    # no post-tool record, and later calls began, so a plain restore leaves their paths alone)
    os.unlink(weird)
    os.unlink(ws / "link")
    (ws / "new.txt").write_text("made by the tool\n")
    tc.fs_restore(SESSION, "toolu_k0", force=True, workspace=ws)
    tc.fs_restore(SESSION, "toolu_k1", force=True, workspace=ws)
    tc.fs_restore(SESSION, "toolu_k3", workspace=ws)
    with open(weird, "rb") as f:
        assert f.read() == b"latin-1 name\n"
    assert os.readlink(ws / "link") == "src/app.py"
    assert not (ws / "new.txt").exists()


def test_a_big_file_is_captured_the_usual_way(ws: Path) -> None:
    big = ws / "big.bin"
    big.write_bytes(os.urandom(BODY_MAX))
    pre(ws, "toolu_big", big)
    assert waiting(ws) == []  # nothing left waiting: it was indexed at once
    [snap] = tc.list_snapshots(SESSION, workspace=ws)
    assert snap["byte_count"] == BODY_MAX


def test_a_full_inbox_is_indexed_by_the_next_hook(ws: Path) -> None:
    app = ws / "src" / "app.py"
    for i in range(PENDING_MAX):
        pre(ws, f"toolu_{i:03d}", app)
    assert len(waiting(ws)) == PENDING_MAX
    pre(ws, "toolu_last", app)
    assert waiting(ws) == []
    snaps = tc.list_snapshots(SESSION, workspace=ws)
    assert [s["snapshot_id"] for s in snaps] == [f"toolu_{i:03d}" for i in range(PENDING_MAX)] + [
        "toolu_last"]


def test_a_hook_killed_before_its_rename_leaves_nothing_but_a_part_swept_later(ws: Path
                                                                                ) -> None:
    data = json.dumps(payload(ws, "PreToolUse", "toolu_dead", ws / "src" / "app.py"))
    proc = subprocess.run([sys.executable, "-c", HOOK_DIES, "inbox-before-rename", data],
                          cwd=ws, capture_output=True, timeout=60)
    assert proc.returncode == -9
    [part] = waiting(ws)
    assert part.endswith(".part")
    assert tc.list_snapshots(SESSION, workspace=ws) == []  # a dead hook recorded nothing...
    assert waiting(ws) == []  # ...and its leftovers are gone
    pre(ws, "toolu_alive", ws / "src" / "app.py")
    assert [s["snapshot_id"] for s in tc.list_snapshots(SESSION, workspace=ws)] == [
        "toolu_alive"]


def test_a_live_writers_part_is_left_alone(ws: Path) -> None:
    folder = inbox.inbox_dir(toolcalls_dir(ws))
    pre(ws, "toolu_1", ws / "src" / "app.py")
    mine = f"{1:020d}-{os.getpid()}-00000000.part"  # this process is alive
    Path(folder, mine).write_bytes(b"half")
    tc.list_snapshots(SESSION, workspace=ws)
    assert waiting(ws) == [mine]


@pytest.mark.parametrize(("point", "indexed_after"), [("intake-before-commit", 2),
                                                      ("intake-committed:1", 0)])
def test_a_reader_killed_while_indexing_indexes_nothing_twice(ws: Path, point: str,
                                                              indexed_after: int) -> None:
    """Killed before a commit: that record waits and is indexed next time. Killed after
    both commits but before their files went: the names were recorded with the rows, so the
    next opener deletes the files and indexes nothing again."""
    from ctrlz.toolcalls.core import Place
    from ctrlz.toolcalls.intake import take_in
    from ctrlz.toolcalls.store import ToolcallStore

    pre(ws, "toolu_1", ws / "src" / "app.py")
    pre(ws, "toolu_2", ws / "README")
    assert len(waiting(ws)) == 2
    name, _, after = point.partition(":")
    script = READER_DIES.replace("failpoints.arm(sys.argv[1])",
                                 f"failpoints.arm(sys.argv[1], {after or 0})")
    proc = subprocess.run([sys.executable, "-c", script, name, str(ws)], cwd=ws,
                          capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    assert len(waiting(ws)) == 2
    root, store = locate(str(ws))
    with ToolcallStore(store) as store_:
        assert take_in(Place(root, store_)) == indexed_after
    assert waiting(ws) == []
    snaps = tc.list_snapshots(SESSION, workspace=ws)
    assert [(s["snapshot_id"], s["captured_paths"]) for s in snaps] == [
        ("toolu_1", ["src/app.py"]), ("toolu_2", ["README"])]


def test_an_unreadable_record_is_set_aside_and_reported(ws: Path) -> None:
    app = ws / "src" / "app.py"
    pre(ws, "toolu_1", app)
    [first] = waiting(ws)
    path = Path(inbox.inbox_dir(toolcalls_dir(ws)), first)
    path.write_bytes(path.read_bytes()[:-3])  # a body cut short
    pre(ws, "toolu_2", app)
    snaps = tc.list_snapshots(SESSION, workspace=ws)
    assert [s["snapshot_id"] for s in snaps] == ["toolu_2"]
    assert waiting(ws) == [first[:-len(".cap")] + ".bad"]
    [err] = hook_errors(ws)
    assert "set aside" in err["error"] and "truncated body" in err["error"]
    tc.list_snapshots(SESSION, workspace=ws)  # a .bad record is not tried again
    assert len(hook_errors(ws)) == 1


GOOD = {"v": 1, "kind": "pre", "session_id": SESSION, "scope_id": "toolu_x", "agent": "claude",
        "tool": "Edit", "args_key": None, "turn_key": None, "taken_ns": 1,
        "images": [{"path": "src/app.py", "kind": "absent", "size": 0, "mode": None}]}


def test_a_record_written_by_hand_is_indexed_as_a_hooks(ws: Path) -> None:
    """The header the tests below spoil, as it is: indexed."""
    inbox.write(toolcalls_dir(ws), GOOD, [], 1)
    [snap] = tc.list_snapshots(SESSION, workspace=ws)
    assert (snap["snapshot_id"], snap["captured_paths"], snap["taken_at_ms"]) == (
        "toolu_x", ["src/app.py"], 0)
    assert waiting(ws) == []


@pytest.mark.parametrize("change", [
    {"v": 2}, {"kind": "post"}, {"session_id": ""}, {"scope_id": None}, {"tool": 3},
    {"taken_ns": "soon"}, {"taken_ns": True}, {"taken_ns": 2**70}, {"images": "none"},
    {"images": [{"path": "x", "kind": "absent", "size": 0, "mode": 2**70}]},
    {"images": [{"path": "../outside", "kind": "absent", "size": 0, "mode": None}]},
    {"images": [{"path": "/etc/passwd", "kind": "absent", "size": 0, "mode": None}]},
    {"images": [{"path": "a//b", "kind": "absent", "size": 0, "mode": None}]},
    {"images": [{"path": "x", "kind": "socket", "size": 0, "mode": None}]},
    {"images": [{"path": "x", "kind": "dir", "size": 0, "mode": "rwx"}]},
    {"images": [{"path": 7, "kind": "absent", "size": 0, "mode": None}]},
], ids=lambda change: "-".join(f"{k}={v!r}"[:30] for k, v in change.items()))
def test_a_record_that_cannot_be_indexed_never_blocks_the_store(ws: Path, change: dict
                                                               ) -> None:
    """Written whole but wrong (another version, a field of the wrong type, a path outside
    the workspace): set aside and reported, and the store opens, with the records beside
    it indexed."""
    inbox.write(toolcalls_dir(ws), GOOD | change, [], 1)
    pre(ws, "toolu_good", ws / "src" / "app.py")
    assert [s["snapshot_id"] for s in tc.list_snapshots(SESSION, workspace=ws)] == [
        "toolu_good"]
    assert [n.rsplit(".", 1)[1] for n in waiting(ws)] == ["bad"]
    [err] = hook_errors(ws)
    assert "set aside" in err["error"]


def test_hooks_and_readers_at_once_lose_nothing_and_double_nothing(ws: Path) -> None:
    """Eight hook processes leave captures while another process keeps opening the store."""
    reader = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom ctrlz import toolcalls\n"
        "for _ in range(40):\n"
        "    toolcalls.list_snapshots('inbox-session', workspace=sys.argv[1])\n"),
        str(ws)], cwd=ws)
    procs = []
    for i in range(8):
        (ws / f"p{i}.txt").write_text(f"v{i}")
        data = json.dumps(payload(ws, "PreToolUse", f"toolu_p{i}", ws / f"p{i}.txt")).encode()
        p = subprocess.Popen([sys.executable, "-m", "ctrlz.hooks", "claude"], cwd=ws,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        procs.append((p, data))
    for p, data in procs:
        assert p.communicate(data, timeout=60) == (b"", b"")
    assert reader.wait(timeout=120) == 0
    snaps = tc.list_snapshots(SESSION, workspace=ws)
    assert sorted(s["snapshot_id"] for s in snaps) == [f"toolu_p{i}" for i in range(8)]
    assert all(s["byte_count"] == 2 for s in snaps)
    assert waiting(ws) == []
    assert hook_errors(ws) == []


# -- any interleaving: the inbox changes nothing but when rows are written ---------------------

EVENT = st.one_of(
    st.tuples(st.just("prompt"), st.sampled_from([None, "k1", "k2", "k3"])),
    st.tuples(st.just("pre"), st.integers(0, 3), st.booleans(),
              st.sampled_from([None, "k1", "k2", "k3", UNTIL_STOP])),
    st.tuples(st.just("post")),
    st.tuples(st.just("edit"), st.integers(0, 3)),
    st.tuples(st.just("read")),
    st.tuples(st.just("stop")),
)


def _rows(root: Path) -> tuple[list, list, list]:
    """Everything a capture writes but its time: sessions, snapshots, entries."""
    from ctrlz.toolcalls.core import opened

    with opened(str(root)) as place:
        db = place.db
        return (db.execute("SELECT session_id, turn, turn_key FROM tc_sessions").fetchall(),
                db.execute("SELECT session_id, snapshot_id, turn, kind, tool, byte_count, "
                           "open, rolled_back FROM tc_snapshots ORDER BY seq").fetchall(),
                db.execute("SELECT s.snapshot_id, e.path, e.kind, e.oid, e.size, e.mode, "
                           "e.post_kind, e.post_oid FROM tc_entries e JOIN tc_snapshots s "
                           "ON s.seq = e.seq ORDER BY s.seq, e.path").fetchall())


@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(events=st.lists(EVENT, min_size=1, max_size=25))
def test_any_interleaving_ends_in_the_rows_direct_indexing_makes(events: list[tuple],
                                                                 tmp_path: Path) -> None:
    from ctrlz.hooks.actions import after_tool, end_turn, file_tool, new_turn
    from ctrlz.hooks.runner import workspace_of

    base = Path(tempfile.mkdtemp(dir=tmp_path))
    roots = {}
    for kind in ("direct", "mixed"):
        root = roots[kind] = base / kind
        root.mkdir()
        for i in range(4):
            (root / f"f{i}.txt").write_text(f"first {i}\n")
        Workspace.init(root).close()
        tc.start_session(SESSION, workspace=root, agent="claude")
    calls = 0
    for event in events:
        for kind, root in roots.items():
            ctx = workspace_of("claude", {"cwd": str(root)}, os.environ, os.getcwd)
            if event[0] == "prompt":
                new_turn(ctx, SESSION, event[1])
            elif event[0] == "pre":
                ctx.index_later = kind == "mixed" and event[2]
                file_tool(ctx, SESSION, f"t{calls}", "Edit", [str(root / f"f{event[1]}.txt")],
                          turn_key=event[3])
            elif event[0] == "post" and calls:
                after_tool(ctx, SESSION, f"t{calls - 1}")
            elif event[0] == "edit":
                (root / f"f{event[1]}.txt").write_text(f"edit {calls} of {event[1]}\n")
            elif event[0] == "read" and kind == "mixed":
                tc.list_snapshots(SESSION, workspace=root)
            elif event[0] == "stop":
                end_turn(ctx, SESSION)
        calls += event[0] == "pre"
    assert _rows(roots["mixed"]) == _rows(roots["direct"])
