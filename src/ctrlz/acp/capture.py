"""Recording what an ACP agent asks the client to do, before the client does it.

The proxy calls these as the messages pass: a session is opened on ``session/new`` (or
``load``/``resume``/``fork``), a turn begins on ``session/prompt`` with a workspace snapshot
(and its response records what the turn left), a pre-image is captured
before ``fs/write_text_file`` is forwarded and its result recorded when the client answers, and
a workspace snapshot is taken before ``terminal/create`` is forwarded. Each is one call into the
agent-neutral actions the agent hooks use (:mod:`ctrlz.hooks.actions`), so an ACP agent is
recorded exactly as a hooked agent is: same store, same session and turn records, same restore.

None of it may break the conversation: a failure is logged on stderr (one line; the traceback
at ``--log-level DEBUG``) and the message is forwarded anyway, as the hook runner does. The
calls run in a worker thread, one at a time (:class:`Worker`), so the event loop keeps relaying
the other direction while the store works, and a capture never races a restore.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
from collections.abc import Callable
from typing import Any, TypeVar

from acp.schema import CreateTerminalRequest, WriteTextFileRequest
from pydantic import ValidationError

from ..errors import WorkspaceError
from ..hooks import actions
from ..hooks.context import HookContext
from ..quoting import quote_path
from .sessions import Session
from .turns import open_turn, settle_turn

log = logging.getLogger("ctrlz.acp")
T = TypeVar("T")


class Worker:
    """Runs store calls in a thread, one at a time and in the order they were asked for."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        async with self._lock:
            return await asyncio.to_thread(fn, *args, **kwargs)

    async def quietly(self, what: str, fn: Callable[..., T], *args: Any,
                      **kwargs: Any) -> T | None:
        """:meth:`call`, but a failure is logged and None returned: capture is best effort."""
        try:
            return await self.call(fn, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the conversation must go on
            log.warning("ctrlz acp: %s failed, forwarding anyway: %s: %s", what,
                        type(exc).__name__, " ".join(str(exc).split()),
                        exc_info=log.isEnabledFor(logging.DEBUG))
            return None


def find_workspace(cwd: str, agent: str, protect: bool) -> HookContext:
    """The protected workspace containing ``cwd``; with ``protect``, ``cwd`` is protected
    first when none does (what ``ctrlz init`` does)."""
    from ..toolcalls.store import locate

    if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise WorkspaceError(f"the session's cwd {cwd!r} is not an absolute path to a "
                             "directory")
    try:
        root, store = locate(cwd)
    except WorkspaceError:
        if not protect:
            raise WorkspaceError(f"{cwd} is not inside a protected workspace (ctrlz acp "
                                 "--no-init); run `ctrlz init` there first") from None
        from ..session.protected import ProtectedWorkspace

        ProtectedWorkspace.init(cwd).close()
        log.warning("ctrlz acp: protecting %s (ctrlz init)", cwd)
        root, store = locate(cwd)
    return HookContext(agent, root, store, cwd)


class Recorder:
    """The capture side of the proxy, for one agent."""

    def __init__(self, worker: Worker, agent: str, protect: bool) -> None:
        self.worker = worker
        self.agent = agent
        self.protect = protect

    async def open_session(self, session_id: str, cwd: Any) -> Session:
        """A session the client opened in ``cwd``; without a workspace it is still relayed,
        and the ctrlz methods say why they cannot serve it."""
        def start() -> HookContext:
            ctx = find_workspace(cwd, self.agent, self.protect)
            actions.session_start(ctx, session_id)
            return ctx

        try:
            ctx = await self.worker.call(start)
        except Exception as exc:  # noqa: BLE001 - the session goes on, unrecorded
            why = " ".join(str(exc).split())
            log.warning("ctrlz acp: session %s is not recorded: %s", session_id, why)
            return Session(session_id, None, problem=why)
        return Session(session_id, ctx)

    async def begin_turn(self, session: Session) -> int | None:
        """A new turn, and the workspace snapshot at its start (:func:`turns.open_turn`)."""
        if session.workspace is None:
            return None
        return await self.worker.quietly(
            "recording the prompt turn", open_turn, session.workspace, session.session_id)

    async def end_turn(self, session: Session, turn: int | None) -> None:
        """Record what the turn left (:func:`turns.settle_turn`), before its response goes
        to the client, so no rollback can come first."""
        if session.workspace is None or turn is None:
            return
        end = await self.worker.quietly(
            "snapshotting what the prompt turn left", settle_turn, session.workspace,
            session.session_id, turn)
        if end is not None:
            session.turn_ends[turn] = end

    async def before_write(self, session: Session, params: Any) -> str | None:
        """Capture the pre-image of the path the agent asks the client to write; the scope id
        it was recorded under (for :meth:`after_write`), or None."""
        if session.workspace is None:
            return None
        try:
            request = WriteTextFileRequest.model_validate(params)
        except ValidationError:
            return None  # the client will answer a malformed request; nothing to capture
        rels = actions.inside(session.workspace, [request.path])
        if not rels:
            return None  # outside the workspace: not ours to restore
        call = session.tool_call_for_write(rels[0])
        scope = session.scope_for(call, "files")
        tool = (call.title or call.kind) if call is not None else None
        await self.worker.quietly(
            f"capturing {quote_path(rels[0])}", actions.capture, session.workspace,
            session.session_id, scope, tool or "fs/write_text_file", rels)
        return scope

    async def after_write(self, session: Session, scope: str) -> None:
        """Record what the write left, so a later restore can tell it from a later edit."""
        if session.workspace is None:
            return
        await self.worker.quietly("recording the write's result", actions.after_tool,
                                  session.workspace, session.session_id, scope)

    async def before_terminal(self, session: Session, params: Any) -> None:
        """A workspace snapshot before a command runs: it may change any path."""
        if session.workspace is None:
            return
        try:
            request = CreateTerminalRequest.model_validate(params)
        except ValidationError:
            return
        command = shlex.join([request.command, *(request.args or ())])
        call = session.tool_call_for_terminal()
        scope = session.scope_for(call, "bash")
        await self.worker.quietly(
            f"snapshotting the workspace before `{command}`", actions.shell_tool,
            session.workspace, session.session_id, scope,
            (call.title if call is not None and call.title else "terminal/create"), command)
