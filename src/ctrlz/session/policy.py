"""Snapshot policy for what a face is asked to do: which snapshots may be deleted, how several
fold into one, what a snapshot may be called, how many manual slots are left.

These rules used to live in the MCP face. They are decisions, not rendering, so every face (MCP
today; the CLI and the service as they grow the same operations) calls one function here and
renders what it returns, and the rules cannot drift apart between faces.

The functions take any object with the few workspace operations they use
(:class:`SnapshotPools`), such as a :class:`ctrlz.Workspace`; nothing here imports a face.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..errors import LimitExceeded, UsageError
from ..types import Snapshot

if TYPE_CHECKING:
    from ..engine.retention import Policy

NAME_MAX = 64
NAME_RULE = (f"a snapshot name is 1-{NAME_MAX} characters, each a letter (A-Z, a-z), a digit, "
             "'_' or '-'")
_NAME = re.compile(rf"[A-Za-z0-9_-]{{1,{NAME_MAX}}}\Z")
_RESERVED = re.compile(r"^(latest|HEAD|@|cp-\d+|#?\d+|snap_.*)$")


class UndoLog(Protocol):
    def referenced(self) -> set[str]: ...


class SnapshotPools(Protocol):
    """What these rules need of a workspace (a :class:`ctrlz.Workspace` has all of it)."""

    @property
    def policy(self) -> Policy: ...

    @property
    def oplog(self) -> UndoLog: ...

    def snapshots(self) -> list[Snapshot]: ...

    def resolve(self, ref: str) -> Snapshot: ...

    def remove(self, refs: Sequence[str]) -> list[Snapshot]: ...

    def relabel(self, ref: str, label: str | None, type: str | None = None) -> Snapshot: ...


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


def check_deletable(ws: SnapshotPools, snaps: Sequence[Snapshot]) -> None:
    """Refuse to delete, on an agent's request, a snapshot that is pinned or a safety snapshot
    that ``ctrlz undo`` still needs: deleting it would take away the way back. The user at a
    shell may still remove either with ``ctrlz rm``, which the message says."""
    needed = ws.oplog.referenced()
    for s in snaps:
        if s.id in needed:
            raise UsageError(f"{s.id} is a safety snapshot that `ctrlz undo` still needs; it "
                             "can only be removed from a shell with `ctrlz rm`")
        if s.pinned:
            raise UsageError(f"{s.id} is pinned; unpin it from a shell before removing it")


def delete(ws: SnapshotPools, snap: Snapshot) -> Snapshot:
    """Delete one snapshot if :func:`check_deletable` allows it."""
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


def compact(ws: SnapshotPools, refs: Sequence[str], name: str | None = None) -> Compaction:
    """Fold the snapshots ``refs`` name into one: the newest of them, renamed ``name`` (default
    ``compacted_<epoch>``) and moved to the manual pool; the older ones are removed.

    Each snapshot is the complete state of the workspace, so the newest one already holds
    everything the others led up to, including deletions: a file deleted before the newest
    snapshot stays deleted (Capsem's merge of file sets brought such files back). A full
    manual pool is an error, never an eviction; the snapshots :func:`check_deletable`
    protects are never dropped."""
    if not refs:
        raise UsageError("give at least one checkpoint to compact")
    name = check_name(name if name is not None else f"compacted_{int(time.time())}")
    chosen: dict[str, Snapshot] = {}
    for ref in refs:
        s = resolve_ref(ws, ref)
        chosen[s.id] = s
    ordered = sorted(chosen.values(), key=lambda s: (s.created_ns, s.number or 0))
    keep, drop = ordered[-1], ordered[:-1]
    check_deletable(ws, drop)
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
    return Compaction(kept, drop, len(ordered))
