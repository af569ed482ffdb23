"""Registering a tool-call snapshot, and the turn it belongs to: the rows every capture starts.

Shared by the tool-call API (a capture indexed as it is taken), shell calls, and the intake of
captures a hook left in the inbox (:mod:`ctrlz.toolcalls.intake`), so that a capture means the
same whichever way it reached the catalog. Pure rows: callers hold the store lock and the
transaction.
"""

from __future__ import annotations

from . import ACP_TURN, UNTIL_STOP, records

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def register_rows(db: Any, session_id: str, scope_id: str, *, lazy: bool,
                  agent: str | None = None, tool: str | None = None, kind: str = "files",
                  detail: str | None = None, args_key: str | None = None,
                  ws_snapshot: str | None = None, turn_key: str | None = None,
                  taken_ns: int | None = None) -> records.SnapRow:
    """Register the snapshot ``scope_id`` (an upsert) in the turn ``turn_key`` names, inside
    the caller's transaction. ``taken_ns``: when it was captured, for a capture indexed
    later than it was taken (:mod:`ctrlz.toolcalls.intake`); default now."""
    turn = enter_turn(db, session_id, agent, turn_key)
    snap = records.find(db, session_id, scope_id)
    if snap is None:
        snap = records.add_snapshot(db, session_id, scope_id, turn, kind, tool=tool,
                                    detail=detail, args_key=args_key,
                                    ws_snapshot=ws_snapshot, open=lazy, taken_ns=taken_ns)
    if lazy:
        records.close_open(db, session_id, except_seq=snap.seq)
        db.execute("UPDATE tc_snapshots SET open = 1 WHERE seq = ?", (snap.seq,))
    return snap


# UNTIL_STOP is the turn key of an agent that sends no turn id and runs its prompt event
# *alongside* the model request (Auggie), so the turn's first tool call may be recorded before
# its prompt. Such a turn is bounded by the agent's Stop event instead: a prompt or a tool call
# after a Stop starts the next turn, and the other of the two joins it, whichever order they
# come in. The states below live in ``tc_sessions.turn_key``; agents' ids never take this form.
_PROMPTED, _TOOL_FIRST, ENDED = "ctrlz:prompted", "ctrlz:tool-first", "ctrlz:ended"


def enter_turn(db: Any, session_id: str, agent: str | None, turn_key: str | None, *,
               prompt: bool = False) -> int:
    """The session's turn for an event that carries the agent's turn id ``turn_key``, inside
    the caller's transaction: the same key is the same turn; a new key starts the next turn.
    Agents send the id with every tool call, so turns stay right where the prompt event never
    fires (Cursor's and Copilot's headless modes) or fires after a tool call started. A
    session whose turn began at a prompt event without the id adopts the first one it sees.
    ``prompt``: the event is the prompt itself (it matters only for :data:`UNTIL_STOP`)."""
    turn = records.ensure_session(db, session_id, agent)
    if turn_key is None:
        return turn
    if turn_key.startswith(ACP_TURN):  # ctrlz acp's session/prompt: always a new turn
        return next_turn(db, session_id, turn_key)
    known = records.turn_key(db, session_id)
    if known is not None and known.startswith(ACP_TURN) and turn > 0:
        # the agent's own id for the turn ctrlz acp began at session/prompt: the same turn
        records.set_turn_key(db, session_id, turn_key)
        return turn
    if turn_key == UNTIL_STOP:
        return _until_stop(db, session_id, turn, known, prompt)
    if known == turn_key:
        return turn
    if known is None and turn > 0:
        records.set_turn_key(db, session_id, turn_key)
        return turn
    return next_turn(db, session_id, turn_key)


def _until_stop(db: Any, session_id: str, turn: int, state: str | None, prompt: bool) -> int:
    if prompt:
        if state == _TOOL_FIRST:  # the late prompt of the turn a tool call began
            records.set_turn_key(db, session_id, _PROMPTED)
            return turn
        # a new prompt; also when the Stop before it never came (the agent was killed), so a
        # lost Stop files a racing first tool call under the turn before, never merges turns
        return next_turn(db, session_id, _PROMPTED)
    if state in (_PROMPTED, _TOOL_FIRST) or (state is None and turn > 0):
        return turn
    return next_turn(db, session_id, _TOOL_FIRST)  # after a Stop, or before the first prompt


def next_turn(db: Any, session_id: str, turn_key: str | None) -> int:
    records.clear_redo(db, session_id)
    records.close_open(db, session_id)
    turn = records.bump_turn(db, session_id)
    records.set_turn_key(db, session_id, turn_key)
    return turn
