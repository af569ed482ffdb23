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
from .engine import retention
from .engine import verify as verify_mod
from .engine.diff import PathChange, diff_trees, unified_diff
from .engine.refs import resolve
from .engine.restore import RestoreResult, restore_snapshot
from .engine.snapshot import gc_paused, overlay_reader, scan_working, take_snapshot
from .errors import (
    PathOutsideWorkspace,
    RestoreError,
    StoreError,
    UsageError,
    WorkspaceError,
)
from .oplog import OpLog
from .reports import History, Status, UndoResult, Version
from .session import journal
from .state.repository import Repository
from .state.scan import ScanStats
from .state.sessiondb import SessionDB
from .state.trees import DIR, FILE, Entry
from .types import Skipped, Snapshot, show_path


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
            here = Path(start).expanduser().resolve()
            for candidate in (here, *here.parents):
                store = store_path_for(candidate, home)
                if store.is_dir() and any(store.iterdir()):
                    raise StoreError(f"the store {store} of {candidate} is unreadable: its "
                                     "catalog.db is missing or not a file")
            raise WorkspaceError(f"{Path(start).expanduser().resolve()} is not inside a protected "
                                 "workspace; run `ctrlz init` there first")
        return cls(root, Repository.open(store_path_for(root, home)),
                   config or load_config(root), home)

    def close(self) -> None:
        if getattr(self, "_session_db", None) is not None:
            self._session_db.close()
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
                 pinned: bool = False, dirty: set[bytes] | None = None,
                 session_id: str | None = None) -> Snapshot:
        """Take a snapshot, obeying the pools: a full manual pool is an error; rings and the
        byte cap drop the oldest droppable snapshots afterwards (see ``engine.retention``)."""
        with gc_paused(), self.repo.lock:
            if type == "manual":
                retention.check_manual_cap(self.snapshots(), self.policy)
            snap, self.last_scan = self._take(type, label, pinned, dirty)
            journal.record_snapshot(self.session_db, snap, auto_max=self.config["auto_max"],
                                    session_id=session_id)
            self.enforce_pools()
        return snap

    def _take(self, type: str, label: str | None, pinned: bool,
              dirty: set[bytes] | None = None) -> tuple[Snapshot, ScanStats]:
        """``dirty``: workspace-relative directories a watcher saw change since the last
        snapshot; every other directory is reused from the stat cache without being listed."""
        return take_snapshot(self.repo, self.roots, [self.config.rules], type=type, label=label,
                             pinned=pinned, limits=self.config.limits,
                             dirty=[dirty] if dirty is not None else None)

    @property
    def session_db(self) -> SessionDB:
        """The store's session database (file events, snapshot events, exec events)."""
        db = getattr(self, "_session_db", None)
        if db is None:
            db = self._session_db = SessionDB(self.store_path / "session.db")
        return db

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
            state = scan_working(self.repo, self.roots, [self.config.rules],
                                       self.config.limits)
            read_new, new_root, new_name = overlay_reader(self.repo, state.trees), state.root, (
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

    def diffs_to_working(self, olds: Sequence[str]) -> list[Diff]:
        """``diff(old)`` against the working tree for each of ``olds``, scanning the working
        tree only once (the MCP server's change listing compares it with every snapshot)."""
        state = scan_working(self.repo, self.roots, [self.config.rules],
                                   self.config.limits)
        read_new = overlay_reader(self.repo, state.trees)
        out = []
        for ref in olds:
            a = self.resolve(ref)
            changes = [PathChange(c.path[2:], c.change_type, c.old, c.new)
                       for c in diff_trees(self.repo.tree, a.root, read_new, state.root)
                       if c.path.startswith(b"0/")]
            out.append(Diff(a.id, "working tree", changes))
        return out

    def entry_at(self, ref: str, path: str | bytes) -> Entry | None:
        """What snapshot ``ref`` holds at ``path`` (a file, symlink or directory entry), or
        None if the path was absent from it."""
        return self._entry_at(self.resolve(ref), self.relpath(path))

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
        result = restore_snapshot(self.repo, self.roots, [self.config.rules], target,
                                  paths=vpaths, dry_run=dry_run, limits=self.config.limits)
        if not dry_run:
            journal.record_restored(self.session_db, result)
        return result

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

    def store_disk_bytes(self) -> int:
        """Bytes the store directory takes on disk (sum of its files' sizes)."""
        return retention.disk_usage(self.store_path)

    # -- pools, retention, undo/redo (issue 3) ------------------------------------------------

    @property
    def policy(self) -> retention.Policy:
        return retention.Policy.from_mapping(self.config.values)

    @property
    def oplog(self) -> OpLog:
        return OpLog(self.repo.catalog)

    def enforce_pools(self) -> retention.PrunePlan:
        """Apply the rings, ``max_count`` and ``store_cap`` now."""
        with self.repo.lock:
            protected = self.oplog.referenced()
            plan = retention.plan_pools(self.snapshots(), self.policy, protected)
            if plan.drop:
                # no gc here: it walks every tree in the store, and a session drops an auto
                # snapshot on every timer tick; the byte cap, `ctrlz gc` and `prune` collect
                plan.execute(self.repo, collect=False)
            capped = retention.enforce_byte_cap(self.repo, self.policy, protected)
            for s in capped.drop:
                plan.add(s, capped.reasons[s.id])
        return plan

    def prune(self, keep: int | None = None, older_than_seconds: float | None = None,
              dry_run: bool = False) -> retention.PrunePlan:
        """Drop snapshots beyond the newest ``keep`` and/or older than ``older_than_seconds``
        (both must agree); with neither, apply the pool rules. Then collect garbage."""
        import time

        with self.repo.lock:
            plan = retention.plan_prune(
                self.snapshots(), self.policy, keep=keep,
                older_than_ns=None if older_than_seconds is None else int(
                    older_than_seconds * 1e9),
                now_ns=time.time_ns(), protected=self.oplog.referenced())
            plan.dry_run = dry_run
            if not dry_run:
                plan.execute(self.repo)
                if keep is None and older_than_seconds is None:
                    capped = retention.enforce_byte_cap(self.repo, self.policy,
                                                        self.oplog.referenced())
                    for s in capped.drop:
                        plan.add(s, capped.reasons[s.id])
        return plan

    def _restore_rel(self, ref: str, rels: Sequence[bytes]) -> RestoreResult:
        target = self.resolve(ref)
        vpaths = [self.vpath(r) for r in rels] if rels else None
        result = restore_snapshot(self.repo, self.roots, [self.config.rules], target,
                                  paths=vpaths, limits=self.config.limits)
        journal.record_restored(self.session_db, result)
        return result

    def rollback(self, ref: str, paths: Sequence[str | bytes] | None = None,
                 dry_run: bool = False, kind: str = "rollback") -> RestoreResult:
        """An in-place restore that ``undo`` can take back (see ``ctrlz.oplog``)."""
        rels = [self.relpath(p) for p in paths] if paths else []
        if dry_run:
            return self.restore(ref, paths, dry_run=True)
        with self.repo.lock:
            result = self._restore_rel(ref, rels)
            self.oplog.record(kind, result.target.id, rels,
                              result.safety.id if result.safety else None)
            self.enforce_pools()
        return result

    def _entry_at(self, snap: Snapshot, rel: bytes) -> Entry | None:
        oid: bytes | None = snap.root
        entry = None
        for name in self.vpath(rel).split(b"/"):
            if oid is None:
                return None
            entry = next((e for e in self.repo.tree(oid) if e.name == name), None)
            if entry is None:
                return None
            oid = entry.oid if entry.kind == DIR else None
        return entry

    def revert(self, path: str | bytes, from_: str | None = None,
               dry_run: bool = False) -> RestoreResult:
        """One file or folder back from the newest snapshot in which it exists (or ``from_``);
        deleted if that snapshot says it was absent."""
        rel = self.relpath(path)
        if not rel:
            raise UsageError("revert takes a file or folder; use `ctrlz rollback` for the "
                             "whole workspace")
        if from_ is None:
            candidates = [s for s in self.snapshots() if s.type != "safety"]
            if not candidates:
                self.resolve("latest")  # raises the "no snapshots yet" error
                candidates = self.snapshots()
            source = next((s for s in reversed(candidates) if self._entry_at(s, rel)),
                          candidates[-1])
            from_ = source.id
        return self.rollback(from_, [path], dry_run=dry_run, kind="revert")

    def relabel(self, ref: str, label: str | None, type: str | None = None) -> Snapshot:
        """Give snapshot ``ref`` a new label (and optionally a new pool type)."""
        with self.repo.lock:
            snap = self.resolve(ref)
            fields: dict[str, object] = {"label": label}
            if type is not None:
                fields["type"] = type
            with self.repo.catalog.transaction():
                self.repo.catalog.update_snapshot(snap.id, **fields)
        return self.resolve(snap.id)

    def undo(self) -> UndoResult:
        """Take back the newest rollback/revert that is not undone yet."""
        with self.repo.lock:
            op = self.oplog.next_undo()
            if op is None:
                raise UsageError("nothing to undo: no rollback or revert since the log began")
            if op.before is None or self.repo.catalog.snapshot(op.before) is None:
                raise RestoreError(f"cannot undo the {op.kind} to {op.target}: its safety "
                                   "snapshot is gone")
            result = self._restore_rel(op.before, list(op.paths))
            self.oplog.mark_undone(op.seq, result.safety.id if result.safety else None)
            self.enforce_pools()
        return UndoResult("undo", op, result)

    def redo(self) -> UndoResult:
        """Apply again the oldest undone rollback/revert."""
        with self.repo.lock:
            op = self.oplog.next_redo()
            if op is None:
                raise UsageError("nothing to redo")
            cat = self.repo.catalog
            ref = op.after if op.after and cat.snapshot(op.after) else op.target
            if cat.snapshot(ref) is None:
                raise RestoreError(f"cannot redo the {op.kind} to {op.target}: its snapshot "
                                   "is gone")
            result = self._restore_rel(ref, list(op.paths))
            self.oplog.mark_redone(op.seq)
            self.enforce_pools()
        return UndoResult("redo", op, result)

    def history(self, path: str | bytes) -> History:
        """Every version of one path across the snapshots, by content (object id)."""
        rel = self.relpath(path)
        versions: list[Version] = []
        group: list[Snapshot] = []
        key: tuple[object, ...] | None = None
        current: Entry | None = None
        for snap in self.snapshots():
            entry = self._entry_at(snap, rel)
            k = (entry.kind, entry.oid if entry.kind != DIR else b"", entry.mode) if entry \
                else None
            if group and k != key:
                versions.append(_version(current, group))
                group = []
            key, current = k, entry
            group.append(snap)
        if group:
            versions.append(_version(current, group))
        if versions and versions[0].kind is None:
            versions.pop(0)  # absent before it first appeared: not a version
        return History(rel, versions)

    def status(self) -> Status:
        """What is protected and excluded, skipped files, last snapshot, store size, health."""
        import time

        snaps = self.snapshots()
        last = snaps[-1] if snaps else None
        by_type: dict[str, int] = {}
        for s in snaps:
            by_type[s.type] = by_type.get(s.type, 0) + 1
        used, cap = self.store_disk_bytes(), self.config["store_cap"]
        problems = []
        if last is None:
            problems.append("no snapshots yet; take one with `ctrlz snapshot`")
        if used > cap:
            problems.append(f"the store ({used} bytes) is over store_cap ({cap} bytes)")
        if last is not None and last.skipped:
            problems.append(f"the last snapshot skipped {len(last.skipped)} path(s)")
        if by_type.get("manual", 0) >= self.config["manual_max"]:
            problems.append("the manual pool is full; `ctrlz rm` or `ctrlz prune` to make room")
        if not self.root.is_dir():
            problems.append(f"the workspace {self.root} is missing")
        from .toolcalls.hook_log import recent_hook_errors

        day_ago = time.time_ns() - 86_400 * 10**9
        hook_errors = recent_hook_errors(self, limit=20, since_ns=day_ago)
        if hook_errors:
            last_error = hook_errors[-1]
            problems.append(f"{len(hook_errors)} agent hook error(s) in the last day; the "
                            f"newest ({last_error.get('agent')} {last_error.get('event')}): "
                            f"{last_error.get('error')}")
        from .session import daemon_client

        failure = daemon_client.recent_failure(self.store_path)
        daemon = {"running": daemon_client.running(self.store_path),
                  "last_failure": failure.get("reason") if failure else None}
        if failure and not daemon["running"]:
            problems.append(f"the workspace daemon failed to start: {daemon['last_failure']}; "
                            "see `ctrlz daemon status`")
        log = self.oplog
        return Status(
            root=str(self.root), store=str(self.store_path), rules=self.config.rules.to_json(),
            snapshots=len(snaps), by_type=by_type, last=last,
            age_seconds=(time.time_ns() - last.created_ns) / 1e9 if last else None,
            store_bytes=used, store_cap=cap,
            skipped=[Skipped(k.path.partition(b"/")[2], k.reason) for k in last.skipped]
            if last else [],
            problems=problems, can_undo=log.next_undo() is not None,
            can_redo=log.next_redo() is not None, daemon=daemon)


def _version(entry: Entry | None, group: list[Snapshot]) -> Version:
    if entry is None:
        return Version(None, None, None, None, tuple(group))
    kind = {"f": "file", "l": "symlink", "d": "dir"}[entry.kind]
    return Version(kind, entry.oid.hex() if entry.kind != DIR else None,
                   entry.size if entry.kind != DIR else None, entry.mode, tuple(group))
