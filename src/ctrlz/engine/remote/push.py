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

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import RemoteError
from ...state.portable import to_record
from ...state.remote.repo import (
    DATA,
    PACK_TARGET,
    TREE,
    RemoteIndex,
    RemoteRepo,
    index_key,
    pack_key,
)
from ...state.repository import Repository
from ...state.transfer import open_stored
from ...types import Snapshot
from ..reach import needed_objects
from .refs import add_entries, entries, update_ref


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

    def to_json(self) -> dict[str, Any]:
        return {"type": "push", "remote": self.remote, "workspace": self.workspace,
                "pushed": self.pushed, "already_there": self.already,
                "objects_uploaded": self.objects, "objects_reused": self.reused,
                "packs": self.packs, "bytes_uploaded": self.bytes}


class _Uploader:
    """Builds packs from local objects and uploads them on a small thread pool."""

    def __init__(self, repo: Repository, remote: RemoteRepo, index: RemoteIndex,
                 report: PushReport, workers: int,
                 progress: Callable[[int], None] | None) -> None:
        self.repo = repo
        self.remote = remote
        self.index = index
        self.report = report
        self.progress = progress
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="ctrlz-push")
        self.pending: list[Future[int]] = []
        self.limit = workers * 2
        self.made: dict[bytes, set[bytes]] = {}  # packs this push uploaded -> their objects

    def upload(self, oids: Sequence[bytes], kind: bytes, salt: bytes = bytes(8)) -> None:
        batch: list[tuple[bytes, int, int, bytes]] = []
        size = 0
        for oid in oids:
            raw, codec, _length, chunks = open_stored(self.repo.objects, oid)
            stored = b"".join(chunks)
            batch.append((oid, raw, codec, stored))
            size += len(stored)
            if size >= PACK_TARGET:
                self._submit(kind, batch, salt)
                batch, size = [], 0
        if batch:
            self._submit(kind, batch, salt)

    def _submit(self, kind: bytes, batch: list[tuple[bytes, int, int, bytes]],
                salt: bytes) -> None:
        pack, body, index, entries_ = self.remote.build_pack(kind, batch, salt)
        self.index.add(pack, kind, entries_)
        self.made[pack] = {e[0] for e in entries_}
        self.report.objects += len(batch)
        self.report.packs += 1
        while len(self.pending) >= self.limit:
            self.pending.pop(0).result()
        self.pending.append(self.pool.submit(self._put, pack, body, index))

    def _put(self, pack: bytes, body: bytes, index: bytes) -> int:
        self.remote.backend.put_new(pack_key(pack), body)  # exists: the same bytes, by name
        self.remote.backend.put_new(index_key(pack), index)  # only after its pack
        if self.progress:
            self.progress(len(body))
        return len(body) + len(index)

    def finish(self) -> None:
        """Wait for every upload so far (an error in one is raised here)."""
        try:
            for f in self.pending:
                self.report.bytes += f.result()
        finally:
            self.pending = []

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def push(repo: Repository, remote: RemoteRepo, workspace: str, name: str,
         snaps: Sequence[Snapshot], origins: dict[str, dict[str, Any]], cache: Path | None,
         *, workers: int = 4, progress: Callable[[int], None] | None = None) -> PushReport:
    """Push ``snaps`` (oldest first) to ``remote`` under ``workspace``'s ref."""
    report = PushReport(remote.url, workspace)
    if remote.algorithm != repo.algorithm:
        raise RemoteError(f"{remote.url} holds {remote.algorithm} object ids and this store "
                          f"uses {repo.algorithm}; push to another prefix")
    doc, _ = remote.read_ref(workspace)
    there = {e["id"] for e in entries(doc)}
    report.already = [s.id for s in snaps if s.id in there]
    todo = [s for s in snaps if s.id not in there]
    if not todo:
        return report
    index = remote.load_index(cache)
    uploader = _Uploader(repo, remote, index, report, workers, progress)
    relied: dict[bytes, set[bytes]] = {}  # pack -> objects this push takes from it
    try:
        condemned = _condemned(remote)
        checked = time.monotonic()

        def has(oid: bytes) -> bool:
            loc = index.objects.get(oid)
            if loc is None or loc.pack in condemned:
                return False
            relied.setdefault(loc.pack, set()).add(oid)
            return True

        needed = needed_objects(repo.tree, [s.root for s in todo], has=has)
        report.reused = sum(len(v) for v in relied.values())
        uploader.upload(needed.blobs, DATA)
        uploader.upload(needed.trees, TREE)
        uploader.finish()
        checked = _recheck(remote, index, relied, uploader)
        new = [{**to_record(s), "origin": origins.get(s.id, {})} for s in todo]

        def before_write() -> None:
            nonlocal checked
            if time.monotonic() - checked > remote.grace / 2:
                checked = _recheck(remote, index, relied, uploader)

        update_ref(remote, workspace, name, add_entries(new), before_write)
    finally:
        uploader.close()
    report.pushed = [s.id for s in todo]
    return report


def _condemned(remote: RemoteRepo) -> set[bytes]:
    state, _ = remote.read_gc()
    out = set()
    for key in state.get("condemned", {}):
        try:
            out.add(bytes.fromhex(key))
        except ValueError:
            continue
    return out


def _recheck(remote: RemoteRepo, index: RemoteIndex, relied: dict[bytes, set[bytes]],
             uploader: _Uploader) -> float:
    """Re-upload what sits only in packs gc condemned since the walk; returns when the check
    was made (the gc state read), on this process's monotonic clock."""
    for _ in range(5):
        for pack, oids in uploader.made.items():
            relied.setdefault(pack, set()).update(oids)
        uploader.made = {}
        checked = time.monotonic()
        condemned = _condemned(remote)
        hit = [p for p in relied if p in condemned]
        if not hit:
            return checked
        again = sorted({o for p in hit for o in relied.pop(p)})
        kinds = {o: index.packs.get(index.objects[o].pack, (DATA, 0))[0] for o in again}
        salt = os.urandom(8)  # not the condemned pack again, byte for byte
        uploader.upload([o for o in again if kinds[o] != TREE], DATA, salt)
        uploader.upload([o for o in again if kinds[o] == TREE], TREE, salt)
        uploader.finish()
    raise RemoteError(f"{remote.url}: gc keeps condemning the packs this push relies on; "
                      "try again later")
