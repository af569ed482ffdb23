"""Rewind: put the whole workspace back to just before one tool call or turn of an agent session.

The timeline of a session is its tool calls in capture order, each in a turn. A file tool call
(Write/Edit/apply_patch/...) has per-path pre-images; a shell call (Bash) has a workspace
snapshot of type ``tool`` taken just before it ran. To rewind to just before tool call X:

1. a ``safety`` snapshot of the workspace is taken (so the rewind itself can be undone);
2. let B be the first shell call at or after X. If there is one, restore the workspace to B's
   ``tool`` snapshot: that is the state just before B, which undoes B and everything after it,
   whoever made the change. A path B's snapshot did not take in (excluded or ignored, such as
   ``.env``) gets the earliest pre-image a file tool call after B captured of it, which undoes
   the file tools' changes to it; what B itself did to such a path no capture holds;
3. and put back the pre-images of every file tool call from X up to (not including) B, or to
   the end when there is no B. Per path, the earliest pre-image at or after X wins, which is the
   state of that path just before X; a path whose content changed after those tool calls (a
   later edit by hand) is left alone and reported, unless ``force``;
   a path a tool call of another agent session captured later (after X, or after B for the
   rest of the workspace) is that session's work: left as it is and reported with the session
   named, unless ``force``, so rewinding one agent never takes away another's work;
4. all of it as one target handed to the restore engine (:mod:`ctrlz.toolcalls.restore.restore`),
which
   captured every path it may touch first (ignored ones too) and records the rewind on the undo
   stack, so ``ctrlz undo`` puts back the state before it and ``ctrlz redo`` the rewind.

Rewinding to turn N means rewinding to the first tool call of turn N. ``dry_run`` computes
what would change without touching anything. The rewound tool calls stay in the timeline: after
``ctrlz undo`` the same rewind is still possible, and rewinding to an earlier call again is still
correct, because the state just before X is fully determined by what was captured at or after X.
The session's turn redo stack is cleared (a rewind is "any other change").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import SnapshotNotFound, UsageError
from ...types import show_path
from .. import records
from ..core import opened

if TYPE_CHECKING:
    from ...session.protected import ProtectedWorkspace


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
    #: what the rewind does to each git repository (ctrlz.engine.restore.githistory), as data
    git: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "target": self.target, "dry_run": self.dry_run,
                "tool_calls": self.tool_calls, "shell_snapshot": self.shell_snapshot,
                "safety_snapshot": self.safety, "changed_paths": self.changed_paths,
                "skipped": self.skipped,
                "undo": "ctrlz undo" if self.safety and not self.dry_run else None,
                "git": self.git}


def agent_sessions(ws: ProtectedWorkspace) -> list[dict[str, Any]]:
    """Every agent session with tool-call state in this workspace, most recent last."""
    from ...types import iso_utc

    with opened(ws) as place:
        return [{"session_id": sid, "agent": agent, "turns": turn,
                 "started": iso_utc(created), "last_activity": iso_utc(last)}
                for sid, agent, turn, created, last in records.sessions(place.db)]


def latest_session(ws: ProtectedWorkspace) -> str:
    found = agent_sessions(ws)
    if not found:
        raise UsageError("no agent session has been recorded in this workspace yet; install "
                         "the hooks with `ctrlz install AGENT` (or `ctrlz install --detect`)")
    return found[-1]["session_id"]


def timeline(ws: ProtectedWorkspace, session_id: str | None = None) -> list[dict[str, Any]]:
    """The session's tool calls in order: time, turn, tool, paths or command, tool_use_id."""
    sid = session_id or latest_session(ws)
    with opened(ws) as place:
        agent = next((a for s, a, *_ in records.sessions(place.db) if s == sid), None)
        return [s.to_json() | {"tool_use_id": s.snapshot_id, "session_id": sid, "agent": agent}
                for s in records.snapshots(place.db, sid, include_rolled_back=False)]


def _select(snaps: list[records.SnapRow], target: str) -> list[records.SnapRow]:
    ids = [i for i, s in enumerate(snaps) if s.snapshot_id == target]
    if ids:
        return snaps[ids[0]:]
    if _turn_number(target):
        turn = int(target.lstrip("#"))
        return [s for s in snaps if s.turn >= turn]
    raise SnapshotNotFound(f"{target} is neither a tool_use_id nor a turn number of this "
                           "session; see `ctrlz rewind --list`")


def _refuse_evicted(db: Any, sid: str, snaps: list[records.SnapRow], target: str) -> None:
    """A rewind whose range holds a capture the pre-image budget evicted cannot put back what
    that tool call changed: it used to undo the rest and report success."""
    at = next((s for s in snaps if s.snapshot_id == target), None)
    if at is not None:
        gone = records.evicted_since(db, sid, seq=at.seq)
    elif _turn_number(target):
        gone = records.evicted_since(db, sid, turn=int(target.lstrip("#")))
    else:
        gone = records.evicted_since(db, sid, snapshot_id=target)
    if gone:
        kept = [s.turn for s in snaps if s.turn > max(t for _, t in gone)]
        hint = (f"the earliest turn still held whole is {min(kept)}" if kept else
                "no turn after them is held whole")
        raise UsageError(f"cannot rewind to {target}: the captures of {len(gone)} tool "
                         f"call(s) after it ({gone[0][0]}, turn {gone[0][1]}, ...) were "
                         f"evicted by the pre-image budget (preimage_cap); {hint}")


def rewind(ws: ProtectedWorkspace, target: str, session_id: str | None = None,
           dry_run: bool = False, force: bool = False, force_others: bool | None = None,
           git: str = "auto") -> RewindResult:
    """Restore the workspace to just before tool call ``target`` (an id) or turn ``target``.
    ``force_others`` (default: ``force``) decides apart from ``force`` whether other sessions'
    later work is overwritten: ACP forces over its own previous rollback, never over them."""
    from .restore import restore_tool_calls

    sid = session_id or latest_session(ws)
    with ws.repo.lock, opened(ws) as place, place.store.lock:
        snaps = records.snapshots(place.db, sid, include_rolled_back=False)
        _refuse_evicted(place.db, sid, snaps, target)
        chosen = _select(snaps, target)
        if not chosen:
            raise UsageError(f"nothing to rewind: session {sid} has no tool call at or after "
                             f"{target}")
        bash = next((s for s in chosen if s.kind == "bash"), None)
        files = [s for s in chosen if s.kind == "files" and (bash is None or s.seq < bash.seq)]
        beyond = [s for s in chosen if s.kind == "files" and bash is not None
                  and s.seq > bash.seq]
        result = RewindResult(sid, target, dry_run, [s.snapshot_id for s in chosen],
                              shell_snapshot=bash.ws_snapshot if bash else None)
        outcome = restore_tool_calls(ws, place, sid, files, shell=bash, beyond=beyond,
                                     force=force, force_others=force_others,
                                     kind="rewind", label=f"to {target}", dry_run=dry_run,
                                     git=git)
        restored = outcome.result
        result.git = restored.git
        actions = restored.plan.actions if dry_run else restored.applied
        result.changed_paths = sorted({show_path(a.path.partition(b"/")[2]) for a in actions
                                       if (a.entry or a.expect) is not None
                                       and (a.entry or a.expect).kind != "d"})
        result.skipped = [outcome.skip(rel, show_path(rel)) for rel in outcome.skipped]
        result.skipped += [{"path": show_path(k.path.partition(b"/")[2]), "reason": k.reason}
                           for k in restored.skipped]
        if not dry_run:
            result.safety = restored.safety.id if restored.safety else None
            with place.store.catalog.transaction():
                records.clear_redo(place.db, sid)
        return result


def _turn_number(target: str) -> bool:
    """Is ``target`` a turn number (digits, or ``#`` and digits; ASCII: int refuses "²")?"""
    digits = target.removeprefix("#")
    return digits.isascii() and digits.isdigit()
