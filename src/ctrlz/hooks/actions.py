"""What a hook does, agent-neutral: each adapter translates its agent's JSON into these calls.

Paths the agent names outside the workspace are ignored (they are not ours to restore); a tool
call that names no path inside it records nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .runner import HookContext


def inside(ctx: HookContext, paths: Iterable[str]) -> list[str]:
    """The paths (absolute, or relative to the payload's cwd) that lie in the workspace."""
    root = os.fsencode(ctx.root)
    out = []
    for p in paths:
        if not p:
            continue
        full = os.path.normpath(os.path.join(ctx.cwd, p))
        if not os.fsencode(full).startswith(root + b"/"):
            # the agent may name the workspace through a symlink (/tmp -> /private/tmp)
            full = os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))
        if os.fsencode(full).startswith(root + b"/"):
            out.append(full)
    return out


def session_start(ctx: HookContext, session_id: str) -> None:
    from ..toolcalls.api import start_session

    start_session(session_id, workspace=ctx, agent=ctx.agent)


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
    from ..workspace import Workspace

    with Workspace.open(ctx.root) as ws:
        shell_call(session_id, tool_id, command, workspace=ws, agent=ctx.agent, tool=tool)


def after_tool(ctx: HookContext, session_id: str, tool_id: str | None = None,
               args_key: str | None = None) -> None:
    from ..toolcalls.api import finish_tool_call

    finish_tool_call(session_id, tool_id, args_key=args_key, workspace=ctx)
