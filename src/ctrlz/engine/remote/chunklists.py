"""Reading the chunk lists of chunked blobs (:mod:`ctrlz.state.remote.chunks`) off a remote.

Every walk from snapshots to objects (push, pull, verify, gc) reaches a chunked blob's id
first; what it stands for, the chunks, is in its list. One batch of small ranged reads
fetches the lists of every chunked blob a walk reached.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...errors import CorruptObject, RemoteError
from ...state.remote.chunks import CHUNKED, decode_list
from ...state.remote.repo import Location, RemoteIndex, RemoteRepo, pack_key

ChunkList = list[tuple[bytes, int]]


def chunked_among(index: RemoteIndex, oids: Iterable[bytes]) -> list[tuple[bytes, Location]]:
    """The chunked blobs among ``oids``, with where their lists sit."""
    out = []
    for oid in oids:
        loc = index.objects.get(oid)
        if loc is not None and loc.codec == CHUNKED:
            out.append((oid, loc))
    return out


def read_lists(remote: RemoteRepo, wanted: list[tuple[bytes, Location]],
               errors: list[str] | None = None) -> dict[bytes, ChunkList]:
    """The chunk list of each blob of ``wanted``. Damage is raised as :class:`RemoteError`
    naming the pack, or collected in ``errors`` when given (that blob is then left out)."""
    lists: dict[bytes, ChunkList] = {}
    if not wanted:
        return lists
    try:
        for oid, loc, stored in remote.fetch(wanted):
            try:
                lists[oid] = decode_list(oid, loc.size, stored)
            except CorruptObject as exc:
                msg = f"{exc} in {pack_key(loc.pack)}"
                if errors is None:
                    raise RemoteError(f"{remote.url}: {msg}; run `ctrlz verify --remote`"
                                      ) from None
                errors.append(msg)
    except RemoteError as exc:
        if errors is None:
            raise
        errors.append(str(exc))
    return lists


def chunks_of(remote: RemoteRepo, index: RemoteIndex, oids: Iterable[bytes]) -> set[bytes]:
    """Every chunk the chunked blobs among ``oids`` are made of."""
    return {cid for chunks in read_lists(remote, chunked_among(index, oids)).values()
            for cid, _ in chunks}
