"""Restores of a whole workspace or some of its paths, and the undo stack over them.

Each function here decides *what* to restore (which snapshot, which paths, how the undo entry is
left) and hands one :class:`~ctrlz.engine.restore.restore.Request` to the restore engine, which does
everything else; then it writes the ``restored`` file events and applies the pools. The faces
(CLI, MCP, the Python API) call these and render the result.

Undo and redo are restores too. The operation log (:mod:`ctrlz.state.db.oplog`) is the one undo
stack of the store: rollbacks, reverts, rewinds and tool-call restores all push onto it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

from ..engine.restore.githistory import check_mode
from ..engine.restore.requests import Request, RestoreResult
from ..errors import RestoreError, UsageError
from ..paths import within
from ..state import meter
from . import journal

# The engine itself loads in :func:`run`, when the restore is not handed to the daemon.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..engine.snapshot import DirtySource
    from ..state.db.oplog import Operation
    from ..types import Snapshot
    from .protected import ProtectedWorkspace
    from .reports import UndoResult

PathArg = str | os.PathLike[str] | bytes


def run(ws: ProtectedWorkspace, req: Request,
        dirty_source: DirtySource | None = None) -> RestoreResult:
    """Hand one request to the engine, then record what it did.

    In a short-lived process (``ws.restore_by_daemon``) with the workspace daemon running,
    the daemon runs it: the same engine, warm, its capture scanning only what its watcher saw
    change (:func:`_by_daemon`). ``dirty_source``: what the capture step asks for that, when
    not the daemon (the daemon passes its own watcher)."""
    if dirty_source is None and req.build_target is None and _daemon_may_serve(ws, req.dry_run):
        from . import restore_wire

        result = _by_daemon(ws, restore_wire.encode_request(req), req.kind)
        if result is not None:
            return result
    return _run_here(ws, req, dirty_source)


def _daemon_may_serve(ws: ProtectedWorkspace, dry_run: bool) -> bool:
    """Not with a progress bar on screen (the socket carries no progress; a person at a
    terminal gets the bar rather than the milliseconds), not for a dry run, and not while
    this process holds the store lock (the daemon needs it)."""
    return (ws.restore_by_daemon and ws.use_daemon and not dry_run
            and meter.current() is None and not ws.holds_store_lock)


def _run_here(ws: ProtectedWorkspace, req: Request,
              dirty_source: DirtySource | None) -> RestoreResult:
    """The restore in this process: one hold on the store (:func:`writing`: the lock, and
    the clean-up after a crashed writer) for the engine's whole run and its records."""
    from ..engine.snapshot import writing

    with writing(ws.repo):
        result = _restore_held(ws, req, dirty_source)
    if not req.dry_run and dirty_source is None:
        ws.ensure_daemon()  # unless one runs, its capture walked the whole tree
    return result


def _restore_held(ws: ProtectedWorkspace, req: Request,
                  dirty_source: DirtySource | None) -> RestoreResult:
    """The engine's restore and the ``restored`` events, inside the caller's
    :func:`~ctrlz.engine.snapshot.writing`."""
    from ..engine.restore.restore import restore_in_place

    try:
        result = restore_in_place(ws.repo, ws.roots, [ws.config.rules], req, ws.config.limits,
                                  dirty_source=dirty_source or ws.dirty_source)
    except RestoreError as exc:
        partial = getattr(exc, "result", None)
        if partial is not None:
            journal.record_restored(ws.session_db, partial)
        raise
    if not req.dry_run:
        journal.record_restored(ws.session_db, result)
        ws.after_change()
    return result


def _by_daemon(ws: ProtectedWorkspace, body: dict[str, object],
               kind: str) -> RestoreResult | None:
    """The restore ``body`` describes (:mod:`.restore_wire`), run by the workspace daemon
    (:func:`ctrlz.session.served.ask_restore`); None when none runs or it declined before
    starting, and the caller restores in-process."""
    from .served import ask_restore

    return ask_restore(ws.store_path, ws.config.values, body, kind)


def rollback(ws: ProtectedWorkspace, ref: str, paths: Sequence[PathArg] | None = None,
             dry_run: bool = False, kind: str = "rollback",
             git: str = "auto") -> RestoreResult:
    """The workspace (or only ``paths``) back to snapshot ``ref``, in place; undoable.
    ``git``: what becomes of each ``.git`` (:mod:`ctrlz.engine.restore.githistory`: ``auto``,
    ``keep`` or ``restore``).

    A daemon that serves it gets ``ref`` as given and resolves it itself, so this process
    never opens the store; one that declines (a ref it cannot resolve among them) leaves it
    to this process, which then meets the same error itself."""
    rels = [ws.relpath(p) for p in paths] if paths else []
    target = None
    if rels:  # resolved here once, for the check; a daemon resolves ``ref`` itself
        target = ws.resolve(ref)
        _check_paths_exist(ws, target, rels)
    if _daemon_may_serve(ws, dry_run):
        from . import restore_wire

        result = _by_daemon(ws, restore_wire.encode_rollback(ref, rels, kind, git), kind)
        if result is not None:
            return result
    if target is None:
        target = ws.resolve(ref)
    return _run_here(ws, rollback_request(ws, target, rels, kind, dry_run, git), None)


def _check_paths_exist(ws: ProtectedWorkspace, target: Snapshot, rels: list[bytes]) -> None:
    """A path in neither the snapshot nor the working tree is a mistake (a typo, the wrong
    snapshot): refuse it before anything happens, rather than take a safety snapshot and
    report that nothing changed."""
    from ..types import quote_path

    for rel in rels:
        if rel and ws._entry_at(target, rel) is None \
                and not _on_disk(os.fsencode(ws.root), rel):
            raise UsageError(f"{quote_path(rel)}: in neither {target.id} nor the working tree; "
                             f"see `ctrlz diff {target.id} --name-status`")


def _on_disk(root: bytes, rel: bytes) -> bool:
    """``os.path.lexists``, for a path of any depth: past ``PATH_MAX`` it said False for a
    path that is there, and the request was refused as naming nothing."""
    try:
        os.lstat(os.path.join(root, rel))
        return True
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            return False  # as lexists: a loop of links (ELOOP) is not a path that is there
    *parents, name = rel.split(b"/")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parents:  # one name at a time, as lexists follows links on the way
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        os.stat(name, dir_fd=fd, follow_symlinks=False)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def rollback_request(ws: ProtectedWorkspace, target: Snapshot, rels: list[bytes], kind: str,
                     dry_run: bool, git: str = "auto") -> Request:
    """The request of a rollback (or revert) of ``rels`` (none: everything) to ``target``,
    whichever process runs it."""
    return Request(
        kind=kind, target=target, paths=[ws.vpath(r) for r in rels] or None, dry_run=dry_run,
        undo={"record": {"kind": kind, "paths": [r.hex() for r in rels]}},
        label=f"before {kind} to {target.id}", git=check_mode(git))


def revert(ws: ProtectedWorkspace, path: PathArg, from_: str | None = None,
           dry_run: bool = False) -> RestoreResult:
    """One file or folder back from the newest snapshot in which it exists (or ``from_``);
    deleted if that snapshot says it was absent."""
    rel = ws.relpath(path)
    if not rel:
        raise UsageError("revert takes a file or folder; use `ctrlz rollback` for the "
                         "whole workspace")
    if from_ is None:
        candidates = [s for s in ws.snapshots() if s.type != "safety"]
        if not candidates:
            ws.resolve("latest")  # raises the "no snapshots yet" error
            candidates = ws.snapshots()
        source = next((s for s in reversed(candidates) if ws._entry_at(s, rel)),
                      candidates[-1])
        from_ = source.id
    return rollback(ws, from_, [path], dry_run=dry_run, kind="revert")


def restore_to(ws: ProtectedWorkspace, ref: str, dest: str | os.PathLike[str],
               paths: Sequence[PathArg] | None = None, dry_run: bool = False) -> RestoreResult:
    """Extract snapshot ``ref`` into ``dest``, which must be new or empty."""
    target = ws.resolve(ref)
    dest_path = Path(dest).expanduser().absolute()
    if within(str(dest_path.resolve()), str(ws.root.resolve())):
        raise UsageError(f"{dest} is inside the workspace; restore into a directory "
                         "outside it, or use rollback")
    vpaths = [ws.vpath(ws.relpath(p)) for p in paths] if paths else None
    from ..engine.restore.restore import restore_into

    return restore_into(ws.repo, len(ws.roots), target, dest_path, vpaths, dry_run,
                        record_in_dest=True)


def undo(ws: ProtectedWorkspace, dry_run: bool = False, git: str = "auto") -> UndoResult:
    """Take back the newest operation that is not undone yet: restore the state captured just
    before it, over the same paths. ``dry_run``: the plan only; the log is untouched."""
    from ..engine.snapshot import writing

    with writing(ws.repo):  # an interrupted restore leaves its undo entry first
        op = ws.oplog.next_undo()
        if op is None:
            raise UsageError("nothing to undo: no rollback, revert or rewind since the log "
                             "began")
        result = _replay(ws, "undo", op, op.before, "its safety snapshot is gone", dry_run, git)
    if not dry_run:
        ws.ensure_daemon()
    return result


def redo(ws: ProtectedWorkspace, dry_run: bool = False, git: str = "auto") -> UndoResult:
    """Apply again the oldest undone operation: restore the state it had produced (captured
    by its undo), or else its target. ``dry_run``: the plan only."""
    from ..engine.snapshot import writing

    with writing(ws.repo):
        op = ws.oplog.next_redo()
        if op is None:
            raise UsageError("nothing to redo")
        ref = op.after if op.after and ws.repo.catalog.snapshot(op.after) else op.target
        result = _replay(ws, "redo", op, ref, "its snapshot is gone", dry_run, git)
    if not dry_run:
        ws.ensure_daemon()
    return result


def _replay(ws: ProtectedWorkspace, action: str, op: Operation, ref: str | None,
            gone: str, dry_run: bool = False, git: str = "auto") -> UndoResult:
    """Inside the caller's :func:`~ctrlz.engine.snapshot.writing`: the operation it read from
    the log is still the one to replay when the restore runs."""
    target = ws.repo.catalog.snapshot(ref) if ref else None
    if target is None:
        raise RestoreError(f"cannot {action} the {op.kind} to {op.target}: {gone}")
    result = _restore_held(ws, Request(
        kind=action, target=target, paths=[ws.vpath(p) for p in op.paths] or None,
        explicit=[ws.vpath(p) for p in op.explicit], undo={f"{action}_of": op.seq},
        dry_run=dry_run, git=check_mode(git),
        label=f"before {action}ing the {op.kind} to {op.target}"), None)
    from .reports import UndoResult  # its dataclasses cost a rollback ~10 ms of imports

    return UndoResult(action, op, result)
