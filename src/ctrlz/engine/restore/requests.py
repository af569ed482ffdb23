"""The records of one restore: what a face asks for (:class:`Request`, and the
:class:`TargetContext` a target built from the captured state is given) and what the engine
did (:class:`RestoreResult`).

They live apart from the engine so that a process which only asks for a restore and reports
it (a short-lived command handing the work to the workspace daemon, see
:mod:`ctrlz.session.restore_wire`) never loads the engine itself.
"""

from __future__ import annotations

from ...types import show_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from ...state.store.repository import Repository
    from ...state.trees import Entry
    from ...types import Skipped, Snapshot
    from ..diff import TreeReader
    from .actions import Action, RestorePlan
    from .plan import Coverage

    BodySink = Callable[[bytes, int, Callable[[], bytes], Callable[[int], None]], None]
    #: builds the target from the captured state; returns (root tree id, base snapshot whose
    #: metadata and rules the target takes)
    TargetBuilder = Callable[["TargetContext"], tuple[bytes, Snapshot]]


class RestoreResult:
    """What a restore did (or, for a dry run, would do), and the safety snapshot that
    undoes it."""

    __slots__ = ("target", "plan", "safety", "applied", "skipped", "conflicts", "dry_run",
                 "destination", "kind", "git")

    def __init__(self, target: Snapshot, plan: RestorePlan, safety: Snapshot | None = None,
                 applied: list[Action] | None = None, skipped: list[Skipped] | None = None,
                 conflicts: list[Skipped] | None = None, dry_run: bool = False,
                 destination: str | None = None, kind: str = "rollback",
                 git: list[dict[str, Any]] | None = None) -> None:
        self.target = target
        self.plan = plan
        self.safety = safety
        self.applied = applied if applied is not None else []
        self.skipped = skipped if skipped is not None else []
        self.conflicts = conflicts if conflicts is not None else []
        self.dry_run = dry_run
        self.destination = destination
        self.kind = kind
        #: what the restore does to each git repository whose ``.git`` it touches, as data
        #: (:meth:`ctrlz.engine.restore.githistory.GitChange.to_json`; ``summary`` is its one line)
        self.git = git if git is not None else []

    def __repr__(self) -> str:
        return f"RestoreResult({self.to_json(strip_root=False)})"

    def counts(self) -> dict[str, int]:
        """What a dry run would change, or what the restore did change: a write it had to leave
        undone is never counted as made."""
        return self.plan.counts(None if self.dry_run else self.applied)

    def to_json(self, strip_root: bool = True) -> dict[str, Any]:
        def p(path: bytes) -> str:
            return show_path(path.partition(b"/")[2] if strip_root else path)

        return {
            "target": self.target.id,
            "safety_snapshot": self.safety.id if self.safety else None,
            "dry_run": self.dry_run,
            "destination": self.destination,
            "counts": self.counts(),
            "actions": [{**a.to_json(), "path": p(a.path)} for a in
                        (self.plan.actions if self.dry_run else self.applied)],
            "skipped": [{"path": p(s.path), "reason": s.reason} for s in self.skipped],
            "conflicts": [{"path": p(s.path), "reason": s.reason} for s in self.conflicts],
            "git": self.git,
        }


class Request:
    """One restore, as a face or the session layer asks for it.

    ``kind``: rollback, revert, undo, redo, rewind, toolcall, turn-rollback or restore.
    ``target``, or ``build_target`` to build it from the captured state. ``paths``: the
    virtual paths the restore is limited to; ``explicit``: virtual paths captured and covered
    whatever the rules. ``undo``: how the undo entry is left (``{"record": {...}}``,
    ``{"undo_of": seq}``, ``{"redo_of": seq}`` or ``{}``). ``label``: what the safety
    snapshot is labelled with. ``git``: what becomes of each ``.git`` in the workspace
    (:mod:`ctrlz.engine.restore.githistory`): ``auto`` (put back unless that makes commits
    unreachable, else refuse), ``keep`` (left as it is) or ``restore`` (put back)."""

    __slots__ = ("kind", "target", "paths", "explicit", "build_target", "undo", "label",
                 "dry_run", "numbered_safety", "git")

    def __init__(self, kind: str, target: Snapshot | None = None,
                 paths: Sequence[bytes] | None = None, explicit: Sequence[bytes] = (),
                 build_target: TargetBuilder | None = None,
                 undo: dict[str, Any] | None = None, label: str | None = None,
                 dry_run: bool = False, numbered_safety: bool = True,
                 git: str = "auto") -> None:
        self.kind = kind
        self.target = target
        self.paths = paths
        self.explicit = explicit
        self.build_target = build_target
        self.undo = undo if undo is not None else {}
        self.label = label
        self.dry_run = dry_run
        self.numbered_safety = numbered_safety
        self.git = git


class TargetContext:
    """What a target builder may use: the captured state, and a way to add trees and bodies
    (stored for a real restore, only hashed for a dry run)."""

    def __init__(self, repo: Repository, current: Snapshot, read: TreeReader,
                 put_tree: Callable[[bytes], bytes], put_body: BodySink,
                 put_blob: Callable[[bytes], bytes]) -> None:
        self.repo = repo
        self.current = current  # the captured state (the safety snapshot, or a dry scan)
        self.read = read  # reads trees of the store and of the target under construction
        self._put_tree = put_tree
        #: ``put_body(oid, size, read_all, write_to)``: make a file body available to the
        #: apply step (``read_all()`` returns it, ``write_to(fd)`` streams it)
        self.put_body = put_body
        self.put_blob = put_blob  # a small blob (a link target); returns its id
        self._coverage: dict[str, Coverage] = {}

    def covers(self, snapshot: Snapshot, vpath: bytes) -> bool:
        """Whether ``snapshot`` took in the file at ``vpath`` (its rules, its ignore files, its
        skips): when it did not, its tree says nothing about that path."""
        from .plan import Coverage

        cov = self._coverage.get(snapshot.id)
        if cov is None:
            cov = self._coverage[snapshot.id] = Coverage(snapshot, self.read,
                                                         self.repo.objects.read)
        return cov.covers(vpath, False)

    def graft(self, base_root: bytes, changes: dict[bytes, Entry | None]) -> bytes:
        from ..graft import graft

        def dir_mode(_vpath: bytes) -> int:
            return 0o755

        return graft(self.read, self._put_tree, base_root, changes, dir_mode)
