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


def _paths(tool_input: dict[str, Any]) -> list[str]:
    command = tool_input.get("command") or tool_input.get("patch") or ""
    if isinstance(command, list):
        command = "\n".join(map(str, command))
    paths = patch_paths(str(command))
    if tool_input.get("file_path"):
        paths.append(str(tool_input["file_path"]))
    return paths


def handle(payload: dict[str, Any], ctx: HookContext) -> None:
    actions.dispatch(payload, ctx, file_tools=PATCH_TOOLS, shell_tools=SHELL_TOOLS,
                     paths_of=_paths)
