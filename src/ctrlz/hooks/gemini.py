"""Gemini CLI hooks (``ctrlz hook gemini``): BeforeTool / AfterTool, BeforeAgent, SessionStart.

Gemini sends no tool-call id, so BeforeTool names the snapshot ``gemini-<time>-<args hash>`` and
AfterTool finds it again by the hash of the tool name and arguments. BeforeAgent (the prompt
was submitted) starts a turn.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from . import actions
from .runner import HookContext

FILE_TOOLS = ("write_file", "replace")
SHELL_TOOLS = ("run_shell_command",)


def args_key(tool: str, tool_input: dict[str, Any]) -> str:
    text = json.dumps([tool, tool_input], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def handle(payload: dict[str, Any], ctx: HookContext) -> None:
    event = payload.get("hook_event_name")
    session_id = str(payload.get("session_id") or "")
    tool = str(payload.get("tool_name") or "")
    tool_input = payload.get("tool_input") or {}
    key = args_key(tool, tool_input)
    tool_id = f"gemini-{time.time_ns()}-{key[:8]}"
    if event == "SessionStart":
        actions.session_start(ctx, session_id)
    elif event == "BeforeAgent":
        actions.new_turn(ctx, session_id)
    elif event == "BeforeTool" and tool in FILE_TOOLS:
        path = tool_input.get("file_path") or tool_input.get("absolute_path")
        actions.file_tool(ctx, session_id, tool_id, tool, [path] if path else [], args_key=key)
    elif event == "BeforeTool" and tool in SHELL_TOOLS:
        command = str(tool_input.get("command", ""))
        actions.shell_tool(ctx, session_id, tool_id, tool, command)
    elif event == "AfterTool" and tool in FILE_TOOLS:
        actions.after_tool(ctx, session_id, args_key=key)
