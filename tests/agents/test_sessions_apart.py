"""Two agent sessions in one workspace (issue 41, section 3): rewinding one leaves the other's
work alone.

Sessions A and B speak Claude Code's hook protocol, interleaved, each hook a real `ctrlz hook
claude` process: A writes a.txt; B writes b.txt; A runs `rm -rf docs` through Bash; B creates
c.txt (and docs/b.md, and edits README.md) through its file tools; A writes a.txt again.
`ctrlz rewind --session A` to A's first call used to put back a.txt and docs/ and also delete
c.txt (the workspace went back to the snapshot taken before A's Bash call), with nothing said.
A path a later tool call of another session captured is that session's work: left alone and
listed with the session named, unless --force.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ctrlz import toolcalls as tc
from ctrlz.workspace import Workspace

from .test_hooks import CTRLZ, hook

A, B = "sess-A", "sess-B"


@pytest.fixture
def ws(ws_dir: Path) -> Path:
    (ws_dir / "docs").mkdir()
    (ws_dir / "docs" / "guide.md").write_text("# guide\n")
    (ws_dir / "README.md").write_text("# demo\n")
    (ws_dir / "a.txt").write_text("a, before\n")
    Workspace.init(ws_dir).close()
    return ws_dir


def claude(sid: str, event: str, ws: Path, **fields: object) -> dict:
    return {"session_id": sid, "transcript_path": str(ws / f".{sid}.jsonl"), "cwd": str(ws),
            "hook_event_name": event, "permission_mode": "default", **fields}


def file_tool(ws: Path, sid: str, call: str, tool: str, rel: str, text: str) -> None:
    """One Write/Edit as Claude Code runs it: PreToolUse, the change, PostToolUse."""
    args = {"file_path": str(ws / rel), "content": text}
    hook("claude", claude(sid, "PreToolUse", ws, tool_name=tool, tool_input=args,
                          tool_use_id=call), ws)
    (ws / rel).parent.mkdir(parents=True, exist_ok=True)
    (ws / rel).write_text(text)
    hook("claude", claude(sid, "PostToolUse", ws, tool_name=tool, tool_input=args,
                          tool_use_id=call,
                          tool_response={"filePath": args["file_path"], "success": True}), ws)


def interleave(ws: Path) -> None:
    for sid in (A, B):
        hook("claude", claude(sid, "SessionStart", ws, source="startup"), ws)
        hook("claude", claude(sid, "UserPromptSubmit", ws, prompt="work"), ws)
    file_tool(ws, A, "toolu_A1", "Write", "a.txt", "a, by A\n")
    file_tool(ws, B, "toolu_B1", "Write", "b.txt", "b, by B\n")
    bash = {"command": "rm -rf docs"}
    hook("claude", claude(A, "PreToolUse", ws, tool_name="Bash", tool_input=bash,
                          tool_use_id="toolu_A2"), ws)
    subprocess.run(["rm", "-rf", "docs"], cwd=ws, check=True)
    hook("claude", claude(A, "PostToolUse", ws, tool_name="Bash", tool_input=bash,
                          tool_use_id="toolu_A2", tool_response={"stdout": ""}), ws)
    file_tool(ws, B, "toolu_B2", "Write", "c.txt", "c, by B\n")
    file_tool(ws, B, "toolu_B3", "Write", "docs/b.md", "B's page\n")
    file_tool(ws, B, "toolu_B4", "Edit", "README.md", "# demo, B's edit\n")
    file_tool(ws, A, "toolu_A3", "Write", "a.txt", "a, by A again\n")


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def b_state(ws: Path) -> dict[str, str]:
    return {rel: (ws / rel).read_text() for rel in ("b.txt", "c.txt", "docs/b.md", "README.md")}


B_WORK = {"b.txt": "b, by B\n", "c.txt": "c, by B\n", "docs/b.md": "B's page\n",
          "README.md": "# demo, B's edit\n"}


def test_rewinding_session_a_leaves_session_b_later_work(ws: Path) -> None:
    interleave(ws)
    dry = json.loads(run("rewind", "--session", A, "toolu_A1", "--dry-run", "--json",
                         cwd=ws).stdout)
    left = {s["path"]: s for s in dry["skipped"]}
    # b.txt was written before A's shell call: the snapshot taken before it holds B's b.txt,
    # so the rewind does not change it and has nothing to say about it
    assert sorted(left) == ["README.md", "c.txt", "docs/b.md"]
    assert left["c.txt"]["session_id"] == B and left["c.txt"]["tool_use_id"] == "toolu_B2"
    assert f"session {B}'s work" in left["c.txt"]["reason"]
    assert "c.txt" not in dry["changed_paths"] and "a.txt" in dry["changed_paths"]
    assert "docs/guide.md" in dry["changed_paths"]
    text = run("rewind", "--session", A, "toolu_A1", "--dry-run", cwd=ws)
    assert f"left alone: c.txt: session {B}'s work" in text.stdout + text.stderr
    assert b_state(ws) == B_WORK and not (ws / "docs" / "guide.md").exists()  # a dry run

    done = run("rewind", "--session", A, "toolu_A1", cwd=ws)
    assert f"left alone: c.txt: session {B}'s work" in done.stdout + done.stderr
    assert (ws / "a.txt").read_text() == "a, before\n"
    assert (ws / "docs" / "guide.md").read_text() == "# guide\n"
    assert b_state(ws) == B_WORK

    run("undo", cwd=ws)
    assert (ws / "a.txt").read_text() == "a, by A again\n" and not (ws / "docs/guide.md").exists()
    forced = json.loads(run("rewind", "--session", A, "toolu_A1", "--force", "--json",
                            cwd=ws).stdout)
    assert forced["skipped"] == [] and "c.txt" in forced["changed_paths"]
    assert not (ws / "c.txt").exists() and not (ws / "docs" / "b.md").exists()
    assert (ws / "README.md").read_text() == "# demo\n"


def test_rewinding_session_b_leaves_session_a_work(ws: Path) -> None:
    interleave(ws)
    out = json.loads(run("rewind", "--session", B, "toolu_B1", "--json", cwd=ws).stdout)
    assert out["skipped"] == []
    assert not (ws / "b.txt").exists() and not (ws / "c.txt").exists()
    # B's page goes; A's `rm -rf docs` stays done (the folder B's Write made may stay, empty)
    assert not (ws / "docs").exists() or not any((ws / "docs").iterdir())
    assert (ws / "README.md").read_text() == "# demo\n"
    assert (ws / "a.txt").read_text() == "a, by A again\n"


def test_rewinding_session_b_leaves_what_a_changed_in_b_file_since(ws: Path) -> None:
    """A edits the file B created: that edit is A's work, named as such (it used to be
    reported as "a later edit" by hand), and B's rewind keeps it unless --force."""
    interleave(ws)
    file_tool(ws, A, "toolu_A4", "Edit", "c.txt", "c, by B, then A\n")
    out = json.loads(run("rewind", "--session", B, "toolu_B1", "--json", cwd=ws).stdout)
    assert [(s["path"], s["session_id"], s["tool_use_id"]) for s in out["skipped"]] == [
        ("c.txt", A, "toolu_A4")]
    assert f"session {A}'s work" in out["skipped"][0]["reason"]
    assert (ws / "c.txt").read_text() == "c, by B, then A\n" and not (ws / "b.txt").exists()
    run("undo", cwd=ws)
    run("rewind", "--session", B, "toolu_B1", "--force", cwd=ws)
    assert not (ws / "c.txt").exists()


def test_a_turn_rollback_and_a_tool_call_restore_leave_another_session_work(
        ws: Path) -> None:
    """No shell call: the rule holds for the pre-images themselves (turn rollback and
    `fs_restore`, which ACP's session/restore_tool_call is), and names B, not a hand edit."""
    for sid in (A, B):
        hook("claude", claude(sid, "UserPromptSubmit", ws, prompt="work"), ws)
    file_tool(ws, A, "toolu_A1", "Edit", "README.md", "# demo, A's edit\n")
    file_tool(ws, A, "toolu_A2", "Write", "a.txt", "a, by A\n")
    file_tool(ws, B, "toolu_B1", "Edit", "README.md", "# demo, A's and B's edit\n")

    out = tc.fs_restore(A, "toolu_A1", workspace=ws)
    assert out["restored_paths"] == []
    [skip] = out["skipped_paths_with_reasons"]
    assert skip["path"] == "README.md" and skip["session_id"] == B
    assert f"session {B}'s work" in skip["reason"]
    assert (ws / "README.md").read_text() == "# demo, A's and B's edit\n"

    rolled = tc.rollback(A, 1, workspace=ws)
    skipped = [s for r in rolled["fs_restores"] for s in r["skipped_paths_with_reasons"]]
    assert [(s["path"], s["session_id"]) for s in skipped] == [("README.md", B)]
    assert (ws / "README.md").read_text() == "# demo, A's and B's edit\n"
    assert (ws / "a.txt").read_text() == "a, before\n"
