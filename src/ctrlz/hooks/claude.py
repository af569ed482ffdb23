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


def _paths(tool_input: dict[str, Any]) -> list[str]:
    path = tool_input.get("file_path") or tool_input.get("notebook_path")
    return [str(path)] if path else []


def handle(payload: dict[str, Any], ctx: HookContext) -> None:
    actions.dispatch(payload, ctx, file_tools=FILE_TOOLS, shell_tools=SHELL_TOOLS,
                     paths_of=_paths, post_events=("PostToolUse", "PostToolUseFailure"))
