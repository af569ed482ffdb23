"""What a hook does, agent-neutral: each adapter translates its agent's JSON into these calls.

Paths the agent names outside the workspace are ignored (they are not ours to restore); a tool
call that names no path inside it records nothing.
"""

from __future__ import annotations

import os

from .context import HookContext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def inside(ctx: HookContext, paths: Iterable[str]) -> list[bytes]:
    """The workspace files the tool will write when it writes these paths (absolute, or
    relative to the payload's cwd), as workspace-relative paths: what the rest of the hook
    carries. Others are not ours to restore.

    By the one path check's rule for a write (:func:`ctrlz.paths.where`, ``on_disk``): each
    path is taken where it really is, through its parent directories' links (the agent may
    name the workspace as /tmp/... for /private/tmp/..., or a file as lib/f.txt where lib
    links to packages/lib), and, when it is a link itself, with the file it points to, which
    the tool writes through. The capture refuses a path through a link (a safety rule of every
    write), so a path named through one used to be left uncaptured while the rewind still
    counted its tool call as undone."""
    from ..paths import where

    root = os.fsencode(ctx.root_dir)
    cwd = os.fsencode(ctx.cwd)
    out: dict[bytes, None] = {}
    for p in paths:
        if not p:
            continue
        found = where(p, root, cwd, on_disk=True, allow_root=False)
        if found.inside:
            out[found.rel] = None
            if found.target is not None:
                out[found.target] = None
    return list(out)


def session_start(ctx: HookContext, session_id: str) -> None:
    from ..toolcalls.api import start_session

    start_session(session_id, workspace=ctx, agent=ctx.agent)
    start_daemon(ctx)


def start_daemon(ctx: HookContext) -> None:
    """Start the workspace daemon in the background, so the session's first shell snapshot is
    already incremental (see ``ctrlz.session.daemon.daemon``)."""
    from ..session import daemon_client

    daemon_client.autostart(ctx.root, ctx.store_path)


def new_turn(ctx: HookContext, session_id: str, turn_key: str | None = None) -> None:
    from ..toolcalls.api import begin_turn

    begin_turn(session_id, workspace=ctx, agent=ctx.agent, turn_key=turn_key)


def end_turn(ctx: HookContext, session_id: str) -> None:
    from ..toolcalls.api import end_turn as finish

    finish(session_id, workspace=ctx, agent=ctx.agent)


def file_tool(ctx: HookContext, session_id: str, tool_id: str, tool: str,
              paths: Iterable[str], args_key: str | None = None,
              turn_key: str | None = None) -> None:
    """Capture what a file tool will write at ``paths`` (as the agent named them)."""
    capture(ctx, session_id, tool_id, tool, inside(ctx, paths), args_key=args_key,
            turn_key=turn_key)


def capture(ctx: HookContext, session_id: str, tool_id: str, tool: str, rels: list[bytes],
            args_key: str | None = None, turn_key: str | None = None) -> None:
    """Capture the pre-images of ``rels`` (:func:`inside`'s answer) for the tool call; none
    records nothing."""
    if not rels:
        return
    if ctx.index_later:
        from ..toolcalls.inbox import capture_later as take
    else:
        from ..toolcalls.api import capture_rels as take
    take(session_id, tool_id, rels, workspace=ctx, agent=ctx.agent, tool=tool,
         args_key=args_key, turn_key=turn_key)


def shell_tool(ctx: HookContext, session_id: str, tool_id: str, tool: str, command: str,
               turn_key: str | None = None) -> None:
    from ..toolcalls.shell import shell_call

    shell_call(session_id, tool_id, command, workspace=ctx, agent=ctx.agent, tool=tool,
               turn_key=turn_key, take_snapshot=ctx.take_snapshot)


def after_tool(ctx: HookContext, session_id: str, tool_id: str | None = None,
               args_key: str | None = None) -> None:
    from ..toolcalls.api import finish_tool_call

    finish_tool_call(session_id, tool_id, args_key=args_key, workspace=ctx)


class Call:
    """One hook invocation in agent-neutral words; each adapter's ``read`` builds it.

    ``event`` is session | prompt | pre | post | stop (None: nothing for ctrlz to do). ``kind``
    says what the tool does: files (``paths`` are what it will write), shell (``command``), or
    None for a tool ctrlz does not capture. ``tool_id`` is the agent's tool-call id; agents that
    send none (Gemini, Copilot) get ``args_key``, a hash of the tool and its input, which pairs
    the pre and post events. ``turn_key`` is the agent's own id of the turn, when it sends one,
    or ``UNTIL_STOP`` for an agent whose turns end with a stop event (Auggie). A plain class:
    ``dataclasses`` costs every hook several milliseconds of import."""

    __slots__ = ("event", "session_id", "tool", "kind", "tool_id", "args_key", "paths",
                 "command", "turn_key")

    def __init__(self, event: str | None, session_id: str = "", tool: str = "",
                 kind: str | None = None, tool_id: str = "", args_key: str | None = None,
                 paths: list[str] | None = None, command: str = "",
                 turn_key: str | None = None) -> None:
        self.event = event
        self.session_id = session_id
        self.tool = tool
        self.kind = kind
        self.tool_id = tool_id
        self.args_key = args_key
        self.paths = paths or []
        self.command = command
        self.turn_key = turn_key

    def __repr__(self) -> str:
        return "Call(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


def handle(call: Call, ctx: HookContext) -> None:
    """Do what ``call`` asks: the one place that maps hook events onto the tool-call library."""
    if call.event is None:
        return
    if call.event == "session":
        session_start(ctx, call.session_id)
    elif call.event == "prompt":
        new_turn(ctx, call.session_id, call.turn_key)
    elif call.event == "stop":
        end_turn(ctx, call.session_id)
    elif call.event == "pre" and call.kind is not None:
        if not call.tool_id:
            import time

            call.tool_id = f"{ctx.agent}-{time.time_ns()}-{(call.args_key or '')[:8]}"
        if call.kind == "files":
            file_tool(ctx, call.session_id, call.tool_id, call.tool, call.paths,
                      args_key=call.args_key, turn_key=call.turn_key)
        elif call.kind == "shell":
            shell_tool(ctx, call.session_id, call.tool_id, call.tool, call.command,
                       turn_key=call.turn_key)
    elif call.event == "post" and call.kind == "files":
        after_tool(ctx, call.session_id, call.tool_id or None,
                   args_key=None if call.tool_id else call.args_key)


def args_key(tool: str, tool_input: Any) -> str:
    """A stable hash of a tool call's name and input: what pairs BeforeTool with AfterTool for
    agents that send no tool-call id. Two identical calls running at once share it."""
    import hashlib
    import json

    text = json.dumps([tool, tool_input], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def clean_id(value: Any) -> str:
    """A tool-call id usable on a command line: Cursor's hold a newline (``call_x\nctc_y``)."""
    return "-".join(str(value or "").split())


def file_paths(tool_input: Any, *keys: str) -> list[str]:
    """The first path-valued field of ``tool_input`` among ``keys``; agents name it
    differently (``file_path``, ``path``, ``filePath``, ``notebook_path``)."""
    if not isinstance(tool_input, dict):
        return []
    for key in keys or ("file_path", "path", "filePath", "notebook_path"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return [value]
    return []


def command_of(tool_input: Any) -> str:
    command = tool_input.get("command", "") if isinstance(tool_input, dict) else ""
    if isinstance(command, list):
        command = " ".join(map(str, command))
    return str(command)
