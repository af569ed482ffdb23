"""Pulling snapshots: fetch exactly the objects the local store lacks, then commit them all.

Trees first, one directory level per round (a tree the local store already holds is not
entered: locally, a stored tree always comes with everything below it), then the file contents
nobody here has. Every object is checked against its id as it arrives, and staged in a new pack
that nothing references; one catalog transaction then adds the objects and the snapshot rows
together, under the store's writer lock. A corrupt, truncated or missing object stops the pull
with one line naming it and its pack, and nothing is added; a crash leaves only files the next
writer's recovery removes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import CorruptObject, RemoteError
from ...state.interchange.portable import from_record
from ...state.interchange.transfer import ObjectSink, commit_received, receiving
from ...state.remote.chunks import CHUNKED
from ...state.remote.repo import Location, RemoteIndex, RemoteRepo, check_stored, pack_key
from ...state.store.objects import CLONE
from ...state.store.packs import pwrite_all
from ...state.store.repository import Repository
from ...state.trees import FILE, Entry, decode_tree
from ...types import Snapshot
from ..verify import size_problem, top_tree_problem
from .chunklists import read_lists
from .repair import checked, good_copy
from .walk import walk_levels


@dataclass
class PullReport:
    remote: str
    pulled: list[Snapshot] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    objects: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"type": "pull", "remote": self.remote, "pulled": [s.id for s in self.pulled],
                "already_here": self.already, "objects_fetched": self.objects,
                "bytes_fetched": self.bytes}


def locate(index: RemoteIndex, oid: bytes, remote: RemoteRepo, what: str) -> Location:
    loc = index.objects.get(oid)
    if loc is None:
        raise RemoteError(f"{remote.url}: object {oid.hex()[:16]} needed by {what} is missing "
                          "from the remote; run `ctrlz verify --remote` (nothing was pulled)")
    return loc


def fetch_checked(remote: RemoteRepo, wanted: list[tuple[bytes, Location]], sink: ObjectSink,
                  accept: Callable[[bytes, Location, bytes, Any], None],
                  raw: bool = True, write_loose: bool = False,
                  index: RemoteIndex | None = None) -> None:
    """Fetch objects, check each against its id on the download threads
    (:meth:`ObjectSink.check`), and hand it to ``accept`` with its raw bytes (``raw``; else
    only a clone's, which staging needs: a 2 GB clone keeps one form of each file in memory,
    not two); any damage names the object and its pack.

    ``write_loose``: an object stored loose (large, or a clone) is also written to its temp
    file there (:meth:`ObjectSink.write_loose`), and ``accept`` gets that file's
    ``(path, length)`` instead of bytes: a clone's disk writes then run beside its downloads,
    not one after another on this thread.

    ``index``: an object whose copy is damaged is read from another copy, if one checks out
    (``push --repair`` uploads one: :mod:`.repair`)."""

    def check(oid: bytes, loc: Location, stored: bytes) -> Any:
        try:
            data = sink.check(oid, loc.size, loc.codec, stored)
        except CorruptObject as exc:
            return exc  # raised below, in order, with the pack named
        if write_loose:
            written = sink.write_loose(oid, loc.size, loc.codec, stored, data)
            if written is not None:
                return written
        return data if raw or loc.codec == CLONE else b""

    with closing(remote.fetch_each(wanted, check)) as fetched:
        # closing: on an error below, the download threads finish (and their temp files are
        # down) before the caller's clean-up sweeps the store
        for oid, loc, stored, data in fetched:
            if isinstance(data, CorruptObject) or data is None:
                alt = good_copy(remote, index, oid, loc, check) if index is not None else None
                if alt is not None:
                    loc, stored, data = alt
                    accept(oid, loc, stored, data)
                    continue
                raise RemoteError(f"{remote.url}: {data} in {pack_key(loc.pack)}; the remote "
                                  "copy is damaged (run `ctrlz verify --remote`); nothing was "
                                  "pulled")
            accept(oid, loc, stored, data)


def pull(repo: Repository, remote: RemoteRepo, records: Sequence[dict[str, Any]],
         cache: Path | None, progress: Callable[[int], None] | None = None) -> PullReport:
    """Add the snapshots of ``records`` (ref entries) that this store lacks, with their
    objects: all of them or none."""
    report = PullReport(remote.url)
    if remote.algorithm != repo.algorithm:
        raise RemoteError(f"{remote.url} holds {remote.algorithm} object ids and this store "
                          f"uses {repo.algorithm}; it cannot be pulled here")
    with repo.lock:
        repo.recover()
        fresh: list[Snapshot] = []
        for rec in records:
            try:
                snap = from_record(rec)
            except CorruptObject as exc:
                raise RemoteError(f"{remote.url}: {exc}") from None
            mine = repo.catalog.snapshot(snap.id)
            if mine is None:
                fresh.append(snap)
            elif mine.root == snap.root:
                report.already.append(snap.id)
            else:
                raise RemoteError(f"{remote.url} has a snapshot {snap.id} that differs from "
                                  "the local one with that id; nothing was pulled")
        if not fresh:
            return report
        # the index and the gc state in one round: read from the copy gc keeps, since a
        # pack gc condemned (one it repacked, say) may be deleted once the grace period is
        # over, even while this pull runs
        with ThreadPoolExecutor(1) as pool:
            condemned = pool.submit(remote.condemned)
            index = remote.load_index(cache)
            index.avoid(condemned.result())
        with receiving(repo) as sink:
            _fetch_all(repo, remote, index, sink, fresh, progress)
            commit_received(repo, sink, fresh)
        report.pulled = sorted(fresh, key=lambda s: s.created_ns)
        report.objects, report.bytes = sink.added, sink.bytes
        return report


def _fetch_all(repo: Repository, remote: RemoteRepo, index: RemoteIndex, sink: ObjectSink,
               snaps: list[Snapshot], progress: Callable[[int], None] | None) -> None:
    names = {s.root: s.id for s in snaps}
    staged: dict[bytes, list[Entry]] = {}
    files: dict[bytes, Entry] = {}  # a file entry of each blob the fetched trees name

    def fetch_trees(level: list[bytes]) -> dict[bytes, list[Entry]]:
        got: dict[bytes, list[Entry]] = {}
        wanted = []
        for oid in level:
            if oid in staged:
                got[oid] = staged[oid]
            else:
                wanted.append((oid, locate(index, oid, remote, names.get(oid, "a snapshot"))))

        def accept(oid: bytes, loc: Location, stored: bytes, data: bytes) -> None:
            sink.stage(oid, loc.size, loc.codec, stored, data)
            try:
                got[oid] = staged[oid] = decode_tree(data)
            except CorruptObject as exc:
                raise RemoteError(f"{remote.url}: {exc} in {pack_key(loc.pack)}; nothing was "
                                  "pulled") from None
            problem = top_tree_problem(got[oid]) if oid in names else None
            if problem is not None:
                raise RemoteError(f"{remote.url}: snapshot {names[oid]}: {problem}; it "
                                  "cannot be restored, so nothing was pulled")
            for e in got[oid]:
                seen = files.setdefault(e.oid, e) if e.kind == FILE else e
                if seen.size != e.size:
                    _wrong_size(remote, e, seen.size)
            if progress:
                progress(len(stored))

        fetch_checked(remote, wanted, sink, accept, index=index)
        return got

    # a tree the store already has is complete below it: not entered
    _trees, blobs = walk_levels([s.root for s in snaps], fetch_trees,
                                enter=lambda oid: not _committed(repo, oid))
    wanted = [(oid, locate(index, oid, remote, "a snapshot")) for oid in blobs
              if not sink.has(oid)]
    for oid, loc in wanted:  # the sizes the fetched objects are checked against
        if oid in files and files[oid].size != loc.size:
            _wrong_size(remote, files[oid], loc.size)
    for oid, e in files.items():
        row = repo.catalog.lookup(oid)  # a blob this store holds already
        if row is not None and row[4] != e.size:
            _wrong_size(remote, e, row[4])
    chunked = [(oid, loc) for oid, loc in wanted if loc.codec == CHUNKED]
    if chunked:
        wanted = [(oid, loc) for oid, loc in wanted if loc.codec != CHUNKED]
        fetch_chunked(remote, index, sink, chunked, progress)

    def accept_blob(oid: bytes, loc: Location, stored: bytes, data: Any) -> None:
        if isinstance(data, tuple):  # written to its temp file on the download thread
            sink.stage_written(oid, loc.size, loc.codec, data)
        else:
            sink.stage(oid, loc.size, loc.codec, stored, data)
        if progress:
            progress(len(stored))

    fetch_checked(remote, wanted, sink, accept_blob, raw=False, write_loose=True, index=index)


def _wrong_size(remote: RemoteRepo, e: Entry, size: int) -> None:
    raise RemoteError(f"{remote.url}: {size_problem(e, size)}; a restore of it would fail, "
                      "so nothing was pulled")


def _committed(repo: Repository, oid: bytes) -> bool:
    return repo.catalog.lookup(oid) is not None


def fetch_chunked(remote: RemoteRepo, index: RemoteIndex, sink: ObjectSink,
                  chunked: list[tuple[bytes, Location]],
                  progress: Callable[[int], None] | None = None) -> None:
    """Fetch chunked blobs: their lists, then every distinct chunk once, each checked against
    its id on the download threads and written there to every place it holds in the blobs'
    scratch files; then each blob is stored from its scratch file, checked against its own
    id. A chunk two versions of a file share is downloaded once."""
    lists = read_lists(remote, chunked)
    locs = dict(chunked)
    places: dict[bytes, list[tuple[str, int, int]]] = {}
    scratch: dict[bytes, str] = {}
    try:
        for oid, chunks in lists.items():
            path = scratch[oid] = sink.scratch_path()
            with open(path, "wb") as f:
                f.truncate(locs[oid].size)
            offset = 0
            for cid, n in chunks:
                places.setdefault(cid, []).append((path, offset, n))
                offset += n
        wanted = [(cid, locate(index, cid, remote, "a chunked object")) for cid in places]

        def place(cid: bytes, loc: Location, stored: bytes) -> int:
            try:
                data = check_stored(remote.digest, cid, loc.size, loc.codec, stored)
            except RemoteError as exc:
                alt = good_copy(remote, index, cid, loc, checked(remote))
                if alt is not None:
                    data = alt[2]
                else:
                    raise RemoteError(f"{remote.url}: chunk {exc} in {pack_key(loc.pack)}; "
                                      "the remote copy is damaged (run `ctrlz verify "
                                      "--remote`); nothing was pulled") from None
            for path, offset, n in places[cid]:
                if n != len(data):
                    raise RemoteError(f"{remote.url}: chunk {cid.hex()[:16]} in "
                                      f"{pack_key(loc.pack)} is not as long as its list "
                                      "says; nothing was pulled")
                fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    pwrite_all(fd, data, offset)
                finally:
                    os.close(fd)
            return len(stored)

        with closing(remote.fetch_each(wanted, place)) as fetched:
            for _cid, _loc, _stored, sent in fetched:
                if progress and sent:
                    progress(sent)
        todo = [oid for oid in lists if not sink.has(oid)]

        def assemble(oid: bytes) -> tuple[int, tuple[str, int]]:
            return sink.assemble(oid, locs[oid].size, scratch[oid])

        with ThreadPoolExecutor(2, thread_name_prefix="ctrlz-assemble") as pool:
            try:
                made = list(pool.map(assemble, todo))
            except CorruptObject as exc:
                raise RemoteError(f"{remote.url}: {exc}; the remote copy is damaged (run "
                                  "`ctrlz verify --remote`); nothing was pulled") from None
        for oid, (codec, written) in zip(todo, made, strict=True):
            sink.stage_written(oid, locs[oid].size, codec, written)
    finally:
        for path in scratch.values():
            try:
                os.unlink(path)
            except OSError:
                pass
