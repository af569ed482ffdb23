"""Claude Code hooks (``ctrlz hook claude``): PreToolUse, PostToolUse, UserPromptSubmit,
SessionStart, as documented for Claude Code's command hooks (JSON on stdin).

PreToolUse of Write/Edit/MultiEdit/NotebookEdit captures ``tool_input.file_path`` (or
``notebook_path``) under ``tool_use_id``; PreToolUse of Bash takes a workspace snapshot, which
Claude Code's own /rewind cannot do; PostToolUse records what the file tool left.
"""

from __future__ import annotations

from typing import Any

from . import actions
from .runner import HookContext

FILE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
SHELL_TOOLS = ("Bash",)


def handle(payload: dict[str, Any], ctx: HookContext) -> None:
    event = payload.get("hook_event_name")
    session_id = str(payload.get("session_id") or "")
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input") or {}
    tool_id = str(payload.get("tool_use_id") or "")
    if event == "SessionStart":
        actions.session_start(ctx, session_id)
    elif event == "UserPromptSubmit":
        actions.new_turn(ctx, session_id)
    elif event == "PreToolUse" and tool in FILE_TOOLS:
        path = tool_input.get("file_path") or tool_input.get("notebook_path")
        actions.file_tool(ctx, session_id, tool_id, tool, [path] if path else [])
    elif event == "PreToolUse" and tool in SHELL_TOOLS:
        actions.shell_tool(ctx, session_id, tool_id, tool, str(tool_input.get("command", "")))
    elif event in ("PostToolUse", "PostToolUseFailure") and tool in FILE_TOOLS:
        actions.after_tool(ctx, session_id, tool_id)
