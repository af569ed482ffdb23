"""Planning a restore: the full list of writes and deletes, decided before anything is touched.

The planner compares the current state (the capture just taken, or a dry scan) with the target
snapshot, tree by tree, skipping equal subtrees. It obeys the safety contract:

* a path is deleted only if the current state captured it (so its bytes are in the store) and the
  target snapshot's own rules cover it, or the caller named it explicitly (a tool call's paths):
  files that were excluded, ignored or skipped when the target was taken are never deleted;
* a path is written only over something the current state captured; a path that exists on disk
  but was not captured (excluded now, too large, unreadable) is left alone and reported;
* every name comes from a validated tree (no ``/``, ``..``, NUL), and both the planner's disk
  checks and the apply step reach each parent through ``O_NOFOLLOW`` directory handles, so no
  check or write goes through a symlink, and no path is ever longer than one name.

The walk is iterative (an explicit stack), so a directory chain thousands of levels deep plans
like any other tree.
"""

from __future__ import annotations

import os
import stat as st
from collections.abc import Callable, Collection, Sequence

from ...errors import CorruptObject, RestoreError
from ...state.ignore.exclude import Matcher, Rules
from ...state.trees import DIR, FILE, SYMLINK, Entry
from ...types import Skipped, Snapshot, quote_path
from ..diff import CREATED, DELETED, MODIFIED, PERMISSIONS, TreeReader
from ..dirs import DirHandles
from .actions import (
    ANCESTOR,
    CHMOD,
    DELETE,
    DIRMODE,
    MKDIR,
    RMDIR,
    SYMLINK_OP,
    UTIME,
    WRITE,
    Action,
    RestorePlan,
    restored_mode,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KEPT_UNCOVERED = "kept: the snapshot did not cover it (excluded, ignored or skipped then)"
#: a requested path the restore cannot reach without writing through what is there now (a
#: symlink or a file where the snapshot has a directory): the restore refuses the request
PARENT_NOT_DIR = "left alone: a parent of the requested path is not a directory now"
LEFT_UNCAPTURED = ("left alone: it exists but the safety snapshot did not capture it "
                   "(excluded or skipped now), so overwriting it could lose data")
#: a path below a folder the restore may not enter (no search permission): whatever is there
#: was not captured either, so it is left as it is
LEFT_UNREADABLE = ("a folder above it cannot be entered (permission denied), so the safety "
                   "snapshot could not capture what is there")


class _Unreadable(Exception):
    """``_lstat`` met a folder it may not search: the caller leaves the path alone."""


def _join(prefix: bytes, name: bytes) -> bytes:
    return prefix + b"/" + name if prefix else name


def snapshot_ignore_reader(read: TreeReader, read_blob: Callable[[bytes], bytes],
                           root_oid: bytes | None) -> Callable[[bytes], bytes | None]:
    """Reads ignore files out of a snapshot's tree, so coverage is judged by the rules that
    were in force when the snapshot was taken."""

    def reader(rel: bytes) -> bytes | None:
        if root_oid is None:
            return None
        oid = root_oid
        parts = rel.split(b"/")
        for i, name in enumerate(parts):
            found = next((e for e in read(oid) if e.name == name), None)
            if found is None:
                return None
            if i == len(parts) - 1:
                return read_blob(found.oid) if found.kind == FILE else None
            if found.kind != DIR:
                return None
            oid = found.oid
        return None

    return reader


class Coverage:
    """Which paths a snapshot took in: the rules and ignore files in force when it was taken,
    less the paths it skipped. A path it did not cover says nothing about the workspace then,
    so a restore to it never deletes or rewrites that path on its word."""

    def __init__(self, target: Snapshot, read_target: TreeReader,
                 read_blob: Callable[[bytes], bytes]) -> None:
        self.target = target
        self.read_target = read_target
        self.read_blob = read_blob
        self.skipped_paths = {s.path for s in target.skipped}
        self._matchers: dict[bytes, Matcher] = {}

    def _matcher(self, root: bytes) -> Matcher:
        m = self._matchers.get(root)
        if m is None:
            rules_list = self.target.rules.get("roots", [])
            index = int(root)
            rules = Rules.from_json(rules_list[index]) if index < len(rules_list) else Rules()
            root_oid = next((e.oid for e in self.read_target(self.target.root)
                             if e.name == root), None)
            reader = snapshot_ignore_reader(self.read_target, self.read_blob, root_oid)
            m = self._matchers[root] = Matcher(rules, reader)
        return m

    def covers(self, path: bytes, is_dir: bool) -> bool:
        """``path``: a store path (``"0/src/a.py"``)."""
        root, _, rel = path.partition(b"/")
        probe = path
        while probe:  # the path, or a directory above it, was skipped when the target was taken
            if probe in self.skipped_paths:
                return False
            probe = probe.rpartition(b"/")[0]
        return self._matcher(root).covers(rel, is_dir)


def _everything(path: bytes) -> str:
    return "in"


class PathFilter:
    """Where a store path stands against the paths a restore was limited to: ``in`` when it
    is one of them or lies below one, ``ancestor`` when one lies below it, else ``out``. Sets
    of the paths and of every folder above one make that a few lookups per path, not a pass
    over every path for every entry the plan meets (a restore of N paths went over each
    entry of each folder on their way N times)."""

    __slots__ = ("_above", "_named")

    def __init__(self, paths: Collection[bytes]) -> None:
        self._named = frozenset(paths)
        self._above = frozenset(p[:i] for p in self._named for i in range(len(p))
                                if p[i:i + 1] == b"/")

    def state(self, path: bytes) -> str:
        named = self._named
        probe = path
        while True:
            if probe in named:
                return "in"
            cut = probe.rfind(b"/")
            if cut < 0:
                return "ancestor" if path in self._above else "out"
            probe = probe[:cut]


class Planner:
    """Builds a :class:`RestorePlan`; ``explicit`` names paths that count as covered whatever
    the rules say (the paths a tool call touched, which may be ignored files such as ``.env``)."""

    def __init__(self, target: Snapshot, read_target: TreeReader, read_current: TreeReader,
                 read_blob: Callable[[bytes], bytes], dest_roots: Sequence[bytes],
                 filters: Sequence[bytes] | None, check_disk: bool,
                 explicit: Collection[bytes] = ()) -> None:
        self.plan = RestorePlan(target)
        self.read_target = read_target
        self.read_current = read_current
        self.read_blob = read_blob
        self.dest_roots = list(dest_roots)
        self.filters = list(filters) if filters is not None else None
        self._filter_state = (PathFilter(self.filters).state if self.filters is not None
                              else _everything)
        self.check_disk = check_disk
        self.explicit = frozenset(explicit)
        self.coverage = Coverage(target, read_target, read_blob)
        self._disk = DirHandles(self.dest_roots, limit=32) if check_disk else None
        self._stack: list[tuple[Any, ...]] = []

    # -- coverage ----------------------------------------------------------------------------

    def covers(self, path: bytes, is_dir: bool) -> bool:
        return path in self.explicit or self.coverage.covers(path, is_dir)

    def _lstat(self, path: bytes) -> os.stat_result | None:
        """What is on disk at ``path`` now, reached through directory handles; None when
        nothing is (or a parent is missing). Raises :class:`_Unreadable` when a folder on the
        way may not be entered, and a :class:`RestoreError` naming the path for any other
        error: planning changes nothing, so the message can say so."""
        assert self._disk is not None
        parent, _, name = path.rpartition(b"/")
        try:
            return os.stat(name, dir_fd=self._disk.get(parent), follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except PermissionError:
            raise _Unreadable from None
        except OSError as exc:
            raise RestoreError(f"cannot look at {quote_path(path.partition(b'/')[2])} in the "
                               f"workspace: {exc.strerror or exc}; nothing was changed") from exc

    # -- planning ----------------------------------------------------------------------------

    def run(self, current_top: bytes | None) -> RestorePlan:
        try:
            target_top = self.plan.target.root
            current = ({e.name: e for e in self.read_current(current_top)}
                       if current_top is not None else {})
            for t in reversed(self.read_target(target_top)):
                if t.kind != DIR or not t.name.isdigit():
                    # a top tree names root directories only; anything else is a damaged
                    # (or crafted) snapshot, not a bare ValueError half way through a plan
                    raise CorruptObject(f"snapshot {self.plan.target.id}'s top tree is "
                                        "damaged (it names no root directories); run "
                                        "`ctrlz verify`")
                state = self._filter_state(t.name)
                if int(t.name) >= len(self.dest_roots) or state == "out":
                    continue
                c = current.get(t.name)
                c = c if c is not None and c.kind == DIR else None
                if state == "in" and (c is None or c.mode != t.mode):
                    self._stack.append(("final", Action(DIRMODE, t.name, t, c, PERMISSIONS)))
                # roots themselves are never created or removed
                self._stack.append(("descend", t.name, c, t))
            self._drain()
        finally:
            if self._disk is not None:
                self._disk.close()
        return self.plan

    def _drain(self) -> None:
        handlers: dict[str, Callable[..., None]] = {
            "pair": self._pair, "descend": self._descend, "ancestor": self._ancestor,
            "remove": self._remove, "create": self._create,
        }
        stack = self._stack
        while stack:
            task = stack.pop()
            kind = task[0]
            if kind == "final":
                self.plan.finals.append(task[1])
            elif kind == "removal":
                self.plan.removals.append(task[1])
            else:
                handlers[kind](*task[1:])

    def _children(self, read: TreeReader, entry: Entry | None) -> dict[bytes, Entry]:
        if entry is None or entry.kind != DIR:
            return {}
        return {e.name: e for e in read(entry.oid)}

    def _pair(self, path: bytes, c: Entry | None, t: Entry | None) -> None:
        state = self._filter_state(path)
        if state == "out":
            return
        if state == "ancestor":
            self._ancestor(path, c, t)
            return
        if t is None:
            if c is not None:
                self._remove(path, c)
        elif c is None:
            self._create(path, t, self.check_disk)
        elif c.kind != t.kind and DIR not in (c.kind, t.kind):
            # a link for a file or a file for a link: one swap, as for new content, so that
            # no instant (no crash) finds the path missing
            op = WRITE if t.kind == FILE else SYMLINK_OP
            self.plan.writes.append(Action(op, path, t, c, MODIFIED))
        elif c.kind != t.kind:
            # a directory for a file or the other way round: a removal and a create, and
            # removals all run before writes (the order of these two pushes is free); a crash
            # in between leaves the path missing until `ctrlz undo` or the rollback again
            self._create(path, t, False)
            self._remove(path, c)
        elif t.kind == DIR:
            if c.mode != t.mode:
                self._stack.append(("final", Action(DIRMODE, path, t, c, PERMISSIONS)))
            if c.oid != t.oid:
                self._descend(path, c, t)
        elif c.oid != t.oid:
            op = WRITE if t.kind == FILE else SYMLINK_OP
            self.plan.writes.append(Action(op, path, t, c, MODIFIED))
        elif t.kind == SYMLINK:
            return  # a link's own mode and mtime are not restored
        elif c.mode != restored_mode(t):
            self.plan.writes.append(Action(CHMOD, path, t, c, PERMISSIONS))
        elif c.mtime_ns != t.mtime_ns:
            self.plan.writes.append(Action(UTIME, path, t, c, "touched"))

    def _descend(self, path: bytes, c: Entry | None, t: Entry | None) -> None:
        cur = self._children(self.read_current, c)
        tgt = self._children(self.read_target, t)
        # Inside the request, an entry that is the same on both sides plans nothing in
        # ``_pair`` (unless it is a file whose s-bits a restore drops): skip it here, so a
        # changed directory of thousands of entries costs a tuple comparison per entry.
        inside = self._filter_state(path) == "in"
        stack = self._stack
        for name in sorted(cur.keys() | tgt.keys(), reverse=True):
            ce, te = cur.get(name), tgt.get(name)
            if inside and te is not None and ce == te and te.mode == restored_mode(te):
                continue
            stack.append(("pair", _join(path, name), ce, te))

    def _ancestor(self, path: bytes, c: Entry | None, t: Entry | None) -> None:
        """A directory above a requested path: create it if needed, never remove or chmod it."""
        if t is not None and t.kind == DIR:
            if c is None:
                try:
                    s = self._lstat(path) if self.check_disk else None
                except _Unreadable:
                    self.plan.skipped.append(Skipped(path, LEFT_UNREADABLE))
                    return
                if s is not None:
                    if not st.S_ISDIR(s.st_mode):
                        self.plan.skipped.append(Skipped(path, LEFT_UNCAPTURED))
                        return
                    self._descend(path, None, t)
                else:
                    self.plan.writes.append(Action(MKDIR, path, t, None, CREATED))
                    self._stack.append(("final", Action(DIRMODE, path, t, None, CREATED)))
                    self._descend(path, None, t)
            elif c.kind == DIR:
                self._descend(path, c, t)
            else:
                self.plan.skipped.append(Skipped(path, PARENT_NOT_DIR))
        elif c is not None and c.kind == DIR:
            # the target has no directory here: it goes once what the request removes from it
            # is gone (the apply step keeps it, silently, while it holds anything else)
            if self.covers(path, True):
                self._stack.append(("removal", Action(RMDIR, path, None, c, ANCESTOR)))
            self._descend(path, c, None)

    def _remove(self, path: bytes, c: Entry) -> None:
        if not self.covers(path, c.kind == DIR):
            self.plan.skipped.append(Skipped(path, KEPT_UNCOVERED))
            return
        if c.kind == DIR:
            # children first: the rmdir is queued below them and runs once they are planned
            self._stack.append(("removal", Action(RMDIR, path, None, c, DELETED)))
            for child in reversed(self.read_current(c.oid)):
                self._stack.append(("remove", _join(path, child.name), child))
        else:
            self.plan.removals.append(Action(DELETE, path, None, c, DELETED))

    def _create(self, path: bytes, t: Entry, check_disk: bool) -> None:
        if check_disk:
            try:
                s = self._lstat(path)
            except _Unreadable:
                self.plan.skipped.append(Skipped(path, LEFT_UNREADABLE))
                return
            if s is not None:
                if t.kind == DIR and st.S_ISDIR(s.st_mode):
                    # an uncaptured directory: fill in what is missing, touch nothing there
                    for child in reversed(self.read_target(t.oid)):
                        self._stack.append(("create", _join(path, child.name), child, True))
                else:
                    self.plan.skipped.append(Skipped(path, LEFT_UNCAPTURED))
                return
        if t.kind == DIR:
            self.plan.writes.append(Action(MKDIR, path, t, None, CREATED))
            self._stack.append(("final", Action(DIRMODE, path, t, None, CREATED)))
            for child in reversed(self.read_target(t.oid)):
                self._stack.append(("create", _join(path, child.name), child, False))
        else:
            op = WRITE if t.kind == FILE else SYMLINK_OP
            self.plan.writes.append(Action(op, path, t, None, CREATED))


def refuse_unreachable(plan: RestorePlan, requested: Sequence[bytes] | None) -> None:
    """A path the user asked for that the restore would have to leave alone, because what is
    now in the way of it is not a directory (a symlink perhaps pointing out of the
    workspace), or is a folder it may not enter: the whole request fails before anything is
    written, rather than succeed without it (exit 0 and a note is how a user learns the
    wrong thing). Below a requested folder, an unreadable path is left alone and reported."""
    blocked = [k.path for k in plan.skipped if k.reason == PARENT_NOT_DIR]
    _refuse(blocked, "the snapshot has a directory there, the workspace now a file or a "
            "symlink, which a restore never writes through; move it away and retry")
    shut = [p for p in requested or () for k in plan.skipped
            if k.reason == LEFT_UNREADABLE and (p == k.path or p.startswith(k.path + b"/"))]
    _refuse(shut, "a folder on the way to it cannot be entered (permission denied), so the "
            "restore cannot see what is there; make it readable (chmod u+rx) and retry")


def _refuse(paths: list[bytes], why: str) -> None:
    """Fail the request over ``paths`` (virtual, root first), naming the first of them."""
    if paths:
        more = f" (and {len(paths) - 1} more)" if len(paths) > 1 else ""
        raise RestoreError(f"{quote_path(paths[0].partition(b'/')[2])}{more}: {why} "
                           "(nothing was changed)")
