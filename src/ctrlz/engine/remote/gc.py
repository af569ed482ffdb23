"""``ctrlz gc --remote``: delete packs that no snapshot reaches, safely while others push.

There is no lock. The rule (``docs/remote.md`` says it for people) has two halves:

gc's half, per run:
    1. read the gc state, then the server's clock (``now``), and only then every ref;
    2. a pack is *live* if it holds any object some snapshot of some ref reaches (that, for
       a pack gc repacked, its replacements do not hold: :mod:`.repack`);
    3. a pack that is not live and older than the grace period is *condemned*: recorded in
       ``gc/state`` with ``now``; a condemned pack that is live again is forgiven;
    4. a pack condemned at least ``grace`` (plus a second for clock rounding) before ``now``,
       and still not live, is deleted (its index first, then the pack).

the pusher's half (:mod:`.push`):
    before naming a snapshot in a ref, read the gc state; an object the push relies on whose
    pack is condemned is uploaded again into a new pack; and the ref must be written within
    ``grace / 2`` of that read, or the read is made again.

Why nothing a push names is deleted: for gc to delete pack P, P must have been condemned at
``t0 <= now - grace`` and gc must have read the refs after ``now``. A push relying on P either
read the gc state after ``t0``, saw P condemned and did not rely on it; or read it before ``t0``
and so wrote its ref before ``t0 + grace / 2`` — before gc read the refs, which then name the
push's snapshot, which makes P live. Young packs (an upload under way) are never condemned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import RemoteError
from ...state.remote.backend import Conflict
from ...state.remote.repo import RemoteIndex, RemoteRepo, index_key, pack_key
from ...state.trees import Entry
from .check import all_roots, pack_listing, remote_tree_fetcher
from .chunklists import chunks_of
from .repack import candidates, live_packs, repack
from .walk import walk_levels

CLOCK_SLACK = 1.0


@dataclass
class RemoteGcReport:
    remote: str
    live_packs: int = 0
    condemned: list[str] = field(default_factory=list)  # newly condemned this run
    forgiven: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    deleted_bytes: int = 0
    waiting: int = 0  # condemned earlier, not yet past the grace period
    repacked: list[str] = field(default_factory=list)  # mostly garbage: live objects copied
    grace_seconds: float = 0.0
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"type": "gc", "remote": self.remote, "dry_run": self.dry_run,
                "live_packs": self.live_packs, "condemned": self.condemned,
                "forgiven": self.forgiven, "deleted": self.deleted,
                "deleted_bytes": self.deleted_bytes, "waiting": self.waiting,
                "repacked": self.repacked,
                "grace_seconds": self.grace_seconds}


def gc_remote(remote: RemoteRepo, index: RemoteIndex,
              local_tree: Callable[[bytes], list[Entry] | None] | None = None,
              dry_run: bool = False,
              reload: Callable[[], RemoteIndex] | None = None) -> RemoteGcReport:
    """One gc pass (module docstring). ``reload`` reads the index again: a push that lands
    between the caller's index read and this pass's read of the refs names objects that
    index does not know yet, so the pass starts over with a fresh index (twice at most)
    before it calls them missing and does nothing."""
    for attempt in range(3):
        report, lost = _gc_pass(remote, index, local_tree, dry_run, final=attempt == 2
                                or reload is None)
        if not lost:
            return report
        assert reload is not None
        index = reload()
    raise AssertionError("unreachable")


def _gc_pass(remote: RemoteRepo, index: RemoteIndex,
             local_tree: Callable[[bytes], list[Entry] | None] | None, dry_run: bool,
             final: bool) -> tuple[RemoteGcReport, list[bytes]]:
    report = RemoteGcReport(remote.url, grace_seconds=remote.grace, dry_run=dry_run)
    state, _etag = remote.read_gc()
    condemned: dict[str, float] = dict(state.get("condemned", {}))
    index.avoid({_id(k) for k in condemned})  # read trees from the copies gc keeps
    now = remote.backend.server_time()  # before the refs are read: see the module docstring
    listing = pack_listing(remote)
    roots, _ = all_roots(remote)
    trees, blobs = walk_levels([r for _, r in roots],
                               remote_tree_fetcher(remote, index, None, local_tree))
    reached = trees | set(blobs)
    reached |= chunks_of(remote, index, blobs)  # a chunked blob reaches its chunks
    lost = [o for o in reached if o not in index.objects]
    if lost and not final:
        return report, lost
    if lost:
        raise RemoteError(f"{remote.url}: {len(lost)} objects the snapshots name are missing "
                          f"(first: {lost[0].hex()[:16]}); gc did nothing — run "
                          "`ctrlz verify --remote`")
    superseded = _superseded(state)
    live = live_packs(index, reached, superseded, condemned)
    sparse = candidates(index, reached, live, condemned, superseded, listing, now,
                        remote.grace)
    replaced: dict[str, list[str]] = {}
    if sparse and not dry_run:
        replaced = repack(remote, index, reached, sparse)
        superseded.update(replaced)
        live = live_packs(index, reached, superseded, condemned)
    report.repacked = [pack_key(p) for p in sparse]
    report.live_packs = len(live)
    known = set(listing) | set(index.packs) | index.dangling
    delete: list[bytes] = []
    for pack in sorted(known - live):
        key = pack.hex()
        if key in condemned:
            if now - float(condemned[key]) >= remote.grace + CLOCK_SLACK:
                delete.append(pack)
            else:
                report.waiting += 1
        elif now - listing.get(pack, (0, 0.0))[1] >= remote.grace:
            report.condemned.append(key)
    report.forgiven = [k for k in condemned if _id(k) in live or _id(k) not in known]
    if dry_run:
        report.deleted = [pack_key(p) for p in delete]
        return report, []
    for pack in delete:
        remote.backend.delete(index_key(pack))
        remote.backend.delete(pack_key(pack))
        report.deleted.append(pack_key(pack))
        report.deleted_bytes += listing.get(pack, (0, 0.0))[0]
    gone = {k for k in superseded if _id(k) not in known}
    _record(remote, report, {p.hex() for p in delete}, replaced, gone)
    return report, []


def _superseded(state: dict[str, Any]) -> dict[str, list[str]]:
    """Old pack -> the packs gc copied its live objects into (:mod:`.repack`)."""
    raw = state.get("superseded", {})
    if not isinstance(raw, dict):
        return {}
    return {k: [n for n in v if isinstance(n, str)] for k, v in raw.items()
            if isinstance(k, str) and isinstance(v, list)}


def _id(key: str) -> bytes:
    try:
        return bytes.fromhex(key)
    except ValueError:
        return b""


def _record(remote: RemoteRepo, report: RemoteGcReport, deleted: set[str],
            replaced: dict[str, list[str]] | None = None,
            gone: frozenset[str] | set[str] = frozenset()) -> None:
    """Write this run's changes into the gc state, merging with any concurrent gc run. A pack
    is condemned as of the server's clock just before the write that publishes it (not the
    start of the run): the pusher's half of the rule counts from when it could see it."""
    for _ in range(50):
        state, etag = remote.read_gc()
        now = remote.backend.server_time()
        condemned = dict(state.get("condemned", {}))
        for key in deleted | set(report.forgiven):
            condemned.pop(key, None)
        for key in report.condemned:
            condemned.setdefault(key, now)
        superseded = _superseded(state)
        for key in deleted | gone:
            superseded.pop(key, None)
        superseded.update(replaced or {})  # in the same write that condemns the old packs
        state = {"format": "ctrlz-gc 1", "condemned": condemned, "superseded": superseded,
                 "generation": int(state.get("generation", 0)) + (1 if deleted else 0)}
        try:
            remote.write_gc(state, etag)
            return
        except Conflict:
            continue
    raise RemoteError(f"{remote.url}: gc/state kept changing; run gc again")
