"""Real ACP agents through ``ctrlz acp``, offline: the Gemini CLI (``gemini --acp``) and Zed's
``claude-code-acp``, each against the scripted fake model on loopback (fakemodel.py).

The editor side is a real ACP client: the SDK's client side (tests/acp/editor.py's
:class:`RealClient`), which writes the files the agent asks it to write, runs its terminal
commands and grants its permission requests. The scenario is harness.py's: write ``hello.py``,
edit it, ``rm -rf build``; then ``session/restore_tool_call`` with the agent's own id of the
edit, ``session/rollback`` of the turn (the whole tree, byte for byte), ``session/redo``.

What each agent does through this door (issue 41 §4, docs/acp.md):

- Gemini CLI 0.61, in its default mode, names a file write only in
  ``session/request_permission`` (status pending, the path in ``locations``); once the client
  allowed edits for the session, the next edit comes as a ``tool_call`` update. It writes files
  through the client (``fs/write_text_file``, having read them with ``fs/read_text_file``) and
  runs its shell command itself, no ``terminal/create``. With its hooks installed too, the
  session still has one turn, and its BeforeTool/AfterTool hooks record nothing.
- claude-code-acp 0.16 reports tool calls in ``session/update``, asks permission, writes through
  the client and runs Bash through ``terminal/create``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp.client.router import build_client_router
from acp.connection import StreamDirection, StreamEvent

from acp import spawn_stdio_connection
from tests.acp.editor import RealClient

from .fakemodel import AnthropicServer, GeminiServer, ToolCall
from .harness import CTRLZ, EDITED, FILE, NEW, OLD, PROMPT, WRITTEN, Sandbox, tree, tree_diff
from .test_gemini import trust_and_auth

SHELL = "rm -rf build"
TIMEOUT = 240  # seconds for one prompt turn of a real agent (they take 5-20 s here)


class Wire:
    """Every message the client received, raw (the SDK's schema reads ``restored`` as None)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def __call__(self, event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            self.messages.append(event.message)

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m["params"] for m in self.messages if m.get("method") == method
                and "id" in m]

    def tool_calls(self) -> dict[str, dict[str, Any]]:
        """toolCallId -> what the agent said of it (kind, title, locations), from updates and
        permission requests."""
        out: dict[str, dict[str, Any]] = {}
        for m in self.messages:
            params = m.get("params") or {}
            if m.get("method") == "session/update":
                call = params.get("update") or {}
                if call.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
                    continue
            elif m.get("method") == "session/request_permission":
                call = params.get("toolCall") or {}
            else:
                continue
            known = out.setdefault(call.get("toolCallId"), {})
            known.update({k: v for k, v in call.items() if v is not None})
        return out


@asynccontextmanager
async def acp_editor(sb: Sandbox, agent: list[str], env: dict[str, str], log: Path
                     ) -> AsyncIterator[tuple[Any, Wire]]:
    """``ctrlz acp -- AGENT`` in the sandbox's project, with the SDK's client on our side."""
    wire = Wire()
    client = RealClient()
    client.cwd = str(sb.project)
    with open(log, "ab") as err:
        async with spawn_stdio_connection(
                build_client_router(client), CTRLZ, "acp", "--", *agent,
                env={**sb.env, **env}, cwd=sb.project, observers=[wire],
                stderr=err.fileno()) as (conn, process):
            sb.pids.append(process.pid)
            yield conn, wire


async def start(conn: Any, sb: Sandbox) -> str:
    await asyncio.wait_for(conn.send_request("initialize", {
        "protocolVersion": 1, "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}}), TIMEOUT)
    new = await asyncio.wait_for(conn.send_request("session/new", {
        "cwd": str(sb.project), "mcpServers": []}), TIMEOUT)
    return new["sessionId"]


def report(sb: Sandbox, what: str, wire: Wire, model: Any, log: Path) -> str:
    methods = [m.get("method") or ("response" if "id" in m else "?") for m in wire.messages]
    dump = "\n".join(json.dumps(m)[:600] for m in wire.messages)
    return sb.report(f"{what}\n--- ACP methods the client got ---\n{methods}\n"
                     f"--- the messages ---\n{dump[-12000:]}\n"
                     f"--- ctrlz acp / agent stderr ---\n{log.read_text()[-6000:]}",
                     model=model)


async def round_trip(sb: Sandbox, agent: list[str], env: dict[str, str], model: Any,
                     edit_kind: str) -> dict[str, Any]:
    """The scenario through the proxy; returns what the client saw, for agent-specific
    checks. ``edit_kind`` is the ACP kind of the agent's edit tool call."""
    log = sb.root / "acp.stderr"
    before = tree(sb.project)
    async with acp_editor(sb, agent, env, log) as (conn, wire):
        sid = await start(conn, sb)
        reply = await asyncio.wait_for(conn.send_request("session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": PROMPT}]}), TIMEOUT)
        assert reply.get("stopReason") == "end_turn", report(sb, f"prompt: {reply}", wire,
                                                             model, log)
        final = tree(sb.project)
        assert final.get(FILE, ())[-1:] == (EDITED,) and "build" not in final, report(
            sb, f"the agent did not play the script:\n{tree_diff(final, before)}", wire,
            model, log)

        # the edit, by the agent's own toolCallId
        calls = wire.tool_calls()
        edits = [i for i, c in calls.items() if c.get("kind") == edit_kind
                 and any(loc.get("path") == str(sb.project / FILE)
                         for loc in c.get("locations") or ())]
        assert len(edits) >= 2, report(sb, f"tool calls seen: {json.dumps(calls)}", wire,
                                       model, log)
        done = await conn.send_request("session/restore_tool_call", {
            "sessionId": sid, "toolCallId": edits[-1]})
        assert done["restoredPaths"] == [str(sb.project / FILE)], done
        assert (sb.project / FILE).read_bytes() == WRITTEN
        # and the write, by its id (Gemini names it only in its permission request)
        done = await conn.send_request("session/restore_tool_call", {
            "sessionId": sid, "toolCallId": edits[0]})
        assert done["restoredPaths"] == [str(sb.project / FILE)], done
        assert not (sb.project / FILE).exists()
        restored = tree(sb.project)

        # the whole turn: the shell command too, whichever way the agent ran it
        rolled = await conn.send_request("session/rollback", {"sessionId": sid})
        got = tree(sb.project)
        assert got == before, report(sb, f"session/rollback gave:\n{tree_diff(got, before)}"
                                     f"\nresult: {json.dumps(rolled)}", wire, model, log)
        assert rolled["turn"] == 1 and rolled["restoredPaths"], rolled
        redone = await conn.send_request("session/redo", {"sessionId": sid})
        got = tree(sb.project)
        want = restored  # as the tool-call restores left it
        assert got == want, report(sb, f"session/redo gave:\n{tree_diff(got, want)}\n"
                                   f"result: {json.dumps(redone)}", wire, model, log)
        # kept for a look at what the agent did (pytest's --basetemp keeps the sandbox)
        (sb.root / "wire.jsonl").write_text("".join(json.dumps(m) + "\n"
                                                    for m in wire.messages))
        return {"calls": calls, "wire": wire, "rolled": rolled}


def listing(sb: Sandbox) -> list[dict[str, Any]]:
    return sb.ctrlz_json("rewind", "--list")["tool_calls"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_gemini_acp_through_ctrlz_acp(agent_bin, sandbox, anyio_backend) -> None:
    """With Gemini's hooks installed as well (docs/agents.md): its BeforeAgent hook fires for
    the proxy's prompt and joins its turn, so there is one turn to roll back."""
    gemini = agent_bin("gemini")
    sb = sandbox
    trust_and_auth(sb.home, sb.project)
    sb.ctrlz("install", "gemini")
    path = str(sb.project / FILE)
    script = [ToolCall("write_file", {"file_path": path, "content": WRITTEN.decode()}),
              ToolCall("replace", {"file_path": path, "old_string": OLD, "new_string": NEW,
                                   "instruction": "Change the greeting."}),
              ToolCall("run_shell_command", {"command": SHELL,
                                             "description": "Delete the build directory"})]
    env = {"GEMINI_API_KEY": "fake-gemini-key", "GEMINI_CLI_NO_RELAUNCH": "true"}
    with GeminiServer(script) as model:
        env["GOOGLE_GEMINI_BASE_URL"] = model.url
        seen = await round_trip(sb, [str(gemini), "--acp", "-m", "gemini-2.5-flash"], env,
                                model, "edit")
    wire: Wire = seen["wire"]
    # what Gemini did through this door: permission requests name its calls, its writes go
    # through the client, its shell command does not
    assert wire.requests("session/request_permission"), report(
        sb, "no permission request", wire, model, sb.root / "acp.stderr")
    assert len(wire.requests("fs/write_text_file")) == 2
    assert not wire.requests("terminal/create")
    calls = listing(sb)
    assert len({c["turn"] for c in calls}) == 1, calls  # one turn for both doors
    assert [c["kind"] for c in calls][0] == "bash", calls  # the turn's start snapshot
    # its BeforeTool/AfterTool hooks do not fire for the tools it runs in ACP mode: every
    # record is the proxy's, under Gemini's ACP ids
    assert all(not c["tool_use_id"].startswith("gemini-") for c in calls), calls


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("hooks", [False, True], ids=["acp-only", "with-claude-hooks"])
async def test_claude_code_acp_through_ctrlz_acp(agent_bin, sandbox, anyio_backend,
                                                 hooks: bool) -> None:
    """claude-code-acp works through the client for every call. With ``ctrlz install claude``
    as well, Claude Code's hooks run inside it for the same session id: its prompt hook joins
    the proxy's turn, so there is still one turn."""
    claude_acp = agent_bin("claude-acp")
    sb = sandbox
    if hooks:
        sb.ctrlz("install", "claude")
    path = str(sb.project / FILE)
    script = [ToolCall("mcp__acp__Write", {"file_path": path, "content": WRITTEN.decode()}),
              ToolCall("mcp__acp__Edit", {"file_path": path, "old_string": OLD,
                                          "new_string": NEW}),
              ToolCall("mcp__acp__Bash", {"command": SHELL, "timeout": 60000,
                                          "description": "Delete the build directory"})]
    env = {"ANTHROPIC_API_KEY": "sk-ant-fake-key", "IS_SANDBOX": "1",
           "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
           "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "NODE_PATH": os.environ.get("NODE_PATH", "")}
    with AnthropicServer(script) as model:
        env["ANTHROPIC_BASE_URL"] = model.url
        seen = await round_trip(sb, [str(claude_acp)], env, model, "edit")
    wire: Wire = seen["wire"]
    assert len(wire.requests("fs/write_text_file")) == 2
    assert wire.requests("terminal/create")
    calls = listing(sb)
    assert len({c["turn"] for c in calls}) == 1, calls
    (sb.root / "listing.json").write_text(json.dumps(sb.ctrlz_json("rewind", "--list")))
