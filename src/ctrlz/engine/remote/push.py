"""Pushing snapshots: upload what the remote lacks, then name the snapshots in the ref.

In order, so that a reader never sees a snapshot whose objects are not all there and a crash
at any point leaves only garbage, never damage:

1. read the ref; snapshots already named there are done;
2. load the remote index and the gc state; walk the snapshots' trees and list every object the
   remote lacks (an object whose pack gc has condemned counts as lacking);
3. upload packs (create-only, content-addressed, in parallel), each followed by its index;
4. re-read the gc state: an object this push relies on whose pack was condemned meanwhile is
   uploaded again, into a new pack;
5. add the snapshots to the ref by compare-and-swap, re-reading and merging on conflict. Steps
   4 and 5 must happen within half the remote's gc grace period of each other; if they do not
   (a slow link, many conflicts), step 4 runs again. This is the pusher's half of the gc rule.

An interrupted push leaves packs the ref does not name. The next push finds their objects in
the index and does not upload them again, so it resumes where the last one stopped; packs that
never got an index are collected by ``gc --remote``.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ...errors import RemoteError
from ...state.chunking import Cut
from ...state.db.catalog import ObjectRow
from ...state.interchange.portable import to_record
from ...state.interchange.transfer import members_checked, open_checked
from ...state.remote.chunks import CHUNK_FROM, CHUNKED, chunked, encode_list
from ...state.remote.known import MAX_TREES, KnownTrees, load_known, save_known
from ...state.remote.repo import (
    DATA,
    PACK_TARGET,
    TREE,
    RemoteIndex,
    RemoteRepo,
    index_key,
    pack_key,
)
from ...state.store.cut_objects import CutReader
from ...state.store.groups import GROUP
from ...state.store.objects import CLONE
from ...state.store.packs import encode_small
from ...state.store.repository import Repository
from ...types import Snapshot
from .plan import Plan
from .refs import add_entries, entries, update_ref
from .repair import damaged_copies

T = TypeVar("T")


@dataclass
class PushReport:
    remote: str
    workspace: str
    pushed: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    objects: int = 0  # objects uploaded
    reused: int = 0  # objects the remote already held
    packs: int = 0
    bytes: int = 0  # bytes uploaded (packs and indexes)
    trees_walked: int = 0  # trees read to find what the remote lacks
    trees_known: int = 0  # trees not entered: known complete on the remote from earlier pushes
    repaired: int = 0  # objects whose remote copy was damaged, sent again (``repair``)

    def to_json(self) -> dict[str, Any]:
        return {"type": "push", "remote": self.remote, "workspace": self.workspace,
                "pushed": self.pushed, "already_there": self.already,
                "objects_uploaded": self.objects, "objects_reused": self.reused,
                "packs": self.packs, "bytes_uploaded": self.bytes,
                "trees_walked": self.trees_walked, "trees_known": self.trees_known,
                "objects_repaired": self.repaired}


class _Uploader:
    """Builds packs from local objects and uploads them on a small thread pool.

    A blob of ``CHUNK_FROM`` bytes and up (not a clone) goes up as a chunk list and the
    chunks the remote lacks (:mod:`ctrlz.state.remote.chunks`); new chunks are compressed on
    the upload threads, where zstd runs beside the main thread's reading and cutting."""

    def __init__(self, repo: Repository, remote: RemoteRepo, index: RemoteIndex,
                 report: PushReport, workers: int,
                 progress: Callable[[int], None] | None, cache: Path | None = None,
                 has: Callable[[bytes], bool] = lambda oid: False) -> None:
        self.repo = repo
        self.cache = cache
        self.remote = remote
        self.index = index
        self.report = report
        self.progress = progress
        self.has = has  # does the remote hold this chunk (in a pack gc keeps)? relies on it
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="ctrlz-push")
        self.pending: list[Future[tuple[bytes, bytes, list[Any], int]]] = []
        self.limit = workers * 2
        self.made: dict[bytes, set[bytes]] = {}  # packs this push uploaded -> their objects
        self.sent: set[bytes] = set()  # chunks this push uploads
        #: chunk -> a blob it was cut from: a chunk is no local object, so sending it again
        #: (its pack was condemned meanwhile) means cutting that blob again
        self.parent_of: dict[bytes, bytes] = {}

    def upload(self, oids: Sequence[bytes], kind: bytes, salt: bytes = bytes(8)) -> None:
        batch: list[tuple[bytes, int, int | None, bytes]] = []
        size = 0
        for item in self._items(oids, kind):
            batch.append(item)
            size += len(item[3])
            if size >= PACK_TARGET:
                self._submit(kind, batch, salt)
                batch, size = [], 0
        if batch:
            self._submit(kind, batch, salt)

    def _items(self, oids: Sequence[bytes], kind: bytes
               ) -> Iterator[tuple[bytes, int, int | None, bytes]]:
        """(id, raw size, codec, stored bytes) to send; codec ``None``: the pool compresses."""
        lookup = self.repo.objects.catalog.lookup
        rows = {oid: lookup(oid) for oid in oids}
        big = [oid for oid, row in rows.items() if _big(kind, row)]
        # a blob the store cut as it stored it names its chunks: only new ones are read
        tables = {oid: t for oid in big if (t := self.repo.objects.cuts(oid)) is not None}
        cuts = self._cut_ahead([oid for oid in big if oid not in tables])
        grouped: list[ObjectRow] = []
        try:
            for oid, row in rows.items():
                if row is not None and row[5] == GROUP:
                    grouped.append(row)  # below
                elif oid in tables:
                    yield from self._chunked_from_table(oid, row[4], tables[oid])  # type: ignore[index]
                elif _big(kind, row):
                    cut_oid, data, cut = next(cuts)
                    if cut_oid != oid:  # the read-ahead follows this loop's order
                        raise AssertionError("chunked blobs out of order")
                    yield from self._chunked(oid, data, cut)
                else:
                    raw, codec, _length, chunks = open_checked(self.repo.objects, oid)
                    yield oid, raw, codec, b"".join(chunks)
        finally:
            cuts.close()
        # a member of a local group travels alone, compressed on the pool (codec None), read
        # a group at a time (each decoded once), not in the order of the trees
        for oid, data in members_checked(self.repo.objects, grouped):
            yield oid, len(data), None, data

    def _cut_ahead(self, big: list[bytes]
                   ) -> Iterator[tuple[bytes, bytes, list[tuple[bytes, int, int]]]]:
        """(oid, bytes, cuts) of each big blob, in order: read, checked against its id and
        cut on two threads (decompressing and hashing release the GIL), at most two blobs
        ahead of the caller, so no more than three are in memory at once. The store looks
        each one up and opens it here (:meth:`ObjectStore.loose_reader`); a packed one is
        read when its turn comes."""
        if not big:
            return
        objects = self.repo.objects
        digest = self.remote.digest

        def read_and_cut(read: Callable[[], bytes]) -> tuple[bytes, list[tuple[bytes, int, int]]]:
            data = read()
            return data, chunked(data, digest)

        with ThreadPoolExecutor(2, thread_name_prefix="ctrlz-cut") as pool:

            def start(oid: bytes) -> tuple[bytes, Future[Any] | None]:
                read = objects.loose_reader(oid)
                return oid, None if read is None else pool.submit(read_and_cut, read)

            ahead: deque[tuple[bytes, Future[Any] | None]] = deque()
            todo = iter(big)
            try:
                ahead.extend(start(oid) for oid in itertools.islice(todo, 2))
                while ahead:
                    oid, fut = ahead.popleft()
                    ahead.extend(start(nxt) for nxt in itertools.islice(todo, 1))
                    if fut is None:
                        data = objects.read(oid)
                        yield oid, data, chunked(data, digest)
                    else:
                        data, cut = fut.result()
                        yield oid, data, cut
            finally:
                for _, fut in ahead:
                    if fut is not None:
                        fut.cancel()

    def _sort_chunks(self, oid: bytes, chunks: Iterable[tuple[bytes, int, T]]
                     ) -> tuple[list[tuple[bytes, int]], list[T]]:
        """The chunk list of blob ``oid`` from its (id, length, where) chunks, and the
        ``where`` of each the remote lacks and this push has not sent (now counted as
        sent); the chunks the remote has are relied on."""
        listing, new = [], []
        for cid, n, where in chunks:
            listing.append((cid, n))
            self.parent_of.setdefault(cid, oid)
            if cid in self.sent or self.has(cid):
                continue
            self.sent.add(cid)
            new.append(where)
        return listing, new

    def _chunked(self, oid: bytes, data: bytes, cuts: list[tuple[bytes, int, int]]
                 ) -> Iterator[tuple[bytes, int, int | None, bytes]]:
        """The chunks of blob ``oid`` (``data``, cut at ``cuts``) the remote lacks (raw:
        compressed on the pool), then its chunk list."""
        view = memoryview(data)
        listing, new = self._sort_chunks(oid, ((cid, n, (cid, off, n)) for cid, off, n in cuts))
        for cid, off, n in new:
            yield cid, n, None, bytes(view[off:off + n])
        yield oid, len(data), CHUNKED, encode_list(len(data), listing)

    def _chunked_from_table(self, oid: bytes, size: int, table: list[Cut]
                            ) -> Iterator[tuple[bytes, int, int | None, bytes]]:
        """As :meth:`_chunked`, from the blob's cut table: the chunks the remote has are
        named, not read; new ones are read, decoded and checked on the pool, a few ahead."""
        listing, new = self._sort_chunks(oid, ((c[0], c[1], c) for c in table))
        if new:
            yield from self._read_new(self.repo.objects.cut_reader(oid, new))
        yield oid, size, CHUNKED, encode_list(size, listing)

    def _read_new(self, reader: CutReader) -> Iterator[tuple[bytes, int, int | None, bytes]]:
        """Each chunk of ``reader`` (raw, to be compressed on the pool), read on the pool a
        few ahead of the caller."""
        ahead: deque[tuple[bytes, int, Future[bytes]]] = deque()
        todo = iter(reader.cuts)

        def start(cuts: Iterable[Cut]) -> None:
            ahead.extend((c[0], c[1], self.pool.submit(reader.read, c)) for c in cuts)

        try:
            start(itertools.islice(todo, self.limit))
            while ahead:
                cid, n, fut = ahead.popleft()
                start(itertools.islice(todo, 1))
                yield cid, n, None, fut.result()
        finally:
            for *_, fut in ahead:
                fut.cancel()
            for *_, fut in ahead:
                if not fut.cancelled():
                    fut.exception()  # a read still running: the file closes after it
            reader.close()

    def _submit(self, kind: bytes, batch: list[tuple[bytes, int, int | None, bytes]],
                salt: bytes) -> None:
        self.report.objects += len(batch)
        self.report.packs += 1
        while len(self.pending) >= self.limit:
            self._collect(self.pending.pop(0))
        self.pending.append(self.pool.submit(self._build_put, kind, batch, salt))

    def _build_put(self, kind: bytes, batch: list[tuple[bytes, int, int | None, bytes]],
                   salt: bytes) -> tuple[bytes, bytes, list[Any], int]:
        """Compress new chunks, build the pack and upload it, then its index (a pool
        thread)."""
        objects = [(oid, size, codec, stored) if codec is not None
                   else (oid, size, *encode_small(stored)) for oid, size, codec, stored in batch]
        pack, body, index, entries_ = self.remote.build_pack(kind, objects, salt)
        self.remote.backend.put_new(pack_key(pack), body)  # exists: the same bytes, by name
        self.remote.backend.put_new(index_key(pack), index)  # only after its pack
        self.remote.keep_index(self.cache, pack, index)
        if self.progress:
            self.progress(len(body))
        return pack, kind, entries_, len(body) + len(index)

    def _collect(self, future: Future[tuple[bytes, bytes, list[Any], int]]) -> None:
        pack, kind, entries_, sent = future.result()
        self.index.add(pack, kind, entries_)
        self.made[pack] = {e[0] for e in entries_}
        self.report.bytes += sent

    def finish(self) -> None:
        """Wait for every upload so far (an error in one is raised here)."""
        try:
            for f in self.pending:
                self._collect(f)
        finally:
            self.pending = []

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def push(repo: Repository, remote: RemoteRepo, workspace: str, name: str,
         snaps: Sequence[Snapshot], origins: dict[str, dict[str, Any]], cache: Path | None,
         *, known: Path | None = None, workers: int = 4,
         progress: Callable[[int], None] | None = None, repair: bool = False) -> PushReport:
    """Push ``snaps`` (oldest first) to ``remote`` under ``workspace``'s ref. ``known`` is
    the file of trees known to be complete on this remote (:mod:`ctrlz.state.remote.known`):
    read to skip them, and extended once the ref is written.

    ``repair``: every object the push would rely on, for all of ``snaps`` (pushed before or
    not), is downloaded and checked, and one whose copy is damaged is sent again
    (:mod:`.repair`); the known-complete cache is not trusted for that walk."""
    report = PushReport(remote.url, workspace)
    if remote.algorithm != repo.algorithm:
        raise RemoteError(f"{remote.url} holds {remote.algorithm} object ids and this store "
                          f"uses {repo.algorithm}; push to another prefix")
    # the first round trips at once: the ref, the gc state, the index (its two listings stay
    # in order inside load_index), and the local cache of complete trees
    with ThreadPoolExecutor(3) as pool:
        ref_f = pool.submit(remote.read_ref, workspace)
        gc_f = pool.submit(_condemned, remote)
        index_f = pool.submit(remote.load_index, cache)
        doc, etag = ref_f.result()
        there = {e["id"] for e in entries(doc)}
        report.already = [s.id for s in snaps if s.id in there]
        todo = [s for s in snaps if s.id not in there]
        if not todo and not repair:
            pool.shutdown(wait=True, cancel_futures=True)
            return report
        # the gc state is read before any pack is relied on: the pusher's half of the rule
        condemned, checked = gc_f.result()
        index = index_f.result()
    index.avoid(condemned)  # a copy gc keeps (a repacked pack's objects) over one it drops
    cached = load_known(known, remote.identity) if known is not None and not repair \
        else KnownTrees()
    plan = Plan(repo, remote, index, [s.root for s in (snaps if repair else todo)], cached,
                 condemned)
    uploader = _Uploader(repo, remote, index, report, workers, progress, cache, has=plan.has)
    try:
        plan.walk()
        if repair:
            plan.damaged = damaged_copies(remote, index, plan.relied)
            report.repaired = len(plan.damaged)
            if plan.damaged:
                plan.walk()  # the damaged copies are not relied on now: they are sent
        # a repair's pack must not be the damaged pack's name again, byte for byte: an
        # upload of an existing name is skipped (create-only, content-addressed)
        salt = os.urandom(8) if report.repaired else bytes(8)
        uploader.upload(plan.needed.blobs, DATA, salt)
        uploader.upload(plan.needed.trees, TREE, salt)
        uploader.finish()
        report.reused = plan.reused()  # chunks too: an upload relies on those already there
        checked = _recheck(remote, plan, uploader, condemned, checked)
        new = [{**to_record(s), "origin": origins.get(s.id, {})} for s in todo]
        if not new:  # a repair of snapshots the ref names already: their objects are sent
            return report

        def before_write() -> None:
            nonlocal checked
            if time.monotonic() - checked > remote.grace / 2:
                checked = _recheck(remote, plan, uploader, None, checked)

        update_ref(remote, workspace, name, add_entries(new), before_write,
                   first=(doc, etag))
    finally:
        uploader.close()
    report.pushed = [s.id for s in todo]
    report.trees_walked, report.trees_known = len(plan.walked), len(plan.hits)
    if known is not None:
        _remember(known, remote, plan)
    return report


def _remember(path: Path, remote: RemoteRepo, plan: Plan) -> None:
    """Add what this push made complete on the remote to the cache (only after its ref
    write: see :mod:`ctrlz.state.remote.known`)."""
    known = KnownTrees(plan.known.trees | plan.walked, plan.known.packs | plan.relied.keys())
    # another push from this store may have saved meanwhile: keep its trees too, if its packs
    # were usable when this push looked (else they would spoil the next push's check)
    theirs = load_known(path, remote.identity)
    if theirs.packs <= plan.index.packs.keys() and theirs.packs.isdisjoint(plan.condemned):
        known.trees |= theirs.trees
        known.packs |= theirs.packs
    if len(known.trees) > MAX_TREES:  # keep what the next push will most likely meet
        known.trees = plan.walked | plan.hits
    try:
        save_known(path, remote.identity, known)
    except OSError:
        pass  # only a cache: the next push walks more


def _big(kind: bytes, row: ObjectRow | None) -> bool:
    """Is this a blob that goes up cut in chunks (:mod:`ctrlz.state.remote.chunks`)?"""
    return kind == DATA and row is not None and row[4] >= CHUNK_FROM and row[5] != CLONE


def _condemned(remote: RemoteRepo) -> tuple[set[bytes], float]:
    """The packs gc has condemned, and when they were read (this process's monotonic
    clock, taken before the read)."""
    at = time.monotonic()
    return remote.condemned(), at


def _recheck(remote: RemoteRepo, plan: Plan, uploader: _Uploader,
             condemned: set[bytes] | None, checked: float) -> float:
    """Re-upload what this push relies on that sits in a condemned pack; returns when the gc
    state used was read. ``condemned`` is a state already read at ``checked`` (the push's
    first read: its ref write must then come within ``grace / 2`` of it, which
    ``before_write`` sees to); ``None`` reads it again."""
    for _ in range(5):
        relied = plan.relied  # drop_known starts it over: take it afresh every round
        for pack, oids in uploader.made.items():
            relied.setdefault(pack, set()).update(oids)
        uploader.made = {}
        if condemned is None:
            condemned, checked = _condemned(remote)
        hit = [p for p in relied if p in condemned]
        if not hit:
            return checked
        plan.index.avoid(condemned)
        objects = plan.index.objects
        uploader.sent = {c for c in uploader.sent
                         if (loc := objects.get(c)) is not None and loc.pack not in condemned}
        if any(p in plan.known.packs for p in hit):
            plan.drop_known(condemned)  # which objects to send again: walk to find out
            salt = os.urandom(8)  # not a condemned pack again, byte for byte
            uploader.upload(plan.needed.blobs, DATA, salt)
            uploader.upload(plan.needed.trees, TREE, salt)
        else:
            index = plan.index
            plan.condemned = condemned
            again = sorted({o for p in hit for o in relied.pop(p)})
            # a chunk is no local object: it is sent again by cutting a blob it came from
            local = {o for o in again if plan.repo.catalog.lookup(o) is not None}
            parents = {uploader.parent_of.get(o) or plan.parent_of[o]
                       for o in again if o not in local}
            kinds = {o: index.packs.get(index.objects[o].pack, (DATA, 0))[0] for o in local}
            salt = os.urandom(8)  # not the condemned pack again, byte for byte
            uploader.upload(sorted({o for o in local if kinds[o] != TREE} | parents), DATA,
                            salt)
            uploader.upload(sorted(o for o in local if kinds[o] == TREE), TREE, salt)
        uploader.finish()
        condemned = None
    raise RemoteError(f"{remote.url}: gc keeps condemning the packs this push relies on; "
                      "try again later")
