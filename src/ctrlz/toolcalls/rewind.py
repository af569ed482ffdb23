"""Rewind: put the whole workspace back to just before one tool call or turn of an agent session.

The timeline of a session is its tool calls in capture order, each in a turn. A file tool call
(Write/Edit/apply_patch/...) has per-path pre-images; a shell call (Bash) has a workspace
snapshot of type ``tool`` taken just before it ran. To rewind to just before tool call X:

1. take a ``safety`` snapshot of the workspace (so the rewind itself can be undone);
2. let B be the first shell call at or after X. If there is one, restore the workspace to B's
   ``tool`` snapshot: that is the state just before B, which undoes B and everything after it,
   whoever made the change (files the snapshot's rules exclude are left alone, as always);
3. then restore, in reverse order, the pre-images of every file tool call from X up to (not
   including) B, or to the end when there is no B. Per path, the earliest pre-image at or after
   X wins, which is the state of that path just before X;
4. take a second snapshot of the result and record the rewind in the operation log, so
   ``ctrlz undo`` puts back the safety snapshot and ``ctrlz redo`` the rewind.

Rewinding to turn N means rewinding to the first tool call of turn N. ``dry_run`` computes
what would change without touching anything. The rewound tool calls stay in the timeline: after
``ctrlz undo`` the same rewind is still possible, and rewinding to an earlier call again is still
correct, because the state just before X is fully determined by what was captured at or after X.
The session's turn redo stack is cleared (a rewind is "any other change").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import RestoreError, SnapshotNotFound, UsageError
from ..types import show_path
from . import records
from .core import opened
from .images import fingerprint, put_back

if TYPE_CHECKING:
    from ..workspace import Workspace


@dataclass
class RewindResult:
    session_id: str
    target: str
    dry_run: bool
    tool_calls: list[str]
    shell_snapshot: str | None = None
    safety: str | None = None
    changed_paths: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "target": self.target, "dry_run": self.dry_run,
                "tool_calls": self.tool_calls, "shell_snapshot": self.shell_snapshot,
                "safety_snapshot": self.safety, "changed_paths": self.changed_paths,
                "skipped": self.skipped,
                "undo": "ctrlz undo" if self.safety and not self.dry_run else None}


def agent_sessions(ws: Workspace) -> list[dict[str, Any]]:
    """Every agent session with tool-call state in this workspace, most recent last."""
    from ..types import iso_utc

    with opened(ws) as place:
        return [{"session_id": sid, "agent": agent, "turns": turn,
                 "started": iso_utc(created), "last_activity": iso_utc(last)}
                for sid, agent, turn, created, last in records.sessions(place.db)]


def latest_session(ws: Workspace) -> str:
    found = agent_sessions(ws)
    if not found:
        raise UsageError("no agent session has been recorded in this workspace yet; install "
                         "the hooks with `ctrlz install claude|gemini|codex`")
    return found[-1]["session_id"]


def timeline(ws: Workspace, session_id: str | None = None) -> list[dict[str, Any]]:
    """The session's tool calls in order: time, turn, tool, paths or command, tool_use_id."""
    sid = session_id or latest_session(ws)
    with opened(ws) as place:
        return [s.to_json() | {"tool_use_id": s.snapshot_id, "session_id": sid}
                for s in records.snapshots(place.db, sid, include_rolled_back=False)]


def _select(snaps: list[records.SnapRow], target: str) -> list[records.SnapRow]:
    ids = [i for i, s in enumerate(snaps) if s.snapshot_id == target]
    if ids:
        return snaps[ids[0]:]
    if target.lstrip("#").isdigit():
        turn = int(target.lstrip("#"))
        return [s for s in snaps if s.turn >= turn]
    raise SnapshotNotFound(f"{target} is neither a tool_use_id nor a turn number of this "
                           "session; see `ctrlz rewind --list`")


def rewind(ws: Workspace, target: str, session_id: str | None = None,
           dry_run: bool = False) -> RewindResult:
    """Restore the workspace to just before tool call ``target`` (an id) or turn ``target``."""
    sid = session_id or latest_session(ws)
    with opened(ws) as place:
        chosen = _select(records.snapshots(place.db, sid, include_rolled_back=False), target)
        if not chosen:
            raise UsageError(f"nothing to rewind: session {sid} has no tool call at or after "
                             f"{target}")
        bash = next((s for s in chosen if s.kind == "bash"), None)
        files = [s for s in chosen if s.kind == "files" and (bash is None or s.seq < bash.seq)]
        result = RewindResult(sid, target, dry_run, [s.snapshot_id for s in chosen],
                              shell_snapshot=bash.ws_snapshot if bash else None)
        if bash is not None and (bash.ws_snapshot is None
                                 or ws.repo.catalog.snapshot(bash.ws_snapshot) is None):
            raise RestoreError(f"the workspace snapshot taken before {bash.snapshot_id} "
                               f"({bash.ws_snapshot}) is gone (pruned); cannot rewind past that "
                               "shell command")
        changed: dict[str, None] = {}
        if dry_run:
            if bash is not None:
                for c in ws.diff(bash.ws_snapshot).changes:
                    changed[show_path(c.path)] = None
            for snap in reversed(files):
                for e in records.entries(place.db, snap.seq):
                    now = fingerprint(place.rootb, e.path, place.store.objects)
                    if now.key != e.pre.key:
                        changed[show_path(e.path)] = None
            result.changed_paths = sorted(changed)
            return result
        with ws.repo.lock, place.store.lock:
            safety = ws.snapshot(type="safety", label=f"before rewind to {target}")
            result.safety = safety.id
            if bash is not None:
                restored = ws.restore(bash.ws_snapshot)
                for action in restored.applied:
                    changed[show_path(action.path.partition(b"/")[2])] = None
                result.skipped += [{"path": show_path(k.path.partition(b"/")[2]),
                                    "reason": k.reason} for k in restored.skipped]
            for snap in reversed(files):
                for e in records.entries(place.db, snap.seq):
                    try:
                        if fingerprint(place.rootb, e.path, place.store.objects).key != \
                                e.pre.key:
                            put_back(place.rootb, e.path, e.pre, place.store.objects)
                            changed[show_path(e.path)] = None
                    except Exception as exc:  # one bad path must not stop the others
                        result.skipped.append({"path": show_path(e.path), "reason": str(exc)})
            after = ws.snapshot(type="safety", label=f"after rewind to {target}")
            ws.oplog.record("rewind", after.id, [], safety.id)
            with place.store.catalog.transaction():
                records.clear_redo(place.db, sid)
        result.changed_paths = sorted(changed)
        return result
