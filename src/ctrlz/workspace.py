"""The native Python API: one protected workspace and its store.

>>> ws = Workspace.init("~/code/app")          # doctest: +SKIP
>>> snap = ws.snapshot(label="before refactor")  # doctest: +SKIP
>>> ws.restore(snap.id)                        # doctest: +SKIP

The store lives under ``$CTRLZ_HOME`` (default: the platform's user data directory), never in the
workspace: ``<home>/workspaces/<name>-<hash of the workspace's real path>/``. Every operation
here is one call into the engine; the CLI, the MCP server and the hooks all go through this class.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from .config import Config, load_config
from .engine import gc as gc_mod
from .engine import verify as verify_mod
from .engine.diff import PathChange, diff_trees, unified_diff
from .engine.refs import resolve
from .engine.restore import RestoreResult, restore_snapshot
from .engine.snapshot import overlay_reader, scan_working, take_snapshot
from .errors import PathOutsideWorkspace, UsageError, WorkspaceError
from .state.repository import Repository
from .state.scan import ScanStats
from .state.trees import DIR, FILE, Entry
from .types import Snapshot, show_path


def default_home() -> Path:
    """``$CTRLZ_HOME`` if set, else the platform's user data directory for ctrlz."""
    env = os.environ.get("CTRLZ_HOME")
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir("ctrlz"))


def store_path_for(root: Path, home: Path) -> Path:
    real = os.fsencode(root.resolve())
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", root.resolve().name)[:40] or "root"
    return home / "workspaces" / f"{slug}-{hashlib.sha256(real).hexdigest()[:16]}"


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


@dataclass(frozen=True)
class Diff:
    """The changes between two states of a workspace, in path order."""

    old: str  # a snapshot id
    new: str  # a snapshot id, or "working tree"
    changes: list[PathChange]


class Workspace:
    def __init__(self, root: Path, repo: Repository, config: Config, home: Path) -> None:
        self.root = root
        self.repo = repo
        self.config = config
        self.home = home

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def init(cls, path: str | os.PathLike[str] = ".", home: Path | None = None,
             config: Config | None = None) -> Workspace:
        """Start protecting ``path``; idempotent."""
        root = Path(path).expanduser()
        if not root.is_dir():
            raise UsageError(f"{root} is not a directory")
        root = root.resolve()
        home = (home or default_home()).expanduser()
        store = store_path_for(root, home)
        if _inside(home, root) or _inside(store, root):
            raise WorkspaceError(
                f"the ctrlz store ({store}) would be inside the workspace {root}; set CTRLZ_HOME "
                "to a directory outside it")
        config = config or load_config(root)
        if not Repository.exists(store):
            Repository.create(store, [str(root)], algorithm=config["hash"]).close()
        return cls(root, Repository.open(store), config, home)

    @classmethod
    def find(cls, start: str | os.PathLike[str] = ".", home: Path | None = None) -> Path | None:
        """The protected workspace that contains ``start``, if any."""
        home = (home or default_home()).expanduser()
        here = Path(start).expanduser().resolve()
        for candidate in (here, *here.parents):
            if Repository.exists(store_path_for(candidate, home)):
                return candidate
        return None

    @classmethod
    def open(cls, start: str | os.PathLike[str] = ".", home: Path | None = None,
             config: Config | None = None) -> Workspace:
        home = (home or default_home()).expanduser()
        if not Path(start).expanduser().exists():
            raise UsageError(f"{start} does not exist")
        root = cls.find(start, home)
        if root is None:
            raise WorkspaceError(f"{Path(start).expanduser().resolve()} is not inside a protected "
                                 "workspace; run `ctrlz init` there first")
        return cls(root, Repository.open(store_path_for(root, home)),
                   config or load_config(root), home)

    def close(self) -> None:
        self.repo.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def store_path(self) -> Path:
        return self.repo.path

    @property
    def roots(self) -> list[Path]:
        return [self.root]

    # -- snapshots ---------------------------------------------------------------------------

    def snapshot(self, type: str = "manual", label: str | None = None,
                 pinned: bool = False) -> Snapshot:
        snap, self.last_scan = self._take(type, label, pinned)
        return snap

    def _take(self, type: str, label: str | None, pinned: bool) -> tuple[Snapshot, ScanStats]:
        return take_snapshot(self.repo, self.roots, [self.config.rules], type=type, label=label,
                             pinned=pinned, limits=self.config.limits)

    def snapshots(self) -> list[Snapshot]:
        """All snapshots, oldest first."""
        return self.repo.catalog.snapshots()

    def resolve(self, ref: str) -> Snapshot:
        return resolve(self.snapshots(), ref)

    def remove(self, refs: Sequence[str]) -> list[Snapshot]:
        with self.repo.lock:
            gone = [self.resolve(r) for r in refs]
            with self.repo.catalog.transaction():
                for s in gone:
                    self.repo.catalog.delete_snapshot(s.id)
        return gone

    def set_pinned(self, ref: str, pinned: bool) -> Snapshot:
        with self.repo.lock:
            snap = self.resolve(ref)
            with self.repo.catalog.transaction():
                self.repo.catalog.update_snapshot(snap.id, pinned=int(pinned))
        return self.resolve(snap.id)

    # -- paths -------------------------------------------------------------------------------

    def relpath(self, path: str | os.PathLike[str] | bytes) -> bytes:
        """A user-supplied path as a workspace-relative path, refusing anything outside.

        Relative paths are taken from the current directory when it lies inside the workspace
        (as git does), otherwise from the workspace root. ``..`` is resolved lexically, so
        ``a..b.txt`` is a fine name while ``../x`` is refused; symlinks are not followed.
        """
        raw = os.fsencode(path)
        if not raw:
            raise UsageError("empty path")
        root = os.fsencode(self.root)
        cwd = os.fsencode(os.getcwd())
        if not (cwd == root or cwd.startswith(root + b"/")):
            cwd = root
        full = os.path.normpath(raw if raw.startswith(b"/") else os.path.join(cwd, raw))
        if full == root:
            return b""
        if not full.startswith(root + b"/"):
            raise PathOutsideWorkspace(f"{os.fsdecode(raw)} is outside the workspace "
                                       f"{self.root}")
        return full[len(root) + 1:]

    @staticmethod
    def vpath(rel: bytes) -> bytes:
        """Workspace-relative path to the engine's virtual path (root 0)."""
        return b"0/" + rel if rel else b"0"

    # -- diff --------------------------------------------------------------------------------

    def diff(self, old: str | None = None, new: str | None = None,
             paths: Sequence[str | bytes] | None = None) -> Diff:
        """Changes from snapshot ``old`` (default: latest) to snapshot ``new`` (default: the
        working tree)."""
        a = self.resolve(old or "latest")
        if new is None:
            state, sink = scan_working(self.repo, self.roots, [self.config.rules],
                                       self.config.limits)
            read_new, new_root, new_name = overlay_reader(self.repo, sink.blobs), state.root, (
                "working tree")
        else:
            b = self.resolve(new)
            read_new, new_root, new_name = self.repo.tree, b.root, b.id
        changes = [
            PathChange(c.path[2:], c.change_type, c.old, c.new)
            for c in diff_trees(self.repo.tree, a.root, read_new, new_root)
            if c.path.startswith(b"0/")
        ]
        if paths:
            prefixes = [self.relpath(p) for p in paths]
            changes = [c for c in changes if any(
                not p or c.path == p or c.path.startswith(p + b"/") for p in prefixes)]
        return Diff(a.id, new_name, changes)

    def content(self, entry: Entry | None, rel: bytes, working: bool) -> bytes | None:
        """A file's bytes from the store or, for the working tree side, from disk."""
        if entry is None or entry.kind == DIR:
            return None
        if working:
            try:
                if entry.kind == FILE:
                    with open(os.path.join(os.fsencode(self.root), rel), "rb") as f:
                        return f.read()
                return os.fsencode(os.readlink(os.path.join(os.fsencode(self.root), rel)))
            except OSError:
                return None
        return self.repo.objects.read(entry.oid)

    def patches(self, d: Diff) -> Iterator[str]:
        """Unified diffs for every changed file in ``d``."""
        working = d.new == "working tree"
        for c in d.changes:
            if c.kind == DIR or c.change_type == "permissions_changed":
                continue
            old = self.content(c.old, c.path, False)
            new = self.content(c.new, c.path, working)
            yield unified_diff(show_path(c.path), old, new)

    # -- restore -----------------------------------------------------------------------------

    def restore(self, ref: str, paths: Sequence[str | bytes] | None = None,
                dry_run: bool = False) -> RestoreResult:
        """Roll the workspace (or only ``paths``) back to snapshot ``ref``, in place."""
        target = self.resolve(ref)
        vpaths = [self.vpath(self.relpath(p)) for p in paths] if paths else None
        return restore_snapshot(self.repo, self.roots, [self.config.rules], target,
                                paths=vpaths, dry_run=dry_run, limits=self.config.limits)

    def restore_to(self, ref: str, dest: str | os.PathLike[str],
                   paths: Sequence[str | bytes] | None = None,
                   dry_run: bool = False) -> RestoreResult:
        """Extract snapshot ``ref`` into ``dest``, which must be new or empty."""
        target = self.resolve(ref)
        dest_path = Path(dest).expanduser().absolute()
        if _inside(dest_path, self.root):
            raise UsageError(f"{dest} is inside the workspace; restore into a directory "
                             "outside it, or use rollback")
        vpaths = [self.vpath(self.relpath(p)) for p in paths] if paths else None
        return restore_snapshot(self.repo, self.roots, [self.config.rules], target,
                                paths=vpaths, to=dest_path, dry_run=dry_run)

    # -- maintenance -------------------------------------------------------------------------

    def verify(self) -> verify_mod.VerifyReport:
        return verify_mod.verify_store(self.repo)

    def gc(self) -> gc_mod.GcReport:
        return gc_mod.collect_garbage(self.repo)

    def store_usage(self) -> tuple[int, int]:
        """(logical bytes, stored bytes) of every object in the store."""
        return self.repo.catalog.stored_bytes()
