"""Claude Code hooks (``ctrlz-hook claude``): SessionStart, UserPromptSubmit, PreToolUse,
PostToolUse and PostToolUseFailure, in Claude Code's command-hook JSON.

Write/Edit/MultiEdit/NotebookEdit capture ``tool_input.file_path`` (or ``notebook_path``)
under ``tool_use_id``; Bash and PowerShell take a workspace snapshot, which Claude Code's own
/rewind cannot do. ``prompt_id`` is the turn key.

Two other agents run the hooks in ``.claude/settings*.json`` with payloads of their own: GitHub
Copilot CLI (Claude tool names, but ``tool_input.path`` and no ``tool_use_id``) and Cursor with
third-party hooks on (``conversation_id``, ``workspace_roots``, camelCase or Claude event names).
:func:`foreign` tells them apart, so their calls are read by their own adapter and recorded
under their own name instead of being missed.
"""

from __future__ import annotations

from . import actions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
SHELL_TOOLS = ("Bash", "PowerShell")
EVENTS = {"SessionStart": "session", "UserPromptSubmit": "prompt", "PreToolUse": "pre",
          "PostToolUse": "post", "PostToolUseFailure": "post"}


def foreign(payload: dict[str, Any]) -> str | None:
    """The agent that really sent a payload to the Claude hook, when it is not Claude Code."""
    if "conversation_id" in payload or "workspace_roots" in payload or (
            "cursor_version" in payload):
        return "cursor"
    if "toolName" in payload or "sessionId" in payload:
        return "copilot"  # Copilot's own dialect
    if "transcript_path" not in payload and "timestamp" in payload:
        # Copilot's Claude-compatible dialect, on every event: Claude Code always sends a
        # transcript path and never a timestamp
        return "copilot"
    return None


def kind_of(tool: str) -> str | None:
    return "files" if tool in FILE_TOOLS else "shell" if tool in SHELL_TOOLS else None


def read(payload: dict[str, Any]) -> actions.Call:
    tool = str(payload.get("tool_name") or "")
    tool_input = payload.get("tool_input") or {}
    return actions.Call(
        EVENTS.get(str(payload.get("hook_event_name"))),
        session_id=str(payload.get("session_id") or ""), tool=tool, kind=kind_of(tool),
        tool_id=actions.clean_id(payload.get("tool_use_id")),
        paths=actions.file_paths(tool_input, "file_path", "notebook_path", "path"),
        command=actions.command_of(tool_input),
        turn_key=str(payload["prompt_id"]) if payload.get("prompt_id") else None)
