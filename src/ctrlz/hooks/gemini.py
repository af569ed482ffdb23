"""Gemini CLI hooks (``ctrlz-hook gemini``): SessionStart, BeforeAgent, BeforeTool, AfterTool.

Gemini sends no tool-call id, so BeforeTool names the snapshot ``gemini-<time>-<args hash>``
and AfterTool finds it again by the hash of the tool name and arguments. BeforeAgent (the
prompt was submitted) starts a turn. File tools are ``write_file`` and ``replace``
(``file_path``); the shell is ``run_shell_command``.
"""

from __future__ import annotations

import time

from . import actions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILE_TOOLS = ("write_file", "replace")
SHELL_TOOLS = ("run_shell_command",)
EVENTS = {"SessionStart": "session", "BeforeAgent": "prompt", "BeforeTool": "pre",
          "AfterTool": "post"}

args_key = actions.args_key  # kept importable from here: tests and older callers use it


def read(payload: dict[str, Any]) -> actions.Call:
    tool = str(payload.get("tool_name") or "")
    tool_input = payload.get("tool_input") or {}
    key = actions.args_key(tool, tool_input)
    kind = "files" if tool in FILE_TOOLS else "shell" if tool in SHELL_TOOLS else None
    event = EVENTS.get(str(payload.get("hook_event_name")))
    return actions.Call(
        event, session_id=str(payload.get("session_id") or ""), tool=tool, kind=kind,
        tool_id=f"gemini-{time.time_ns()}-{key[:8]}" if event == "pre" else "", args_key=key,
        paths=actions.file_paths(tool_input, "file_path", "absolute_path"),
        command=actions.command_of(tool_input))
