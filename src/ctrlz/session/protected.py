"""An open protected workspace: its root, its store, its configuration, and the policy of
taking snapshots there (pools, retention).

This is the session layer's handle on a workspace; the Python API's
:class:`ctrlz.Workspace` is a thin face over it, and the session, tool-call and daemon code take
it (or a :class:`ctrlz.Workspace`, which is one) without importing any face.

The store lives under ``$CTRLZ_HOME`` (default: the platform's user data directory), never in the
workspace: ``<home>/workspaces/<name>-<hash of the workspace's real path>/``
(:mod:`ctrlz.state.locator`). Opening it finishes whatever an interrupted restore left
(:func:`ctrlz.engine.restore.journal.recover`); what was done is in :attr:`recovered`.

The store's repository (its catalog, SQLite; its objects) opens on first use of
:attr:`ProtectedWorkspace.repo`, not with the workspace: a rollback or a snapshot that the
workspace daemon serves never reads the store in the asking process, and importing and
opening it was ~10 ms of such a process's ~60.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import StoreError, UsageError, WorkspaceError
from ..paths import within, workspace_relative
from ..state.trees import DIR, Entry
from .config import Config, load_config
from .locator import default_home, has_store, inside, refuse_root_in_home, store_path_for

# The snapshot engine, retention and the restore engine load when a method needs them: a
# command that only reads (`ctrlz list`) opens a workspace in a fresh interpreter.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Self

    from ..engine import retention
    from ..engine.snapshot import DirtySource, Taken
    from ..state.db.oplog import OpLog
    from ..state.db.sessiondb import SessionDB
    from ..state.store.repository import Repository
    from ..types import Snapshot


def recover(ws: ProtectedWorkspace) -> list[str]:
    """:func:`ctrlz.engine.restore.journal.recover`, the store opened only when a restore's journal
    is there (one stat): opening a workspace must clean up after a crash, and must stay
    cheap."""
    from ..engine.restore import journal

    if not journal.pending(ws.store_path):
        return []
    return journal.recover(ws.repo)


def keep_restores_in_process() -> None:
    """For a long-lived process: every restore it runs, it runs itself."""
    ProtectedWorkspace.restore_by_daemon = False


class ProtectedWorkspace:
    """A workspace ctrlz protects, opened: root, store, configuration, snapshot policy."""

    #: Whether a running workspace daemon is asked first: it takes snapshots from its
    #: watcher's dirty set, and tells a restore's capture what changed, so neither lists the
    #: whole tree (see :mod:`ctrlz.session.daemon.daemon`). The daemon turns it off for itself.
    use_daemon = True
    #: Whether a restore is handed to a running workspace daemon (``session.restores.run``):
    #: it saves a process opened for one command its start-up and its stat walk. A process
    #: that keeps workspaces open (the service, the MCP server) turns it off for itself with
    #: :func:`keep_restores_in_process`: it is warm already, and restores what it is asked
    #: to where its own clients see it (progress, events, its crash semantics).
    restore_by_daemon = True
    #: Whether a snapshot or restore that this process ran itself (no daemon answered)
    #: starts the workspace daemon afterwards, the ``daemon`` setting permitting, so that the
    #: next one costs what changed instead of a walk of the whole tree (:meth:`ensure_daemon`).
    #: The command line sets it on the workspace it opens, as agent hooks start the daemon at
    #: ``SessionStart``; a library caller (the Python API, the ``SnapshotManager``) never
    #: gets a background process it did not ask for.
    start_daemon = False
    #: Whether the pools (:meth:`enforce_pools`) that follow a snapshot or restore wait for
    #: :meth:`housekeep`: the workspace daemon turns it on and calls that once its answer is
    #: sent, so that the caller does not wait for retention (~1.3 ms of a snapshot once the
    #: safety ring is full). Off, they run before the snapshot or restore returns.
    housekeep_later = False
    _pools_due = False

    def __init__(self, root: Path, store: Path, config: Config, home: Path) -> None:
        self.root = root
        self._store = store
        self._opened: dict[str, Repository] = {}  # the repository, once open
        self.config = config
        self.home = home
        #: notes about interrupted restores this opening cleaned up (shown by the CLI)
        self.recovered: list[str] = recover(self)

    @property
    def repo(self) -> Repository:
        """The store's repository, opened on first use (see the module docstring). Two
        threads here at once (the service's) get the same one: ``setdefault`` is atomic, and
        the loser's is closed."""
        repo = self._opened.get("repo")
        if repo is None:
            from ..state.store.repository import Repository

            mine = Repository.open(self._store)
            repo = self._opened.setdefault("repo", mine)
            if repo is not mine:
                mine.close()
        return repo

    def open_store(self) -> Repository:
        """Open the store now rather than on first use: for a command whose whole job is to
        say the workspace is protected (``ctrlz init``), which must fail over a store it
        cannot read or that a newer ctrlz wrote, not report success."""
        return self.repo

    @property
    def holds_store_lock(self) -> bool:
        """Whether this process holds the store's writer lock (never, if it has not opened
        the store)."""
        repo = self._opened.get("repo")
        return repo is not None and repo.lock.held

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def init(cls, path: str | os.PathLike[str] = ".",
             home: str | os.PathLike[str] | None = None,
             config: Config | None = None) -> Self:
        """Start protecting ``path``; idempotent."""
        root = Path(path).expanduser()
        if not root.is_dir():
            raise UsageError(f"{root} is not a directory")
        root = root.resolve()
        home = Path(home or default_home()).expanduser()
        refuse_root_in_home(root, home)
        store = store_path_for(root, home)
        if inside(home, root) or inside(store, root):
            raise WorkspaceError(
                f"the ctrlz store ({store}) would be inside the workspace {root}; set CTRLZ_HOME "
                "to a directory outside it")
        config = config or load_config(root)
        if not has_store(store):
            from ..state.store.repository import Repository

            Repository.create(store, [str(root)], algorithm=config["hash"]).close()
        return cls(root, store, config, home)

    @classmethod
    def find(cls, start: str | os.PathLike[str] = ".",
             home: str | os.PathLike[str] | None = None) -> Path | None:
        """The protected workspace that contains ``start``, if any."""
        home = Path(home or default_home()).expanduser()
        here = Path(start).expanduser().resolve()
        for candidate in (here, *here.parents):
            if has_store(store_path_for(candidate, home)):
                return candidate
        return None

    @classmethod
    def open(cls, start: str | os.PathLike[str] = ".",
             home: str | os.PathLike[str] | None = None,
             config: Config | None = None) -> Self:
        home = Path(home or default_home()).expanduser()
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
        refuse_root_in_home(root, home)
        return cls(root, store_path_for(root, home), config or load_config(root), home)

    @classmethod
    def located(cls, root: str | os.PathLike[str], store: str | os.PathLike[str],
                config: Config | None = None) -> Self:
        """The workspace at ``root`` (real) whose store the locator already found
        (:func:`ctrlz.session.locator.locate`; a hook's context holds both), opened without
        locating it a second time: the home is the store's (``<home>/workspaces/<name>``)."""
        root, store = Path(root), Path(store)
        home = store.parent.parent
        refuse_root_in_home(root, home)
        return cls(root, store, config or load_config(root), home)

    def close(self) -> None:
        if getattr(self, "_session_db", None) is not None:
            self._session_db.close()
        repo = self._opened.get("repo")
        if repo is not None:
            repo.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def store_path(self) -> Path:
        return self._store

    @property
    def roots(self) -> list[Path]:
        return [self.root]

    def snapshot(self, type: str = "manual", label: str | None = None,
                 pinned: bool = False, dirty: set[bytes] | None = None,
                 session_id: str | None = None) -> Snapshot:
        """Take a snapshot, obeying the pools: a full manual pool is an error; rings and the
        byte cap drop the oldest droppable snapshots afterwards (see ``engine.retention``).

        When the workspace daemon runs, it takes the snapshot from its watcher's dirty set
        (the same snapshot, without listing the whole tree); ``dirty`` is given by a caller
        that watches the tree itself."""
        label = check_label(label)
        if dirty is None and self.use_daemon:
            snap = self._snapshot_by_daemon(type, label, pinned, session_id)
            if snap is not None:
                self.last_scan = None
                return snap
        from ..engine import retention
        from ..engine.snapshot import writing
        from . import journal

        # the lock, and the clean-up after a crashed writer (a long-lived process, the daemon,
        # meets a crashed restore here), once for the check, the snapshot and its records
        with writing(self.repo):
            if type == "manual":
                retention.check_manual_cap(self.repo.catalog.type_counts().get("manual", 0),
                                           self.policy)
            taken = self._take(type, label, pinned, dirty)
            snap, self.last_scan = taken.snapshot, taken.stats
            journal.record_snapshot(self.session_db, snap, auto_max=self.config["auto_max"],
                                    session_id=session_id)
            self.after_change()
        if dirty is None:
            self.ensure_daemon()
        return snap

    def ensure_daemon(self) -> None:
        """After a snapshot or restore that walked the whole tree because no daemon answered:
        start one in the background when :attr:`start_daemon` and the ``daemon`` setting ask
        for it (one lock probe when it runs already). After the work, never before it: its
        start-up and first scan must not compete with the command the user is waiting for."""
        if self.start_daemon and self.use_daemon:
            from . import daemon_client

            daemon_client.autostart(self.root, self.store_path, bool(self.config["daemon"]))

    def _snapshot_by_daemon(self, type: str, label: str | None, pinned: bool,
                            session_id: str | None) -> Snapshot | None:
        """The snapshot taken by the workspace daemon, when one answers; None otherwise, and
        on any refusal (a full manual pool, a changed configuration, a snapshot over
        ``max_bytes``...), so that the caller takes it here and meets the error itself.

        Not while this process holds the store lock: the daemon needs it to commit."""
        if self.holds_store_lock:
            return None
        from .served import ask_snapshot

        return ask_snapshot(self.store_path, self.config.values, type=type, label=label,
                            pinned=pinned, session_id=session_id,
                            lookup=lambda sid: self.repo.catalog.snapshot(sid))

    @property
    def dirty_source(self) -> DirtySource | None:
        """What a restore's capture step asks, under the store lock, for the directories that
        changed since the stat cache was written: the daemon's watcher, when one runs."""
        if not self.use_daemon:
            return None
        store, config = self.store_path, self.config.values

        def from_daemon() -> list[set[bytes] | None] | None:
            from . import daemon_client

            try:
                return [daemon_client.dirty(store, config)]
            except daemon_client.DaemonUnavailable:
                return None

        return from_daemon

    def _take(self, type: str, label: str | None, pinned: bool,
              dirty: set[bytes] | None = None) -> Taken:
        """``dirty``: workspace-relative directories a watcher saw change since the last
        snapshot; every other directory is reused from the stat cache without being listed.
        Inside :func:`~ctrlz.engine.snapshot.writing`, as :meth:`snapshot` calls it."""
        from ..engine.snapshot import take_snapshot

        return take_snapshot(self.repo, self.roots, [self.config.rules], type=type, label=label,
                             pinned=pinned, limits=self.config.limits,
                             dirty=[dirty] if dirty is not None else None)

    @property
    def session_db(self) -> SessionDB:
        """The store's session database (file events, snapshot events, exec events)."""
        db = getattr(self, "_session_db", None)
        if db is None:
            from ..state.db.sessiondb import SessionDB

            db = self._session_db = SessionDB(self.store_path / "session.db")
        return db

    def snapshots(self) -> list[Snapshot]:
        """All snapshots, oldest first."""
        return self.repo.catalog.snapshots()

    def resolve(self, ref: str) -> Snapshot:
        """A snapshot by id, ``latest``, label, id prefix, number or ``cp-N``
        (:func:`ctrlz.engine.refs.resolve`). A full id or ``latest`` is one catalog query (the
        same answer, since those are tried first), so the refs that restores and scripts pass
        cost the same at any length of history; the rest reads the list."""
        key = ref.strip()
        catalog = self.repo.catalog
        exact = (catalog.latest() if key in ("latest", "HEAD", "@") else
                 catalog.snapshot(key) if key.startswith("snap_") and key.isascii() else None)
        if exact is not None:
            return exact
        from ..engine.refs import resolve

        return resolve(self.snapshots(), ref)

    def remove(self, refs: Sequence[str]) -> list[Snapshot]:
        with self.repo.lock:
            gone = [self.resolve(r) for r in refs]
            self.repo.recover()  # a failed snapshot's pack may be what filled the disk
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

    def relpath(self, path: str | os.PathLike[str] | bytes) -> bytes:
        """A user-supplied path as a workspace-relative path, refusing anything outside.

        Relative paths are taken from the current directory when it lies inside the workspace
        (as git does), otherwise from the workspace root (:mod:`ctrlz.paths`)."""
        root = os.fsencode(self.root)
        cwd = os.fsencode(os.getcwd())
        return workspace_relative(root, path, cwd if within(cwd, root) else root)

    @staticmethod

    def vpath(rel: bytes) -> bytes:
        """Workspace-relative path to the engine's virtual path (root 0)."""
        return b"0/" + rel if rel else b"0"

    def entry_at(self, ref: str, path: str | bytes) -> Entry | None:
        """What snapshot ``ref`` holds at ``path`` (a file, symlink or directory entry), or
        None if the path was absent from it."""
        return self._entry_at(self.resolve(ref), self.relpath(path))

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

    def store_usage(self) -> tuple[int, int]:
        """(logical bytes, stored bytes) of every object in the store."""
        return self.repo.catalog.stored_bytes()

    def store_disk_bytes(self) -> int:
        """Bytes the store takes against ``store_cap``: its catalog, packs, objects and stat
        cache (``state.store.usage.STORE_FILES``), read from the catalog; the agents' pre-images
        have their own budget."""
        from ..state.store.usage import store_usage

        return store_usage(self.repo)

    @property
    def policy(self) -> retention.Policy:
        from ..engine.retention import Policy

        return Policy.from_mapping(self.config.values)

    @property
    def oplog(self) -> OpLog:
        from ..state.db.oplog import OpLog

        return OpLog(self.repo.catalog)

    def after_change(self) -> None:
        """The pools, after a snapshot or restore committed: now, or at :meth:`housekeep`
        (see :attr:`housekeep_later`)."""
        if self.housekeep_later:
            self._pools_due = True
        else:
            self.enforce_pools()

    def housekeep(self) -> None:
        """The pools that :meth:`after_change` left for later, if any. Should they fail,
        they stay due: the next call tries again."""
        if self._pools_due:
            self.enforce_pools()
            self._pools_due = False

    def enforce_pools(self) -> retention.PrunePlan:
        """Apply the rings, ``max_count`` and ``store_cap`` now, and hand ``preimage_cap`` to
        the agent hooks, which enforce it at their next capture (they cannot load the config)."""
        from ..engine import retention
        from ..state import failpoints

        failpoints.hit("pools")
        cap = self.config["preimage_cap"]
        if getattr(self, "_synced_preimage_cap", None) != cap:  # once per process and value
            from ..state.store.toolcall_store import sync_preimage_cap

            sync_preimage_cap(self.store_path, cap)
            self._synced_preimage_cap = cap
        with self.repo.lock:
            protected = self.oplog.referenced()
            plan = retention.plan_pools_for(self.repo, self.policy, protected)
            if plan.drop:
                # no gc here: it walks every tree in the store, and a session drops an auto
                # snapshot on every timer tick; the byte cap, `ctrlz gc` and `prune` collect
                plan.execute(self.repo, collect=False)
            # the disk bound spares only what the next undo and redo need (see needed_next)
            capped = retention.enforce_byte_cap(self.repo, self.policy,
                                                self.oplog.needed_next())
            for s in capped.drop:
                plan.add(s, capped.reasons[s.id])
        return plan

    def prune(self, keep: int | None = None, older_than_seconds: float | None = None,
              dry_run: bool = False) -> retention.PrunePlan:
        """Drop snapshots beyond the newest ``keep`` and/or older than ``older_than_seconds``
        (both must agree); with neither, apply the pool rules. Then collect garbage."""
        import time

        from ..engine import retention

        with self.repo.lock:
            plan = retention.plan_prune(
                self.snapshots(), self.policy, keep=keep,
                older_than_ns=None if older_than_seconds is None else int(
                    older_than_seconds * 1e9),
                now_ns=time.time_ns(), protected=self.oplog.referenced())
            plan.dry_run = dry_run
            if not dry_run:
                self.repo.recover()
                plan.execute(self.repo)
                if keep is None and older_than_seconds is None:
                    capped = retention.enforce_byte_cap(self.repo, self.policy,
                                                        self.oplog.needed_next())
                    for s in capped.drop:
                        plan.add(s, capped.reasons[s.id])
        return plan

    def relabel(self, ref: str, label: str | None, type: str | None = None) -> Snapshot:
        """Give snapshot ``ref`` a new label (and optionally a new pool type)."""
        label = check_label(label)
        with self.repo.lock:
            snap = self.resolve(ref)
            fields: dict[str, object] = {"label": label}
            if type is not None:
                fields["type"] = type
            with self.repo.catalog.transaction():
                self.repo.catalog.update_snapshot(snap.id, **fields)
        return self.resolve(snap.id)


def check_label(label: str | None) -> str | None:
    """A label as given, if it is text a catalog can store. A label made of bytes that are
    not UTF-8 (a shell's ``$'caf\\xe9'``, which Python reads as surrogate escapes) is refused
    with a usage error, where storing it was an internal error."""
    if label is not None:
        try:
            label.encode("utf-8")
        except UnicodeEncodeError:
            try:
                raw = label.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800"), no byte at all
                raw = label.encode("utf-8", "backslashreplace")
            shown = raw.decode("ascii", "backslashreplace")
            raise UsageError(f"the label {shown} is not UTF-8 text; give it in UTF-8") \
                from None
    return label
