"""Garbage collection: drop objects no snapshot reaches, and repack what is left.

``ctrlz gc`` (``compact=True``) also compresses the large objects a snapshot stored as they
were because the disk was faster than the compressor (:mod:`ctrlz.state.store.compact`) and
regroups small objects stored one by one (an older ctrlz's packs, :mod:`ctrlz.state.store.groups`),
and so
does retention once the store is over ``store_cap``, before it drops a snapshot; the other
collections retention runs inside a snapshot do not, as someone waits for those.

This module decides what is live (every object some snapshot's tree reaches);
:func:`ctrlz.state.store.sweep.sweep` reclaims the rest, the same sweep the tool-call store uses.
Safe against crashes at any point: live objects are copied into a new pack and fsynced; one
catalog transaction then points the index at the new pack and forgets the dead rows; only after
that commit are old packs and dead loose files deleted. A crash before the commit leaves a stray
new pack (removed by the next writer); a crash after it leaves stray old packs (likewise).
Readers in other processes never read a deleted pack's bytes under a new pack's id: pack ids are
not reused, and a read that finds its pack gone looks the object up again.
"""

from __future__ import annotations

from ..state import meter
from ..state.store.repository import Repository
from ..state.store.sweep import sweep
from ..state.trees import DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class GcReport:
    """What one collection did (``removed_bytes``: stored bytes reclaimed)."""

    __slots__ = ("removed_objects", "removed_bytes", "repacked_packs", "kept_objects",
                 "strays_removed", "compressed_objects", "compressed_saved_bytes")

    def __init__(self, removed_objects: int = 0, removed_bytes: int = 0,
                 repacked_packs: int = 0, kept_objects: int = 0,
                 strays_removed: int = 0, compressed_objects: int = 0,
                 compressed_saved_bytes: int = 0) -> None:
        self.removed_objects = removed_objects
        self.removed_bytes = removed_bytes
        self.repacked_packs = repacked_packs
        self.kept_objects = kept_objects
        self.strays_removed = strays_removed
        #: large objects stored uncompressed that were compressed, and the bytes that gave back
        self.compressed_objects = compressed_objects
        self.compressed_saved_bytes = compressed_saved_bytes

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GcReport):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"GcReport({self.to_json()})"

    def to_json(self) -> dict[str, Any]:
        return {"removed_objects": self.removed_objects, "removed_bytes": self.removed_bytes,
                "repacked_packs": self.repacked_packs, "kept_objects": self.kept_objects,
                "strays_removed": self.strays_removed,
                "compressed_objects": self.compressed_objects,
                "compressed_saved_bytes": self.compressed_saved_bytes}


def reachable(repo: Repository) -> set[bytes]:
    live: set[bytes] = set()
    bar = meter.current()
    if bar is not None:  # a count of the trees marked; the total is not known in advance
        bar.start("Collect garbage", unit="trees")
    for s in repo.catalog.snapshots():
        mark(repo, s.root, live, bar)
    return live


def mark(repo: Repository, root: bytes, live: set[bytes],
         bar: meter.Meter | None = None) -> list[bytes]:
    """Add to ``live`` every object the tree ``root`` reaches that is not in it yet, and
    return those: marking snapshots one after another tells what each holds that the ones
    before it do not (``retention`` weighs what dropping snapshots would free this way)."""
    added: list[bytes] = []
    stack = [root]
    while stack:
        oid = stack.pop()
        if oid in live:
            continue
        live.add(oid)
        added.append(oid)
        if bar is not None:
            bar.files += 1
        for e in repo.tree(oid):
            if e.kind == DIR:
                stack.append(e.oid)
            elif e.oid not in live:
                live.add(e.oid)
                added.append(e.oid)
    return added


def collect_garbage(repo: Repository, *, compact: bool = False) -> GcReport:
    report = GcReport()
    with repo.lock:
        report.strays_removed = len(repo.recover(force=True))
        done = sweep(repo.objects, reachable(repo), regroup=compact)
        report.removed_objects = done.removed_objects
        report.removed_bytes = done.removed_bytes
        report.repacked_packs = done.repacked_packs
        report.kept_objects = done.kept_objects
        if compact:
            from ..state.store.compact import compact as compress_stored

            squeezed = compress_stored(repo.objects)
            report.compressed_objects = squeezed.objects
            report.compressed_saved_bytes = squeezed.saved_bytes
    return report
