"""The tools that change things: create, delete, compact, revert, restore, rewind, undo and
redo.

Each one parses its arguments, makes one call into the library (the rules for deleting and
compacting are :mod:`ctrlz.session.policy`'s, the restores :class:`~ctrlz.Workspace`'s, the
rewinds :mod:`ctrlz.toolcalls.restore.rewinds`', the same calls the CLI makes) and
shapes the result. Expected failures raise :class:`~ctrlz.errors.CtrlzError` subclasses with
one-line messages that name the MCP tool to use next.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..errors import LimitExceeded, UsageError
from ..session import policy
from ..session.reports import UndoResult
from ..toolcalls.restore import rewinds
from ..types import Snapshot, text_path
from ..workspace import Workspace
from .checkpoints import cp_aliases, from_root, pools
from .text import clean

MAX_ACTIONS = 200
_DELETE_HINT = "free a slot with snapshots_delete or snapshots_compact (or `ctrlz rm` in a shell)"


def _limit_hint(exc: LimitExceeded) -> LimitExceeded:
    """The library's pool-full message, with the shell advice replaced by the tools'."""
    msg = str(exc).split("; remove some with")[0]
    return LimitExceeded(f"{msg}; {_DELETE_HINT}")


def create(ws: Workspace, name: str) -> dict[str, Any]:
    """A manual snapshot named ``name``, the agent's own (so snapshots_delete may remove it
    again); a full manual pool is an error, never an eviction."""
    try:
        snap = policy.create(ws, name)
    except LimitExceeded as exc:
        raise _limit_hint(exc) from None
    snaps = ws.snapshots()
    return {"checkpoint": snap.id, "cp": cp_aliases(snaps).get(snap.id), "name": snap.label,
            "hash": snap.root.hex(), "available": pools(ws, snaps)["manual_available"],
            "files_count": snap.files + snap.symlinks, "number": snap.number,
            "created_at": snap.created_at,
            "skipped": [s.to_json() | {"path": text_path(s.path)} for s in snap.skipped]}


def delete(ws: Workspace, checkpoint: str) -> dict[str, Any]:
    snap = policy.resolve_ref(ws, checkpoint)
    cps = cp_aliases(ws.snapshots())
    policy.delete(ws, snap)
    return {"deleted": True, "checkpoint": snap.id, "cp": cps[snap.id], "name": snap.label,
            "origin": snap.type,
            "available": pools(ws, ws.snapshots())["manual_available"]}


def compact(ws: Workspace, checkpoints: Sequence[str], name: str | None = None
            ) -> dict[str, Any]:
    """Fold several snapshots into one (see :func:`ctrlz.session.policy.compact`)."""
    try:
        done = policy.compact(ws, checkpoints, name)
    except LimitExceeded as exc:
        raise _limit_hint(exc) from None
    kept = done.kept
    snaps = ws.snapshots()
    return {"compacted": True, "checkpoint": kept.id, "cp": cp_aliases(snaps)[kept.id],
            "name": kept.label, "hash": kept.root.hex(), "merged_count": done.merged,
            "deleted_checkpoints": [s.id for s in done.dropped],
            "files_count": kept.files + kept.symlinks,
            "available": pools(ws, snaps)["manual_available"]}


def _undo_hint(safety: Snapshot | None) -> str | None:
    if safety is None:
        return None
    return (f"snapshots_undo takes this back while it is the newest change; "
            f"snapshots_restore(checkpoint=\"{safety.id}\") puts back what this replaced at "
            "any time (or `ctrlz undo` in a shell)")


def revert(ws: Workspace, path: str, checkpoint: str | None = None) -> dict[str, Any]:
    """One file or folder back to ``checkpoint`` (default: the newest snapshot that has it;
    if none has it, the newest snapshot, which deletes it)."""
    path = from_root(ws, path)
    rel = ws.relpath(path)
    if not rel:
        raise UsageError("revert takes a file or folder; use snapshots_restore for the whole "
                         "workspace")
    ref = policy.resolve_ref(ws, checkpoint).id if checkpoint is not None else None
    if ref is not None and ws.entry_at(ref, path) is None and not os.path.lexists(
            os.path.join(os.fsencode(ws.root), rel)):
        raise UsageError(f"{text_path(rel)} exists neither in {ref} nor in the workspace")
    if ref is None and not ws.snapshots():
        ws.resolve("latest")  # the "no snapshots yet" error
    result = ws.revert(path, ref)
    counts = result.counts()
    present = ws.entry_at(result.target.id, path) is not None
    action = ("unchanged" if not any(counts.values())
              else "restored" if present else "deleted")
    cps = cp_aliases(ws.snapshots())
    return {"reverted": True, "path": text_path(rel), "action": action,
            "checkpoint": result.target.id, "cp": cps.get(result.target.id),
            "name": result.target.label, "counts": counts,
            "safety_snapshot": result.safety.id if result.safety else None,
            "undo": _undo_hint(result.safety)}


def restore(ws: Workspace, checkpoint: str, paths: Sequence[str] | None = None,
            dry_run: bool = False, git: str = "auto") -> dict[str, Any]:
    """Roll the workspace (or ``paths``) back to ``checkpoint`` in place, after a safety
    snapshot; ``dry_run`` only plans; ``git``: what becomes of each ``.git``
    (:mod:`ctrlz.engine.restore.githistory`)."""
    absolute = [from_root(ws, p) for p in paths or ()]
    snap = policy.resolve_ref(ws, checkpoint)
    result = ws.rollback(snap.id, absolute or None, dry_run=dry_run, git=git)
    data = result.to_json()
    actions = [{"op": a["op"], "path": clean(a["path"]), "change": a["change"]}
               for a in data["actions"] if a["op"] not in ("mkdir", "rmdir", "dirmode", "utime")]
    cps = cp_aliases(ws.snapshots())
    return {"restored": not dry_run, "dry_run": dry_run, "checkpoint": snap.id,
            "cp": cps.get(snap.id), "name": snap.label, "paths": list(paths or []),
            "counts": data["counts"], "actions": actions[:MAX_ACTIONS],
            "actions_total": len(actions),
            "skipped": [{"path": clean(k["path"]), "reason": k["reason"]}
                        for k in data["skipped"]],
            "safety_snapshot": data["safety_snapshot"], "undo": _undo_hint(result.safety),
            "git": data["git"]}


def _paths(paths: Sequence[str]) -> list[str]:
    return [clean(p) for p in paths]


def rewind(ws: Workspace, target: str, session_id: str | None = None, dry_run: bool = False,
           force: bool = False) -> dict[str, Any]:
    """The workspace back to just before tool call ``target`` (a tool_use_id) or turn
    ``target`` of an agent session (default: the latest), as ``ctrlz rewind`` does."""
    if not target or not target.strip():
        raise UsageError("the target is empty; give a tool_use_id or a turn number")
    if session_id is not None and not session_id.strip():
        raise UsageError("the session_id is empty; leave it out for the latest agent session")
    result = rewinds.rewind(ws, target.strip(), session_id, dry_run=dry_run, force=force)
    data = result.to_json()
    safety = ws.repo.catalog.snapshot(result.safety) if result.safety else None
    changed = _paths(data["changed_paths"])
    return {"rewound": not dry_run, "session_id": data["session_id"],
            "target": data["target"], "dry_run": dry_run, "tool_calls": data["tool_calls"],
            "shell_snapshot": data["shell_snapshot"],
            "safety_snapshot": data["safety_snapshot"],
            "changed_paths": changed[:MAX_ACTIONS], "changed_total": len(changed),
            # another session's work names it: session_id, tool_use_id
            "skipped": [k | {"path": clean(k["path"])} for k in data["skipped"]],
            "undo": _undo_hint(safety) if not dry_run else None, "git": data["git"]}


def _replayed(done: UndoResult, again: str) -> dict[str, Any]:
    op, result = done.operation, done.restore
    data = result.to_json()
    actions = [{"op": a["op"], "path": clean(a["path"]), "change": a["change"]}
               for a in data["actions"] if a["op"] not in ("mkdir", "rmdir", "dirmode", "utime")]
    return {"action": done.action,
            "operation": {"seq": op.seq, "kind": op.kind, "target": op.target,
                          "paths": _paths(op.to_json()["paths"]),
                          "session_id": op.session_id},
            "checkpoint": result.target.id, "counts": data["counts"],
            "actions": actions[:MAX_ACTIONS], "actions_total": len(actions),
            "skipped": [{"path": clean(k["path"]), "reason": k["reason"]}
                        for k in data["skipped"]],
            "safety_snapshot": data["safety_snapshot"], "next": again, "git": data["git"]}


def undo(ws: Workspace, git: str = "auto") -> dict[str, Any]:
    """Take back the newest restore, revert or rewind not undone yet (``ctrlz undo``)."""
    return _replayed(ws.undo(git=git),
                     "snapshots_redo applies it again (or `ctrlz redo` in a shell)")


def redo(ws: Workspace, git: str = "auto") -> dict[str, Any]:
    """Apply again the oldest undone one (``ctrlz redo``)."""
    return _replayed(ws.redo(git=git), "snapshots_undo takes it back again (or `ctrlz undo` "
                                       "in a shell)")
