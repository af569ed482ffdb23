"""What a hook does, agent-neutral: each adapter translates its agent's JSON into these calls.

Paths the agent names outside the workspace are ignored (they are not ours to restore); a tool
call that names no path inside it records nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from .runner import HookContext


def inside(ctx: HookContext, paths: Iterable[str]) -> list[str]:
    """The paths (absolute, or relative to the payload's cwd) that lie in the workspace, by the
    one path check (:mod:`ctrlz.paths`); others are not ours to restore."""
    from ..errors import CtrlzError
    from ..paths import workspace_relative

    root = os.fsencode(ctx.root_dir)
    cwd = os.fsencode(ctx.cwd)
    out = []
    for p in paths:
        if not p:
            continue
        try:
            rel = workspace_relative(root, p, cwd, allow_root=False)
        except CtrlzError:
            # the agent may name the workspace through a symlink (/tmp -> /private/tmp)
            raw = os.path.join(cwd, os.fsencode(p))
            real = os.path.join(os.path.realpath(os.path.dirname(raw)), os.path.basename(raw))
            try:
                rel = workspace_relative(root, real, cwd, allow_root=False)
            except CtrlzError:
                continue
        out.append(os.fsdecode(root + b"/" + rel))
    return out


def session_start(ctx: HookContext, session_id: str) -> None:
    from ..toolcalls.api import start_session

    start_session(session_id, workspace=ctx, agent=ctx.agent)
    start_daemon(ctx)


def start_daemon(ctx: HookContext) -> None:
    """Start the workspace daemon in the background, so the session's first shell snapshot is
    already incremental (see ``ctrlz.session.daemon``)."""
    from ..session import daemon_client

    daemon_client.autostart(ctx.root, ctx.store_path)


def new_turn(ctx: HookContext, session_id: str) -> None:
    from ..toolcalls.api import begin_turn

    begin_turn(session_id, workspace=ctx, agent=ctx.agent)


def file_tool(ctx: HookContext, session_id: str, tool_id: str, tool: str,
              paths: Iterable[str], args_key: str | None = None) -> None:
    from ..toolcalls.api import fs_snapshot

    wanted = inside(ctx, paths)
    if wanted:
        fs_snapshot(session_id, tool_id, wanted, workspace=ctx, agent=ctx.agent, tool=tool,
                    args_key=args_key)


def shell_tool(ctx: HookContext, session_id: str, tool_id: str, tool: str, command: str) -> None:
    from ..toolcalls.shell import shell_call

    shell_call(session_id, tool_id, command, workspace=ctx, agent=ctx.agent, tool=tool)


def after_tool(ctx: HookContext, session_id: str, tool_id: str | None = None,
               args_key: str | None = None) -> None:
    from ..toolcalls.api import finish_tool_call

    finish_tool_call(session_id, tool_id, args_key=args_key, workspace=ctx)


def dispatch(payload: dict[str, Any], ctx: HookContext, *, file_tools: tuple[str, ...],
             shell_tools: tuple[str, ...], paths_of: Callable[[dict[str, Any]], list[str]],
             post_events: tuple[str, ...] = ("PostToolUse",)) -> None:
    """The Claude-style hook wire format, which Claude Code and Codex share: the adapters
    differ only in tool names and in where a tool's paths are."""
    event = payload.get("hook_event_name")
    session_id = str(payload.get("session_id") or "")
    tool = str(payload.get("tool_name") or "")
    tool_input = payload.get("tool_input") or {}
    tool_id = str(payload.get("tool_use_id") or "")
    if event == "SessionStart":
        session_start(ctx, session_id)
    elif event == "UserPromptSubmit":
        new_turn(ctx, session_id)
    elif event == "PreToolUse" and tool in file_tools:
        file_tool(ctx, session_id, tool_id, tool, paths_of(tool_input))
    elif event == "PreToolUse" and tool in shell_tools:
        command = tool_input.get("command", "")
        if isinstance(command, list):
            command = " ".join(map(str, command))
        shell_tool(ctx, session_id, tool_id, tool, str(command))
    elif event in post_events and tool in file_tools:
        after_tool(ctx, session_id, tool_id)
