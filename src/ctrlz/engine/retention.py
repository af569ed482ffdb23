"""Pools and retention: which snapshots are kept, and which are dropped when.

Pools are fixed by snapshot type (as in Capsem):

* ``auto`` snapshots form a ring of ``auto_max``: the oldest auto snapshot goes first;
* ``manual`` snapshots have a cap of ``manual_max``: taking one over the cap is an error, and no
  existing manual snapshot is ever overwritten;
* ``safety`` and ``tool`` snapshots keep their own rings (``safety_max``, ``tool_max``);
* ``max_count`` caps all snapshots together: the oldest droppable snapshots go, except manual
  ones (the manual pool's promise holds: a snapshot the user took is never dropped to make
  room for the automatic ones, so manual snapshots may keep the total over ``max_count``);
* ``store_cap`` caps the bytes the store's snapshots take on disk (:func:`store_usage`): once
  the store outgrows it, the oldest droppable snapshots go, manual ones included (the disk
  bound comes first), until it is back under ``CAP_FLOOR`` (90%) of the cap, and their
  objects are collected.

``store_cap`` counts only what dropping snapshots can shrink: the catalog, the packs, the loose
objects and the stat cache (``STORE_FILES``). Agent tool-call pre-images (``<store>/toolcalls/``)
have their own budget, ``preimage_cap``, enforced by the tool-call store at every capture; were
they counted here, a flood of pre-images would make retention drop manual snapshots and still
not fit. Session records, the daemon's socket and logs and the lock file do not count either.

Pinned snapshots are never dropped automatically, nor are ``pre-run`` snapshots unless
``delete_initial`` is set, nor the newest snapshot, nor any snapshot the caller protects. The
session protects every snapshot the undo stack names from the rings and ``max_count``, which
bound a count, but from ``store_cap`` only those the next undo and the next redo need
(:meth:`~ctrlz.state.db.oplog.OpLog.needed_next`): deeper undo history goes oldest first with
everything else, so that a store at its cap never drops a snapshot taken a moment ago while
it keeps the safety snapshots of fifty earlier rollbacks. Every decision is a
:class:`PrunePlan` first; ``PrunePlan.execute()`` carries it out.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Collection, Mapping

from ..errors import LimitExceeded
from ..state.store.repository import Repository
from ..state.store.usage import store_usage
from ..types import Snapshot
from .gc import GcReport, collect_garbage, mark

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RINGS = {"auto": "auto_max", "safety": "safety_max", "tool": "tool_max"}
#: how every reason ``store_cap`` gives for a drop begins (``ctrlz status`` looks for it)
OVER_STORE_CAP = "the store is over store_cap"


class Policy(namedtuple("Policy", "auto_max manual_max safety_max tool_max max_count store_cap "
                        "delete_initial", defaults=(10, 12, 10, 50, 100, 5 << 30, False))):
    """The pools' sizes and caps, from the configuration keys of the same names."""

    __slots__ = ()

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> Policy:
        names = cls._fields
        return cls(**{k: values[k] for k in names if k in values})

    def ring(self, type: str) -> int | None:
        name = RINGS.get(type)
        return getattr(self, name) if name else None


class PrunePlan:
    """Snapshots to drop, each with the reason, and how many stay."""

    __slots__ = ("drop", "reasons", "kept", "dry_run", "gc")

    def __init__(self, kept: int = 0, dry_run: bool = False) -> None:
        self.drop: list[Snapshot] = []
        self.reasons: dict[str, str] = {}
        self.kept = kept
        self.dry_run = dry_run
        self.gc: GcReport | None = None

    def __repr__(self) -> str:
        return f"PrunePlan({self.to_json()})"

    def add(self, snap: Snapshot, reason: str) -> None:
        if snap.id not in self.reasons:
            self.drop.append(snap)
            self.reasons[snap.id] = reason
            self.kept -= 1

    def execute(self, repo: Repository, collect: bool = True) -> PrunePlan:
        """Delete the planned snapshots in one transaction, recording what went and why
        (``Catalog.drops``, which ``ctrlz status`` shows), then collect their objects."""
        if self.drop:
            import time

            with repo.lock, repo.catalog.transaction():
                for s in self.drop:
                    repo.catalog.delete_snapshot(s.id)
                repo.catalog.record_drops(
                    [(s.id, s.type, s.label, self.reasons[s.id]) for s in self.drop],
                    time.time_ns())
        if collect:
            self.gc = collect_garbage(repo)
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "prune",
            "dry_run": self.dry_run,
            "dropped": [{"id": s.id, "type": s.type, "label": s.label,
                         "reason": self.reasons[s.id]} for s in self.drop],
            "kept": self.kept,
            "gc": self.gc.to_json() if self.gc else None,
        }


def droppable(snap: Snapshot, policy: Policy, protected: Collection[str]) -> bool:
    if snap.pinned or snap.id in protected:
        return False
    return snap.type != "pre-run" or policy.delete_initial


def check_manual_cap(manual: int, policy: Policy) -> None:
    """Refuse a new manual snapshot over ``manual_max`` (``manual``: how many there are);
    existing ones are never overwritten."""
    if manual >= policy.manual_max:
        raise LimitExceeded(
            f"the manual pool is full ({manual} of manual_max={policy.manual_max}); "
            "remove some with `ctrlz rm SNAP` or `ctrlz prune`, or raise manual_max")


def plan_pools_for(repo: Repository, policy: Policy,
                   protected: Collection[str] = ()) -> PrunePlan:
    """:func:`plan_pools` at a cost that does not grow with the history: the catalog's
    per-type counts tell which pools are over; only those pools' snapshots are read (a ring
    holds tens). Over ``max_count``, the oldest snapshots are read too, a page at a time,
    until the page holds every snapshot that cap drops: a store that sits at its cap (its
    steady state once a pool is raised past ``max_count``) reads a few snapshots per new
    one, not all of them."""
    catalog = repo.catalog
    counts = catalog.type_counts()
    total = sum(counts.values())
    over = [t for t, name in RINGS.items() if counts.get(t, 0) > getattr(policy, name)]
    if not over and total <= policy.max_count:
        return PrunePlan(kept=total)
    newest = catalog.latest()
    newest_id = newest.id if newest else None
    if total <= policy.max_count:
        return plan_pools(catalog.snapshots(types=over), policy, protected,
                          newest=newest_id, total=total)
    # the cap never drops a manual snapshot: its walk reads only the others
    others = total - counts.get("manual", 0)
    page = 2 * (total - policy.max_count) + 16  # room for pinned and protected ones
    while True:
        # the oldest ``page`` come first, in order, with no droppable snapshot missing
        # between them: the cap's walk is the full list's as long as it stays inside them
        snapshots = catalog.oldest(page, over, but=("manual",))
        plan = plan_pools(snapshots, policy, protected, newest=newest_id, total=total)
        if page >= others or _cap_walk_inside(plan, snapshots, page, policy):
            return plan
        page *= 4


def _cap_walk_inside(plan: PrunePlan, snapshots: list[Snapshot], page: int,
                     policy: Policy) -> bool:
    """Did ``max_count``'s walk end among the ``page`` oldest? It did when the cap is met and
    every snapshot it dropped is one of them (the other snapshots read are only the rings'
    pools, which hide the snapshots between them)."""
    if plan.kept > policy.max_count:
        return False
    oldest = {s.id for s in snapshots[:page]} if len(snapshots) > page else None
    if oldest is None:
        return True
    cap = _over_count(policy)
    return all(s.id in oldest for s in plan.drop if plan.reasons[s.id] == cap)


def _over_count(policy: Policy) -> str:
    return f"more than max_count={policy.max_count} snapshots"


def plan_pools(snapshots: list[Snapshot], policy: Policy,
               protected: Collection[str] = (), *, newest: str | None = None,
               total: int | None = None) -> PrunePlan:
    """Rings per type and ``max_count`` (``snapshots`` oldest first). ``snapshots`` may be
    part of the catalog (:func:`plan_pools_for`): the whole of each pool over its ring, and
    under ``max_count`` nothing else, or over it the oldest snapshots too; then ``newest``
    and ``total`` describe the whole catalog."""
    plan = PrunePlan(kept=len(snapshots) if total is None else total)
    if newest is None and total is None:
        newest = snapshots[-1].id if snapshots else None
    keep = set(protected) | ({newest} if newest else set())
    for type, name in RINGS.items():
        cap = getattr(policy, name)
        pool = [s for s in snapshots if s.type == type]
        excess = len(pool) - cap
        for s in pool:
            if excess <= 0:
                break
            if droppable(s, policy, keep):
                plan.add(s, f"{type} ring is full ({name}={cap})")
                excess -= 1
    excess = plan.kept - policy.max_count
    for s in snapshots:
        if excess <= 0:
            break
        # manual snapshots have a cap of their own, and what is under it is never taken back
        if s.type != "manual" and s.id not in plan.reasons and droppable(s, policy, keep):
            plan.add(s, _over_count(policy))
            excess -= 1
    return plan


def plan_prune(snapshots: list[Snapshot], policy: Policy, *, keep: int | None = None,
               older_than_ns: int | None = None, now_ns: int = 0,
               protected: Collection[str] = ()) -> PrunePlan:
    """``--keep N`` / ``--older-than``: both must agree for a snapshot to go. Without either,
    the pool rules."""
    if keep is None and older_than_ns is None:
        return plan_pools(snapshots, policy, protected)
    plan = PrunePlan(kept=len(snapshots))
    newest_first = list(reversed(snapshots))
    for index, s in enumerate(newest_first):
        if index == 0 or not droppable(s, policy, protected):
            continue
        beyond = keep is None or index >= keep
        old = older_than_ns is None or s.created_ns < now_ns - older_than_ns
        if beyond and old:
            why = []
            if keep is not None:
                why.append(f"not among the newest {keep}")
            if older_than_ns is not None:
                why.append("older than the cut-off")
            plan.add(s, " and ".join(why))
    plan.drop.reverse()  # oldest first
    return plan


#: Once the store outgrows ``store_cap``, snapshots go until it is back under this share of
#: it. Every pass collects garbage (a mark of every snapshot's trees, and a repack of the
#: packs that hold dead objects), so a store brought back to just under its cap would pay
#: that at every later snapshot; a tenth of the cap as room makes it one pass per tenth of
#: the cap the workspace grows by.
CAP_FLOOR = 0.9


def enforce_byte_cap(repo: Repository, policy: Policy, protected: Collection[str] = (),
                     usage: Callable[[Repository], int] = store_usage) -> PrunePlan:
    """When the store is over ``store_cap``: collect garbage, and if it is still over
    ``CAP_FLOOR`` of the cap, drop the fewest oldest droppable snapshots that bring it under
    (weighed before anything is dropped, see :func:`_victims`), in one transaction, and
    collect once. Pinned snapshots, the newest and ``protected`` ones stay even if the store
    then does not fit; the tool-call pre-images beside it are never measured here."""
    plan = PrunePlan()
    if usage(repo) > policy.store_cap:
        # reclaim what earlier ring drops left unreachable, and compress the large objects
        # stored as they were (state/store/compact.py), before dropping anything live
        plan.gc = collect_garbage(repo, compact=True)
        floor = int(policy.store_cap * CAP_FLOOR)
        reason = f"{OVER_STORE_CAP}={policy.store_cap} bytes"
        while (need := usage(repo) - floor) > 0:
            victims = _victims(repo, policy, protected, need)
            if not victims:
                break
            step = PrunePlan()
            for v in victims:
                step.add(v, reason)
                plan.add(v, reason)
            step.execute(repo)
            plan.gc = step.gc
    plan.kept = sum(repo.catalog.type_counts().values())
    return plan


def _victims(repo: Repository, policy: Policy, protected: Collection[str],
             need: int) -> list[Snapshot]:
    """The fewest of the oldest droppable snapshots whose dropping frees ``need`` stored
    bytes (all of them, if even that does not): one collection instead of one per dropped
    snapshot, which cost 220 ms a snapshot on a store of git's source sitting at its cap."""
    weighed = freed_by_dropping(repo, policy, protected)
    for count, (_, freed) in enumerate(weighed, 1):
        if freed >= need:
            return [s for s, _ in weighed[:count]]
    return [s for s, _ in weighed]


def freed_by_dropping(repo: Repository, policy: Policy,
                      protected: Collection[str] = ()) -> list[tuple[Snapshot, int]]:
    """Each droppable snapshot, oldest first, with the stored bytes that dropping it and
    every droppable one before it would free. One mark of the store tells: first every
    snapshot that stays, then the droppable ones newest first, so that what each adds is
    what it holds that nothing newer or kept does; the oldest ``j`` free the sum of the
    first ``j`` of those shares, exactly (a collection then removes just those objects)."""
    snapshots = repo.catalog.snapshots()
    if not snapshots:
        return []
    keep = set(protected) | {snapshots[-1].id}
    droppable_ones = [s for s in snapshots if droppable(s, policy, keep)]
    if not droppable_ones:
        return []
    lengths = {row[0]: row[3] for row in repo.catalog.object_rows()}
    live: set[bytes] = set()
    for s in snapshots:
        if not droppable(s, policy, keep):
            mark(repo, s.root, live)
    shares = [sum(lengths.get(oid, 0) for oid in mark(repo, s.root, live))
              for s in reversed(droppable_ones)]
    weighed, freed = [], 0
    for s, share in zip(droppable_ones, reversed(shares), strict=True):
        freed += share
        weighed.append((s, freed))
    return weighed
