"""OpenCode hooks (``ctrlz-hook opencode``), fed by the plugin ``ctrlz install opencode`` writes
(:mod:`ctrlz.installers.opencode`): OpenCode extends itself with in-process JS plugins, not
command hooks, so the plugin hands each event to this command as JSON.

Events, as the plugin names them: ``session.created``, ``chat.message`` (a prompt: a new turn),
``tool.execute.before`` and ``tool.execute.after``. Each carries ``session_id`` (a subagent's
child session is already mapped to its parent by the plugin), ``tool_use_id`` (OpenCode's
``callID``), ``tool_name``, ``tool_input`` (the tool's args) and ``cwd``. Tools: ``write``,
``edit`` and ``multiedit`` (``filePath``), ``apply_patch`` / ``patch`` (``patchText``),
``bash`` (``command``).
"""

from __future__ import annotations

from . import actions
from .codex import patch_paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILE_TOOLS = ("write", "edit", "multiedit", "apply_patch", "patch")
SHELL_TOOLS = ("bash",)
EVENTS = {"session.created": "session", "chat.message": "prompt",
          "tool.execute.before": "pre", "tool.execute.after": "post"}


def read(payload: dict[str, Any]) -> actions.Call:
    tool = str(payload.get("tool_name") or "")
    args = payload.get("tool_input") or {}
    kind = "files" if tool in FILE_TOOLS else "shell" if tool in SHELL_TOOLS else None
    if kind == "files" and isinstance(args, dict) and ("patchText" in args or "patch" in args):
        paths = patch_paths(str(args.get("patchText") or args.get("patch") or ""))
    else:
        paths = actions.file_paths(args, "filePath", "file_path", "path")
    return actions.Call(
        EVENTS.get(str(payload.get("hook_event_name"))),
        session_id=str(payload.get("session_id") or ""), tool=tool, kind=kind,
        tool_id=actions.clean_id(payload.get("tool_use_id")),
        args_key=actions.args_key(tool, args), paths=paths,
        command=actions.command_of(args))
