"""GitHub Copilot CLI hooks (``ctrlz-hook copilot EVENT``): sessionStart, userPromptSubmitted,
preToolUse, postToolUse and postToolUseFailure.

Copilot speaks two dialects. Its own (camelCase events, from ``.github/copilot/settings*.json``
or ``~/.copilot/hooks/``) sends ``{sessionId, timestamp, cwd, toolName, toolArgs}`` and no event
name, so the installed command passes the event as an argument. The Claude-compatible one (when
Copilot runs the hooks in ``.claude/settings*.json``) sends ``hook_event_name``, ``session_id``,
``tool_name`` with Claude's names and ``tool_input``, routed here by :mod:`ctrlz.hooks.claude`.
Neither sends a tool-call id: the id is made from the event's timestamp and a hash of the tool
and its input (the same in both dialects, so a call seen through both files is recorded once),
and the hash pairs the pre and post events.

Tools: ``create`` / ``edit`` / ``str_replace_editor`` (``path``), ``apply_patch`` (patch text),
``bash`` / ``powershell`` (``command``); in the Claude dialect Write, Edit and Bash.
"""

from __future__ import annotations

import json
import time

from . import actions
from .codex import patch_paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILE_TOOLS = ("create", "edit", "str_replace_editor", "write", "apply_patch", "Write", "Edit",
              "MultiEdit")
SHELL_TOOLS = ("bash", "powershell", "Bash", "PowerShell")
EVENTS = {"sessionStart": "session", "userPromptSubmitted": "prompt", "preToolUse": "pre",
          "postToolUse": "post", "postToolUseFailure": "post",
          "SessionStart": "session", "UserPromptSubmit": "prompt", "PreToolUse": "pre",
          "PostToolUse": "post", "PostToolUseFailure": "post"}


#: Copilot's Claude-compatible dialect renames its tools (create -> Write, edit and apply_patch ->
#: Edit, bash and powershell -> Bash); the pairing hash uses one name per family, so a call seen
#: in both dialects hashes the same.
FAMILY = {"create": "write", "write": "write", "edit": "edit", "str_replace_editor": "edit",
          "apply_patch": "edit", "multiedit": "edit", "bash": "bash", "powershell": "bash"}


def _args(payload: dict[str, Any]) -> Any:
    args = payload.get("toolArgs", payload.get("tool_input"))
    if isinstance(args, str):  # Copilot sends the arguments as a JSON string
        try:
            return json.loads(args)
        except ValueError:
            return {"command": args}
    return args or {}


def _millis(stamp: Any) -> int:
    """The event time in ms, from an epoch-ms number or an ISO-8601 string."""
    if isinstance(stamp, (int, float)):
        return int(stamp)
    if isinstance(stamp, str) and stamp:
        from datetime import datetime

        try:
            return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            pass
    return time.time_ns() // 1_000_000


def _paths(tool: str, args: Any) -> list[str]:
    if not isinstance(args, dict):
        return []
    if tool == "apply_patch" or ("patch" in args and "path" not in args):
        text = args.get("patch") or args.get("input") or args.get("command") or ""
        return patch_paths(str(text))
    return actions.file_paths(args, "path", "file_path", "filePath")


def read(payload: dict[str, Any], event_hint: str = "") -> actions.Call:
    tool = str(payload.get("toolName") or payload.get("tool_name") or "")
    args = _args(payload)
    key = actions.args_key(FAMILY.get(tool.lower(), tool), args)
    kind = "files" if tool in FILE_TOOLS else "shell" if tool in SHELL_TOOLS else None
    event = EVENTS.get(str(payload.get("hook_event_name") or event_hint))
    session = payload.get("sessionId") or payload.get("session_id") or ""
    # A prompt seen through both dialects (Copilot's own hooks and the Claude files) carries
    # the same time: as the turn key, it starts one turn, not two.
    turn_key = f"prompt-{_millis(payload.get('timestamp'))}" if event == "prompt" else None
    return actions.Call(
        event, session_id=str(session), tool=tool, kind=kind,
        tool_id=f"copilot-{_millis(payload.get('timestamp'))}-{key[:8]}" if event == "pre"
        else "", args_key=key, paths=_paths(tool, args) if kind == "files" else [],
        command=actions.command_of(args) if kind == "shell" else "", turn_key=turn_key)
