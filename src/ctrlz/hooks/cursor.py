"""Cursor hooks (``ctrlz-hook cursor``, from ``.cursor/hooks.json``): sessionStart,
beforeSubmitPrompt, preToolUse, postToolUse and postToolUseFailure.

Cursor's payload differs from Claude's: the session is ``conversation_id``, there is no ``cwd``
(the workspace is ``workspace_roots[0]``), the turn is ``generation_id``, and ``tool_use_id``
holds a newline (``call_x\\nctc_y``). File tools are Write, StrReplace, Delete and
EditNotebook, with the path in ``file_path`` (hook captures) or ``path`` (transcripts); the
shell is Shell. With third-party hooks on, Cursor also runs the Claude hook with these payloads
(and Claude's event names); :mod:`ctrlz.hooks.claude` sends those here.
"""

from __future__ import annotations

from . import actions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILE_TOOLS = ("Write", "StrReplace", "Delete", "EditNotebook", "Edit", "MultiEdit")
SHELL_TOOLS = ("Shell", "Bash")
EVENTS = {"sessionStart": "session", "beforeSubmitPrompt": "prompt", "preToolUse": "pre",
          "postToolUse": "post", "postToolUseFailure": "post",
          "SessionStart": "session", "UserPromptSubmit": "prompt", "PreToolUse": "pre",
          "PostToolUse": "post", "PostToolUseFailure": "post"}


def cwd(payload: dict[str, Any]) -> str | None:
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str):
        return roots[0]
    return payload.get("cwd") or None


def read(payload: dict[str, Any]) -> actions.Call:
    tool = str(payload.get("tool_name") or "")
    tool_input = payload.get("tool_input") or {}
    key = actions.args_key(tool, tool_input)
    kind = "files" if tool in FILE_TOOLS else "shell" if tool in SHELL_TOOLS else None
    tool_id = actions.clean_id(payload.get("tool_use_id")) or f"cursor-{key}"
    session = payload.get("conversation_id") or payload.get("session_id") or ""
    return actions.Call(
        EVENTS.get(str(payload.get("hook_event_name"))), session_id=str(session), tool=tool,
        kind=kind, tool_id=tool_id, args_key=key,
        paths=actions.file_paths(tool_input, "file_path", "path", "target_notebook"),
        command=actions.command_of(tool_input),
        turn_key=str(payload["generation_id"]) if payload.get("generation_id") else None)
