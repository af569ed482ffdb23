"""A completed prompt turn taken back, and put back again, on the one restore engine.

``session/rollback`` is ``ctrlz rewind`` to the start of the turn (:func:`rollback_turn`):
the workspace goes back to just before the turn's first tool call, shell commands included
(``rm -rf`` in a terminal is undone by the workspace snapshot taken before it; a file written
through the client by its pre-image). The rewind is recorded on the store's undo stack like any
restore, so ``session/redo`` is the undo of that rewind (:func:`redo_rollback`), allowed only
while the rewind is still the newest entry of the stack: after any other restore (``ctrlz
undo``, another rewind, a tool-call restore) redo refuses rather than undo something else.

A rewind leaves alone a file changed after the tool calls that wrote it (a later edit by hand)
and reports it. When the turn after this one was rolled back by this session just before, and
nothing was restored since, its files no longer hold what its tool calls left there: that
"later edit" is the previous rollback, so this rewind is forced, as harn's always is. A hand
edit is then overwritten too (one made between the two rollbacks, or one the previous rollback
kept), but never lost: the rewind captures the workspace first, and ``session/redo`` (or
``ctrlz undo``) puts it back. What another agent session's tool calls changed after the turn's
calls is that session's work, and stays, forced or not (:mod:`ctrlz.toolcalls.restore`).

These run in the proxy's worker thread and return JSON for the wire; paths are absolute, as
ACP's are.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import UsageError
from ..types import show_path


class StaleRedo(UsageError):
    """The rollback to redo is no longer the newest entry of the undo stack."""


def op_key(op: Any) -> str:
    """Names one entry of the undo stack for good (a seq alone may be reused once the entry
    is dropped)."""
    return f"{op.seq}:{op.created_ns}:{op.kind}"


def _absolute(root: str, rels: list[str]) -> list[str]:
    return [os.path.join(root, r) for r in rels]


def rollback_turn(ctx: Any, session_id: str, turn: int, previous: str | None = None
                  ) -> tuple[dict[str, Any], str | None]:
    """Rewind the workspace to just before turn ``turn`` of the session; ``previous`` is the
    undo-stack key of the session's last rollback, still to be redone. Returns the wire result
    and the undo-stack key of the rewind (None when nothing was put back)."""
    from ..session.protected import ProtectedWorkspace
    from ..toolcalls import rewinds

    with ProtectedWorkspace.open(ctx.root_dir) as ws:
        if not any(c["turn"] == turn for c in rewinds.timeline(ws, session_id)):
            # a turn that only talked: nothing to put back (later turns are rolled back)
            return {"turn": turn, "toolCallIds": [], "restoredPaths": [], "skippedPaths": [],
                    "safetySnapshot": None}, None
        before = ws.oplog.next_undo()
        force = previous is not None and before is not None and op_key(before) == previous
        done = rewinds.rewind(ws, f"#{turn}", session_id, force=force, force_others=False)
        op = ws.oplog.next_undo()
        recorded = op is not None and (before is None or op_key(op) != op_key(before))
        root = str(ws.root)
        return {"turn": turn, "toolCallIds": done.tool_calls,
                "restoredPaths": _absolute(root, done.changed_paths),
                "skippedPaths": [{"path": os.path.join(root, s["path"]),
                                  "reason": s["reason"]} for s in done.skipped],
                "safetySnapshot": done.safety}, (op_key(op) if recorded else None)


def redo_rollback(ctx: Any, session_id: str, turn: int, key: str | None) -> dict[str, Any]:
    """Take back the rewind ``key`` (it must still be the newest entry of the undo stack)."""
    if key is None:
        return {"turn": turn, "restoredPaths": [], "safetySnapshot": None}
    from ..session import restores
    from ..session.protected import ProtectedWorkspace

    with ProtectedWorkspace.open(ctx.root_dir) as ws:
        op = ws.oplog.next_undo()
        if op is None or op_key(op) != key:
            raise StaleRedo(f"nothing to redo in session {session_id}: the workspace was "
                            "restored since the rollback (a ctrlz undo, a rewind or another "
                            "restore); `ctrlz undo` and `ctrlz redo` still work")
        undone = restores.undo(ws)
        root = str(ws.root)
        paths = sorted({show_path(a.path.partition(b"/")[2]) for a in undone.restore.applied
                        if (a.entry or a.expect) is not None
                        and (a.entry or a.expect).kind != "d"})
        safety = undone.restore.safety
        return {"turn": turn, "restoredPaths": _absolute(root, paths),
                "safetySnapshot": safety.id if safety else None}
