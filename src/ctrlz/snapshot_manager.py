"""The SnapshotManager API, as nono-py documents it, on ctrlz's engine.

Signatures, defaults and result types follow the seed (shared/seeds/002…) so code written for it
runs unchanged. Where the seed's implementation is known to be wrong, this one is right: it trusts
unchanged stat data instead of re-hashing everything, reads ``.gitignore`` at every level, matches
patterns relative to each tracked root, restores permissions, symlinks and directories, and never
deletes a file the snapshot's rules excluded. Every restore first takes a safety snapshot (kept
in the store, outside the numbered sequence). Everything lives under ``session_dir``, in a
SHA-256 repository, so ``FileState.hash`` is the SHA-256 of the file's bytes.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .engine.diff import PERMISSIONS, PathChange, diff_trees
from .engine.restore.actions import CHMOD, DELETE, RMDIR, UTIME, WRITE, Action
from .engine.restore.journal import recover
from .engine.restore.restore import Request, restore_in_place
from .engine.snapshot import take_snapshot, writing
from .errors import CtrlzError, SnapshotNotFound, UsageError
from .state.fsio.atomic import atomic_write_bytes
from .state.ignore.exclude import Rules
from .state.scan import Limits
from .state.store.repository import Repository
from .state.trees import DIR, FILE, SYMLINK
from .types import Snapshot, iso_utc


@dataclass(frozen=True)
class ContentHash:
    """SHA-256 content hash. Immutable and hashable."""

    digest: bytes

    def hex(self) -> str:
        return self.digest.hex()

    @classmethod
    def from_hex(cls, text: str) -> ContentHash:
        return cls(bytes.fromhex(text))

    def __repr__(self) -> str:
        return f"ContentHash({self.hex()})"

    def __str__(self) -> str:
        return self.hex()


@dataclass(frozen=True)
class FileState:
    hash: ContentHash
    size: int
    mtime: int  # seconds since the epoch
    permissions: int  # st_mode, type bits included (0o100644 == 33188)


@dataclass(frozen=True)
class Change:
    path: str
    change_type: str  # "created", "modified", "deleted" or "permissions_changed"
    size_delta: int | None


@dataclass(frozen=True)
class SnapshotManifest:
    number: int
    timestamp: str  # ISO 8601
    parent: int | None
    merkle_root: ContentHash
    files: dict[str, FileState]
    symlinks: dict[str, str] = field(default_factory=dict)  # path -> link target


class ExclusionConfig:
    """Which files a session tracks. Read-only once built."""

    def __init__(self, use_gitignore: bool = True, exclude_patterns: list[str] | None = None,
                 exclude_globs: list[str] | None = None,
                 force_include: list[str] | None = None) -> None:
        self._rules = Rules(use_gitignore, tuple(exclude_patterns or ()),
                            tuple(exclude_globs or ()), tuple(force_include or ()))

    use_gitignore = property(lambda self: self._rules.use_gitignore)
    exclude_patterns = property(lambda self: list(self._rules.exclude_patterns))
    exclude_globs = property(lambda self: list(self._rules.exclude_globs))
    force_include = property(lambda self: list(self._rules.force_include))

    def __repr__(self) -> str:
        return (f"ExclusionConfig(use_gitignore={self.use_gitignore}, "
                f"exclude_patterns={self.exclude_patterns}, exclude_globs={self.exclude_globs}, "
                f"force_include={self.force_include})")


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SessionMetadata:
    """Ties together a session's snapshot chain, network audit trail and execution context."""

    def __init__(self, session_id: str, command: list[str], tracked_paths: list[str]) -> None:
        self.session_id = session_id
        self.command = list(command)
        self.tracked_paths = list(tracked_paths)
        self.started = _now_iso()
        self.ended: str | None = None
        self.snapshot_count = 0
        self.exit_code: int | None = None
        self._merkle_roots: list[ContentHash] = []
        self._network_events: list[dict[str, Any]] = []

    @property
    def merkle_roots(self) -> list[ContentHash]:
        return list(self._merkle_roots)

    @property
    def network_events(self) -> list[dict[str, Any]]:
        return [dict(e) for e in self._network_events]

    def add_merkle_root(self, root: ContentHash) -> None:
        if not isinstance(root, ContentHash):
            raise TypeError("add_merkle_root takes a ContentHash")
        self._merkle_roots.append(root)

    def set_network_events(self, events: Iterable[dict[str, Any]]) -> None:
        self._network_events = [dict(e) for e in events]

    def to_json(self) -> str:
        return json.dumps({
            "session_id": self.session_id, "started": self.started, "ended": self.ended,
            "command": self.command, "tracked_paths": self.tracked_paths,
            "snapshot_count": self.snapshot_count, "exit_code": self.exit_code,
            "merkle_roots": [r.hex() for r in self._merkle_roots],
            "network_events": self._network_events,
        }, indent=2)

    @staticmethod
    def from_json(text: str) -> SessionMetadata:
        try:
            data = json.loads(text)
            meta = SessionMetadata(data["session_id"], data.get("command", []),
                                   data.get("tracked_paths", []))
            meta.started = data.get("started", meta.started)
            meta.ended = data.get("ended")
            meta.snapshot_count = int(data.get("snapshot_count", 0))
            meta.exit_code = data.get("exit_code")
            meta._merkle_roots = [ContentHash.from_hex(h) for h in data.get("merkle_roots", [])]
            meta._network_events = list(data.get("network_events", []))
        except (ValueError, KeyError, TypeError) as exc:
            raise CtrlzError(f"invalid session metadata: {exc}") from exc
        return meta

    def __repr__(self) -> str:
        return (f"SessionMetadata(session_id={self.session_id!r}, "
                f"snapshot_count={self.snapshot_count}, exit_code={self.exit_code})")


SESSION_FILE = "session.json"


class SnapshotManager:
    """Content-addressed snapshots of ``tracked_paths``, kept under ``session_dir``."""

    def __init__(self, session_dir: str, tracked_paths: list[str],
                 exclusion: ExclusionConfig | None = None, max_entries: int = 2_000_000,
                 max_bytes: int = 2_147_483_648) -> None:
        if not tracked_paths:
            raise UsageError("tracked_paths must name at least one directory")
        self.session_dir = Path(session_dir).expanduser().absolute()
        self.tracked_paths = [Path(p).expanduser().resolve() for p in tracked_paths]
        for p in self.tracked_paths:
            if not p.is_dir():
                raise UsageError(f"tracked path {p} is not a directory")
        self.exclusion = exclusion or ExclusionConfig()
        # 0 means unlimited, as in the seed
        self.limits = Limits(max_entries or 1 << 62, max_bytes or 1 << 62, 1 << 62,
                             refuse_over_max_bytes=True)
        roots = [str(p) for p in self.tracked_paths]
        if Repository.exists(self.session_dir):
            self.repo = Repository.open(self.session_dir)
            recover(self.repo)  # what an interrupted restore_to left
            if self.repo.roots != roots:
                raise UsageError(f"{self.session_dir} tracks {self.repo.roots}, not {roots}; "
                                 "use a new session_dir")
        else:
            self.repo = Repository.create(self.session_dir, roots, "sha256", kind="session")

    # -- helpers -----------------------------------------------------------------------------

    @property
    def _rules(self) -> list[Rules]:
        return [self.exclusion._rules] * len(self.tracked_paths)

    def _numbered(self) -> list[Snapshot]:
        return [s for s in self.repo.catalog.snapshots() if s.number is not None]

    def _by_number(self, number: int) -> Snapshot:
        for s in self._numbered():
            if s.number == number:
                return s
        raise SnapshotNotFound(f"no snapshot number {number} in {self.session_dir}")

    def _abs(self, vpath: bytes) -> str:
        root, _, rel = vpath.partition(b"/")
        base = os.fsencode(self.tracked_paths[int(root)])
        return os.fsdecode(base + b"/" + rel if rel else base)

    def _manifest(self, snap: Snapshot) -> SnapshotManifest:
        files: dict[str, FileState] = {}
        links: dict[str, str] = {}
        stack = [(e.name, e) for e in self.repo.tree(snap.root)]
        while stack:
            path, e = stack.pop()
            if e.kind == DIR:
                stack += [(path + b"/" + c.name, c) for c in self.repo.tree(e.oid)]
            elif e.kind == FILE:
                files[self._abs(path)] = FileState(ContentHash(e.oid), e.size,
                                                   e.mtime_ns // 1_000_000_000,
                                                   stat.S_IFREG | e.mode)
            elif e.kind == SYMLINK:
                links[self._abs(path)] = os.fsdecode(self.repo.objects.read(e.oid))
        parent = self.repo.catalog.snapshot(snap.parent) if snap.parent else None
        return SnapshotManifest(snap.number or 0, iso_utc(snap.created_ns),
                                parent.number if parent else None, ContentHash(snap.root),
                                dict(sorted(files.items())), dict(sorted(links.items())))

    def _change(self, c: PathChange) -> Change:
        delta = None if c.change_type == PERMISSIONS else c.size_delta
        return Change(self._abs(c.path), c.change_type, delta)

    # -- the documented API ------------------------------------------------------------------

    def create_baseline(self) -> SnapshotManifest:
        if self._numbered():
            raise CtrlzError("this session already has a baseline; call create_incremental()")
        with writing(self.repo):
            snap = take_snapshot(self.repo, self.tracked_paths, self._rules, type="pre-run",
                                 label="baseline", limits=self.limits).snapshot
        return self._manifest(snap)

    def create_incremental(self) -> tuple[SnapshotManifest, list[Change]]:
        numbered = self._numbered()
        if not numbered:
            raise CtrlzError("No previous snapshot. Call create_baseline() first.")
        previous = numbered[-1]
        with writing(self.repo):
            snap = take_snapshot(self.repo, self.tracked_paths, self._rules, type="auto",
                                 limits=self.limits, parent=previous).snapshot
        changes = [self._change(c) for c in diff_trees(self.repo.tree, previous.root,
                                                        self.repo.tree, snap.root)
                   if c.kind != DIR]
        return self._manifest(snap), changes

    def _restore_changes(self, actions: Iterable[Action]) -> list[Change]:
        out = []
        for a in actions:
            if a.op == RMDIR or (a.entry is not None and a.entry.kind == DIR) or a.op == UTIME:
                continue
            old, new = a.expect, a.entry
            if a.op == DELETE:
                out.append(Change(self._abs(a.path), "deleted", -(old.size if old else 0)))
            elif a.op == CHMOD:
                out.append(Change(self._abs(a.path), "permissions_changed", None))
            elif new is not None:
                kind = "modified" if old is not None else "created"
                delta = new.size - (old.size if old else 0) if a.op == WRITE else 0
                out.append(Change(self._abs(a.path), kind, delta))
        return sorted(out, key=lambda c: c.path)

    def compute_restore_diff(self, snapshot_number: int) -> list[Change]:
        with writing(self.repo):
            result = restore_in_place(self.repo, self.tracked_paths, self._rules, Request(
                kind="restore", target=self._by_number(snapshot_number), dry_run=True),
                self.limits)
        return self._restore_changes(result.plan.actions)

    def restore_to(self, snapshot_number: int) -> list[Change]:
        """Put the tracked paths back to snapshot ``snapshot_number``, through the restore
        engine: a safety snapshot (unnumbered) first, and an undo entry after."""
        target = self._by_number(snapshot_number)
        with writing(self.repo):
            result = restore_in_place(self.repo, self.tracked_paths, self._rules, Request(
                kind="restore", target=target, numbered_safety=False,
                undo={"record": {"kind": "restore", "paths": []}},
                label=f"before restoring snapshot {snapshot_number}"), self.limits)
        return self._restore_changes(result.applied)

    def load_manifest(self, number: int) -> SnapshotManifest:
        return self._manifest(self._by_number(number))

    def snapshot_count(self) -> int:
        return len(self._numbered())

    def save_session_metadata(self, meta: SessionMetadata) -> None:
        atomic_write_bytes(self.session_dir / SESSION_FILE, meta.to_json().encode())

    @staticmethod
    def load_session_metadata(session_dir: str) -> SessionMetadata:
        path = Path(session_dir).expanduser() / SESSION_FILE
        try:
            return SessionMetadata.from_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CtrlzError(f"no session metadata in {session_dir}") from None

    def close(self) -> None:
        self.repo.close()
