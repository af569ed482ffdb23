"""Garbage collection: drop objects no snapshot reaches, and repack what is left.

Safe against crashes at any point: live objects are copied into a new pack and fsynced; one
catalog transaction then points the index at the new pack and forgets the dead rows; only after
that commit are old packs and dead loose files deleted. A crash before the commit leaves a stray
new pack (removed by the next writer); a crash after it leaves stray old packs (likewise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..state import failpoints
from ..state.repository import Repository
from ..state.trees import DIR


@dataclass
class GcReport:
    removed_objects: int = 0
    removed_bytes: int = 0  # stored bytes reclaimed
    repacked_packs: int = 0
    kept_objects: int = 0
    strays_removed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"removed_objects": self.removed_objects, "removed_bytes": self.removed_bytes,
                "repacked_packs": self.repacked_packs, "kept_objects": self.kept_objects,
                "strays_removed": self.strays_removed}


def reachable(repo: Repository) -> set[bytes]:
    live: set[bytes] = set()
    stack = [s.root for s in repo.catalog.snapshots()]
    while stack:
        oid = stack.pop()
        if oid in live:
            continue
        live.add(oid)
        for e in repo.tree(oid):
            if e.kind == DIR:
                stack.append(e.oid)
            else:
                live.add(e.oid)
    return live


def collect_garbage(repo: Repository) -> GcReport:
    report = GcReport()
    with repo.lock:
        report.strays_removed = len(repo.recover())
        live = reachable(repo)
        rows = repo.catalog.object_rows()
        dead = [r for r in rows if r[0] not in live]
        report.kept_objects = len(rows) - len(dead)
        if not dead:
            return report
        dead_packs = {r[1] for r in dead if r[1] is not None}
        moving = [r for r in rows if r[1] in dead_packs and r[0] in live]
        writer = repo.objects.writer(fresh=True)  # the live ids move to a new pack
        for oid, pack, offset, length, size, codec in moving:
            stored = repo.objects.read_stored(pack, offset, length)
            repo.objects.check_stored(oid, stored, codec, size)
            writer.put_encoded(oid, size, codec, stored)
        failpoints.hit("gc-before-commit")
        packs = repo.catalog.packs()
        with repo.catalog.transaction():
            repo.catalog.delete_objects(r[0] for r in dead)
            repo.catalog.delete_objects(r[0] for r in moving)
            writer.commit(repo.catalog)
            for pack_id in dead_packs:
                repo.catalog.delete_pack(pack_id)
        failpoints.hit("gc-after-commit")
        repo.objects.close()
        for pack_id in dead_packs:
            name = packs[pack_id][0]
            try:
                (repo.objects.packs_dir / name).unlink()
            except FileNotFoundError:
                pass
        for oid, pack, _offset, length, _size, _codec in dead:
            report.removed_objects += 1
            report.removed_bytes += length
            if pack is None:
                try:
                    repo.objects.loose_path(oid).unlink()
                except FileNotFoundError:
                    pass
        report.repacked_packs = len(dead_packs)
    return report
