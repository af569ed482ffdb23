"""The restore engine: the one code path by which ctrlz changes a workspace.

Rollback, revert, undo, redo, rewind, tool-call and turn restores, MCP restores,
``SnapshotManager.restore_to`` and ``restore --to`` all come here, and every in-place restore runs
the same six steps, in this order, under the store's writer lock:

1. **capture** — a ``safety`` snapshot of the current state, into which every path the request
   names explicitly is grafted even where the rules ignore it (:mod:`ctrlz.engine.graft`), so
   that everything the restore can overwrite or delete is in the store before it starts;
2. **plan** — compare the captured state with the target (:mod:`ctrlz.engine.restore.plan`): only
   captured and covered paths are written or deleted; nothing is touched yet;
3. **journal** — make an intent record durable (:mod:`ctrlz.engine.restore.journal`);
4. **apply** — temp file, fsync, atomic rename, through ``O_NOFOLLOW`` directory handles, each
   replaced inode checked after the swap (:mod:`ctrlz.engine.restore.apply`);
5. **verify** — re-read every path written or removed;
6. **commit** — record the undo entry in the operation log and drop the journal.

A failure anywhere after the capture is an error (never a "skipped" behind success): the temp
files are removed, the undo entry is recorded all the same, so ``ctrlz undo`` returns to the
state before, and the error says so. A crash leaves the journal, and the next ctrlz process that
opens the store does the same clean-up (:func:`ctrlz.engine.restore.journal.recover`). Paths that
changed under the restore are left as they are and make it end with
:class:`~ctrlz.errors.RestoreIncomplete`.

``restore --to`` (a new or empty directory) needs no capture and leaves no undo entry, but is
journalled and verified like the rest; its journal is kept in the destination, not in the
store, so that it works while the store's disk is full (:mod:`ctrlz.engine.restore.journal`).

A restore in place runs inside one :func:`~ctrlz.engine.snapshot.writing` (the caller's): the
lock is taken, and a crashed writer's leftovers cleaned up, once for the whole operation, its
capture included. The capture returns what it decoded and read by name
(:class:`~ctrlz.engine.snapshot.Taken`), and the plan and the apply step take it from there:
nothing passes through the repository's caches or a dict filled in on the side.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ...errors import CtrlzError, RestoreError, RestoreIncomplete, VerifyMismatch
from ...state import failpoints
from ...state.ignore.exclude import Rules
from ...state.scan import Limits
from ...state.store.objects import LOOSE_MIN
from ...state.store.repository import Repository
from ...state.trees import Entry, decode_tree
from ...types import Skipped, Snapshot, quote_path
from ..graft import DiskCapture, graft
from ..snapshot import (
    DirtySource,
    StatKey,
    Taken,
    new_snapshot_id,
    overlay_reader,
    scan_working,
    take_snapshot,
    writing,
)
from . import githistory, journal, madedirs
from .actions import SYMLINK_OP, WRITE, RestorePlan
from .apply import KEPT_IN_THE_WAY, Applier, ApplyFailed, Identity
from .check import verify_applied
from .journal import abandon, leave_undo_path, undo_hint
from .plan import Planner, refuse_unreachable
from .requests import (  # noqa: F401 - the engine's records, re-exported
    Request,
    RestoreResult,
    TargetContext,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..diff import TreeReader


# -- in place ----------------------------------------------------------------------------------

def restore_in_place(repo: Repository, roots: Sequence[Path], rules: Sequence[Rules],
                     req: Request, limits: Limits | None = None,
                     dirty_source: DirtySource | None = None) -> RestoreResult:
    """Run inside :func:`~ctrlz.engine.snapshot.writing`: the capture commits under its lock,
    and relies on its recovery. ``dirty_source``: what changed since the stat cache, from a
    file watcher, for the capture step (:func:`~ctrlz.engine.snapshot.take_snapshot`)."""
    assert repo.lock.held, "restore_in_place runs inside writing(repo)"
    dest_roots = [os.fsencode(r) for r in roots]
    if req.dry_run:
        return _dry_run(repo, roots, rules, req, limits)
    if req.git == "auto" and req.target is not None and req.paths is None:
        # refused before the capture, so a refusal leaves no safety snapshot behind
        githistory.precheck(req.target, repo.tree, repo.objects.read, dest_roots, req.kind)
    label = req.label or (f"before restoring {req.target.id}" if req.target else None)
    captured = take_snapshot(repo, roots, rules, type="safety", limits=limits, label=label,
                             numbered=req.numbered_safety, include=req.explicit,
                             dirty_source=dirty_source)
    safety = captured.snapshot
    # the captured side of every changed directory, as the capture decoded it; a built
    # target's trees join them
    trees = captured.trees
    read = overlay_reader(repo, trees)
    target = req.target if req.target is not None else _build(repo, req, safety, trees, read)
    planner = Planner(target, read, read, repo.objects.read, dest_roots, req.paths,
                      check_disk=True, explicit=req.explicit)
    plan = planner.run(safety.root)
    refuse_unreachable(plan, req.paths)
    git = githistory.judge(plan, req.git, req.kind, False, read, repo.objects.read, dest_roots)
    result = RestoreResult(target, plan, safety=safety,
                           skipped=list(plan.skipped) + _left_out(safety, req, plan),
                           kind=req.kind, git=git)
    undo = _with_created_uncovered(req.undo, plan, planner)
    identity = _identity(captured)
    intent = journal.Intent(
        token=os.urandom(6).hex(), kind=req.kind, target=target.id, safety=safety.id,
        roots=dest_roots, dirs=sorted(plan.parents()), undo=undo, created_ns=time.time_ns())
    _apply(repo, plan, result, intent, identity)
    if result.conflicts:
        raise _incomplete(req.kind, target, result)
    return result


def _left_out(capture: Snapshot, req: Request, plan: RestorePlan) -> list[Skipped]:
    """What the capture left out (over ``max_bytes``, unreadable, a FIFO...) within the
    restore's paths: the restore leaves those alone, and the safety snapshot cannot bring
    them back, so the user is told rather than left to assume they are covered."""
    told = {k.path for k in plan.skipped}
    scope = req.paths
    return [Skipped(k.path, f"not in the safety snapshot: {k.reason}")
            for k in capture.skipped if k.path not in told
            and (scope is None or any(k.path == p or k.path.startswith(p + b"/")
                                      for p in scope))]


def _with_created_uncovered(undo: dict[str, Any], plan: RestorePlan,
                            planner: Planner) -> dict[str, Any]:
    """A restore that creates a path its target's rules do not cover (an ignored file that a
    tool-call restore grafted into a snapshot) names it in its undo entry, so that the undo
    captures and removes it like any other path the restore wrote."""
    if "record" not in undo:
        return undo
    made = [a.path.partition(b"/")[2] for a in plan.writes
            if a.expect is None and a.op in (WRITE, SYMLINK_OP) and a.path.startswith(b"0/")
            and not planner.covers(a.path, False)]
    if not made:
        return undo
    record = dict(undo["record"])
    record["explicit"] = sorted(set(record.get("explicit", [])) | {p.hex() for p in made})
    return {**undo, "record": record}


def _apply(repo: Repository, plan: RestorePlan, result: RestoreResult, intent: journal.Intent,
           identity: Identity | None, extract_to: bytes | None = None) -> None:
    """Journal, apply, verify, commit; on any failure clean up and leave the undo path.

    ``extract_to``: a ``restore --to`` into that new directory, which keeps its record there
    and leaves no undo entry, so it writes nothing into the store (see ``journal``)."""
    if plan.empty:
        leave_undo_path(repo, intent, "done")
        return
    if extract_to is None:
        journal.write(repo.path, intent)  # fails before any write, or not at all
    else:
        try:
            journal.write_incomplete(extract_to, intent)
        except OSError as exc:
            reason = _HINTS.get(exc.errno or 0, exc.strerror or str(exc))
            raise RestoreError(f"{intent.label} failed: {reason}") from exc
    try:
        failpoints.hit("restore-journal-written")
        applied = Applier(plan, repo.objects, intent.roots, token=intent.token,
                          identity=identity).run()
        result.applied, result.conflicts = applied.applied, applied.conflicts
        result.skipped += applied.skipped
        verify_applied(repo.objects, intent.roots, applied.applied)
        failpoints.hit("restore-before-commit")
    except BaseException as exc:
        if isinstance(exc, ApplyFailed):
            result.applied, result.conflicts = exc.result.applied, exc.result.conflicts
        if extract_to is None:
            abandon(repo, intent, "failed")
        else:  # a failure cleans up as it goes: only a kill leaves the record
            journal.sweep(intent, repo.objects)
            journal.clear_incomplete(extract_to, strict=False)
        if isinstance(exc, ApplyFailed):
            raise RestoreError(_failure_message(intent, exc, plan, result)) from exc.error
        if isinstance(exc, VerifyMismatch):
            raise VerifyMismatch(f"{exc}; {undo_hint(intent)}") from None
        if isinstance(exc, OSError):
            reason = _HINTS.get(exc.errno or 0, exc.strerror or str(exc))
            raise RestoreError(f"{intent.label} failed: {reason}; {undo_hint(intent)}") from exc
        raise
    if extract_to is not None:
        try:
            journal.clear_incomplete(extract_to)
        except OSError as exc:
            raise RestoreError(f"{intent.label} was written and verified, but "
                               f"{quote_path(extract_to)}/{journal.INCOMPLETE} could not be "
                               f"removed ({exc.strerror or exc}); remove it") from exc
        return
    try:
        leave_undo_path(repo, intent, "done")
        journal.clear(repo.path)
    except (OSError, CtrlzError) as exc:
        # everything was applied and verified; the journal still names it, so the next ctrlz
        # command records the undo entry
        raise RestoreError(f"{intent.label} was applied and verified, but its undo entry could "
                           f"not be recorded ({exc}); the next ctrlz command records it") from exc


_HINTS = {
    errno.ENOSPC: "no space left on the disk; free some space",
    errno.EDQUOT: "disk quota exceeded; free some space",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n)",
    errno.ENFILE: "the system ran out of open files",
    errno.EACCES: "permission denied; check the permissions of the workspace",
    errno.EPERM: "operation not permitted; check the permissions of the workspace",
    errno.EIO: "the disk reported an I/O error",
    errno.EROFS: "the filesystem is read-only",
    errno.EFBIG: "file too large for this filesystem or limit",
    errno.ELOOP: "a parent directory was replaced by a symlink",
    errno.ENOTDIR: "a parent directory was replaced by a file",
}


def _failure_message(intent: journal.Intent, exc: ApplyFailed, plan: RestorePlan,
                     result: RestoreResult) -> str:
    reason = _HINTS.get(exc.error.errno or 0, exc.error.strerror or str(exc.error))
    done, total = len(result.applied), len(plan.actions)
    return (f"{intent.label} stopped at {quote_path(exc.action.path.partition(b'/')[2])}: "
            f"{reason}; {done} of {total} changes were made; {undo_hint(intent)}")


def _incomplete(kind: str, target: Snapshot, result: RestoreResult) -> RestoreIncomplete:
    """The error of a restore that left the paths in ``result.conflicts`` as they are."""
    first = result.conflicts[0]
    more = f" and {len(result.conflicts) - 1} more" if len(result.conflicts) > 1 else ""
    undo = (f"; `ctrlz undo` puts back the state before it (safety snapshot {result.safety.id})"
            if result.safety is not None else "")
    what = ("could not be put in place" if first.reason == KEPT_IN_THE_WAY else
            "changed while it ran")
    return RestoreIncomplete(f"{kind} to {target.id} is incomplete: "
                             f"{quote_path(first.path.partition(b'/')[2])}{more} {what} and "
                             f"{'was' if not more else 'were'} left as they are "
                             f"({first.reason}){undo}", result)


def _identity(captured: Taken) -> Identity:
    """What the capture saw at a path (the stat cache it wrote, and the paths it read by
    name): lets the apply step trust an untouched file by its stat instead of reading it
    again."""
    roots, extra = captured.cache.roots, captured.keys

    def identity(vpath: bytes) -> StatKey | None:
        hit = extra.get(vpath)
        if hit is not None:
            return hit
        root, _, rel = vpath.partition(b"/")
        index = int(root)
        if index >= len(roots):
            return None
        d, _, name = rel.rpartition(b"/")
        listing = roots[index].get(d)
        if listing is None:
            return None
        e = listing[1].get(name)
        if e is None or not e[2]:  # unknown, or racily clean: read it
            return None
        return e[0], e[1]

    return identity


def _build(repo: Repository, req: Request, safety: Snapshot,
           trees: dict[bytes, list[Entry]], read: TreeReader) -> Snapshot:
    """Build and commit the target snapshot of a tool-call restore. ``trees``: the capture's
    decoded trees, to which the target's own are added, so that ``read`` (over them, then the
    store) serves the builder and then the plan."""
    assert req.build_target is not None
    writer = repo.objects.writer()

    def put_tree(data: bytes) -> bytes:
        oid = writer.put(data)
        trees[oid] = decode_tree(data)
        return oid

    def put_body(oid: bytes, size: int, read_all: Callable[[], bytes],
                 write_to: Callable[[int], None]) -> None:
        if writer.contains(oid):
            return
        if size < LOOSE_MIN:
            if writer.put(read_all()) != oid:
                raise RestoreError(f"a pre-image body {oid.hex()[:16]} changed in the store; "
                                   "run `ctrlz verify`")
            return
        import tempfile

        with tempfile.TemporaryFile(dir=repo.path) as f:
            write_to(f.fileno())
            f.seek(0)
            got, tmp, raw, stored, codec = writer.ingest_large(f.fileno())
            if got != oid:
                os.unlink(tmp)
                raise RestoreError(f"a pre-image body {oid.hex()[:16]} changed in the store; "
                                   "run `ctrlz verify`")
            writer.adopt_large(got, tmp, raw, stored, codec)

    try:
        ctx = TargetContext(repo, safety, read, put_tree, put_body, writer.put)
        root, base = req.build_target(ctx)
        snap = Snapshot(
            id=new_snapshot_id(), number=None, parent=safety.id, type="safety",
            label=f"{req.kind} target", pinned=False, created_ns=time.time_ns(), root=root,
            files=base.files, dirs=base.dirs, symlinks=base.symlinks, bytes=base.bytes,
            added_bytes=writer.added_bytes, size_delta=0, created=0, modified=0, deleted=0,
            rules=base.rules, skipped=base.skipped, roots=base.roots)
        with repo.catalog.transaction():
            writer.commit(repo.catalog)
            repo.catalog.add_snapshot(snap)
    except BaseException:
        writer.abort()
        raise
    return snap


def _dry_run(repo: Repository, roots: Sequence[Path], rules: Sequence[Rules], req: Request,
             limits: Limits | None) -> RestoreResult:
    """Plan against a scan that stores nothing; the target is built in memory."""
    dest_roots = [os.fsencode(r) for r in roots]
    state = scan_working(repo, roots, rules, limits, as_capture=True)
    trees = dict(state.trees)
    read = overlay_reader(repo, trees, state.patched)
    bodies: dict[bytes, Callable[[], bytes]] = {}

    def put_tree(data: bytes) -> bytes:
        oid = repo.objects.digest(data)
        trees[oid] = decode_tree(data)
        return oid

    current_root = state.root
    if req.explicit:
        def hash_file(fd: int, size: int) -> bytes:
            h = repo.objects.new_hasher()
            while chunk := os.read(fd, 4 << 20):
                h.update(chunk)
            return h.digest()

        disk = DiskCapture(dest_roots, hash_file, repo.objects.digest)
        try:
            changes = {v: e for v in req.explicit if (e := disk.entry(v)) is not None}
            current_root = graft(read, put_tree, current_root, changes, disk.dir_mode)
        finally:
            disk.close()
    current = Snapshot(id="working tree", number=None, parent=None, type="safety", label=None,
                       pinned=False, created_ns=time.time_ns(), root=current_root, files=0,
                       dirs=0, symlinks=0, bytes=0, added_bytes=0, size_delta=0, created=0,
                       modified=0, deleted=0, rules={"roots": [r.to_json() for r in rules]},
                       skipped=tuple(state.skipped), roots=tuple(str(r) for r in roots))
    if req.target is not None:
        target = req.target
    else:
        assert req.build_target is not None
        ctx = TargetContext(repo, current, read, put_tree,
                            lambda oid, size, read_all, write_to: bodies.setdefault(oid, read_all),
                            repo.objects.digest)
        root, base = req.build_target(ctx)
        target = base.replace(id=f"{req.kind} target", root=root)

    def read_blob(oid: bytes) -> bytes:
        if oid in bodies and not repo.objects.has(oid):
            return bodies[oid]()
        return repo.objects.read(oid)

    plan = Planner(target, read, read, read_blob, dest_roots, req.paths, check_disk=True,
                   explicit=req.explicit).run(current_root)
    refuse_unreachable(plan, req.paths)
    git = githistory.judge(plan, req.git, req.kind, True, read, read_blob, dest_roots)
    return RestoreResult(target, plan, dry_run=True,
                         skipped=list(plan.skipped) + _left_out(current, req, plan),
                         kind=req.kind, git=git)


# -- into a new directory ----------------------------------------------------------------------

def restore_into(repo: Repository, roots_count: int, target: Snapshot, dest: Path,
                 paths: Sequence[bytes] | None = None, dry_run: bool = False, *,
                 record_in_dest: bool = False) -> RestoreResult:
    """Extract ``target`` into ``dest``, which must be new or empty; nothing else is touched.

    ``record_in_dest``: its crash record in ``dest``, nothing in the store (``restore --to``,
    see ``journal``); a clone or an import writes the new workspace's store anyway."""
    dest_b = os.fsencode(dest)
    require_empty_destination(dest_b)
    dest_roots = [dest_b] if roots_count == 1 else [dest_b + b"/" + str(i).encode()
                                                    for i in range(roots_count)]
    plan = Planner(target, repo.tree, repo.tree, repo.objects.read, dest_roots, paths,
                   check_disk=False).run(None)
    result = RestoreResult(target, plan, dry_run=dry_run, destination=os.fsdecode(dest),
                           skipped=list(plan.skipped), kind="restore")
    if dry_run:
        return result
    made = madedirs.make(dest_roots)
    try:
        with writing(repo):
            intent = journal.Intent(token=os.urandom(6).hex(), kind="restore",
                                    target=target.id, safety=None, roots=dest_roots,
                                    dirs=sorted(plan.parents()), created_ns=time.time_ns())
            _apply(repo, plan, result, intent, None, dest_b if record_in_dest else None)
    except BaseException:  # what it made goes again, unless it holds what was put there
        madedirs.remove(made, madedirs.by_plan(result.applied, dest_roots))
        raise
    if result.conflicts:
        raise _incomplete("restore", target, result)
    return result


def require_empty_destination(path: bytes) -> None:
    if os.path.lexists(path):
        if os.path.islink(path) or not os.path.isdir(path):
            raise RestoreError(f"{quote_path(path)} exists and is not a directory; "
                               "choose a new or empty directory for --to")
        names = os.listdir(path)
        if os.fsencode(journal.INCOMPLETE) in names:
            raise RestoreError(f"{quote_path(path)} holds an interrupted restore (see its "
                               f"{journal.INCOMPLETE}); remove the directory and try again")
        if names:
            raise RestoreError(f"{quote_path(path)} is not empty; choose a new or empty "
                               "directory for --to")
