"""Putting tool calls back: one function behind ``fs_restore``, turn rollback and ``rewind``.

It decides, per path, what the workspace should hold (the earliest pre-image at or after the
first chosen tool call, unless the path changed after the tool calls and ``force`` is off), and
hands the restore engine a *target builder*: the engine captures the workspace first (the named
paths included, even ignored ones such as ``.env``), then the builder grafts the pre-images onto
a base tree (the captured state, or the workspace snapshot taken before a shell call), and the
engine plans, journals, applies, verifies and records the undo entry as for any other restore.
So a tool-call restore obeys the same safety contract and is undone by the same ``ctrlz undo``.

"Changed after the tool call" compares content (kind and object id), never size or mtime: the
path's state now with what the last chosen tool call left there (its recorded post-image, or the
next tool call's pre-image). With neither, for a call that has ended (a later call of its
session began: the user denied or interrupted it, and its post-tool event never came), a path
that holds anything but a state the calls went through is left alone too: it may be the user's
own edit. The newest call of a session may still be running, its post-tool event to come: what
its path holds is taken as what it left, as before.

Several agent sessions may work in one workspace. A path that a file tool call of *another*
session captured after the state being put back (after the call whose pre-image would go back,
or after the shell call whose snapshot is the base) is that session's work: it is left as it is
now and reported, with the session and the call named, the same way as a later hand edit, unless
``force`` (or ``force_others``). Every face's restore of tool calls comes through here (``ctrlz
rewind``, turn rollback, ``fs_restore``, the MCP rewind, ACP's rollback and tool-call restore),
so the rule holds for all of them. Another session's shell commands name no paths; what they
did is not told apart (a rewind past this session's shell call still undoes it).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...engine.graft import lookup
from ...engine.restore.restore import Request, RestoreResult, TargetContext
from ...errors import RestoreError
from ...state.trees import DIR as TREE_DIR
from ...state.trees import FILE as TREE_FILE
from ...state.trees import SYMLINK as TREE_SYMLINK
from ...state.trees import Entry
from .. import records
from ..core import Place, expected_now
from ..images import ABSENT, DIR, FILE, OTHER, SYMLINK, Image

if TYPE_CHECKING:
    from ...session.protected import ProtectedWorkspace
    from ...state.store.objects import ObjectStore
    from ...types import Snapshot

_IMAGE_KIND = {TREE_FILE: FILE, TREE_SYMLINK: SYMLINK, TREE_DIR: DIR}
CHANGED_AFTER = "changed after the tool call (a later edit); use force to overwrite"
#: no post-tool event came though a later call began (the call was denied or interrupted, or
#: its hook did not run) and no later call captured the path: what is there now may be the
#: user's, so it is not overwritten
UNKNOWN_AFTER = ("changed since the tool call, and no record says by whom (the call was denied "
                 "or interrupted, or its post-tool hook did not run); use force to overwrite")




def theirs(session_id: str, call_id: str) -> str:
    """Why a path another session's later tool call captured was left alone."""
    return (f"session {session_id}'s work (its tool call {call_id} changed this path later); "
            "use force to overwrite")


@dataclass
class Outcome:
    result: RestoreResult
    #: workspace-relative path -> why it was left alone
    skipped: dict[bytes, str] = field(default_factory=dict)
    restored: list[bytes] = field(default_factory=list)
    #: workspace-relative path left alone as another session's work -> (session, tool call)
    owners: dict[bytes, tuple[str, str]] = field(default_factory=dict)

    def skip(self, rel: bytes, shown: str) -> dict[str, str]:
        """One left-alone path as a report entry; another session's work names the session
        and its call, so a face can say whose it is."""
        out = {"path": shown, "reason": self.skipped[rel]}
        if rel in self.owners:
            out["session_id"], out["tool_use_id"] = self.owners[rel]
        return out

    def per_call(self, snap: records.SnapRow, entries: list[records.EntryRow]) -> dict[str, Any]:
        """harn's per-tool-call restore report."""
        restored, skipped = [], []
        for e in entries:
            shown = os.fsdecode(e.path)
            if e.path in self.skipped:
                skipped.append(self.skip(e.path, shown))
            else:
                restored.append(shown)
        return {"snapshot_id": snap.snapshot_id, "restored_paths": restored,
                "skipped_paths_with_reasons": skipped}


def _key(entry: Entry | None, objects: ObjectStore) -> tuple[str, bytes | None]:
    """A tree entry as a pre-image key. Pre-images are named by content hash; a workspace
    snapshot may hold a large file as a clone, named by its blocks, so its content id (the
    clone's seal) is what compares."""
    if entry is None:
        return (ABSENT, None)
    kind = _IMAGE_KIND[entry.kind]
    if kind == DIR:
        return (kind, None)
    return (kind, objects.content_id(entry.oid) if kind == FILE else entry.oid)


def restore_tool_calls(ws: ProtectedWorkspace, place: Place, session_id: str,
                       calls: list[records.SnapRow], *, shell: records.SnapRow | None = None,
                       beyond: list[records.SnapRow] | None = None,
                       only: set[bytes] | None = None, force: bool = False,
                       force_others: bool | None = None,
                       kind: str = "toolcall", label: str = "", dry_run: bool = False,
                       git: str = "auto") -> Outcome:
    """Restore the pre-images of the file tool calls ``calls`` (in capture order) and, with
    ``shell``, the whole workspace to the snapshot taken just before that shell call. ``beyond``:
    the file tool calls after the shell call, whose pre-images go back on the paths the shell
    call's snapshot did not take in (an ignored ``.env`` a later Edit changed: that snapshot
    cannot say what it held, the earliest later pre-image can). ``force_others`` (default:
    ``force``) also overwrites what other sessions' later tool calls changed. Call with the
    workspace store's lock and the tool-call store's lock held, in that order."""
    from ...session import restores

    images, expected, passed, last, since = _earliest(place, calls, only)
    late, late_expected, late_passed, late_last, late_since = _earliest(place, beyond or [],
                                                                        only)
    chosen = [s.seq for s in [*calls, *(beyond or []), *([shell] if shell else [])]]
    others = ({} if (force if force_others is None else force_others) or not chosen
              else records.others_after(place.db, session_id, min(chosen)))
    # a call with a later one in its session has ended; with no post-tool record it was denied
    # or interrupted (or its hook failed), and what its path holds now may be the user's
    newest = max((s.seq for s in records.snapshots(place.db, session_id)), default=0)
    for rel in images:
        late.pop(rel, None)  # a path the chosen calls touched: their pre-image wins
    last.update((rel, late_last[rel]) for rel in late)
    base_snapshot: Snapshot | None = None
    if shell is not None:
        base_snapshot = (ws.repo.catalog.snapshot(shell.ws_snapshot)
                         if shell.ws_snapshot else None)
        if base_snapshot is None:
            raise RestoreError(f"the workspace snapshot taken before {shell.snapshot_id} "
                               f"({shell.ws_snapshot}) is gone (pruned); cannot rewind past "
                               "that shell command")
    skipped: dict[bytes, str] = {}
    owners: dict[bytes, tuple[str, str]] = {}
    objects = place.store.objects

    def build(ctx: TargetContext) -> tuple[bytes, Snapshot]:
        skipped.clear()
        owners.clear()
        base = base_snapshot or ctx.current
        changes: dict[bytes, Entry | None] = {}
        now_ns = time.time_ns()
        todo = [(rel, pre, expected.get(rel), passed[rel], shell is not None, since[rel])
                for rel, pre in images.items()]
        for rel, pre in late.items():
            if not ctx.covers(base, ws.vpath(rel)):  # the shell call's snapshot cannot tell
                todo.append((rel, pre, late_expected.get(rel), late_passed[rel], False,
                             late_since[rel]))
        if shell is not None:  # the rest of the workspace goes back to the shell call's base
            named = {t[0] for t in todo}
            for rel, (seq, sid, call) in others.items():
                if rel in named or seq < shell.seq or not ctx.covers(base, ws.vpath(rel)):
                    continue
                current = lookup(ctx.read, ctx.current.root, ws.vpath(rel))
                then = lookup(ctx.read, base.root, ws.vpath(rel))
                if _key(current, ws.repo.objects) != _key(then, ws.repo.objects):
                    skipped[rel], owners[rel] = theirs(sid, call), (sid, call)
                    changes[ws.vpath(rel)] = current  # leave it as it is now
        for rel, pre, want, seen, from_base, first in todo:
            vpath = ws.vpath(rel)
            current = lookup(ctx.read, ctx.current.root, vpath)
            reason = _refusal(pre, current)
            owner = others.get(rel)
            if (reason is None and owner is not None and owner[0] > first
                    and _key(current, ws.repo.objects) != pre.key):
                reason = theirs(owner[1], owner[2])
                owners[rel] = owner[1:]
            if reason is None and not force:
                then = lookup(ctx.read, base.root, vpath) if from_base else current
                known = then is not None or not from_base  # an ignored path: B cannot tell
                now = _key(then, ws.repo.objects) if known else None
                if now is None or now in seen:
                    pass  # what the calls themselves went through, or B cannot tell
                elif want is None:
                    # the shell call's snapshot is the record of what the calls left; the
                    # newest call may still be running, its post-tool event to come
                    ended = last[rel] < newest
                    reason = UNKNOWN_AFTER if ended and not from_base else None
                elif now != want.key:
                    reason = CHANGED_AFTER
            if reason is not None:
                skipped[rel] = reason
                if shell is not None:
                    changes[vpath] = current  # leave it as it is now
                continue
            changes[vpath] = _entry(pre, current, now_ns)
            if pre.kind == FILE and pre.oid is not None:
                oid = pre.oid
                ctx.put_body(oid, pre.size, lambda oid=oid: objects.read(oid),
                             lambda fd, oid=oid: objects.write_to(oid, fd))
            elif pre.kind == SYMLINK and pre.oid is not None:
                ctx.put_blob(objects.read(pre.oid))
        return ctx.graft(base.root, changes), base

    rels = list(images)
    named = rels + list(late)
    explicit = [ws.vpath(r) for r in named]
    req = Request(
        kind=kind, build_target=build, explicit=explicit,
        paths=None if shell is not None else explicit, dry_run=dry_run,
        undo={"record": {"kind": kind, "paths": [] if shell is not None else
                         [r.hex() for r in rels], "explicit": [r.hex() for r in named],
                         "session_id": session_id}},
        label=f"before {kind} {label}".strip(), git=git)
    if not explicit and shell is None:
        # nothing to put back: an empty plan, and no undo entry (an entry with no paths would
        # read as "the whole workspace")
        req.paths, req.undo = [], {}
    result = restores.run(ws, req)
    return Outcome(result, dict(skipped), [r for r in rels if r not in skipped], dict(owners))


def _earliest(place: Place, calls: list[records.SnapRow], only: set[bytes] | None
              ) -> tuple[dict[bytes, Image], dict[bytes, Image | None],
                         dict[bytes, set[tuple[str, bytes | None]]], dict[bytes, int],
                         dict[bytes, int]]:
    """Per path the calls touched: the earliest pre-image, what the last call left there,
    every state the path went through between them (one found there was put by the calls
    themselves or by an earlier rewind of them, `rewind 2` then `rewind 1`, not by a later
    edit, and its bytes are in the store), the last call's place in the session, and the
    first call's (another session's call after it changed what that pre-image would undo)."""
    images: dict[bytes, Image] = {}
    expected: dict[bytes, Image | None] = {}
    passed: dict[bytes, set[tuple[str, bytes | None]]] = {}
    last: dict[bytes, int] = {}
    first: dict[bytes, int] = {}
    for snap in calls:
        for e in records.entries(place.db, snap.seq):
            if only is not None and e.path not in only:
                continue
            images.setdefault(e.path, e.pre)
            first.setdefault(e.path, snap.seq)
            expected[e.path] = expected_now(place, snap, e)
            passed.setdefault(e.path, set()).add(e.pre.key)
            last[e.path] = snap.seq
    return images, expected, passed, last, first


def _refusal(pre: Image, current: Entry | None) -> str | None:
    if pre.kind in (DIR, OTHER):
        return (f"the pre-image is a {pre.kind}, which a tool-call snapshot does not "
                "restore")
    if current is not None and current.kind == TREE_DIR:
        return "a directory is there now; not removing it"
    return None


def _entry(pre: Image, current: Entry | None, now_ns: int) -> Entry | None:
    """The pre-image as a tree entry. A file that already has the pre-image's bytes keeps its
    mtime, so putting back what is already there changes nothing."""
    if pre.kind == ABSENT:
        return None
    assert pre.oid is not None
    if pre.kind == SYMLINK:
        return Entry(b"", TREE_SYMLINK, 0o777, pre.size, now_ns, pre.oid)
    mtime = current.mtime_ns if current is not None and current.oid == pre.oid else now_ns
    mode = pre.mode if pre.mode is not None else 0o644
    return Entry(b"", TREE_FILE, mode, pre.size, mtime, pre.oid)
