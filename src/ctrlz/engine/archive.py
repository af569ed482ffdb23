"""Export and import: snapshots in and out of a store as one self-contained archive.

Export writes the snapshots' records and exactly the objects they need (with ``since``, less
everything the ``since`` snapshot already reaches) in the format of
:mod:`ctrlz.state.interchange.archive`. It reads without the store lock (a long export through a
pipe must
not hold up every hook), as any reader does: an object gc moves meanwhile is looked up again.

Import holds the store's writer lock and stages every object in a new pack (and temp loose
files) that nothing references until one catalog transaction adds the objects and the snapshot
rows together, after the archive's end record has checked out and every snapshot was found
complete. Any failure aborts the writer and removes what it staged; a ``kill -9`` leaves files
that the next writer's recovery removes. So an import is all or nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ..errors import CorruptObject, RemoteError
from ..state.interchange.archive import ArchiveReader, ArchiveWriter
from ..state.interchange.portable import from_record, to_record
from ..state.interchange.transfer import ObjectSink, commit_received, open_checked, receiving
from ..state.store.repository import Repository
from ..state.trees import HEADER, Entry, decode_tree
from ..types import Snapshot
from .reach import needed_objects, reachable
from .verify import size_problem, top_tree_problem

#: objects at least this big are streamed to a temp file on import; smaller ones are read
#: whole, so that trees (a directory of 40,000 entries is ~5 MiB) can be decoded and checked
STREAM_MIN = 64 << 20


@dataclass
class ExportReport:
    snapshots: list[str]
    since: str | None
    objects: int = 0
    bytes: int = 0  # archive bytes written

    def to_json(self) -> dict[str, Any]:
        return {"type": "export", "snapshots": self.snapshots, "since": self.since,
                "objects": self.objects, "bytes": self.bytes}


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)  # present before, left as they were
    objects: int = 0  # objects added to the store
    bytes: int = 0  # their raw bytes
    newest: Snapshot | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": "import", "imported": self.imported, "already_present": self.already,
                "objects": self.objects, "bytes": self.bytes,
                "newest": self.newest.id if self.newest else None}


def export_archive(repo: Repository, snaps: Sequence[Snapshot], out: BinaryIO,
                   since: Snapshot | None = None, extra: dict[str, Any] | None = None
                   ) -> ExportReport:
    base = reachable(repo.tree, [since.root]) if since is not None else set()
    needed = needed_objects(repo.tree, [s.root for s in snaps], has=base.__contains__,
                            complete=base.__contains__)
    order = needed.blobs + needed.trees  # trees after what they name
    manifest = {"created_ns": time.time_ns(),
                "snapshots": [to_record(s) for s in sorted(snaps, key=lambda s: s.created_ns)],
                "since": {"id": since.id, "root": since.root.hex()} if since else None,
                "objects": len(order), **(extra or {})}
    writer = ArchiveWriter(out, repo.algorithm, manifest)
    for oid in order:
        size, codec, length, chunks = open_checked(repo.objects, oid)
        writer.add(oid, size, codec, length, chunks)
    writer.close()
    return ExportReport([s.id for s in snaps], since.id if since else None, writer.objects,
                        writer.bytes)


def import_archive(repo: Repository, src: BinaryIO, name: str) -> ImportReport:
    """Add an archive's snapshots and objects to ``repo``: all of them, or none."""
    with repo.lock:
        repo.recover()
        reader = ArchiveReader(src, name)
        manifest = reader.manifest
        if manifest.get("algorithm") != repo.algorithm:
            raise RemoteError(f"{name} uses {manifest.get('algorithm')} object ids and this "
                              f"store uses {repo.algorithm}; import it into a store made with "
                              f"hash = \"{manifest.get('algorithm')}\"")
        try:
            snaps = [from_record(r) for r in manifest.get("snapshots", [])]
        except (CorruptObject, TypeError) as exc:
            raise RemoteError(f"{name} is damaged: {exc}") from None
        if len({s.id for s in snaps}) != len(snaps):
            raise RemoteError(f"{name} is damaged: it names one snapshot id twice; nothing "
                              "was imported")
        count = manifest.get("objects", -1)
        if not isinstance(count, int) or isinstance(count, bool):
            raise RemoteError(f"{name} is damaged: its object count is not a number; nothing "
                              "was imported")
        report = ImportReport()
        with receiving(repo) as sink:
            sizes: dict[bytes, int] = {}
            trees = _stage_objects(reader, sink, name, count, sizes)
            fresh = _new_snapshots(repo, snaps, name, report)
            _check_complete(repo, fresh, trees, sink, manifest, name)
            _check_restorable(repo, fresh, trees, sizes, name)
            commit_received(repo, sink, fresh)
        report.imported = [s.id for s in fresh]
        report.objects, report.bytes = sink.added, sink.bytes
        if snaps:
            report.newest = max(snaps, key=lambda s: s.created_ns)
        return report


def _stage_objects(reader: ArchiveReader, sink: ObjectSink, name: str,
                   expected: int, sizes: dict[bytes, int]) -> dict[bytes, list[Entry]]:
    """Check and stage every object (its size goes to ``sizes``); returns the trees among
    them, decoded."""
    trees: dict[bytes, list[Entry]] = {}
    count = 0
    for oid, size, codec, length, chunks in reader.objects():
        count += 1
        sizes[oid] = size
        try:
            if size >= STREAM_MIN:
                sink.add_stream(oid, size, codec, length, chunks)
                continue
            data = sink.add(oid, size, codec, b"".join(chunks))
        except CorruptObject as exc:
            raise RemoteError(f"{name} is damaged: {exc}; nothing was imported") from None
        if data.startswith(HEADER):
            try:
                trees[oid] = decode_tree(data)
            except CorruptObject:
                pass  # a file that merely starts like a tree
    if expected >= 0 and count != expected:
        raise RemoteError(f"{name} is damaged: its manifest names {expected} objects and it "
                          f"holds {count}; nothing was imported")
    return trees


def _new_snapshots(repo: Repository, snaps: list[Snapshot], name: str,
                   report: ImportReport) -> list[Snapshot]:
    fresh = []
    for s in snaps:
        mine = repo.catalog.snapshot(s.id)
        if mine is None:
            fresh.append(s)
        elif mine.root == s.root:
            report.already.append(s.id)
        else:
            raise RemoteError(f"{name} holds a snapshot {s.id} and this store has a different "
                              "snapshot with the same id; nothing was imported")
    return fresh


def _check_complete(repo: Repository, snaps: list[Snapshot], staged: dict[bytes, list[Entry]],
                    sink: ObjectSink, manifest: dict[str, Any], name: str) -> None:
    """Every object the snapshots reach is in the archive or already in the store."""

    def read(oid: bytes) -> list[Entry]:
        entries = staged.get(oid)
        if entries is not None:
            return entries
        if repo.catalog.lookup(oid) is None:
            raise KeyError(oid)
        return repo.tree(oid)

    try:
        missing = needed_objects(read, [s.root for s in snaps], has=sink.has)
        lacking = missing.trees + missing.blobs
    except KeyError as exc:
        lacking = [exc.args[0]]
    if lacking:
        since = manifest.get("since") or {}
        hint = (f"it is incremental since {since.get('id')}: import the archive holding that "
                "snapshot first" if since else "the archive is incomplete")
        raise RemoteError(f"{name} needs object {lacking[0].hex()[:16]} (and "
                          f"{len(lacking) - 1} more) that neither it nor this store holds; "
                          f"{hint}; nothing was imported")


def _check_restorable(repo: Repository, snaps: list[Snapshot],
                      staged: dict[bytes, list[Entry]], sizes: dict[bytes, int],
                      name: str) -> None:
    """Every new snapshot can be restored: its top tree names only root directories, and
    each file entry's size is its object's (a restore would fail on either only after it had
    changed the workspace). Runs after :func:`_check_complete`: every tree is at hand."""

    def size_of(oid: bytes) -> int | None:
        if oid in sizes:
            return sizes[oid]
        row = repo.catalog.lookup(oid)
        return row[4] if row is not None else None

    def read(oid: bytes) -> list[Entry]:
        entries = staged.get(oid)
        if entries is None:
            entries = repo.tree(oid)
        for e in entries:
            problem = size_problem(e, size_of(e.oid))
            if problem is not None:
                raise RemoteError(f"{name} is damaged: {problem}; nothing was imported")
        return entries

    for s in snaps:
        problem = top_tree_problem(staged.get(s.root) or repo.tree(s.root))
        if problem is not None:
            raise RemoteError(f"{name} is damaged: snapshot {s.id}: {problem}; nothing was "
                              "imported")
    # trees already in the store were checked when they came; only new ones are entered
    needed_objects(read, [s.root for s in snaps],
                   complete=lambda oid: oid not in staged)
