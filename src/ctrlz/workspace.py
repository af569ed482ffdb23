"""The native Python API: one protected workspace and its store.

>>> ws = Workspace.init("~/code/app")          # doctest: +SKIP
>>> snap = ws.snapshot(label="before refactor")  # doctest: +SKIP
>>> ws.rollback(snap.id)                       # doctest: +SKIP
>>> ws.undo()                                  # doctest: +SKIP

The store lives under ``$CTRLZ_HOME`` (default: the platform's user data directory), never in the
workspace: ``<home>/workspaces/<name>-<hash of the workspace's real path>/``. This class is a
face: opening, snapshots and pools come from :class:`ctrlz.session.protected.ProtectedWorkspace`,
every restore is one call into :mod:`ctrlz.session.restores` (and so into the one restore
engine), and the rest reads the store. The CLI, the MCP server and the hooks all go through it.
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Iterator, Sequence

from .session.locator import default_home, store_path_for
from .session.protected import ProtectedWorkspace
from .state.trees import DIR, FILE, Entry

# The engine, the diff and the restore machinery load where a method needs them: a command
# that lists snapshots, and every agent hook, starts a fresh interpreter and should pay for
# nothing it does not run (`ctrlz list` must stay within 60 ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .engine.diff import PathChange
    from .engine.gc import GcReport
    from .engine.restore.restore import RestoreResult
    from .engine.verify import VerifyReport
    from .session.reports import History, Status, UndoResult, Version
    from .types import Snapshot

__all__ = ["Diff", "Workspace", "default_home", "store_path_for"]


class Diff(namedtuple("Diff", "old new changes")):
    """The changes between two states of a workspace, in path order: ``old`` (a snapshot id),
    ``new`` (a snapshot id, or "working tree") and ``changes``."""

    __slots__ = ()
    old: str
    new: str
    changes: list[PathChange]


class Workspace(ProtectedWorkspace):
    """A protected workspace: snapshot, diff, roll back, undo (see the module docstring)."""

    # -- diff --------------------------------------------------------------------------------

    def diff(self, old: str | None = None, new: str | None = None,
             paths: Sequence[str | bytes] | None = None) -> Diff:
        """Changes from snapshot ``old`` (default: latest) to snapshot ``new`` (default: the
        working tree)."""
        from .engine.diff import PathChange, diff_trees
        from .engine.snapshot import overlay_reader, scan_working

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
        from .engine.diff import PathChange, diff_trees
        from .engine.snapshot import overlay_reader, scan_working

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
        from .engine.diff import unified_diff
        from .types import show_path

        working = d.new == "working tree"
        for c in d.changes:
            if c.kind == DIR or c.change_type == "permissions_changed":
                continue
            old = self.content(c.old, c.path, False)
            new = self.content(c.new, c.path, working)
            yield unified_diff(show_path(c.path), old, new)

    # -- restore: each is one call into ctrlz.session.restores ----------------------------------

    def rollback(self, ref: str, paths: Sequence[str | bytes] | None = None,
                 dry_run: bool = False, kind: str = "rollback",
                 git: str = "auto") -> RestoreResult:
        """Roll the workspace (or only ``paths``) back to snapshot ``ref``, in place, after a
        safety snapshot; ``ctrlz undo`` (or :meth:`undo`) takes it back.

        With the workspace daemon running, the daemon runs it (the same engine, warm, see
        docs/agents.md); a long-lived program that wants its restores in its own process
        calls :func:`ctrlz.session.protected.keep_restores_in_process` once.

        ``git``: what becomes of each ``.git`` in the workspace: ``"restore"`` puts it back
        (branches move; commits made since leave the repository), ``"keep"`` leaves it as it
        is (the working tree only), ``"auto"`` restores it unless that drops commits, and
        then raises :class:`~ctrlz.errors.HistoryAtRisk`. ``result.git`` says what moved."""
        from .session import restores

        return restores.rollback(self, ref, paths, dry_run=dry_run, kind=kind, git=git)

    def restore(self, ref: str, paths: Sequence[str | bytes] | None = None,
                dry_run: bool = False) -> RestoreResult:
        """Same as :meth:`rollback` (every in-place restore can be undone)."""
        from .session import restores

        return restores.rollback(self, ref, paths, dry_run=dry_run)

    def revert(self, path: str | bytes, from_: str | None = None,
               dry_run: bool = False) -> RestoreResult:
        """One file or folder back from the newest snapshot in which it exists (or
        ``from_``); deleted if that snapshot says it was absent."""
        from .session import restores

        return restores.revert(self, path, from_, dry_run=dry_run)

    def restore_to(self, ref: str, dest: str | os.PathLike[str],
                   paths: Sequence[str | bytes] | None = None,
                   dry_run: bool = False) -> RestoreResult:
        """Extract snapshot ``ref`` into ``dest``, which must be new or empty."""
        from .session import restores

        return restores.restore_to(self, ref, dest, paths, dry_run=dry_run)

    def undo(self, dry_run: bool = False, git: str = "auto") -> UndoResult:
        """Take back the newest rollback, revert or rewind that is not undone yet
        (``dry_run``: only say what that would do; ``git``: as for :meth:`rollback`)."""
        from .session import restores

        return restores.undo(self, dry_run, git)

    def redo(self, dry_run: bool = False, git: str = "auto") -> UndoResult:
        """Apply again the oldest undone one (``dry_run``: only say what it would do;
        ``git``: as for :meth:`rollback`)."""
        from .session import restores

        return restores.redo(self, dry_run, git)

    # -- maintenance -------------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        from .engine.verify import verify_store

        return verify_store(self.repo)

    def gc(self) -> GcReport:
        """Drop what no snapshot reaches, repack, and compress the large objects a snapshot
        stored uncompressed because the disk was faster than the compressor."""
        from .engine.gc import collect_garbage

        return collect_garbage(self.repo, compact=True)

    # -- reading history -----------------------------------------------------------------------

    def history(self, path: str | bytes) -> History:
        """Every version of one path across the snapshots, by content (object id)."""
        from .session.reports import History

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

    def _write_left_files(self) -> bool:
        """The store's "writing" marker is up while nobody writes: a writer died or gave up
        (a full disk) and its files wait for the next sweep, taking space meanwhile."""
        objects, lock = self.repo.objects, self.repo.lock
        if not objects.may_have_strays() or lock.held or not lock.try_acquire():
            return False  # a writer at work has it up, rightly
        try:
            return objects.may_have_strays()
        finally:
            lock.release()

    def tool_call_refs(self) -> dict[str, tuple[str, str]]:
        """The workspace snapshots recorded tool calls and turns start from (none when no
        agent was ever recorded here: the tool-call store is not made just to look); what
        :func:`ctrlz.session.policy.check_deletable` keeps from an agent."""
        if not os.path.isdir(self.store_path / "toolcalls"):
            return {}
        from .toolcalls import records
        from .toolcalls.core import opened

        with opened(self) as place:  # captures hooks left in the inbox are indexed first
            return records.workspace_snapshot_refs(place.db)

    def status(self) -> Status:
        """What is protected and excluded, skipped files, last snapshot, store size, health."""
        import time

        from .session.reports import Status

        # counts and the newest row only: a status of a long history decodes no other snapshot
        by_type = self.repo.catalog.type_counts()
        last = self.repo.catalog.latest()
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
        if self.repo.catalog.frozen:  # read, not written: see state/db/frozen_catalog.py
            problems.append(f"{self.repo.catalog.frozen}; until then snapshots and "
                            "rollbacks fail, while restore --to, diff and export work")
        elif self._write_left_files():
            problems.append("a write that failed or was killed left files in the store; the "
                            "next snapshot, or `ctrlz gc`, removes them")
        from .toolcalls.hook_log import describe, hook_failures

        day_ago = time.time_ns() - 86_400 * 10**9
        from .engine.retention import OVER_STORE_CAP
        from .session.reports import DROPS_SHOWN, counted

        dropped = self.repo.catalog.drops(since_ns=day_ago, limit=DROPS_SHOWN)
        capped = [d for d in dropped if d["reason"].startswith(OVER_STORE_CAP)]
        if capped:
            newest = capped[0]
            problems.append(f"store_cap dropped {counted(capped)} snapshot(s) in the last day "
                            f"(the newest: {newest['id']}, {newest['type']}); raise store_cap "
                            "to keep more history")
        hooks = hook_failures(self, since_ns=day_ago)  # the agent never hears of them
        if hooks:
            problems.append(describe(hooks))
        from .session import daemon_client

        failure = daemon_client.recent_failure(self.store_path)
        daemon = {"running": daemon_client.running(self.store_path),
                  "last_failure": failure.get("reason") if failure else None}
        if daemon["running"]:  # past the watch limit it scans what it cannot watch: say so
            report = daemon_client.status(self.store_path)
            daemon["unwatched_count"] = int(report.get("unwatched_count") or 0)
            daemon["unwatched"] = list(report.get("unwatched") or [])
        if failure and not daemon["running"]:
            problems.append(f"the workspace daemon failed to start: {daemon['last_failure']}; "
                            "see `ctrlz daemon status`")
        log = self.oplog
        return Status(
            root=str(self.root), store=str(self.store_path), rules=self.config.rules.to_json(),
            snapshots=sum(by_type.values()), by_type=by_type, last=last,
            age_seconds=(time.time_ns() - last.created_ns) / 1e9 if last else None,
            store_bytes=used, store_cap=cap,
            skipped=last.shown_skipped()
            if last else [],
            problems=problems, can_undo=log.next_undo() is not None,
            can_redo=log.next_redo() is not None, daemon=daemon, dropped=dropped,
            hooks=hooks)


def _version(entry: Entry | None, group: list[Snapshot]) -> Version:
    from .session.reports import Version

    if entry is None:
        return Version(None, None, None, None, tuple(group))
    kind = {"f": "file", "l": "symlink", "d": "dir"}[entry.kind]
    return Version(kind, entry.oid.hex() if entry.kind != DIR else None,
                   entry.size if entry.kind != DIR else None, entry.mode, tuple(group))
