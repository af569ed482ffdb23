"""Damaged copies on a remote: finding them (``push --repair``) and reading around them.

A push relies on every object the remote index names: a name proves the key exists, not that
its bytes are good. ``push --repair`` therefore downloads and checks every object it would
rely on; one whose copy fails is sent again from the local store (checked before it leaves)
into a new pack, as if the remote lacked it. The damaged copy stays where it is (its pack
holds other objects, and gc keeps a pack while any object in it is reachable), so readers
(pull, clone, ``verify --remote``) that meet a damaged copy try the object's other copies
before they call it damaged: :func:`good_copy`.

A chunked blob's list is not re-checked here (reading it already decodes it); its chunks are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import closing
from typing import TypeVar

from ...errors import CorruptObject, RemoteError
from ...state.remote.chunks import CHUNKED
from ...state.remote.repo import Location, RemoteIndex, RemoteRepo, check_stored

T = TypeVar("T")


def damaged_copies(remote: RemoteRepo, index: RemoteIndex,
                   relied: dict[bytes, set[bytes]]) -> set[bytes]:
    """The objects among ``relied`` (pack -> objects a push relies on there) whose copy in
    that pack does not decode to its id, or cannot be read at all (a truncated pack)."""

    def ok(oid: bytes, loc: Location, stored: bytes) -> bool:
        try:
            check_stored(remote.digest, oid, loc.size, loc.codec, stored)
        except (RemoteError, CorruptObject):
            return False
        return True

    bad: set[bytes] = set()
    for pack, oids in relied.items():
        wanted = [(oid, loc) for oid in oids
                  if (loc := index.location_in(oid, pack)) is not None and loc.codec != CHUNKED]
        try:
            with closing(remote.fetch_each(wanted, ok)) as fetched:
                for oid, _loc, _stored, good in fetched:
                    if not good:
                        bad.add(oid)
        except RemoteError:  # the pack is truncated or unreadable: none of it is relied on
            bad.update(oid for oid, _ in wanted)
    return bad


def good_copy(remote: RemoteRepo, index: RemoteIndex, oid: bytes, damaged: Location,
              work: Callable[[bytes, Location, bytes], T]
              ) -> tuple[Location, bytes, T] | None:
    """Another copy of ``oid`` (not in ``damaged``'s pack) that ``work`` accepts: it returns
    the checked result, or raises / returns an exception for a bad copy. ``None`` when no
    other copy is good."""
    for loc in _copies(index, oid):
        if loc.pack == damaged.pack:
            continue
        try:
            for _oid, _loc, stored, result in remote.fetch_each([(oid, loc)], work):
                if result is not None and not isinstance(result, Exception):
                    return loc, stored, result
        except (RemoteError, CorruptObject):
            continue
    return None


def _copies(index: RemoteIndex, oid: bytes) -> Iterable[Location]:
    first = index.objects.get(oid)
    if first is not None:
        yield first
    yield from index.others.get(oid, ())


def checked(remote: RemoteRepo) -> Callable[[bytes, Location, bytes], bytes]:
    """A ``work`` for :func:`good_copy`: the raw bytes of a copy that checks out."""
    return lambda oid, loc, stored: check_stored(remote.digest, oid, loc.size, loc.codec,
                                                 stored)
