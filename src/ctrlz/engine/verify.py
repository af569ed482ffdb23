"""Checking a store end to end: every reachable tree decodes, every object re-hashes to its id.

A clone object (named by its blocks, not its hash: :mod:`ctrlz.state.store.clones`) re-hashes to its
seal instead; the first verify that reads it computes the seal and records it, so from then
on any change to its bytes is caught, here and by every read.

Orphans (pack bytes or files no committed snapshot references, left by a crash) are reported as
reclaimable, not as damage: they are exactly what a kill -9 before a commit leaves, and gc removes
them. They are counted only while verify holds the store lock: a snapshot running in another
process has files on disk that it has not indexed *yet*, which look exactly like orphans. Verify
never waits for that writer (it may take minutes); it reports the count as unknown instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import CtrlzError
from ..state import meter
from ..state.store.repository import Repository
from ..state.store.sweep import stray_files
from ..state.trees import DIR, FILE, Entry, decode_tree


@dataclass
class VerifyReport:
    snapshots: int = 0
    trees: int = 0
    objects: int = 0
    bytes: int = 0
    errors: list[str] = field(default_factory=list)
    orphans: int | None = 0  # None: not counted (another process was writing)
    orphans_note: str | None = None  # why ``orphans`` is None

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "snapshots": self.snapshots, "trees": self.trees,
                "objects": self.objects, "bytes": self.bytes, "errors": self.errors,
                "orphans": self.orphans,
                **({"orphans_note": self.orphans_note} if self.orphans_note else {})}


def top_tree_problem(entries: list[Entry]) -> str | None:
    """Why a snapshot's top tree cannot be one (``None``: it can). Every entry of a top tree
    is a tracked root's directory, named by its index (``0``, ``1``...): a restore plans root
    by root from those names, and a top tree of ordinary entries (a crafted archive) must be
    refused where it arrives, not met by a restore half way through a workspace."""
    for e in entries:
        if e.kind != DIR or not e.name.isdigit() or str(int(e.name)).encode() != e.name:
            return (f"its top tree holds {e.name.decode('utf-8', 'replace')!r} where only "
                    "root directories (0, 1, ...) may be")
    return None


def size_problem(e: Entry, size: int | None) -> str | None:
    """Why file entry ``e`` disagrees with its object's ``size`` (``None``: it agrees, or the
    size is unknown). A restore writes the object and then checks the file against the
    entry, so a mismatch fails only after it has changed the workspace: it is refused on
    arrival (import, pull) and reported by verify instead."""
    if e.kind != FILE or size is None or size == e.size:
        return None
    return (f"file entry {e.name.decode('utf-8', 'replace')!r} says {e.size} bytes and its "
            f"object {e.oid.hex()[:16]} holds {size}")


def verify_store(repo: Repository, progress: Callable[[int], None] | None = None) -> VerifyReport:
    report = VerifyReport()
    seen: set[bytes] = set()
    sizes: dict[bytes, int] = {}  # blob -> its size, as re-hashed
    objects = repo.objects
    # what this reader decoded before (groups it keeps, see ctrlz.state.store.groups) is read again
    # from the disk: verify answers for the store's bytes, not for memory
    objects.close()
    bar = meter.current()
    if bar is not None:  # every object is read once: its count and logical bytes are the work
        bar.start("Verify", repo.catalog.object_count(), repo.catalog.stored_bytes()[0],
                  unit="objects")

    def check(oid: bytes, where: str) -> bytes | None:
        try:
            data = objects.read(oid) if oid not in seen else None
        except CtrlzError as exc:
            report.errors.append(f"{where}: {exc}")
            return None
        if data is not None:
            seen.add(oid)
            report.objects += 1
            report.bytes += len(data)
            if progress:
                progress(len(data))
            if bar is not None:
                bar.files += 1
                bar.bytes += len(data)
        return data

    def open_tree(oid: bytes, where: str) -> list[Entry] | None:
        """The tree's entries, once per tree (``None``: seen already, or broken)."""
        if oid in seen:
            return None
        data = check(oid, where)
        if data is None:
            return None
        try:
            entries = decode_tree(data)
        except CtrlzError as exc:
            report.errors.append(f"{where}: {exc}")
            return None
        report.trees += 1
        return entries

    def walk_tree(root: bytes, where: str) -> None:
        """Depth first, in entry order, with an explicit stack rather than recursion: a
        workspace may nest directories deeper than Python's recursion limit."""
        entries = open_tree(root, where)
        if entries is None:
            return
        stack: list[tuple[Iterator[Entry], str]] = [(iter(entries), where)]
        while stack:
            it, base = stack[-1]
            e = next(it, None)
            if e is None:
                stack.pop()
                continue
            child = f"{base}/{e.name.decode('utf-8', 'replace')}"
            if e.kind == DIR:
                sub = open_tree(e.oid, child)
                if sub is not None:
                    stack.append((iter(sub), child))
                continue
            if e.oid not in seen:
                size = _check_stream(repo, e.oid, child, report, seen, progress, bar)
                if size is not None:
                    sizes[e.oid] = size
            problem = size_problem(e, sizes.get(e.oid))
            if problem is not None:
                report.errors.append(f"{base}: {problem}")

    for snap in repo.catalog.snapshots():
        report.snapshots += 1
        _check_top(repo, snap.root, snap.id, report)
        walk_tree(snap.root, snap.id)
    _count_orphans(repo, report)
    return report


def _check_top(repo: Repository, root: bytes, where: str, report: VerifyReport) -> None:
    """The top tree's shape (:func:`top_tree_problem`); a top tree that cannot be read is
    reported by the walk."""
    try:
        entries = decode_tree(repo.objects.read(root))
    except CtrlzError:
        return
    problem = top_tree_problem(entries)
    if problem is not None:
        report.errors.append(f"{where}: {problem}")


def _count_orphans(repo: Repository, report: VerifyReport) -> None:
    try:
        locked = repo.lock.try_acquire()
    except OSError as exc:  # a read-only store: the lock file cannot be opened for writing
        report.orphans = None
        report.orphans_note = f"cannot take the store lock to count orphans: {exc.strerror}"
        return
    if not locked:
        report.orphans = None
        report.orphans_note = ("another ctrlz process is writing to the store; files it has "
                               "not committed yet cannot be told from orphans, so none were "
                               "counted (run verify again when it is done)")
        return
    try:
        report.orphans = len(stray_files(repo.objects))
    finally:
        repo.lock.release()


def _check_stream(repo: Repository, oid: bytes, where: str, report: VerifyReport,
                  seen: set[bytes], progress: Callable[[int], None] | None,
                  bar: meter.Meter | None) -> int | None:
    """Re-hash one blob without holding a large object in memory; its size, or ``None``
    when it is damaged (reported)."""
    hasher = repo.objects.new_hasher()
    size = 0
    try:
        for chunk in repo.objects.iter_chunks(oid):
            hasher.update(chunk)
            size += len(chunk)
            if progress:
                progress(len(chunk))
            if bar is not None:  # per chunk: one large object is most of some stores
                bar.bytes += len(chunk)
    except CtrlzError as exc:
        report.errors.append(f"{where}: {exc}")
        return None
    if not repo.objects.content_matches(oid, hasher.digest()):  # a clone: its seal
        report.errors.append(f"{where}: object {oid.hex()[:16]} does not match its id")
        return None
    seen.add(oid)
    report.objects += 1
    report.bytes += size
    if bar is not None:
        bar.files += 1
    return size
