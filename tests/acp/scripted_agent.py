"""A small ACP agent on the SDK's agent side, scripted by its prompt, for the proxy's tests.

The text of a prompt is a JSON list of steps (anything else runs :data:`DEFAULT`):

- ``{"write": "rel/path", "content": "...", "toolCallId": "tc-1"}``: report a ``tool_call``
  (kind edit, the path as its location), ask the client to ``fs/write_text_file`` it, report it
  completed; ``"toolCallId": null`` writes without reporting a tool call;
- ``{"terminal": ["rm", "-rf", "dir"], "toolCallId": "tc-2"}``: report a ``tool_call`` (kind
  execute), ``terminal/create`` the command in the session's cwd, wait for it, release it;
- ``"via": "permission"`` on a write step: name the tool call only in a
  ``session/request_permission`` (status pending, the path in ``locations``), then write, then
  report it completed, as Gemini CLI's default mode does;
- ``{"direct": "rel/path", "content": "...", "toolCallId": "tc-3"}``: report a tool call and
  write the file itself, never through the client (Gemini CLI's own file tools in ACP mode);
- ``{"shell": "rm -rf dir", "toolCallId": "tc-4"}``: report a tool call and run the command
  itself with ``sh -c`` in the session's cwd, no ``terminal/create`` (Gemini CLI's shell);
- ``{"hook": "gemini", "event": "BeforeAgent"}``: run ``ctrlz-hook gemini`` with that event's
  payload for this session, as Gemini CLI does at each prompt when ``ctrlz install gemini``
  installed its hooks;
- ``{"say": "text"}``: an agent message chunk;
- ``{"garbage": "text"}``: write a line that is not JSON to stdout;
- ``{"exit": 3}``: exit at once with that code, leaving the prompt unanswered.

Then the turn ends (``end_turn``). Run: ``python scripted_agent.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    LoadSessionResponse,
    PermissionOption,
    ToolCallLocation,
    ToolCallUpdate,
)

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_tool_call,
)

DEFAULT = [
    {"write": "new.txt", "content": "created by the agent\n", "toolCallId": "tc-write"},
    {"write": "existing.txt", "content": "edited by the agent\n", "toolCallId": "tc-edit"},
    {"terminal": ["rm", "-rf", "somedir"], "toolCallId": "tc-rm"},
]


class ScriptedAgent(Agent):
    def __init__(self) -> None:
        self.conn: Client | None = None
        self.cwd: dict[str, str] = {}
        self.count = 0

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION,
                                  agent_capabilities=AgentCapabilities(load_session=True))

    async def new_session(self, cwd: str, additional_directories: Any = None,
                          mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        self.count += 1
        session_id = f"sess-{self.count}"
        self.cwd[session_id] = cwd
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: Any = None,
                           **kwargs: Any) -> LoadSessionResponse:
        self.cwd[session_id] = cwd
        return LoadSessionResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        try:
            steps = json.loads(text)
        except ValueError:
            steps = DEFAULT
        for step in steps:
            await self.run_step(session_id, step)
        return PromptResponse(stop_reason="end_turn")

    async def run_step(self, session_id: str, step: dict[str, Any]) -> None:
        assert self.conn is not None
        cwd = self.cwd[session_id]
        call_id = step.get("toolCallId")
        if "write" in step and step.get("via") == "permission":
            path = os.path.join(cwd, step["write"])
            await self.conn.request_permission(
                session_id=session_id, tool_call=ToolCallUpdate(
                    tool_call_id=call_id, title=f"Write {step['write']}", kind="edit",
                    status="pending", locations=[ToolCallLocation(path=path)]),
                options=[PermissionOption(option_id="proceed_once", name="Allow",
                                          kind="allow_once")])
            await self.conn.write_text_file(session_id=session_id, path=path,
                                            content=step["content"])
            await self.conn.session_update(session_id, update_tool_call(
                call_id, status="completed"))
        elif "direct" in step or "shell" in step:
            if call_id:
                what = step.get("direct") or step["shell"]
                await self.conn.session_update(session_id, start_tool_call(
                    call_id, what, kind="edit" if "direct" in step else "execute",
                    status="in_progress"))
            if "direct" in step:
                path = os.path.join(cwd, step["direct"])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(step["content"])
            else:
                proc = await asyncio.create_subprocess_exec("sh", "-c", step["shell"], cwd=cwd)
                await proc.wait()
            if call_id:
                await self.conn.session_update(session_id, update_tool_call(
                    call_id, status="completed"))
        elif "hook" in step:
            hook = os.path.join(os.path.dirname(sys.executable), "ctrlz-hook")
            payload = {"hook_event_name": step["event"], "session_id": session_id, "cwd": cwd,
                       "prompt": "scripted", "timestamp": "2026-11-28T00:00:00Z"}
            proc = await asyncio.create_subprocess_exec(
                hook, step["hook"], cwd=cwd, stdin=asyncio.subprocess.PIPE)
            await proc.communicate(json.dumps(payload).encode())
        elif "write" in step:
            path = os.path.join(cwd, step["write"])
            if call_id:
                await self.conn.session_update(session_id, start_tool_call(
                    call_id, f"Write {step['write']}", kind="edit", status="in_progress",
                    locations=[ToolCallLocation(path=path)]))
            await self.conn.write_text_file(session_id=session_id, path=path,
                                            content=step["content"])
            if call_id:
                await self.conn.session_update(session_id, update_tool_call(
                    call_id, status="completed"))
        elif "terminal" in step:
            command = step["terminal"]
            if call_id:
                await self.conn.session_update(session_id, start_tool_call(
                    call_id, " ".join(command), kind="execute", status="in_progress"))
            terminal = await self.conn.create_terminal(session_id=session_id,
                                                       command=command[0], args=command[1:],
                                                       cwd=cwd)
            await self.conn.wait_for_terminal_exit(session_id=session_id,
                                                   terminal_id=terminal.terminal_id)
            await self.conn.release_terminal(session_id=session_id,
                                             terminal_id=terminal.terminal_id)
            if call_id:
                await self.conn.session_update(session_id, update_tool_call(
                    call_id, status="completed"))
        elif "say" in step:
            await self.conn.session_update(session_id, update_agent_message_text(step["say"]))
        elif "garbage" in step:
            os.write(1, step["garbage"].encode() + b"\n")
        elif "exit" in step:
            os._exit(int(step["exit"]))


if __name__ == "__main__":
    asyncio.run(run_agent(ScriptedAgent()))
