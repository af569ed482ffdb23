"""Codex CLI hooks (``ctrlz hook codex``): Claude-compatible JSON on stdin.

``apply_patch`` carries the raw patch text in ``tool_input.command``; the paths it touches are
read from its ``*** Add File:``, ``*** Update File:``, ``*** Delete File:`` and ``*** Move to:``
headers (relative to the payload's ``cwd``). ``Bash`` takes a workspace snapshot.
"""

from __future__ import annotations

from typing import Any

from . import actions
from .runner import HookContext

PATCH_TOOLS = ("apply_patch", "Edit", "Write")
SHELL_TOOLS = ("Bash", "shell", "local_shell", "exec_command")
HEADERS = ("*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:")


def patch_paths(patch: str) -> list[str]:
    """The paths an apply_patch body adds, updates, deletes or moves to."""
    out = []
    for line in patch.splitlines():
        for header in HEADERS:
            if line.startswith(header):
                out.append(line[len(header):].strip())
    return list(dict.fromkeys(p for p in out if p))


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
    elif event == "PreToolUse" and tool in PATCH_TOOLS:
        command = tool_input.get("command") or tool_input.get("patch") or ""
        if isinstance(command, list):
            command = "\n".join(map(str, command))
        paths = patch_paths(str(command))
        if tool_input.get("file_path"):
            paths.append(str(tool_input["file_path"]))
        actions.file_tool(ctx, session_id, tool_id, str(tool), paths)
    elif event == "PreToolUse" and tool in SHELL_TOOLS:
        command = tool_input.get("command", "")
        if isinstance(command, list):
            command = " ".join(map(str, command))
        actions.shell_tool(ctx, session_id, tool_id, str(tool), str(command))
    elif event == "PostToolUse" and tool in PATCH_TOOLS:
        actions.after_tool(ctx, session_id, tool_id)
