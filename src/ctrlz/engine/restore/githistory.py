"""What a restore does to the history of each git repository in the workspace.

ctrlz captures ``.git`` like any other directory, on purpose: it is what brings a repository
back after an agent's ``rm -rf .git`` or ``git reset --hard``. But a rollback that puts ``.git``
back also moves its branches, and commits made since the snapshot (often the user's own) leave
the repository: their objects are deleted with the rest of what the snapshot did not have. The
safety contract (DESIGN.md, item 8) asks that every plan and result say so, and that the user
can choose. This module is where that is decided, once, for every kind of restore and every
face:

* :func:`consequences` reads the refs (``HEAD``, loose refs, ``packed-refs``) of each
  repository whose ``.git`` the plan touches, as they are on disk now and as they will be once
  the plan is applied (the plan's own writes and deletes over today's files, so a restore of
  some paths is judged exactly), names every ref that moves, and counts the commits reachable
  now that will no longer be (``git rev-list``, read-only, on the current repository; without
  git it names the moves and says it could not count);
* :func:`hold` takes every action inside a ``.git`` out of a plan (``--git=keep``: the working
  tree only);
* :func:`refuse_if_at_risk` is the default (``--git=auto``): ``.git`` goes back unless that
  makes commits unreachable (or they cannot be counted), and then the restore is refused,
  before anything is written, with one line that names the consequences and the two flags.

The facts come from :mod:`ctrlz.engine.restore.gitrefs` (refs read as files, commits counted by
read-only git commands); the repository is never written.
"""

from __future__ import annotations

import os

from ...errors import HistoryAtRisk, UsageError
from ...state.trees import DIR
from ...types import Skipped, show_path
from .actions import DELETE, MKDIR, RMDIR, WRITE, RestorePlan
from .gitrefs import (
    Refs,
    count_unreachable,
    files_in_tree,
    files_on_disk,
    loose_in_tree,
    parse_refs,
    tree_at,
    wanted,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

GIT = b".git"
#: the choices: ``auto`` (the default: restore .git unless commits would become unreachable,
#: else refuse), ``keep`` (leave every .git as it is now) and ``restore`` (put it back too)
MODES = ("auto", "keep", "restore")
KEPT_GIT = "kept as it is (--git=keep): its branches, commits and index were not restored"
#: how many moved refs a one-line summary names before it says "and N more"
SHOWN = 4


def show_text(text: str) -> str:
    """A repository path or ref name in one line of output: git's ref names cannot hold
    control characters, but a directory name can, and must not break the line."""
    return text if all(" " <= c != "\x7f" for c in text) else repr(text)


# -- what a plan does to each repository -------------------------------------------------------

class GitChange:
    """What one restore does to one repository. ``repo``: its workspace path (``.`` for the
    root; with several roots, prefixed by the root's number), ``mode``: ``restore`` or
    ``keep``; ``before``/``after``: its :class:`Refs` now and once the restore is done;
    ``unreachable``: commits reachable now and not after (None: not counted)."""

    __slots__ = ("repo", "mode", "before", "after", "unreachable")

    def __init__(self, repo: str, mode: str, before: Refs, after: Refs,
                 unreachable: int | None) -> None:
        self.repo = repo
        self.mode = mode
        self.before = before
        self.after = after
        self.unreachable = unreachable

    def moves(self) -> list[tuple[str, str | None, str | None]]:
        """(ref, before, after) of every ref that changes, by name."""
        b, a = self.before.refs, self.after.refs
        return [(n, b.get(n), a.get(n)) for n in sorted(b.keys() | a.keys())
                if b.get(n) != a.get(n)]

    @property
    def at_risk(self) -> bool:
        """Commits reachable now would not be after, or might not be (git could not count
        them while refs that hold commits now move or go)."""
        if self.mode == "keep":
            return False
        if self.unreachable is None:
            return bool(self.before.tips() - self.after.tips())
        return self.unreachable > 0

    def summary(self) -> str:
        """One line, e.g. ``git: branch main moves 212d326 → e0df6b2; 2 commits made since
        become unreachable (ctrlz undo brings them back)``."""
        where = "git" if self.repo == "." else f"git ({show_text(self.repo)})"
        b, a = self.before, self.after
        if self.mode == "keep":
            head = _head_text(b)
            return (f"{where}: .git left as it is (--git=keep){', ' + head if head else ''}; "
                    "`git status` shows the rollback as uncommitted changes")
        parts: list[str] = []
        if not b.present and a.present:
            parts.append(".git comes back (it is missing now)"
                         + (f", {_head_text(a)}" if _head_text(a) else ""))
        elif b.present and not a.present:
            parts.append(".git is removed (the snapshot had none)")
        else:
            if b.head != a.head:
                parts.append(f"HEAD switches from {_head_name(b)} to {_head_name(a)}")
            elif b.head is None and b.head_oid != a.head_oid:
                parts.append(f"detached HEAD moves {_short(b.head_oid)} → {_short(a.head_oid)}")
            moves = self.moves()
            for name, old, new in moves[:SHOWN]:
                parts.append(_move_text(name, old, new))
            if len(moves) > SHOWN:
                parts.append(f"and {len(moves) - SHOWN} more refs change")
            if not parts:
                parts.append("no branch or tag moves (only .git's other files go back: "
                             "index, logs, config)")
        lost = self.unreachable
        if lost:
            parts.append(f"{lost} commit{'s' if lost != 1 else ''} made since "
                         f"become{'s' if lost == 1 else ''} unreachable (ctrlz undo brings "
                         f"{'them' if lost != 1 else 'it'} back)")
        elif lost is None and b.tips() - a.tips():
            parts.append("commits reachable now may become unreachable (they could not be "
                         "counted: no git here, or commits only in a pack)")
        return f"{where}: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        def refs(r: Refs) -> dict[str, Any]:
            return {"present": r.present, "head": r.head, "head_oid": r.head_oid}

        return {"repository": self.repo, "mode": self.mode,
                "before": refs(self.before), "after": refs(self.after),
                "refs": [{"ref": n, "before": o, "after": w} for n, o, w in self.moves()],
                "unreachable_commits": self.unreachable, "at_risk": self.at_risk,
                "summary": self.summary()}


def _short(oid: str | None) -> str:
    return oid[:7] if oid else "nothing"


def _ref_name(name: str) -> str:
    for prefix, what in (("refs/heads/", "branch "), ("refs/tags/", "tag "),
                         ("refs/remotes/", "remote-tracking branch ")):
        if name.startswith(prefix):
            return what + show_text(name[len(prefix):])
    return "stash" if name == "refs/stash" else show_text(name)


def _head_name(r: Refs) -> str:
    return _ref_name(r.head) if r.head else f"detached {_short(r.head_oid)}"


def _head_text(r: Refs) -> str:
    if r.head:
        return f"{_ref_name(r.head)} at {_short(r.head_oid)}" if r.head_oid else \
            f"{_ref_name(r.head)} (no commits yet)"
    return f"detached HEAD at {_short(r.head_oid)}" if r.head_oid else ""


def _move_text(name: str, old: str | None, new: str | None) -> str:
    if old is None:
        return f"{_ref_name(name)} appears at {_short(new)}"
    if new is None:
        return f"{_ref_name(name)} ({_short(old)}) is deleted"
    return f"{_ref_name(name)} moves {_short(old)} → {_short(new)}"


def gitdirs(paths: Iterable[bytes]) -> list[bytes]:
    """The ``.git`` directories (virtual paths, ``0/sub/.git``) at or above ``paths``: the
    first ``.git`` on each path (a submodule's repository inside ``.git/modules`` is part of
    its superproject's)."""
    found: set[bytes] = set()
    for path in paths:
        parts = path.split(b"/")
        if GIT in parts[1:]:
            found.add(b"/".join(parts[:parts.index(GIT, 1) + 1]))
    return sorted(found)


def _show_repo(gitdir: bytes, roots: int) -> str:
    root, _, rel = gitdir.rpartition(b"/")[0].partition(b"/")
    text = show_path(rel) if rel else "."
    return text if roots == 1 else f"{root.decode()}:{text}"


def consequences(plan: RestorePlan, mode: str, read_tree: Callable[[bytes], list[Any]],
                 read_blob: Callable[[bytes], bytes], dest_roots: Sequence[bytes],
                 held: Sequence[bytes] = ()) -> list[GitChange]:
    """What applying ``plan`` does to each repository whose ``.git`` it touches (``held``:
    the ``.git`` directories :func:`hold` took out of it, reported as kept). The state after
    is today's ref files with the plan's writes and deletes applied, read from the target's
    entries; so a restore limited to some paths is judged by what it really writes."""
    by_repo: dict[bytes, list[Any]] = {}
    for a in plan.actions:
        for g in gitdirs([a.path]):
            by_repo.setdefault(g, []).append(a)
    out: list[GitChange] = []
    for g in sorted(by_repo.keys() | set(held)):
        root, _, rel = g.partition(b"/")
        disk = os.path.join(dest_roots[int(root)], rel)
        now = files_on_disk(disk)
        before = parse_refs(now)
        if g in held:
            out.append(GitChange(_show_repo(g, len(dest_roots)), "keep", before, before, 0))
            continue
        actions = by_repo[g]
        if now is None and not any(a.path != g or (a.entry is not None and a.entry.kind == DIR)
                                   for a in actions):
            continue  # a gitlink file (a worktree's or a submodule's ``.git``): no refs here
        after_files = dict(now or {})
        present = now is not None
        for a in actions:
            if a.path == g:
                present = {RMDIR: False, MKDIR: True}.get(a.op, present)
                continue
            inner = a.path[len(g) + 1:]
            if not wanted(inner):
                continue
            if a.op == DELETE:
                after_files.pop(inner, None)
            elif a.op == WRITE and a.entry is not None:
                after_files[inner] = read_blob(a.entry.oid)
        after = parse_refs(after_files if present else None)
        lost = before.tips() - after.tips()
        written = {a.path[len(g) + 1:]: a.entry.oid for a in actions
                   if a.op == WRITE and a.entry is not None and a.path.startswith(g + b"/")}

        def loose(oid: str, written: dict[bytes, bytes] = written) -> bytes | None:
            blob = written.get(b"objects/" + oid[:2].encode() + b"/" + oid[2:].encode())
            return None if blob is None else read_blob(blob)

        unreachable = 0 if not lost else count_unreachable(disk, lost, after.tips(), loose)
        out.append(GitChange(_show_repo(g, len(dest_roots)), "restore", before, after,
                             unreachable))
    return out


def hold(plan: RestorePlan) -> list[bytes]:
    """Take every action at or below a ``.git`` out of ``plan`` (``--git=keep``) and list each
    such ``.git`` as skipped; returns the ``.git`` paths held."""
    held: set[bytes] = set()

    def keep(actions: list[Any]) -> list[Any]:
        out = []
        for a in actions:
            g = gitdirs([a.path])
            if g:
                held.update(g)
            else:
                out.append(a)
        return out

    plan.removals, plan.writes, plan.finals = (keep(plan.removals), keep(plan.writes),
                                               keep(plan.finals))
    for g in sorted(held):
        plan.skipped.append(Skipped(g, KEPT_GIT))
    return sorted(held)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise UsageError(f"--git={mode}: choose keep (leave .git as it is), restore (put .git "
                         "back too) or auto")
    return mode


def refuse_if_at_risk(changes: Sequence[GitChange], kind: str, target: str) -> None:
    """The default (``auto``): a restore that would make commits unreachable, or cannot say
    that it would not, is refused; nothing has been written yet."""
    risky = [c for c in changes if c.at_risk]
    if not risky:
        return
    what = " / ".join(c.summary() for c in risky)
    raise HistoryAtRisk(f"{kind} to {target} refused, nothing was changed: {what}. Add "
                        "--git=keep to leave .git as it is (the working tree only) or "
                        "--git=restore to put .git back too", risky)


def precheck(target: Any, read_tree: Callable[[bytes], list[Any]],
             read_blob: Callable[[bytes], bytes], dest_roots: Sequence[bytes],
             kind: str) -> None:
    """:func:`refuse_if_at_risk` for a whole-workspace restore to a stored snapshot, before its
    capture: the ``.git`` at the top of each root ends as the target has it, so its refs after
    are the target's. (A repository deeper down is judged from the plan, after the capture.)"""
    changes = []
    for i, root in enumerate(dest_roots):
        g = str(i).encode() + b"/" + GIT
        entry = tree_at(read_tree, target.root, g)
        if entry is None:
            # the snapshot holds no .git (taken before `git init`, or .git excluded): whether
            # the restore removes one is for its plan to say (an excluded .git is never
            # removed), so it is judged there
            continue
        disk = os.path.join(root, GIT)
        before = parse_refs(files_on_disk(disk))
        after = parse_refs(files_in_tree(read_tree, read_blob, entry.oid))
        lost = before.tips() - after.tips()
        if lost:
            loose = loose_in_tree(read_tree, read_blob, entry.oid)
            changes.append(GitChange(_show_repo(g, len(dest_roots)), "restore", before, after,
                                     count_unreachable(disk, lost, after.tips(), loose)))
    refuse_if_at_risk(changes, kind, target.id)


def judge(plan: RestorePlan, mode: str, kind: str, dry_run: bool,
          read_tree: Callable[[bytes], list[Any]], read_blob: Callable[[bytes], bytes],
          dest_roots: Sequence[bytes]) -> list[dict[str, Any]]:
    """The engine's one call, between planning and the journal: take ``.git`` out of the plan
    for ``keep``, work out what the plan does to each repository, and under ``auto`` refuse a
    real restore that would make commits unreachable (a dry run reports it and goes on).
    Returns the result's ``git`` list."""
    held = hold(plan) if mode == "keep" else []
    changes = consequences(plan, mode, read_tree, read_blob, dest_roots, held)
    if mode == "auto" and not dry_run:
        refuse_if_at_risk(changes, kind, plan.target.id)
    return [c.to_json() for c in changes]
