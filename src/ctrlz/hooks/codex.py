"""Codex CLI hooks (``ctrlz-hook codex``): Claude-compatible JSON on stdin, plus ``turn_id`` on
every event (the turn key).

``apply_patch`` carries the raw patch text in ``tool_input.command``; the paths it touches are
read from its ``*** Add File:``, ``*** Update File:``, ``*** Delete File:`` and ``*** Move to:``
headers (relative to the payload's ``cwd``). ``Bash`` (every shell-like tool) takes a
workspace snapshot. Codex has no failure event: PostToolUse fires for failed patches too.
"""

from __future__ import annotations

from . import actions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PATCH_TOOLS = ("apply_patch", "Edit", "Write")  # Edit/Write: aliases a matcher accepts
SHELL_TOOLS = ("Bash", "shell", "local_shell", "exec_command")
HEADERS = ("*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:")
EVENTS = {"SessionStart": "session", "UserPromptSubmit": "prompt", "PreToolUse": "pre",
          "PostToolUse": "post"}


def patch_paths(patch: str) -> list[str]:
    """The paths an apply_patch body adds, updates, deletes or moves to."""
    out = []
    for line in patch.splitlines():
        for header in HEADERS:
            if line.startswith(header):
                out.append(line[len(header):].strip())
    return list(dict.fromkeys(p for p in out if p))


def _paths(tool_input: Any) -> list[str]:
    if not isinstance(tool_input, dict):
        return []
    command = tool_input.get("command") or tool_input.get("patch") or tool_input.get(
        "input") or ""
    if isinstance(command, list):
        command = "\n".join(map(str, command))
    return patch_paths(str(command)) + actions.file_paths(tool_input, "file_path", "path")


def read(payload: dict[str, Any]) -> actions.Call:
    tool = str(payload.get("tool_name") or "")
    tool_input = payload.get("tool_input") or {}
    kind = "files" if tool in PATCH_TOOLS else "shell" if tool in SHELL_TOOLS else None
    return actions.Call(
        EVENTS.get(str(payload.get("hook_event_name"))),
        session_id=str(payload.get("session_id") or ""), tool=tool, kind=kind,
        tool_id=actions.clean_id(payload.get("tool_use_id")),
        paths=_paths(tool_input) if kind == "files" else [],
        command=actions.command_of(tool_input) if kind == "shell" else "",
        turn_key=str(payload["turn_id"]) if payload.get("turn_id") else None)
