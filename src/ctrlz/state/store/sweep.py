"""Reclaiming a store's dead objects, and finding what a crashed writer left behind.

The one sweep behind both collectors (the workspace store's gc and the tool-call store's
compaction); each decides for itself what is live. Re-exported by :mod:`ctrlz.state.store.objects`.
"""

from __future__ import annotations

import os
from collections.abc import Container

from .. import failpoints
from ..fsio.atomic import TEMP_PREFIX
from .groups import MEMBER_MAX

TYPE_CHECKING = False

if TYPE_CHECKING:
    from pathlib import Path

    from ..db.catalog import ObjectRow
    from .objects import ObjectStore


class Sweep:
    """What :func:`sweep` did. A plain class (agent hooks import this module)."""

    __slots__ = ("removed_objects", "removed_bytes", "repacked_packs", "kept_objects")

    def __init__(self) -> None:
        self.removed_objects = 0
        self.removed_bytes = 0  # stored bytes reclaimed
        self.repacked_packs = 0
        self.kept_objects = 0


def sweep(store: ObjectStore, live: Container[bytes], *, regroup: bool = False) -> Sweep:
    """Forget every object not in ``live`` and reclaim its bytes. Call with the store's lock.

    The workspace store's gc decides ``live`` by walking snapshots, the tool-call store's
    compaction asks its entries. A pack with any dead object is rewritten: its live objects
    move to a new pack, so dead bytes never linger in a pack kept alive by one live neighbour.
    Crash-safe in the same order as a snapshot: the new pack is fsynced, one transaction
    re-points the index and drops the dead rows, and only after that commit are old packs and
    dead loose files (clones included: deleting a clone frees only the blocks nothing else
    shares) deleted; a crash before it leaves a stray new pack, a crash after it stray old
    files, both removed by the next writer's recovery. Pack ids are not reused (``packs.id``
    is ``AUTOINCREMENT``), so a reader in another process that cached an old pack's id finds
    it gone and looks again.

    Small objects that move are grouped anew (:mod:`ctrlz.state.store.groups`). ``regroup``
    (``ctrlz gc``): packs holding small objects stored one by one, as an older ctrlz stored
    them all and a pull stores what it receives, are rewritten too, live or not, so they
    take the grouped form; a pack is rewritten for that once, since afterwards its objects
    are grouped."""
    result = Sweep()
    rows = store.catalog.object_rows()
    dead = [r for r in rows if r[0] not in live]
    result.kept_objects = len(rows) - len(dead)
    dead_packs = {r[1] for r in dead if r[1] is not None}
    if regroup:
        dead_packs |= _ungrouped_packs(rows)
    if not dead and not dead_packs:
        return result
    moving = [r for r in rows if r[1] in dead_packs and r[0] in live]
    from .. import meter  # here: agent hooks load this module, and never draw a bar

    bar = meter.current()
    if bar is not None:  # the copy is most of a collection's time
        bar.start("Repack", len(moving), sum(r[3] for r in moving), unit="objects")
    writer = store.writer(fresh=True)  # the live ids move to a new pack
    # the deletions after the commit are a writer's work too: the store's "writing" mark must
    # outlive the commit (which takes it down once every writer has committed) until they
    # are done, so that a crash between the two leaves the next writer's recovery the old
    # files to remove, and not a store that says it holds no strays
    store.writer_started()
    try:
        for oid, pack, offset, length, size, codec in moving:
            assert pack is not None
            if size <= MEMBER_MAX:  # regrouped (read checks it): an old pack's singles too
                writer.put_small(oid, store.read(oid))
            else:
                stored = store.read_stored(pack, offset, length)
                store.check_stored(oid, stored, codec, size)
                writer.put_encoded(oid, size, codec, stored)
            if bar is not None:
                bar.files += 1
                bar.bytes += length
        failpoints.hit("gc-before-commit")
        packs = store.catalog.packs()
        with store.catalog.transaction():
            store.catalog.delete_objects(r[0] for r in dead)
            store.catalog.delete_objects(r[0] for r in moving)
            writer.commit(store.catalog)
            for pack_id in dead_packs:
                store.catalog.delete_pack(pack_id)
    except BaseException:
        # nothing was deleted yet and the index is as it was: the new pack is the one file
        # that could be a stray, and a writer that fails removes its own
        store.writer_done(aborted=not writer.abort())
        raise
    failpoints.hit("gc-after-commit")
    store.close()
    try:
        for pack_id in dead_packs:
            try:
                os.unlink(os.path.join(store._packs, packs[pack_id][0]))
            except FileNotFoundError:
                pass
        for oid, pack, _offset, length, _size, _codec in dead:
            result.removed_objects += 1
            result.removed_bytes += length
            if pack is None:
                try:
                    os.unlink(store.loose_path(oid))
                except FileNotFoundError:
                    pass
    except BaseException:
        store.writer_done(aborted=True)  # what is left is swept by the next writer
        raise
    store.writer_done(aborted=False)
    result.repacked_packs = len(dead_packs)
    return result


def _ungrouped_packs(rows: list[ObjectRow]) -> set[int]:
    """Packs with two or more small objects stored one by one: regrouping them gains. (A
    writer stores at most one small object alone per pack, the last one given when it is
    the only one left, so a pack of this ctrlz's snapshots is not rewritten again and again.)"""
    singles: dict[int, int] = {}
    for _, pack, _, _, size, codec in rows:
        if pack is not None and codec in (0, 1) and size <= MEMBER_MAX:  # raw, zstd
            singles[pack] = singles.get(pack, 0) + 1
    return {pack for pack, n in singles.items() if n >= 2}


def stray_files(store: ObjectStore) -> list[Path]:
    """Files in the store that no committed index row references: leftovers of a crash."""
    packs = {name for name, _ in store.catalog.packs().values()}
    loose = {store.loose_path(bytes(r[0])) for r in store.catalog.db.execute(
        "SELECT oid FROM objects WHERE pack IS NULL")}
    strays: list[Path] = []
    if store.packs_dir.is_dir():
        strays += [p for p in store.packs_dir.iterdir() if p.name not in packs]
    if store.loose_dir.is_dir():
        for sub in store.loose_dir.iterdir():
            if sub.name.startswith(TEMP_PREFIX):
                strays.append(sub)
            elif sub.is_dir():
                strays += [p for p in sub.iterdir() if p not in loose]
    return strays
