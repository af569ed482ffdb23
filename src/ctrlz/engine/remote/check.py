"""``ctrlz verify --remote``: everything every ref names is there and hashes to its id.

Like restic's ``check --read-data``: every index is read and matched with the pack listing
(an index naming a pack that does not exist, or bytes past its end, is damage), every snapshot
of every workspace is walked, and every object it reaches is downloaded, unsealed, decoded and
re-hashed. Packs no ref reaches are counted, not reported as damage: they are what an
interrupted push leaves, and ``gc --remote`` collects them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import CorruptObject, RemoteError
from ...state.remote.chunks import CHUNKED
from ...state.remote.repo import Location, RemoteIndex, RemoteRepo, check_stored, pack_key
from ...state.trees import Entry, decode_tree
from .chunklists import read_lists
from .refs import entries
from .repair import checked, good_copy
from .walk import walk_levels


@dataclass
class RemoteVerifyReport:
    remote: str
    workspaces: int = 0
    snapshots: int = 0
    packs: int = 0
    objects: int = 0
    bytes: int = 0
    #: packs no snapshot reaches; ``None`` when the walk could not be completed (a tree was
    #: missing or damaged): what lies below it is unknown, so no pack may be called garbage
    unreferenced_packs: int | None = 0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {"type": "verify", "remote": self.remote, "ok": self.ok,
                "workspace_count": self.workspaces, "snapshots": self.snapshots,
                "packs": self.packs, "objects": self.objects, "bytes": self.bytes,
                "unreferenced_packs": self.unreferenced_packs, "errors": self.errors}


def pack_listing(remote: RemoteRepo) -> dict[bytes, tuple[int, float]]:
    """Every pack file on the remote: id -> (size, modification time)."""
    out = {}
    for key, size, mtime in remote.backend.list("data/"):
        name = key.rpartition("/")[2]
        try:
            out[bytes.fromhex(name)] = (size, mtime)
        except ValueError:
            continue
    return out


def all_roots(remote: RemoteRepo) -> tuple[list[tuple[str, bytes]], int]:
    """(snapshot id, root) of every snapshot of every workspace, and the workspace count."""
    roots = []
    spaces = remote.workspaces()
    for ws in spaces:
        doc, _ = remote.read_ref(ws)
        for e in entries(doc):
            try:
                roots.append((str(e["id"]), bytes.fromhex(e["root"])))
            except (KeyError, ValueError, TypeError):
                raise RemoteError(f"{remote.url}: refs/{ws} is damaged: snapshot "
                                  f"{e.get('id')} has no valid root") from None
    return roots, len(spaces)


def remote_tree_fetcher(remote: RemoteRepo, index: RemoteIndex, errors: list[str] | None,
                        local: Callable[[bytes], list[Entry] | None] | None = None
                        ) -> Callable[[list[bytes]], dict[bytes, list[Entry]]]:
    """Fetches a level of trees (from ``local`` first when given); damage is raised, or
    collected in ``errors`` when given (that tree then counts as empty)."""

    def fetch(level: list[bytes]) -> dict[bytes, list[Entry]]:
        got: dict[bytes, list[Entry]] = {}
        wanted: list[tuple[bytes, Location]] = []
        for oid in level:
            mine = local(oid) if local is not None else None
            if mine is not None:
                got[oid] = mine
                continue
            loc = index.objects.get(oid)
            if loc is None:
                msg = f"tree {oid.hex()[:16]} is missing from the remote"
                if errors is None:
                    raise RemoteError(f"{remote.url}: {msg}")
                errors.append(msg)
                got[oid] = []
                continue
            wanted.append((oid, loc))
        for oid, loc, stored in _fetch_tolerant(remote, wanted, errors):
            try:
                try:
                    data = check_stored(remote.digest, oid, loc.size, loc.codec, stored)
                except RemoteError:
                    alt = good_copy(remote, index, oid, loc, checked(remote))
                    if alt is None:
                        raise
                    data = alt[2]
                got[oid] = decode_tree(data)
            except (RemoteError, CorruptObject) as exc:
                msg = f"tree {oid.hex()[:16]} in {pack_key(loc.pack)}: {exc}"
                if errors is None:
                    raise RemoteError(f"{remote.url}: {msg}") from None
                errors.append(msg)
                got[oid] = []
        for oid, _loc in wanted:
            got.setdefault(oid, [])
        return got

    return fetch


def _fetch_tolerant(remote: RemoteRepo, wanted: list[tuple[bytes, Location]],
                    errors: list[str] | None):  # type: ignore[no-untyped-def]
    """Fetch pack by pack, so that one damaged pack is reported and the rest still read."""
    if errors is None:
        yield from remote.fetch(wanted)
        return
    by_pack: dict[bytes, list[tuple[bytes, Location]]] = {}
    for oid, loc in wanted:
        by_pack.setdefault(loc.pack, []).append((oid, loc))
    for pack, items in by_pack.items():
        try:
            yield from remote.fetch(items)
        except RemoteError as exc:
            errors.append(f"{pack_key(pack)}: {exc}")


def verify_remote(remote: RemoteRepo, index: RemoteIndex,
                  progress: Callable[[int], None] | None = None) -> RemoteVerifyReport:
    report = RemoteVerifyReport(remote.url)
    index.avoid(remote.condemned())  # read the copies gc keeps (a repacked pack may go)
    listing = pack_listing(remote)
    report.packs = len(listing)
    for pack, (_kind, end) in index.packs.items():
        if pack in listing and listing[pack][0] < end:
            report.errors.append(f"{pack_key(pack)} is truncated ({listing[pack][0]} bytes, "
                                 f"its index needs {end})")
    roots, report.workspaces = all_roots(remote)
    report.snapshots = len(roots)
    trees, blobs = walk_levels([r for _, r in roots],
                               remote_tree_fetcher(remote, index, report.errors))
    walk_complete = not report.errors
    live_packs: set[bytes] = set()
    wanted = []
    chunked = []
    for oid in blobs:
        loc = index.objects.get(oid)
        if loc is None:
            report.errors.append(f"object {oid.hex()[:16]} is missing from the remote")
            continue
        (chunked if loc.codec == CHUNKED else wanted).append((oid, loc))
    for oid in trees:
        if oid in index.objects:
            live_packs.add(index.objects[oid].pack)
    report.objects = len(trees)
    for oid, loc, stored in _fetch_tolerant(remote, wanted, report.errors):
        live_packs.add(loc.pack)
        try:
            check_stored(remote.digest, oid, loc.size, loc.codec, stored)
        except RemoteError as exc:
            alt = good_copy(remote, index, oid, loc, checked(remote))
            if alt is None:
                report.errors.append(f"{pack_key(loc.pack)}: {exc}")
                continue
            live_packs.add(alt[0].pack)
        report.objects += 1
        report.bytes += loc.size
        if progress:
            progress(loc.size)
    _verify_chunked(remote, index, chunked, report, live_packs, progress)
    report.unreferenced_packs = len((set(listing) | index.dangling) - live_packs) \
        if walk_complete else None
    return report


def _verify_chunked(remote: RemoteRepo, index: RemoteIndex,
                    chunked: list[tuple[bytes, Location]], report: RemoteVerifyReport,
                    live_packs: set[bytes], progress: Callable[[int], None] | None) -> None:
    """Check chunked blobs one at a time: each chunk against its id and its length in the
    list, then the chunks in order against the blob's id (so at most one blob is in memory,
    as a push holds one)."""
    lists = read_lists(remote, chunked, report.errors)
    for oid, loc in chunked:
        chunks = lists.get(oid)
        if chunks is None:
            continue
        live_packs.add(loc.pack)
        wanted, missing = [], False
        for cid in dict.fromkeys(cid for cid, _ in chunks):
            cloc = index.objects.get(cid)
            if cloc is None:
                report.errors.append(f"chunk {cid.hex()[:16]} of object {oid.hex()[:16]} is "
                                     "missing from the remote")
                missing = True
            else:
                wanted.append((cid, cloc))
        got: dict[bytes, bytes] = {}
        for cid, cloc, stored in _fetch_tolerant(remote, wanted, report.errors):
            live_packs.add(cloc.pack)
            try:
                got[cid] = check_stored(remote.digest, cid, cloc.size, cloc.codec, stored)
            except RemoteError as exc:
                alt = good_copy(remote, index, cid, cloc, checked(remote))
                if alt is None:
                    report.errors.append(f"{pack_key(cloc.pack)}: {exc}")
                else:
                    got[cid] = alt[2]
        if missing or len(got) != len(wanted):
            continue
        hasher = remote.new_hasher()
        for cid, n in chunks:
            if len(got[cid]) != n:
                report.errors.append(f"chunk {cid.hex()[:16]} of object {oid.hex()[:16]} is "
                                     "not as long as its list says")
                break
            hasher.update(got[cid])
        else:
            if hasher.digest() != oid:
                report.errors.append(f"object {oid.hex()[:16]} put together from its chunks "
                                     "does not match its id")
                continue
            report.objects += 1 + len(wanted)
            report.bytes += loc.size
            if progress:
                progress(loc.size)
