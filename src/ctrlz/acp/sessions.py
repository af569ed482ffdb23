"""What the proxy remembers about each ACP session: its workspace, its tool calls as the agent
reported them, and its prompt turns.

Tool calls are learnt from the agent's ``session/update`` notifications (``tool_call`` and
``tool_call_update``) and from its ``session/request_permission`` requests, read with the SDK's
schema types; they are how a write request or a terminal is tied to the ACP ``toolCallId`` the
client knows. Gemini CLI's default mode names a tool call only in the permission request
(status pending, the path in ``locations``) before it writes, so both are read. ACP says a
``toolCallId`` is unique within a session, but an agent that reuses one in a later turn gets
a new scope for it there (``<id>:turn-<n>``): folded into the earlier turn's record, the later
call's writes were lost to its own turn's rollback. Turns are the client's
``session/prompt`` requests: one is *running* from the request until its response, then
*completed*; ``session/rollback`` takes back the newest completed turn that is not rolled back
yet, ``session/redo`` the newest rollback, and a new prompt forgets what could be redone (as an
editor's undo does). This is memory of one proxy run; the pre-images themselves are in the
workspace's store and outlive it.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from acp.schema import (
    RequestPermissionRequest,
    SessionNotification,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)
from pydantic import ValidationError

from ..hooks.actions import inside
from ..hooks.context import HookContext

#: statuses of a tool call that may still write (ACP's ``pending`` is the default)
ACTIVE = (None, "pending", "in_progress")


@dataclass
class ToolCall:
    tool_call_id: str
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    paths: list[str] = field(default_factory=list)


@dataclass
class Session:
    session_id: str
    #: the protected workspace containing the session's cwd, as the hooks' actions take it
    workspace: HookContext | None
    #: why there is no workspace (shown by the ctrlz methods), when there is none
    problem: str | None = None
    tool_calls: dict[str, ToolCall] = field(default_factory=dict)
    #: scope id -> "files" or "bash": one id is never recorded as both kinds
    scopes: dict[str, str] = field(default_factory=dict)
    #: scope id -> the turn it was recorded in (a toolCallId reused later gets a new scope)
    scope_turns: dict[str, int | None] = field(default_factory=dict)
    #: toolCallId -> its files scopes, oldest first (the newest is what a restore takes)
    files_scopes: dict[str, list[str]] = field(default_factory=dict)
    #: turn -> the workspace snapshot taken when its response came (what the turn left)
    turn_ends: dict[int, str] = field(default_factory=dict)
    #: prompt turns in flight (their turn numbers; None when recording the turn failed)
    running: list[int | None] = field(default_factory=list)
    completed: list[int] = field(default_factory=list)
    #: the rollbacks that session/redo can take back, newest last: (turn, undo-stack key)
    rolled_back: list[tuple[int, str | None]] = field(default_factory=list)
    _order: itertools.count = field(default_factory=itertools.count)
    _seen: dict[str, int] = field(default_factory=dict)

    # -- tool calls ----------------------------------------------------------------------------

    def observe(self, params: Any) -> None:
        """Learn from one ``session/update``; anything that is not a tool call is ignored."""
        try:
            update = SessionNotification.model_validate(params).update
        except ValidationError:
            return
        if isinstance(update, ToolCallStart):
            call = ToolCall(update.tool_call_id)
            self.tool_calls[call.tool_call_id] = call
        elif isinstance(update, ToolCallProgress):
            call = self.tool_calls.setdefault(update.tool_call_id,
                                              ToolCall(update.tool_call_id))
        else:
            return
        self._learn(call, update)

    def observe_permission(self, params: Any) -> None:
        """Learn from one ``session/request_permission``: the tool call it asks about, which
        may be the only place the agent names it (Gemini CLI's default mode)."""
        try:
            update = RequestPermissionRequest.model_validate(params).tool_call
        except ValidationError:
            return
        call = self.tool_calls.setdefault(update.tool_call_id, ToolCall(update.tool_call_id))
        self._learn(call, update)

    def _learn(self, call: ToolCall,
               update: ToolCallStart | ToolCallProgress | ToolCallUpdate) -> None:
        fields = update.model_fields_set
        for name in ("title", "kind", "status"):
            if name in fields:
                setattr(call, name, getattr(update, name))
        if "locations" in fields:
            call.paths = [loc.path for loc in update.locations or ()]
        self._seen[call.tool_call_id] = next(self._order)

    def _active(self) -> list[ToolCall]:
        """Tool calls that may still write, the most recently reported first."""
        calls = [c for c in self.tool_calls.values() if c.status in ACTIVE]
        return sorted(calls, key=lambda c: self._seen.get(c.tool_call_id, -1), reverse=True)

    def tool_call_for_write(self, rel: bytes) -> ToolCall | None:
        """The latest active tool call whose locations include ``rel`` (workspace-relative,
        as :func:`~ctrlz.hooks.actions.inside` gives it)."""
        if self.workspace is None:
            return None
        return next((c for c in self._active() if rel in inside(self.workspace, c.paths)),
                    None)

    def tool_call_for_terminal(self) -> ToolCall | None:
        """The latest active tool call of kind ``execute``."""
        return next((c for c in self._active() if c.kind == "execute"), None)

    def scope_for(self, call: ToolCall | None, kind: str) -> str:
        """The scope id a capture of ``kind`` is recorded under: the tool call's id, unless
        that id already holds the other kind of record (or there is no tool call), in which
        case a new id that names it; in a later turn than the one that first used the id, a
        scope of that turn (``<id>:turn-<n>``)."""
        turn = self.running[-1] if self.running else None
        base = call.tool_call_id if call is not None else None
        if base is not None and base in self.scope_turns and self.scope_turns[base] != turn:
            base = f"{base}:turn-{turn}"  # an id the agent reused in a later turn
        if base is not None and self.scopes.get(base, kind) == kind:
            scope = base
        else:
            tag = "write" if kind == "files" else "terminal"
            scope = f"{base or 'acp'}:{tag}-{uuid.uuid4().hex[:8]}"
        self.scopes[scope] = kind
        self.scope_turns.setdefault(scope, turn)
        if call is not None and kind == "files":
            known = self.files_scopes.setdefault(call.tool_call_id, [])
            if scope not in known:
                known.append(scope)
        return scope

    # -- turns ---------------------------------------------------------------------------------

    def last_completed(self) -> int | None:
        """The newest completed turn that is not rolled back."""
        undone = {turn for turn, _ in self.rolled_back}
        return next((t for t in reversed(self.completed) if t not in undone), None)

    def begin(self, turn: int | None) -> None:
        self.running.append(turn)
        self.rolled_back.clear()

    def end(self, turn: int | None) -> None:
        if turn in self.running:
            self.running.remove(turn)
        if turn is not None and turn not in self.completed:
            self.completed.append(turn)


class Sessions:
    """Every session the proxy has seen, by ACP session id."""

    def __init__(self) -> None:
        self._by_id: dict[str, Session] = {}

    def add(self, session: Session) -> Session:
        known = self._by_id.get(session.session_id)
        if known is not None and known.workspace == session.workspace:
            return known  # session/load of a session this run already knows
        self._by_id[session.session_id] = session
        return session

    def get(self, session_id: Any) -> Session | None:
        return self._by_id.get(session_id) if isinstance(session_id, str) else None
