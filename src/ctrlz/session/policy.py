"""Snapshot policy for what a face is asked to do: which snapshots may be deleted, how several
fold into one, what a snapshot may be called, how many manual slots are left.

These rules used to live in the MCP face. They are decisions, not rendering, so every face (MCP
today; the CLI and the service as they grow the same operations) calls one function here and
renders what it returns, and the rules cannot drift apart between faces.

What an agent may delete (:func:`check_deletable`) is the rule this module exists for: the
agent's own snapshots and automatic ones that no restore path needs. Everything else is the
person's way back from what the agent did, and an agent that could delete it could make its
own mistakes permanent.

The functions take any object with the few workspace operations they use
(:class:`SnapshotPools`), such as a :class:`ctrlz.Workspace`; nothing here imports a face.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import LimitExceeded, UsageError
from ..types import Snapshot

if TYPE_CHECKING:
    from ..engine.retention import Policy

log = logging.getLogger(__name__)

NAME_MAX = 64
NAME_RULE = (f"a snapshot name is 1-{NAME_MAX} characters, each a letter (A-Z, a-z), a digit, "
             "'_' or '-'")
_NAME = re.compile(rf"[A-Za-z0-9_-]{{1,{NAME_MAX}}}\Z")
_RESERVED = re.compile(r"^(latest|HEAD|@|cp-\d+|#?\d+|snap_.*)$")


class UndoLog(Protocol):
    def referenced(self) -> set[str]: ...

    def needed_next(self) -> set[str]: ...


class AgentMarks(Protocol):
    def mark_agent_made(self, snapshot_id: str, face: str) -> None: ...

    def agent_made(self) -> set[str]: ...


class SnapshotPools(Protocol):
    """What these rules need of a workspace (a :class:`ctrlz.Workspace` has all of it)."""

    @property
    def policy(self) -> Policy: ...

    @property
    def oplog(self) -> UndoLog: ...

    @property
    def session_db(self) -> AgentMarks: ...

    @property
    def root(self) -> Path: ...

    @property
    def store_path(self) -> Path: ...

    def snapshot(self, type: str = "manual", label: str | None = None) -> Snapshot: ...

    def snapshots(self) -> list[Snapshot]: ...

    def resolve(self, ref: str) -> Snapshot: ...

    def remove(self, refs: Sequence[str]) -> list[Snapshot]: ...

    def relabel(self, ref: str, label: str | None, type: str | None = None) -> Snapshot: ...

    def tool_call_refs(self) -> dict[str, tuple[str, str]]:
        """The workspace snapshots recorded tool calls and turns start from, by snapshot id:
        (agent session, tool call). A :class:`ctrlz.Workspace` asks the tool-call store,
        which sits above this layer and so is not imported here."""
        ...


def check_name(name: str) -> str:
    """A snapshot name, as Capsem's MCP tools take one: 1-64 characters of ``[A-Za-z0-9_-]``
    (nothing to quote, escape or mistake for a path), that cannot be mistaken for another
    reference (``latest``, ``cp-3``, ``snap_…``, a number). The CLI's ``-m`` labels are free
    text and do not come through here."""
    if not name:
        raise UsageError(f"the name is empty; {NAME_RULE}")
    if len(name) > NAME_MAX:
        raise UsageError(f"the name is {len(name)} characters long; {NAME_RULE}")
    if not _NAME.match(name):
        raise UsageError(f"{name!r} is not a valid name; {NAME_RULE}")
    if _RESERVED.match(name):
        raise UsageError(f"{name!r} reads as a snapshot reference (latest, cp-N, snap_…, a "
                         "number); choose another name")
    return name


def resolve_ref(ws: SnapshotPools, ref: str) -> Snapshot:
    """The snapshot ``ref`` names; an empty reference is a usage error, not "latest"."""
    if not ref or not ref.strip():
        raise UsageError("the checkpoint is empty; give a snapshot id, prefix, label or cp-N")
    return ws.resolve(ref)


def manual_available(ws: SnapshotPools, snaps: Sequence[Snapshot]) -> int:
    """Free slots in the manual pool. Manual snapshots are never evicted, so a full pool
    refuses new ones instead of dropping old ones."""
    manual = sum(1 for s in snaps if s.type == "manual")
    return max(0, ws.policy.manual_max - manual)


def create(ws: SnapshotPools, name: str, face: str = "mcp") -> Snapshot:
    """A manual snapshot named ``name`` that an agent asked for through ``face``, recorded as
    the agent's: the only manual snapshots :func:`check_deletable` lets an agent delete or
    fold again. A full manual pool is an error, never an eviction."""
    snap = ws.snapshot(type="manual", label=check_name(name))
    _mark(ws, snap.id, face)
    return snap


def _mark(ws: SnapshotPools, snapshot_id: str, face: str) -> None:
    """Record ``snapshot_id`` as an agent's. A record that cannot be written (a full disk)
    leaves the snapshot the person's: kept, which is the safe way to be wrong."""
    import sqlite3

    from ..errors import CtrlzError

    try:
        ws.session_db.mark_agent_made(snapshot_id, face)
    except (sqlite3.Error, CtrlzError, OSError) as exc:
        log.warning("%s stays protected from agents: cannot record it as theirs: %s",
                    snapshot_id, exc)


#: The automatic snapshots, nobody's way back unless a record names them: the only types an
#: agent may delete besides the ``manual`` ones it took through :func:`create`. A list of what
#: is allowed, so a type added later is the person's until someone decides otherwise.
AUTOMATIC = frozenset({"auto", "idle", "git", "build"})

#: Why the other types are a person's whatever an agent asks: one a person took, or one a
#: restore path is built on.
PERSONS = {
    "manual": "a manual snapshot a person took",
    "pre-run": "the snapshot taken before `ctrlz run` started the agent",
    "post-run": "the snapshot taken when a `ctrlz run` ended",
    "tool": "a workspace snapshot taken before an agent's shell command (`ctrlz rewind` "
            "restores it)",
    "safety": "a safety snapshot, holding what a restore replaced (its way back)",
}


def check_deletable(ws: SnapshotPools, snaps: Sequence[Snapshot]) -> None:
    """Refuse, when an agent asks (MCP's snapshots_delete and snapshots_compact; ACP has no
    such method), to delete or fold a snapshot that a person made or that a restore path
    needs. An agent may delete only what it took itself (:func:`create`) and automatic
    snapshots (:data:`AUTOMATIC`), and of those only ones that are not
    pinned, not needed by undo or redo, and not the workspace snapshot a recorded tool call or
    turn of an agent session starts from (``ctrlz rewind --list``). The refusal names the
    snapshot and why; the person may still remove it from a shell with ``ctrlz rm``.

    This used to protect only pinned snapshots and those the undo log names, so an agent could
    delete the snapshot its own ``rm`` would be rewound from, and the person's ``base``."""
    if not snaps:
        return
    undo = ws.oplog.referenced() | ws.oplog.needed_next()
    calls = ws.tool_call_refs()
    mine = ws.session_db.agent_made()
    for s in snaps:
        why = _why_kept(s, undo, calls, mine)
        if why:
            name = f"{s.id} ({s.label})" if s.label else s.id
            raise UsageError(f"{name} is {why}; an agent may delete or compact only snapshots "
                             "it took itself and automatic ones no restore needs (a person "
                             f"can remove it from a shell with `ctrlz rm {s.id}`)")


def _why_kept(s: Snapshot, undo: set[str], calls: dict[str, tuple[str, str]],
              mine: set[str]) -> str | None:
    if s.pinned:
        return "pinned"
    if s.id in undo:
        return "a snapshot that `ctrlz undo` or `ctrlz redo` still needs"
    if s.id in calls:
        session, call = calls[s.id]
        return (f"the workspace snapshot taken before tool call {call} of agent session "
                f"{session}, which `ctrlz rewind {call}` restores")
    if (s.type == "manual" and s.id in mine) or s.type in AUTOMATIC:
        return None
    return PERSONS.get(s.type, f"a {s.type} snapshot, which only a person may remove")


def delete(ws: SnapshotPools, snap: Snapshot) -> Snapshot:
    """Delete one snapshot on an agent's request, if :func:`check_deletable` allows it."""
    check_deletable(ws, [snap])
    ws.remove([snap.id])
    return snap


@dataclass(frozen=True)
class Compaction:
    """What :func:`compact` did: ``kept`` is the result (renamed, now manual), ``dropped``
    the older snapshots removed, ``merged`` how many distinct snapshots were folded."""

    kept: Snapshot
    dropped: list[Snapshot]
    merged: int


def compact(ws: SnapshotPools, refs: Sequence[str], name: str | None = None,
            face: str = "mcp") -> Compaction:
    """Fold the snapshots ``refs`` name into one: the newest of them, renamed ``name`` (default
    ``compacted_<epoch>``) and moved to the manual pool; the older ones are removed.

    Each snapshot is the complete state of the workspace, so the newest one already holds
    everything the others led up to, including deletions: a file deleted before the newest
    snapshot stays deleted (Capsem's merge of file sets brought such files back). A full
    manual pool is an error, never an eviction. Every snapshot named must pass
    :func:`check_deletable`, the newest one too: compacting renames it and makes it the
    agent's, which a person's snapshot or a rewind's must never become."""
    if not refs:
        raise UsageError("give at least one checkpoint to compact")
    name = check_name(name if name is not None else f"compacted_{int(time.time())}")
    chosen: dict[str, Snapshot] = {}
    for ref in refs:
        s = resolve_ref(ws, ref)
        chosen[s.id] = s
    ordered = sorted(chosen.values(), key=lambda s: (s.created_ns, s.number or 0))
    keep, drop = ordered[-1], ordered[:-1]
    check_deletable(ws, ordered)  # the one kept too: it is renamed and becomes the agent's
    if keep.type != "manual":
        dropped = {s.id for s in drop}
        manual = sum(1 for s in ws.snapshots() if s.type == "manual" and s.id not in dropped)
        if manual >= ws.policy.manual_max:
            raise LimitExceeded(f"the manual pool is full ({manual} of manual_max="
                                f"{ws.policy.manual_max}) and the result of a compaction is a "
                                "manual snapshot; remove some with `ctrlz rm SNAP` or "
                                "`ctrlz prune`, or raise manual_max")
    if drop:
        ws.remove([s.id for s in drop])
    kept = ws.relabel(keep.id, name, type="manual")
    _mark(ws, kept.id, face)  # the agent may delete or fold its result again
    return Compaction(kept, drop, len(ordered))
