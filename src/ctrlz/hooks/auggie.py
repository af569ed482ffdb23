"""Augment Auggie hooks (``ctrlz-hook auggie``): SessionStart, PromptSubmit, PreToolUse,
PostToolUse and Stop.

Read from ``@augmentcode/auggie`` 0.36's bundle (``augment.mjs``): every event sends
``hook_event_name``, ``conversation_id`` (the session) and ``workspace_roots`` (one root) and no
``cwd``; the tool events add ``tool_name``, ``tool_input``, ``tool_output``, ``tool_error`` and
``is_mcp_tool`` (PostToolUse also ``file_changes``, and fires for failed tools too). There is
**no tool-call id**: the pre and post events are paired by a hash of the tool and its input, as
for Gemini CLI. There is no turn id either, and Auggie does not wait for PromptSubmit (it runs
alongside the model request), so the turn's first tool call can reach ctrlz before its prompt.
Auggie does wait for Stop, which ends a turn (``agent_stop_cause``: ``end_turn``,
``interrupted``, ``max_iterations``, ``empty_completion``; a thrown error sends none), so turns
are bounded by Stop (``UNTIL_STOP``): whichever of the prompt and the first tool call comes
first after a Stop starts the turn, and the other joins it.

Tools and the inputs Auggie gives them: ``save-file`` (``path``, ``file_content``),
``str-replace-editor`` (``path``; its ``view`` command changes nothing), ``remove-files``
(``file_paths``), ``apply_patch`` (``input``: the patch text), and the Claude-like set some
models get instead, ``write`` and ``edit`` (``path``). Shell: ``launch-process``
(``command``), ``bash`` (``command``) and ``write-process`` (``input_text`` typed into a
process it launched earlier), each snapshotted first.
"""

from __future__ import annotations

from ..toolcalls import UNTIL_STOP
from . import actions
from .codex import patch_paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILE_TOOLS = ("save-file", "str-replace-editor", "remove-files", "apply_patch", "write", "edit")
SHELL_TOOLS = ("launch-process", "bash", "write-process")
EVENTS = {"SessionStart": "session", "PromptSubmit": "prompt", "PreToolUse": "pre",
          "PostToolUse": "post", "Stop": "stop"}


def cwd(payload: dict[str, Any]) -> str | None:
    """The directory Auggie runs the hook in: ``cwd`` if sent, else the workspace root."""
    if payload.get("cwd"):
        return str(payload["cwd"])
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0]:
        return roots[0]
    return None


def _paths(tool: str, tool_input: Any) -> list[str]:
    if not isinstance(tool_input, dict):
        return []
    if tool == "apply_patch":
        return patch_paths(str(tool_input.get("input") or ""))
    if tool == "remove-files":
        listed = tool_input.get("file_paths")
        return [p for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
    return actions.file_paths(tool_input, "path", "file_path")


def _kind(tool: str, tool_input: Any) -> str | None:
    if tool == "str-replace-editor" and isinstance(tool_input, dict) and (
            tool_input.get("command") == "view"):
        return None
    return "files" if tool in FILE_TOOLS else "shell" if tool in SHELL_TOOLS else None


def _command(tool: str, tool_input: Any) -> str:
    if tool == "write-process" and isinstance(tool_input, dict):
        return str(tool_input.get("input_text") or "")
    return actions.command_of(tool_input)


def read(payload: dict[str, Any]) -> actions.Call:
    tool = str(payload.get("tool_name") or "")
    tool_input = payload.get("tool_input") or {}
    kind = _kind(tool, tool_input)
    return actions.Call(
        EVENTS.get(str(payload.get("hook_event_name"))),
        session_id=str(payload.get("conversation_id") or ""), tool=tool, kind=kind,
        args_key=actions.args_key(tool, tool_input),
        paths=_paths(tool, tool_input) if kind == "files" else [],
        command=_command(tool, tool_input) if kind == "shell" else "", turn_key=UNTIL_STOP)
