"""``ctrlz acp`` end to end: the SDK's client side (tests/acp/editor.py) spawns the real proxy,
which spawns a scripted SDK agent (tests/acp/scripted_agent.py); the editor writes the files and
runs the terminal commands for real, in a temporary workspace."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from acp import RequestError

from .conftest import ORIGINAL  # noqa: F401 - test_turns imports it from here
from .editor import editor

pytestmark = pytest.mark.anyio


def contents(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root``: a file's bytes, None for a directory."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, root)] = Path(full).read_bytes()
    return out


async def refused(ed, method: str, params: dict) -> str:
    with pytest.raises(RequestError) as info:
        await ed.call(method, params)
    return str(info.value)


async def test_capture_restore_rollback_redo(ws: Path) -> None:
    before = contents(ws)
    async with editor(ws) as ed:
        init = await ed.initialize()
        caps = init["agentCapabilities"]
        assert caps["sessionCapabilities"] == {"rollback": {}, "redo": {}, "restoreToolCall": {}}
        assert caps["loadSession"] is True  # the agent's own capabilities are kept
        sid = await ed.new_session(ws)

        assert (await ed.prompt(sid))["stopReason"] == "end_turn"
        assert (ws / "new.txt").read_text() == "created by the agent\n"
        assert (ws / "existing.txt").read_text() == "edited by the agent\n"
        assert not (ws / "somedir").exists()  # the editor really ran rm -rf

        # one tool call back: only its file, and the client is told
        done = await ed.call("session/restore_tool_call", {"sessionId": sid,
                                                           "toolCallId": "tc-edit"})
        assert done["restoredPaths"] == [str(ws / "existing.txt")]
        assert done["skippedPaths"] == [] and done["safetySnapshot"].startswith("snap_")
        assert (ws / "existing.txt").read_text() == "the original\n"
        assert (ws / "new.txt").exists() and not (ws / "somedir").exists()
        [note] = ed.updates("restored")
        assert note["sessionId"] == sid
        assert note["update"]["sessionUpdate"] == "tool_call_update"
        assert note["update"]["toolCallId"] == "tc-edit"
        assert note["update"]["_meta"]["harn"] == {"kind": "tool_call_restored",
                                                   "restoredPaths": [str(ws / "existing.txt")]}

        # the whole turn back, the rm -rf included, byte for byte
        after_turn = contents(ws)
        rolled = await ed.call("session/rollback", {"sessionId": sid})
        assert rolled["turn"] == 1
        assert rolled["toolCallIds"] == ["tc-write", "tc-edit", "tc-rm"]
        assert str(ws / "somedir" / "sub" / "b.bin") in rolled["restoredPaths"]
        assert contents(ws) == before

        # and forward again: the state the rollback replaced
        redone = await ed.call("session/redo", {"sessionId": sid})
        assert redone["turn"] == 1 and str(ws / "new.txt") in redone["restoredPaths"]
        assert contents(ws) == after_turn

        # the same turn can be rolled back again, and nothing more can be redone after a prompt
        await ed.call("session/rollback", {"sessionId": sid})
        assert contents(ws) == before
        assert "no completed prompt turn" in await refused(ed, "session/rollback",
                                                           {"sessionId": sid})
        await ed.prompt(sid, '[{"say": "just talking"}]')
        assert "nothing to redo" in await refused(ed, "session/redo", {"sessionId": sid})
    assert ed.process.returncode == 0


async def test_rollback_takes_turns_back_one_at_a_time(ws: Path) -> None:
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        await ed.prompt(sid, '[{"write": "existing.txt", "content": "turn 1\\n", '
                             '"toolCallId": "t1"}]')
        # a write the agent reports no tool call for is still captured (under its own id)
        await ed.prompt(sid, '[{"write": "existing.txt", "content": "turn 2\\n", '
                             '"toolCallId": null}, {"write": "two.txt", "content": "2\\n", '
                             '"toolCallId": "t2"}]')
        assert (await ed.call("_session/rollback", {"sessionId": sid}))["turn"] == 2
        assert (ws / "existing.txt").read_text() == "turn 1\n" and not (ws / "two.txt").exists()
        assert (await ed.call("session/rollback", {"sessionId": sid}))["turn"] == 1
        assert (ws / "existing.txt").read_text() == "the original\n"
        assert (await ed.call("session/redo", {"sessionId": sid}))["turn"] == 1
        assert (ws / "existing.txt").read_text() == "turn 1\n"
        assert (await ed.call("_session/redo", {"sessionId": sid}))["turn"] == 2
        assert (ws / "existing.txt").read_text() == "turn 2\n" and (ws / "two.txt").exists()


async def test_a_hand_edit_after_the_turn_is_kept(ws: Path) -> None:
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        await ed.prompt(sid, '[{"say": "a turn that only talks"}]')
        await ed.prompt(sid, '[{"write": "existing.txt", "content": "agent\\n", '
                             '"toolCallId": "t1"}, {"write": "new.txt", "content": "n\\n", '
                             '"toolCallId": "t2"}]')
        (ws / "existing.txt").write_text("typed by hand\n")
        rolled = await ed.call("session/rollback", {"sessionId": sid})
        assert rolled["restoredPaths"] == [str(ws / "new.txt")]
        [skipped] = rolled["skippedPaths"]
        assert skipped["path"] == str(ws / "existing.txt")
        assert "changed after the tool call" in skipped["reason"]
        assert (ws / "existing.txt").read_text() == "typed by hand\n"
        assert not (ws / "new.txt").exists()
        # the turn before only talked: nothing to put back, and that is not an error
        talk = await ed.call("session/rollback", {"sessionId": sid})
        assert talk == {"turn": 1, "toolCallIds": [], "restoredPaths": [], "skippedPaths": [],
                        "safetySnapshot": None}
        await ed.call("session/redo", {"sessionId": sid})
        await ed.call("session/redo", {"sessionId": sid})
        assert (ws / "new.txt").read_text() == "n\n"
        assert (ws / "existing.txt").read_text() == "typed by hand\n"


async def test_hostile_input_gets_clear_errors_and_the_proxy_goes_on(ws: Path) -> None:
    async with editor(ws) as ed:
        await ed.initialize()
        assert "unknown session nope" in await refused(
            ed, "session/rollback", {"sessionId": "nope"})
        assert "needs a sessionId" in await refused(ed, "session/redo", {})
        assert "takes an object of params" in await refused(ed, "session/rollback", [1])
        sid = await ed.new_session(ws)
        assert "no completed prompt turn" in await refused(
            ed, "session/rollback", {"sessionId": sid})
        assert "nothing to redo" in await refused(ed, "session/redo", {"sessionId": sid})
        assert "needs a toolCallId" in await refused(
            ed, "session/restore_tool_call", {"sessionId": sid, "toolCallId": 7})
        await ed.prompt(sid)
        assert "no recorded tool call tc-nope" in await refused(
            ed, "session/restore_tool_call", {"sessionId": sid, "toolCallId": "tc-nope"})
        assert "ran a terminal command" in await refused(
            ed, "session/restore_tool_call", {"sessionId": sid, "toolCallId": "tc-rm"})
        # a method neither side knows is the agent's to refuse
        with pytest.raises(RequestError) as info:
            await ed.call("session/nonsense", {"sessionId": sid})
        assert info.value.code == -32601
        # still working: the turn rolls back
        await ed.call("session/rollback", {"sessionId": sid})
        assert (ws / "somedir" / "a.txt").read_text() == "a\n"


async def test_rollback_is_refused_while_a_turn_runs(ws: Path) -> None:
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        await ed.prompt(sid, '[{"say": "a first turn"}]')
        seen: list[str] = []

        async def try_rollback(path: str) -> None:
            seen.append(await refused(ed, "session/rollback", {"sessionId": sid}))

        ed.client.before_write = try_rollback
        await ed.prompt(sid, '[{"write": "x.txt", "content": "x", "toolCallId": "tx"}]')
        assert len(seen) == 1 and "a prompt turn is running" in seen[0]


async def test_agent_exit_ends_the_proxy_with_its_code(ws: Path, tmp_path: Path) -> None:
    log = tmp_path / "stderr.txt"
    async with editor(ws, stderr=log) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        with pytest.raises(RequestError) as info:
            await ed.prompt(sid, '[{"exit": 3}]')
        assert "the agent exited with code 3 before answering session/prompt" in str(info.value)
        assert await ed.process.wait() == 3
    assert "Traceback" not in log.read_text()


async def test_agent_garbage_is_dropped_and_logged(ws: Path, tmp_path: Path) -> None:
    log = tmp_path / "stderr.txt"
    async with editor(ws, stderr=log) as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        reply = await ed.prompt(sid, '[{"garbage": "debug output on stdout"}, '
                                     '{"say": "still here"}]')
        assert reply["stopReason"] == "end_turn"
    text = log.read_text()
    assert "dropped a line from the agent that is not JSON" in text
    assert "Traceback" not in text


async def test_no_init_relays_unrecorded(ws: Path) -> None:
    async with editor(ws, "--no-init") as ed:
        await ed.initialize()
        sid = await ed.new_session(ws)
        await ed.prompt(sid)
        assert not (ws / "somedir").exists()
        message = await refused(ed, "session/rollback", {"sessionId": sid})
        assert "not inside a protected workspace" in message and "--no-init" in message


async def test_a_session_outside_any_directory_is_relayed(tmp_path: Path, ws: Path) -> None:
    async with editor(ws) as ed:
        await ed.initialize()
        sid = await ed.new_session(tmp_path / "missing")
        assert "is not an absolute path to a directory" in await refused(
            ed, "session/rollback", {"sessionId": sid})


def test_cli_refuses_a_missing_agent(tmp_path: Path) -> None:
    import subprocess

    from .editor import CTRLZ, proxy_env

    env = {**os.environ, **proxy_env()}
    for args, message in (([], "needs an agent to run"),
                          (["--", "no-such-agent-xyz"], "cannot start the agent "
                                                        "no-such-agent-xyz")):
        r = subprocess.run([CTRLZ, "acp", *args], cwd=tmp_path, env=env, capture_output=True,
                           text=True, stdin=subprocess.DEVNULL)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr


def test_exit_code_of_an_agent_that_exits_at_once(tmp_path: Path) -> None:
    import subprocess

    from .editor import CTRLZ, proxy_env

    r = subprocess.run([CTRLZ, "acp", "--", sys.executable, "-c", "import sys; sys.exit(4)"],
                       input="",
                       cwd=tmp_path, env={**os.environ, **proxy_env()}, capture_output=True,
                       text=True)
    assert r.returncode == 4 and r.stdout == "" and "Traceback" not in r.stderr


async def test_client_garbage_is_answered_not_forwarded(ws: Path, tmp_path: Path) -> None:
    """Lines that are no JSON-RPC message get a JSON-RPC error (id null) from the proxy; the
    conversation goes on, and nothing prints a traceback."""
    import asyncio
    import json

    from .editor import AGENT, CTRLZ, proxy_env

    log = tmp_path / "stderr.txt"
    with open(log, "wb") as err:
        proc = await asyncio.create_subprocess_exec(
            CTRLZ, "acp", "--", sys.executable, AGENT, cwd=ws, env={**os.environ, **proxy_env()},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err)
        assert proc.stdin is not None and proc.stdout is not None

        async def exchange(line: bytes) -> dict:
            proc.stdin.write(line + b"\n")
            await proc.stdin.drain()
            return json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))

        reply = await exchange(b"this is not json {")
        assert reply["id"] is None and reply["error"]["code"] == -32700
        assert "not JSON" in reply["error"]["message"]
        reply = await exchange(b"[1, 2]")
        assert reply["id"] is None and reply["error"]["code"] == -32600
        assert "a JSON list" in reply["error"]["message"]
        reply = await exchange(b'{"jsonrpc": "2.0", "id": "s1", "method": "session/rollback", '
                               b'"params": "nope"}')
        assert reply["id"] == "s1" and reply["error"]["code"] == -32602
        reply = await exchange(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                           "params": {"protocolVersion": 1}}).encode())
        assert reply["id"] == 1 and "restoreToolCall" in \
            reply["result"]["agentCapabilities"]["sessionCapabilities"]
        proc.stdin.close()
        assert await proc.wait() == 0
    text = log.read_text()
    assert "Traceback" not in text and "the client sent a line that is not JSON" in text


@contextlib.asynccontextmanager
async def _raw_proxy(ws: Path, log: Path) -> AsyncIterator[Callable[[bytes], Awaitable[dict]]]:
    """The proxy and the scripted agent, driven line by line: yields ``exchange(line)``,
    which sends one line and returns the next message the proxy writes; at the end, the
    proxy must exit 0 once its input closes, without a traceback."""
    import asyncio
    import json

    from .editor import AGENT, CTRLZ, proxy_env

    with open(log, "wb") as err:
        proc = await asyncio.create_subprocess_exec(
            CTRLZ, "acp", "--", sys.executable, AGENT, cwd=ws, env={**os.environ, **proxy_env()},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err)
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        async def exchange(line: bytes) -> dict:
            stdin.write(line + b"\n")
            await stdin.drain()
            return json.loads(await asyncio.wait_for(stdout.readline(), 60))

        yield exchange
        reply = await exchange(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                           "params": {"protocolVersion": 1}}).encode())
        assert reply["id"] == 1 and "restoreToolCall" in \
            reply["result"]["agentCapabilities"]["sessionCapabilities"]
        stdin.close()
        assert await proc.wait() == 0
    assert "Traceback" not in log.read_text()


async def test_a_deeply_nested_line_is_answered_and_the_session_goes_on(
        ws: Path, tmp_path: Path) -> None:
    """A line nested 5,000 levels deep (json's decoder raises RecursionError) gets a parse
    error, where it ended the session silently with exit 0."""
    async with _raw_proxy(ws, tmp_path / "stderr.txt") as exchange:
        reply = await exchange(b"[" * 5000 + b"]" * 5000)
        assert reply["id"] is None and reply["error"]["code"] == -32700
        assert "nested too deeply" in reply["error"]["message"]


async def test_a_ctrlz_method_with_a_lone_surrogate_is_answered_by_ctrlz_not_forwarded(
        ws: Path, tmp_path: Path) -> None:
    """A ctrlz method whose params hold a lone surrogate (which no UTF-8 can carry) is
    answered by ctrlz, the surrogate escaped in its message, where the failed answer sent
    the request on to the agent."""
    async with _raw_proxy(ws, tmp_path / "stderr.txt") as exchange:
        reply = await exchange(b'{"jsonrpc": "2.0", "id": 7, "method": "session/rollback", '
                               b'"params": {"sessionId": "\\ud800"}}')
        assert reply["id"] == 7 and reply["error"]["code"] == -32602
        assert reply["error"]["message"].startswith("unknown session \ud800")


async def test_sigterm_goes_on_to_the_agent(ws: Path) -> None:
    import signal

    async with editor(ws) as ed:
        await ed.initialize()  # the proxy is relaying, so its signal handlers are in place
        ed.process.send_signal(signal.SIGTERM)
        assert await ed.process.wait() == 128 + signal.SIGTERM  # the agent's death, passed on
