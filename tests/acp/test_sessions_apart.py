"""An ACP session's rollback beside a Claude Code session in the same workspace (issue 41, 3).

The editor side is the SDK's client (tests/acp/editor.py) driving the real ``ctrlz acp`` and a
scripted agent; the second agent is Claude Code's hook protocol, each hook a real ``ctrlz hook
claude`` process. A rollback of the ACP turn that ran ``rm -rf somedir`` goes back to the
workspace snapshot taken before that command, and used to delete the file the Claude session
wrote afterwards, answering success. That file is the Claude session's work: it is kept and
listed under ``skippedPaths`` with why, also when a second rollback is forced over the first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.test_hooks import hook
from tests.conftest import make_tree

from .editor import editor

pytestmark = pytest.mark.anyio

CLAUDE = "claude-beside-acp"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    make_tree(root, {"existing.txt": "the original\n", "somedir": {"a.txt": "a\n"}})
    return root


def claude_writes(ws: Path, call: str, rel: str, text: str) -> None:
    """A Write of the Claude session, as Claude Code runs it: PreToolUse, write, PostToolUse."""
    args = {"file_path": str(ws / rel), "content": text}
    base = {"session_id": CLAUDE, "transcript_path": str(ws / ".t.jsonl"), "cwd": str(ws),
            "permission_mode": "default", "tool_name": "Write", "tool_input": args,
            "tool_use_id": call}
    hook("claude", base | {"hook_event_name": "PreToolUse"}, ws)
    (ws / rel).write_text(text)
    hook("claude", base | {"hook_event_name": "PostToolUse",
                           "tool_response": {"filePath": str(ws / rel), "success": True}}, ws)


async def test_an_acp_rollback_keeps_what_another_session_wrote_after_its_shell_call(
        ws: Path) -> None:
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        await ed.prompt(sid, '[{"write": "existing.txt", "content": "turn 1\\n", '
                             '"toolCallId": "t1"}]')
        await ed.prompt(sid, '[{"terminal": ["rm", "-rf", "somedir"], "toolCallId": "t2"}]')
        assert not (ws / "somedir").exists()
        hook("claude", {"session_id": CLAUDE, "cwd": str(ws), "transcript_path": "",
                        "hook_event_name": "UserPromptSubmit", "prompt": "notes"}, ws)
        claude_writes(ws, "toolu_C1", "claude.txt", "the Claude session's notes\n")

        rolled = await ed.call("session/rollback", {"sessionId": sid})
        assert rolled["turn"] == 2 and (ws / "somedir" / "a.txt").read_text() == "a\n"
        assert (ws / "claude.txt").read_text() == "the Claude session's notes\n"
        [kept] = [s for s in rolled["skippedPaths"] if s["path"] == str(ws / "claude.txt")]
        assert f"session {CLAUDE}'s work" in kept["reason"]
        assert str(ws / "claude.txt") not in rolled["restoredPaths"]

        # the rollback of turn 1 is forced over the rollback of turn 2 (its "later edit"),
        # never over the other session's work
        rolled = await ed.call("session/rollback", {"sessionId": sid})
        assert rolled["turn"] == 1 and (ws / "existing.txt").read_text() == "the original\n"
        assert (ws / "claude.txt").read_text() == "the Claude session's notes\n"
        assert any(s["path"] == str(ws / "claude.txt") for s in rolled["skippedPaths"])
