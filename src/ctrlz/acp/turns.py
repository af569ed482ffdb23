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
calls is that session's work, and stays, forced or not (:mod:`ctrlz.toolcalls.restore.restore`).

Each turn begins with a workspace snapshot (:func:`open_turn`, cheap with the workspace
daemon), recorded as the turn's first call (``acp:prompt-<turn>``), so a rollback covers what
the turn changed whatever way the agent changed it: Gemini CLI, for one, runs its shell and
file tools itself in ACP mode, where neither ``fs/write_text_file`` nor ``terminal/create`` nor
its hooks see them. When the turn's response comes, :func:`settle_turn` takes the snapshot of
what it left; a turn whose every change went through the client's captured writes drops its
start record again, so its rollback keeps a later hand edit as before (a rewind past a
workspace snapshot returns every path to it).

These run in the proxy's worker thread and return JSON for the wire; paths are absolute, as
ACP's are.
"""

from __future__ import annotations

import os
import uuid
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


def start_scope(turn: int) -> str:
    """The id of the record of the workspace at the start of turn ``turn`` (no ACP
    ``toolCallId``: a ctrlz-made id, never shown as one of the turn's tool calls)."""
    return f"{TURN_SCOPE}{turn}"


TURN_SCOPE = "acp:prompt-"


def open_turn(ctx: Any, session_id: str) -> int:
    """Begin the next turn of the session (a key of ``ctrlz acp``'s own, which the agent's
    prompt hook joins) and record the workspace as it is before the agent acts on it."""
    from ..hooks import actions
    from ..toolcalls import ACP_TURN
    from ..toolcalls.api import begin_turn

    turn = begin_turn(session_id, workspace=ctx, agent=ctx.agent,
                      turn_key=f"{ACP_TURN}{uuid.uuid4().hex}")
    actions.shell_tool(ctx, session_id, start_scope(turn), "session/prompt",
                       f"(the workspace before prompt turn {turn})")
    return turn


def settle_turn(ctx: Any, session_id: str, turn: int) -> str | None:
    """Snapshot what turn ``turn`` left, and drop its start record when every path it changed
    was captured by a write through the client (their pre-images are the finer record: a later
    hand edit is kept). Returns the snapshot's id (None when the turn has no start record)."""
    from ..toolcalls import records
    from ..toolcalls.core import opened
    from ..toolcalls.shell import workspace_snapshot

    with opened(ctx) as place:
        calls = [s for s in records.snapshots(place.db, session_id) if s.turn == turn]
        start = next((s for s in calls if s.snapshot_id == start_scope(turn)), None)
        captured = {e.path for s in calls if s.kind == "files"
                    for e in records.entries(place.db, s.seq)}
    if start is None or not start.ws_snapshot:
        return None
    end = workspace_snapshot(ctx, f"after prompt turn {turn} of {session_id}"[:200],
                             session_id=session_id)
    changed = changed_paths(ctx, start.ws_snapshot, end)
    uncovered = [p for p in changed if p not in captured
                 and not any(c.startswith(p + b"/") for c in captured)]
    if not uncovered:
        with opened(ctx) as place, place.store.lock, place.store.catalog.transaction():
            records.delete_snapshot(place.db, start.seq)
    return end


def changed_paths(ctx: Any, old: str, new: str) -> list[bytes]:
    """The workspace-relative paths that differ between two workspace snapshots (a
    directory's mode alone does not count)."""
    from ..engine.diff import PERMISSIONS, diff_trees
    from ..session.protected import ProtectedWorkspace
    from ..state.trees import DIR

    with ProtectedWorkspace.located(ctx.root_dir, ctx.store_dir) as ws:
        a, b = ws.repo.catalog.snapshot(old), ws.repo.catalog.snapshot(new)
        if a is None or b is None:
            return []
        changes = diff_trees(ws.repo.tree, a.root, ws.repo.tree, b.root)
        return [rel for c in changes if not (c.kind == DIR and c.change_type == PERMISSIONS)
                and (rel := c.path.partition(b"/")[2])]


def rollback_turn(ctx: Any, session_id: str, turn: int, previous: str | None = None,
                  end: str | None = None) -> tuple[dict[str, Any], str | None]:
    """Rewind the workspace to just before turn ``turn`` of the session; ``previous`` is the
    undo-stack key of the session's last rollback, still to be redone. Returns the wire result
    and the undo-stack key of the rewind (None when nothing was put back)."""
    from ..session.protected import ProtectedWorkspace
    from ..toolcalls.restore import rewinds

    with ProtectedWorkspace.located(ctx.root_dir, ctx.store_dir) as ws:
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
        result = {"turn": turn,
                  "toolCallIds": [c for c in done.tool_calls if not c.startswith(TURN_SCOPE)],
                  "restoredPaths": _absolute(root, done.changed_paths),
                  "skippedPaths": [{"path": os.path.join(root, s["path"]),
                                    "reason": s["reason"]} for s in done.skipped],
                  "safetySnapshot": done.safety,
                  # what the rollback did to each git repository (ctrlz.engine.restore.githistory)
                  "git": done.git}
    if not result["restoredPaths"] and not result["skippedPaths"] and end is not None:
        _say_what_stayed(ctx, session_id, turn, end, result)
    return result, (op_key(op) if recorded else None)


#: why a path the turn changed is in neither list of a rollback that put nothing back
NOTHING_PUT_BACK = ("the turn changed it, and the rollback found nothing to put back there "
                    "(it already holds what it held before the turn, or no record of the "
                    "turn covers it)")


def _say_what_stayed(ctx: Any, session_id: str, turn: int, end: str,
                     result: dict[str, Any]) -> None:
    """An empty success is a bug (safety contract item 9): when a rollback put nothing back
    while the turn changed files, those files are listed under ``skippedPaths``, with why."""
    from ..toolcalls import records
    from ..toolcalls.core import opened

    with opened(ctx) as place:
        start = records.find(place.db, session_id, start_scope(turn))
        touched = {e.path for s in records.snapshots(place.db, session_id) if s.turn == turn
                   and s.kind == "files" for e in records.entries(place.db, s.seq)}
    if start is not None and start.ws_snapshot:
        touched.update(changed_paths(ctx, start.ws_snapshot, end))
    root = ctx.root_dir
    result["skippedPaths"] = [{"path": os.path.join(root, os.fsdecode(p)),
                               "reason": NOTHING_PUT_BACK} for p in sorted(touched)]


def redo_rollback(ctx: Any, session_id: str, turn: int, key: str | None) -> dict[str, Any]:
    """Take back the rewind ``key`` (it must still be the newest entry of the undo stack)."""
    if key is None:
        return {"turn": turn, "restoredPaths": [], "safetySnapshot": None}
    from ..session import restores
    from ..session.protected import ProtectedWorkspace

    with ProtectedWorkspace.located(ctx.root_dir, ctx.store_dir) as ws:
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
