"""What an ACP turn rollback and a tool-call restore cover when the agent does not go through
the client the way the first tests' agent does: the ways the real Gemini CLI and others work
(issue 41 §4). The scripted agent (tests/acp/scripted_agent.py) plays each of them for real,
through the real ``ctrlz acp`` process and a real client writing the files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from acp import RequestError

from .editor import editor
from .test_proxy import ORIGINAL, contents, refused

pytestmark = pytest.mark.anyio


def steps(*items: dict) -> str:
    return json.dumps(list(items))


async def test_a_tool_call_named_only_in_a_permission_request_is_restored_by_its_id(
        ws: Path) -> None:
    """Gemini CLI's default mode: the call is named only in session/request_permission
    (status pending, the path in locations), then written through the client. The write was
    filed under an ``acp:write-…`` id no editor sees, and restoring the real id answered
    -32602 "no recorded tool call"."""
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        await ed.prompt(sid, steps({"write": "existing.txt", "content": "by gemini\n",
                                    "toolCallId": "write_file-1", "via": "permission"}))
        assert (ws / "existing.txt").read_text() == "by gemini\n"
        done = await ed.call("session/restore_tool_call", {"sessionId": sid,
                                                           "toolCallId": "write_file-1"})
        assert done["restoredPaths"] == [str(ws / "existing.txt")]
        assert (ws / "existing.txt").read_text() == "the original\n"


async def test_a_turn_rollback_takes_back_what_the_agent_changed_itself(ws: Path) -> None:
    """Gemini CLI runs its shell and file tools itself in ACP mode: no fs/write_text_file, no
    terminal/create. The snapshot taken at session/prompt is what the rollback goes back to;
    it answered an empty success while every change stayed."""
    before = contents(ws)
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        await ed.prompt(sid, steps(
            {"direct": "existing.txt", "content": "edited by the agent\n", "toolCallId": "e1"},
            {"direct": "made/new.txt", "content": "new\n", "toolCallId": "e2"},
            {"shell": "rm -rf somedir", "toolCallId": "s1"}))
        assert not (ws / "somedir").exists() and (ws / "made" / "new.txt").exists()
        # its own tool call has no pre-image: said so, not an empty success
        message = await refused(ed, "session/restore_tool_call",
                                {"sessionId": sid, "toolCallId": "e1"})
        assert "wrote no file through the client" in message and "session/rollback" in message
        rolled = await ed.call("session/rollback", {"sessionId": sid})
        assert rolled["turn"] == 1 and rolled["skippedPaths"] == []
        assert str(ws / "existing.txt") in rolled["restoredPaths"]
        assert str(ws / "somedir" / "sub" / "b.bin") in rolled["restoredPaths"]
        assert not any(c.startswith("acp:") for c in rolled["toolCallIds"])
        assert contents(ws) == before
        await ed.call("session/redo", {"sessionId": sid})
        assert (ws / "made" / "new.txt").read_text() == "new\n"


async def test_a_turn_that_wrote_only_through_the_client_keeps_a_later_hand_edit(
        ws: Path) -> None:
    """The start-of-turn snapshot is dropped again when every change of the turn has a
    pre-image of its own, so a hand edit after the turn is still kept (a rewind past a
    workspace snapshot would overwrite it)."""
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        await ed.prompt(sid, steps(
            {"write": "existing.txt", "content": "agent\n", "toolCallId": "t1"},
            {"write": "deep/new.txt", "content": "n\n", "toolCallId": "t2"}))
        (ws / "existing.txt").write_text("typed by hand\n")
        rolled = await ed.call("session/rollback", {"sessionId": sid})
        assert rolled["toolCallIds"] == ["t1", "t2"]
        assert [s["path"] for s in rolled["skippedPaths"]] == [str(ws / "existing.txt")]
        assert (ws / "existing.txt").read_text() == "typed by hand\n"
        assert not (ws / "deep" / "new.txt").exists()


async def test_the_agents_own_prompt_hook_joins_the_proxys_turn(ws: Path) -> None:
    """With ``ctrlz install gemini`` as well, Gemini's BeforeAgent hook fires for the prompt
    the proxy already counted: it opened a second turn, the writes went into it, and
    session/rollback took back the proxy's (empty) turn with an empty success."""
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        hook = {"hook": "gemini", "event": "BeforeAgent"}
        await ed.prompt(sid, steps(hook, {"write": "one.txt", "content": "1\n",
                                          "toolCallId": "w1"}))
        await ed.prompt(sid, steps(hook, {"write": "existing.txt", "content": "2\n",
                                          "toolCallId": "w2"}))
        rolled = await ed.call("session/rollback", {"sessionId": sid})
        assert rolled["turn"] == 2 and rolled["toolCallIds"] == ["w2"]
        assert rolled["restoredPaths"] == [str(ws / "existing.txt")]
        assert (ws / "existing.txt").read_text() == "the original\n"
        assert (ws / "one.txt").exists()
        rolled = await ed.call("session/rollback", {"sessionId": sid})
        assert rolled["turn"] == 1 and rolled["restoredPaths"] == [str(ws / "one.txt")]
        assert not (ws / "one.txt").exists()


async def test_a_tool_call_id_reused_in_a_later_turn_is_that_turns_call(ws: Path) -> None:
    """ACP says a toolCallId is unique within a session; an agent that reuses one in a later
    turn had the later call folded into the earlier turn's record: the later turn's rollback
    answered an empty success while its file stayed changed."""
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        await ed.prompt(sid, steps({"write": "a.txt", "content": "a\n", "toolCallId": "c1"}))
        await ed.prompt(sid, steps({"write": "existing.txt", "content": "two\n",
                                    "toolCallId": "c1"}))
        rolled = await ed.call("session/rollback", {"sessionId": sid})
        assert rolled["turn"] == 2 and rolled["toolCallIds"] == ["c1:turn-2"]
        assert rolled["restoredPaths"] == [str(ws / "existing.txt")]
        assert (ws / "existing.txt").read_text() == "the original\n"
        assert (ws / "a.txt").read_text() == "a\n"
        await ed.call("session/redo", {"sessionId": sid})
        # the id names its newest call: the second turn's
        done = await ed.call("session/restore_tool_call", {"sessionId": sid,
                                                           "toolCallId": "c1"})
        assert done["restoredPaths"] == [str(ws / "existing.txt")]
        assert (ws / "existing.txt").read_text() == "the original\n"
        assert (ws / "a.txt").read_text() == "a\n"


async def test_a_rollback_that_puts_nothing_back_says_which_files_the_turn_changed(
        ws: Path) -> None:
    """The rule behind §4: a rollback that restored nothing while the turn changed files
    lists them under skippedPaths with the reason; never an empty success."""
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        was = (ws / "existing.txt").stat()
        await ed.prompt(sid, steps({"direct": "existing.txt", "content": "agent\n",
                                    "toolCallId": "d1"}))
        # put back by hand exactly as it was, so there is nothing left to restore
        (ws / "existing.txt").write_text(ORIGINAL["existing.txt"])
        os.utime(ws / "existing.txt", ns=(was.st_atime_ns, was.st_mtime_ns))
        rolled = await ed.call("session/rollback", {"sessionId": sid})
        assert rolled["restoredPaths"] == []
        [skipped] = rolled["skippedPaths"]
        assert skipped["path"] == str(ws / "existing.txt")
        assert "the turn changed it" in skipped["reason"]


async def test_a_tool_call_whose_capture_failed_is_an_error_not_an_empty_success(
        ws: Path) -> None:
    """A write whose pre-image could not be captured (here a path under a file, which the
    client cannot write either) leaves a record with no paths: restoring it answered success
    with empty lists and a safety snapshot."""
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        with pytest.raises(RequestError):  # the client's write fails, and so the prompt
            await ed.prompt(sid, steps({"write": "existing.txt/x", "content": "x\n",
                                        "toolCallId": "w1"}))
        message = await refused(ed, "session/restore_tool_call",
                                {"sessionId": sid, "toolCallId": "w1"})
        assert "holds no pre-image" in message and "nothing was put back" in message


async def test_a_turn_that_only_talked_rolls_back_to_nothing(ws: Path) -> None:
    """Not every empty answer is wrong: a turn that changed nothing has nothing to list."""
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        await ed.prompt(sid, steps({"say": "just talking"}))
        talk = await ed.call("session/rollback", {"sessionId": sid})
        assert talk == {"turn": 1, "toolCallIds": [], "restoredPaths": [], "skippedPaths": [],
                        "safetySnapshot": None}


def test_an_agents_own_turn_id_adopts_the_turn_the_proxy_began(tmp_path: Path) -> None:
    """The two doors agree on one turn for an agent that sends its own turn id too (Claude
    Code's prompt_id): the first id seen adopts the proxy's turn; the proxy's next prompt is
    the next turn; a keyless prompt hook joins it once, and a second one is a new prompt."""
    from ctrlz.session.protected import ProtectedWorkspace
    from ctrlz.toolcalls import ACP_TURN
    from ctrlz.toolcalls.api import begin_turn

    root = tmp_path / "ws"
    root.mkdir()
    ProtectedWorkspace.init(str(root)).close()
    sid, at = "s", str(root)
    assert begin_turn(sid, workspace=at, turn_key=f"{ACP_TURN}a") == 1
    assert begin_turn(sid, workspace=at, turn_key="prompt-1") == 1
    assert begin_turn(sid, workspace=at, turn_key="prompt-1") == 1
    assert begin_turn(sid, workspace=at, turn_key=f"{ACP_TURN}b") == 2
    assert begin_turn(sid, workspace=at) == 2
    assert begin_turn(sid, workspace=at) == 3
