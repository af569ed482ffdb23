"""The per-tool-call snapshot API: explicit and lazy capture, restore with force, the byte cap,
list/drop, durability across reopening, turn rollback/redo and redo invalidation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctrlz import toolcalls as tc
from ctrlz.errors import PathOutsideWorkspace, SnapshotNotFound, UsageError
from ctrlz.toolcalls.store import ToolcallStore, find_workspace
from ctrlz.workspace import Workspace, store_path_for


@pytest.fixture
def ws(ws_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    Workspace.init(ws_dir).close()
    monkeypatch.chdir(ws_dir)
    return ws_dir


def test_store_formula_matches_the_workspace(ws: Path) -> None:
    root, store = find_workspace(ws / "deeper" if (ws / "deeper").exists() else ws)
    assert root == ws.resolve()
    assert store == store_path_for(ws, Path(os.environ["CTRLZ_HOME"]))


def test_explicit_snapshot_then_restore_round_trips(ws: Path) -> None:
    (ws / "a.txt").write_text("v1")
    info = tc.fs_snapshot("s1", "tc_1", [str(ws / "a.txt"), "new.txt"])
    assert info["snapshot_id"] == "tc_1"
    assert info["byte_count"] == 2
    assert sorted(info["captured_paths"]) == ["a.txt", "new.txt"]
    (ws / "a.txt").write_text("v2")
    (ws / "new.txt").write_text("created")
    out = tc.fs_restore("s1", "tc_1")
    assert sorted(out["restored_paths"]) == ["a.txt", "new.txt"]
    assert out["skipped_paths_with_reasons"] == []
    assert (ws / "a.txt").read_text() == "v1"
    assert not (ws / "new.txt").exists()


def test_lazy_capture_with_tool_call_and_helpers(ws: Path) -> None:
    (ws / "keep.txt").write_text("original")
    (ws / "gone.txt").write_text("delete me")
    with tc.tool_call("s1", "tc_lazy") as info:
        assert info["captured_paths"] == []
        tc.write_file("keep.txt", "first write")
        tc.write_file("keep.txt", "second write")  # first touch wins
        tc.write_file("sub/fresh.txt", b"new")
        tc.delete_file(ws / "gone.txt")
    [snap] = tc.list_snapshots("s1")
    assert snap["captured_paths"] == ["gone.txt", "keep.txt", "sub/fresh.txt"]
    assert snap["open"] is False
    out = tc.fs_restore("s1", "tc_lazy")
    assert out["skipped_paths_with_reasons"] == []
    assert (ws / "keep.txt").read_text() == "original"
    assert (ws / "gone.txt").read_text() == "delete me"
    assert not (ws / "sub" / "fresh.txt").exists()


def test_helpers_outside_a_scope_just_write(ws: Path) -> None:
    tc.write_file(ws / "plain.txt", "x")
    assert (ws / "plain.txt").read_text() == "x"
    tc.delete_file(ws / "plain.txt")
    assert not (ws / "plain.txt").exists()


def test_restore_skips_a_later_edit_unless_forced(ws: Path) -> None:
    (ws / "a.txt").write_text("v1")
    with tc.tool_call("s1", "tc_1"):
        tc.write_file("a.txt", "tool wrote this")
    (ws / "a.txt").write_text("the user edited it afterwards")
    out = tc.fs_restore("s1", "tc_1")
    assert out["restored_paths"] == []
    [skip] = out["skipped_paths_with_reasons"]
    assert skip["path"] == "a.txt" and "later edit" in skip["reason"]
    assert (ws / "a.txt").read_text() == "the user edited it afterwards"
    out = tc.fs_restore("s1", "tc_1", force=True)
    assert out["restored_paths"] == ["a.txt"]
    assert (ws / "a.txt").read_text() == "v1"


def test_restore_subset_of_paths(ws: Path) -> None:
    (ws / "a").write_text("a1")
    (ws / "b").write_text("b1")
    tc.fs_snapshot("s1", "t", ["a", "b"])
    (ws / "a").write_text("a2")
    (ws / "b").write_text("b2")
    out = tc.fs_restore("s1", "t", ["b"])
    assert out["restored_paths"] == ["b"]
    assert (ws / "a").read_text() == "a2" and (ws / "b").read_text() == "b1"


def test_errors(ws: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        tc.fs_snapshot(" ", "x")
    with pytest.raises(SnapshotNotFound, match="no snapshots registered"):
        tc.fs_restore("nobody", "x")
    tc.fs_snapshot("s1", "x", ["f"])
    with pytest.raises(SnapshotNotFound, match="unknown snapshot"):
        tc.fs_restore("s1", "y")
    with pytest.raises(PathOutsideWorkspace):
        tc.fs_snapshot("s1", "z", [str(tmp_path / "elsewhere")])


def test_byte_cap_evicts_oldest_but_never_the_open_one(ws: Path) -> None:
    for name in ("one", "two", "three"):
        (ws / name).write_bytes(b"x" * 5)
    tc.fs_snapshot("s1", "first", ["one"])
    tc.configure_byte_cap("s1", 8)
    tc.fs_snapshot("s1", "second", ["two"])
    assert [s["snapshot_id"] for s in tc.list_snapshots("s1")] == ["second"]
    # an oversized snapshot is kept rather than evicting itself
    (ws / "big").write_bytes(b"y" * 20)
    tc.fs_snapshot("s1", "big", ["big"])
    assert [s["snapshot_id"] for s in tc.list_snapshots("s1")] == ["big"]
    # the open lazy scope survives while later explicit snapshots push it over the cap
    with tc.tool_call("s1", "open"):
        tc.write_file("three", "zzzzz")
        tc.fs_snapshot("s1", "later", ["one"])
        ids = [s["snapshot_id"] for s in tc.list_snapshots("s1")]
        assert "open" in ids and "big" not in ids


def test_bodies_are_deduplicated(ws: Path) -> None:
    (ws / "a").write_bytes(b"same body" * 100)
    (ws / "b").write_bytes(b"same body" * 100)
    tc.fs_snapshot("s1", "t1", ["a"])
    tc.fs_snapshot("s2", "t2", ["b"])
    root, store = find_workspace(ws)
    with ToolcallStore(store) as s:
        assert len(s.catalog.object_rows()) == 1


def test_list_drop_and_drop_session(ws: Path) -> None:
    (ws / "a").write_text("1")
    tc.fs_snapshot("s1", "t1", ["a"])
    tc.fs_snapshot("s1", "t2", ["a"])
    assert [s["snapshot_id"] for s in tc.list_snapshots("s1")] == ["t1", "t2"]
    assert tc.drop_snapshot("s1", "t1") == {"snapshot_id": "t1", "dropped": True}
    assert tc.drop_snapshot("s1", "t1") == {"snapshot_id": "t1", "dropped": False}
    assert [s["snapshot_id"] for s in tc.list_snapshots("s1")] == ["t2"]
    assert tc.drop_session("s1")["dropped_snapshots"] == 1
    assert tc.list_snapshots("s1") == []
    _, store = find_workspace(ws)
    with ToolcallStore(store) as s:
        assert s.catalog.object_rows() == []  # bodies collected


def test_state_survives_reopening_in_a_new_process(ws: Path) -> None:
    import subprocess
    import sys

    (ws / "a").write_text("before")
    code = ("from ctrlz import toolcalls as tc\n"
            "tc.fs_snapshot('s1', 'tc_x', ['a'])\n")
    subprocess.run([sys.executable, "-c", code], cwd=ws, check=True)
    (ws / "a").write_text("after")
    assert tc.fs_restore("s1", "tc_x")["restored_paths"] == ["a"]
    assert (ws / "a").read_text() == "before"


def test_workspace_argument_accepts_a_workspace_or_a_path(ws: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (ws / "a").write_text("1")
    with Workspace.open(ws) as w:
        tc.fs_snapshot("s1", "t1", [str(ws / "a")], workspace=w)
    assert tc.list_snapshots("s1", workspace=ws)[0]["captured_paths"] == ["a"]


def test_rollback_and_redo_of_turns(ws: Path) -> None:
    (ws / "a").write_text("a0")
    assert tc.begin_turn("s1") == 1
    with tc.tool_call("s1", "t1"):
        tc.write_file("a", "a1")
    assert tc.begin_turn("s1") == 2
    with tc.tool_call("s1", "t2"):
        tc.write_file("a", "a2")
        tc.write_file("b", "b2")
    with tc.tool_call("s1", "t3"):
        tc.write_file("a", "a3")
    out = tc.rollback("s1", 2)
    assert out["fs_snapshot_ids"] == ["t2", "t3"]
    assert all(not r["skipped_paths_with_reasons"] for r in out["fs_restores"])
    assert (ws / "a").read_text() == "a1" and not (ws / "b").exists()
    tc.redo("s1")
    assert (ws / "a").read_text() == "a3" and (ws / "b").read_text() == "b2"
    with pytest.raises(UsageError, match="nothing to redo"):
        tc.redo("s1")
    tc.rollback("s1", 1)
    assert (ws / "a").read_text() == "a0" and not (ws / "b").exists()


def test_turns_bounded_by_stop_take_a_late_prompt(ws: Path) -> None:
    """UNTIL_STOP (Auggie): whichever of the prompt and the first tool call comes first after
    a Stop starts the turn; a prompt with no Stop before it still starts one."""
    (ws / "a").write_text("a0")

    def call(tool_id: str) -> None:
        tc.fs_snapshot("s1", tool_id, ["a"], turn_key=tc.UNTIL_STOP)

    call("t1")                                            # before the session's first prompt
    assert tc.begin_turn("s1", turn_key=tc.UNTIL_STOP) == 1
    call("t2")
    tc.end_turn("s1")
    assert tc.begin_turn("s1", turn_key=tc.UNTIL_STOP) == 2
    call("t3")
    tc.end_turn("s1")
    call("t4")                                            # overtakes its prompt
    assert tc.begin_turn("s1", turn_key=tc.UNTIL_STOP) == 3
    assert tc.begin_turn("s1", turn_key=tc.UNTIL_STOP) == 4  # the Stop never came
    call("t5")
    assert [(s["snapshot_id"], s["turn"]) for s in tc.list_snapshots("s1")] == [
        ("t1", 1), ("t2", 1), ("t3", 2), ("t4", 3), ("t5", 4)]
    out = tc.rollback("s1", 3)
    assert out["fs_snapshot_ids"] == ["t4", "t5"]


def test_any_other_change_clears_the_redo_stack(ws: Path) -> None:
    (ws / "a").write_text("a0")
    tc.begin_turn("s1")
    with tc.tool_call("s1", "t1"):
        tc.write_file("a", "a1")
    tc.rollback("s1", 1)
    with tc.tool_call("s1", "t2"):  # a new mutation through the helpers
        tc.write_file("c", "c")
    with pytest.raises(UsageError, match="nothing to redo"):
        tc.redo("s1")
    assert (ws / "a").read_text() == "a0"
