"""Factory Droid hooks (``ctrlz-hook droid``): SessionStart, UserPromptSubmit, PreToolUse and
PostToolUse, in Droid's Claude-style command-hook JSON.

Read from the ``droid`` binary of ``@factory/cli`` 0.225 (its embedded JS): every event sends
``session_id``, ``transcript_path``, ``cwd``, ``permission_mode`` and ``hook_event_name``; the
tool events add ``tool_name`` and ``tool_input`` (PostToolUse also ``tool_response``, and fires
only when the tool succeeded). Unlike Claude Code, Droid sends **no tool-call id**: the pre and
post events are paired by a hash of the tool and its input, as for Gemini CLI.
UserPromptSubmit carries the prompt's ``message_id``, the turn key.

Droid's own tool names and inputs: ``Create`` (``file_path``, ``content``), ``Edit``
(``file_path``, ``old_str``, ``new_str``), ``ApplyPatch`` (``input``: the patch text, with
Codex's ``*** Add/Update/Delete File:`` headers), ``Execute`` (``command``). ``MultiEdit``
(``file_path``) is from older releases. ``Script`` runs JavaScript that drives other tools; it
is snapshotted like a shell command, so whatever it does can be rewound.
"""

from __future__ import annotations

from . import actions
from .codex import patch_paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILE_TOOLS = ("Create", "Edit", "MultiEdit", "ApplyPatch")
SHELL_TOOLS = ("Execute", "Script")
EVENTS = {"SessionStart": "session", "UserPromptSubmit": "prompt", "PreToolUse": "pre",
          "PostToolUse": "post"}


def _paths(tool: str, tool_input: Any) -> list[str]:
    if not isinstance(tool_input, dict):
        return []
    if tool == "ApplyPatch":
        return patch_paths(str(tool_input.get("input") or tool_input.get("patch") or ""))
    return actions.file_paths(tool_input, "file_path", "path")


def _command(tool: str, tool_input: Any) -> str:
    """The shell command; for Script, the first line of its code (the whole script can be
    long, and the rewind list shows one line)."""
    if tool != "Script":
        return actions.command_of(tool_input)
    if not isinstance(tool_input, dict):
        return "Script"
    if "script" in tool_input:
        lines = str(tool_input["script"]).splitlines()
    else:  # the free-form input: a line of JSON options, then the code
        lines = str(tool_input.get("input") or "").splitlines()[1:]
    return "Script: " + next((ln.strip() for ln in lines if ln.strip()), "")


def read(payload: dict[str, Any]) -> actions.Call:
    tool = str(payload.get("tool_name") or "")
    tool_input = payload.get("tool_input") or {}
    kind = "files" if tool in FILE_TOOLS else "shell" if tool in SHELL_TOOLS else None
    event = EVENTS.get(str(payload.get("hook_event_name")))
    return actions.Call(
        event, session_id=str(payload.get("session_id") or ""), tool=tool, kind=kind,
        args_key=actions.args_key(tool, tool_input),
        paths=_paths(tool, tool_input) if kind == "files" else [],
        command=_command(tool, tool_input) if kind == "shell" else "",
        turn_key=str(payload["message_id"]) if event == "prompt" and payload.get(
            "message_id") else None)
