"""Repacking for ``gc --remote``: copy the live objects out of mostly-garbage packs.

A pack stays while any one object in it is live, so a pack whose snapshots were forgotten
but which also holds one file still in use keeps all its bytes. Like restic's prune, gc copies
the live objects of such a pack into a new pack, and records in ``gc/state`` that the old pack
is *superseded* by the new ones. From then on the old pack counts as live only for objects the
new packs do not hold, so the normal rule condemns it and, a grace period later, deletes it.

Why this keeps the rule (``docs/remote.md``) whole:

* the new packs are uploaded (pack, then index) before the state names them, and they are
  young, so nothing condemns them; the old pack is condemned only in the same compare-and-swap
  write that records it superseded;
* at deletion time gc checks again, object by object, that every object some snapshot
  reaches in the old pack sits in a replacement that still exists and is not condemned; an
  object a push made live meanwhile (one that was garbage when gc copied) keeps the old pack
  live, so it is forgiven, not deleted;
* a push or pull locates objects outside condemned packs wherever another copy exists
  (:meth:`~ctrlz.state.remote.repo.RemoteIndex.avoid`); a push that relied on the old pack
  before it was condemned wrote its ref long before the deletion (the pusher's half of the
  rule), and the objects it names are in the replacements.
"""

from __future__ import annotations

import os

from ...errors import CorruptObject, RemoteError
from ...state.remote.chunks import CHUNKED, decode_list
from ...state.remote.repo import (
    PACK_HEAD,
    PACK_TARGET,
    Location,
    RemoteIndex,
    RemoteRepo,
    check_stored,
    index_key,
    pack_key,
)

#: a pack whose live objects fill less than this share of it is repacked ...
REPACK_BELOW = 0.5
#: ... if that frees at least this much
REPACK_MIN_GARBAGE = 256 << 10


def live_packs(index: RemoteIndex, reached: set[bytes], superseded: dict[str, list[str]],
               condemned: dict[str, float]) -> set[bytes]:
    """Packs holding an object some snapshot reaches that no replacement of theirs (existing,
    not condemned) also holds."""
    live = set()
    for pack, oids in index.pack_objects.items():
        hits = [o for o in oids if o in reached]
        if not hits:
            continue
        held: set[bytes] = set()
        for rep in superseded.get(pack.hex(), ()):
            new = _id(rep)
            if new and new in index.packs and rep not in condemned:
                held.update(index.pack_objects.get(new, ()))
        if not held.issuperset(hits):
            live.add(pack)
    return live


def candidates(index: RemoteIndex, reached: set[bytes], live: set[bytes],
               condemned: dict[str, float], superseded: dict[str, list[str]],
               listing: dict[bytes, tuple[int, float]], now: float, grace: float
               ) -> list[bytes]:
    """Live packs, older than the grace period and neither condemned nor already repacked,
    whose live objects fill less than ``REPACK_BELOW`` of them."""
    out = []
    for pack in sorted(live):
        key = pack.hex()
        if key in condemned or key in superseded or pack not in listing:
            continue
        size, mtime = listing[pack]
        if now - mtime < grace:
            continue
        used = 0
        for oid in index.pack_objects[pack]:
            if oid in reached:
                loc = index.location_in(oid, pack)
                used += loc.length if loc is not None else 0
        garbage = size - PACK_HEAD - used
        if garbage >= REPACK_MIN_GARBAGE and used < REPACK_BELOW * size:
            out.append(pack)
    return out


def repack(remote: RemoteRepo, index: RemoteIndex, reached: set[bytes],
           packs: list[bytes]) -> dict[str, list[str]]:
    """Copy the live objects of ``packs`` into new packs (a random salt each, so never the
    bytes of an old pack), each uploaded before its index, and add them to ``index``.
    Returns old pack -> its replacements, for the gc state. Every copied object is checked
    against its id first: gc never spreads damage."""
    by_kind: dict[bytes, dict[bytes, Location]] = {}
    sources: dict[bytes, list[bytes]] = {}
    for pack in packs:
        kind = index.packs[pack][0]
        sources.setdefault(kind, []).append(pack)
        for oid in index.pack_objects[pack]:
            loc = index.location_in(oid, pack)
            if oid in reached and loc is not None:
                by_kind.setdefault(kind, {}).setdefault(oid, loc)
    out: dict[str, list[str]] = {}
    for kind, wanted in by_kind.items():
        made: list[str] = []
        batch: list[tuple[bytes, int, int, bytes]] = []
        size = 0
        for oid, loc, stored in remote.fetch(wanted.items()):
            if loc.codec == CHUNKED:  # a chunk list: its chunks are checked on their own
                try:
                    decode_list(oid, loc.size, stored)
                except CorruptObject as exc:
                    raise RemoteError(f"{remote.url}: {exc} in {pack_key(loc.pack)}; gc "
                                      "stopped; run `ctrlz verify --remote`") from None
            else:
                check_stored(remote.digest, oid, loc.size, loc.codec, stored)
            batch.append((oid, loc.size, loc.codec, stored))
            size += len(stored)
            if size >= PACK_TARGET:
                made.append(_upload(remote, index, kind, batch))
                batch, size = [], 0
        if batch:
            made.append(_upload(remote, index, kind, batch))
        for pack in sources.get(kind, ()):
            out[pack.hex()] = made
    return out


def _upload(remote: RemoteRepo, index: RemoteIndex, kind: bytes,
            batch: list[tuple[bytes, int, int, bytes]]) -> str:
    pack, body, raw_index, entries = remote.build_pack(kind, batch, os.urandom(8))
    remote.backend.put_new(pack_key(pack), body)
    remote.backend.put_new(index_key(pack), raw_index)  # only after its pack
    index.add(pack, kind, entries)
    return pack.hex()


def _id(key: object) -> bytes:
    try:
        return bytes.fromhex(key) if isinstance(key, str) else b""
    except ValueError:
        return b""  # not a pack id: names nothing
