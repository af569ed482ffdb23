"""Fork: a new workspace at one point of a workspace's history, beside the original.

``fork(ws, ref, dest)`` creates ``dest`` holding exactly the files of one snapshot, so an agent
can try a second approach from the same checkpoint while the first goes on in the original:

- **The point** is a snapshot reference (id, prefix, label, number, ``cp-N``, ``latest``:
  :meth:`ProtectedWorkspace.resolve`) or the ``tool_use_id`` of a tool call of an agent
  session (the latest session, or ``session_id``). A shell (``bash``) tool call has the
  workspace snapshot taken just before it ran, and that is the point. A file tool call has only
  per-path pre-images, no whole-workspace snapshot of the moment before it, so it is refused,
  naming the newest snapshot taken before it and the next shell call instead.
- **The fork**: when the workspace root holds ``.git``, a ``git worktree`` on a new branch
  (default ``ctrlz/fork-<short snapshot id>``) made from ``HEAD`` with
  ``git -C ROOT worktree add -b BRANCH DEST HEAD``, whose files are then replaced by the
  snapshot's (every file of the worktree but ``.git`` goes; the snapshot, but for its ``.git``,
  is extracted beside it through the one restore engine,
  :func:`~ctrlz.session.restores.restore_to`, and moved in).
  ``git status`` in the fork shows the snapshot against ``HEAD``. Files the snapshot did not
  hold (ignored or excluded ones) are not in the fork, even when git tracks them. Otherwise a
  plain directory, extracted by :func:`~ctrlz.session.restores.restore_to`.
- The original workspace is never written. ``git worktree add`` writes the new branch and the
  worktree's record under the repository's ``.git`` (``.git/worktrees/<name>``); remove both with
  ``git worktree remove DEST`` and ``git branch -D BRANCH``.
- **Lineage**: the fork is protected with its own store, whose catalog meta records
  ``forked_from_workspace`` (the parent's root), ``forked_from_snapshot`` and, when the point
  was a tool call, ``forked_from_tool_call`` and ``forked_from_session``
  (:func:`lineage` reads them back); its first snapshot is a manual one labelled
  ``fork of <parent> at <snapshot>``.
- **Resume**: when the point came from a Claude Code session, :attr:`ForkResult.resume` is the
  command that continues the conversation in the fork (``claude --resume ID --fork-session``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import AmbiguousSnapshot, SnapshotNotFound, UsageError, WorkspaceError
from ...paths import within
from ...session.protected import ProtectedWorkspace
from ...session.restores import restore_to
from ...types import Snapshot

#: catalog meta keys of the lineage, in the fork's store
META_KEYS = {"workspace": "forked_from_workspace", "snapshot": "forked_from_snapshot",
             "tool_call": "forked_from_tool_call", "session_id": "forked_from_session"}


@dataclass
class ForkResult:
    workspace: str
    store: str
    parent: str
    snapshot: str
    first_snapshot: str
    git: bool
    branch: str | None = None
    tool_call: str | None = None
    session_id: str | None = None
    agent: str | None = None
    resume: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": "fork", "workspace": self.workspace, "store": self.store,
                "forked_from": {"workspace": self.parent, "snapshot": self.snapshot,
                                "tool_call": self.tool_call, "session_id": self.session_id},
                "first_snapshot": self.first_snapshot, "git": self.git, "branch": self.branch,
                "agent": self.agent, "resume": self.resume}


@dataclass
class _Point:
    snapshot: Snapshot
    tool_call: str | None = None
    session_id: str | None = None
    agent: str | None = None


def lineage(ws: ProtectedWorkspace) -> dict[str, str | None] | None:
    """Where this workspace was forked from (``workspace``, ``snapshot``, ``tool_call``,
    ``session_id``), or None if it is not a fork."""
    catalog = ws.repo.catalog
    found = {name: catalog.get_meta(key) for name, key in META_KEYS.items()}
    return found if found["workspace"] else None


def fork(ws: ProtectedWorkspace, ref: str, dest: str | os.PathLike[str], *,
         branch: str | None = None, session_id: str | None = None) -> ForkResult:
    """Create ``dest`` (new, or an empty directory outside the workspace) at point ``ref``."""
    dest_path = _check_dest(ws, dest)
    point = _point(ws, ref, session_id)
    snap = point.snapshot
    git = (ws.root / ".git").exists()
    if git:
        branch = branch or f"ctrlz/fork-{snap.id.removeprefix('snap_')[:8]}"
        _git_fork(ws, snap, dest_path, branch)
    else:
        if branch:
            raise UsageError(f"--branch needs a git repository; {ws.root} is not one")
        restore_to(ws, snap.id, dest_path)
    with ProtectedWorkspace.init(dest_path, home=ws.home) as child:
        with child.repo.catalog.transaction():
            values = {"workspace": str(ws.root), "snapshot": snap.id,
                      "tool_call": point.tool_call, "session_id": point.session_id}
            for name, value in values.items():
                if value:
                    child.repo.catalog.set_meta(META_KEYS[name], value)
        first = child.snapshot(type="manual", label=f"fork of {ws.root} at {snap.id}")
        result = ForkResult(str(child.root), str(child.store_path), str(ws.root), snap.id,
                            first.id, git, branch if git else None, point.tool_call,
                            point.session_id, point.agent)
    if point.session_id and point.agent == "claude":
        result.resume = (f"cd {shlex.quote(result.workspace)} && claude --resume "
                         f"{shlex.quote(point.session_id)} --fork-session")
    return result


def _check_dest(ws: ProtectedWorkspace, dest: str | os.PathLike[str]) -> Path:
    path = Path(dest).expanduser().absolute()
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise UsageError(f"{dest} exists and is not a directory; fork into a new directory")
    if path.is_dir() and any(path.iterdir()):
        raise UsageError(f"{dest} is not empty; fork into a new or empty directory")
    real = path.resolve()
    if within(str(real), str(ws.root.resolve())):
        raise UsageError(f"{dest} is inside the workspace {ws.root}; fork into a directory "
                         "outside it")
    return real


def _point(ws: ProtectedWorkspace, ref: str, session_id: str | None) -> _Point:
    """The snapshot ``ref`` names, trying a tool call of the agent session first when
    ``session_id`` is given, else a snapshot reference first."""
    if session_id is None:
        try:
            return _Point(ws.resolve(ref))
        except AmbiguousSnapshot:
            raise
        except SnapshotNotFound as exc:
            point = _tool_call_point(ws, ref, None)
            if point is None:
                raise SnapshotNotFound(f"{ref!r} is neither a snapshot ({exc}) nor a tool call "
                                       "of the latest agent session") from exc
            return point
    point = _tool_call_point(ws, ref, session_id)
    return point if point is not None else _Point(ws.resolve(ref))


def _tool_call_point(ws: ProtectedWorkspace, ref: str, session_id: str | None) -> _Point | None:
    """The point just before tool call ``ref`` of the session (None if it has no such call)."""
    from .. import records
    from ..core import opened
    from .rewinds import agent_sessions

    sessions = {s["session_id"]: s["agent"] for s in agent_sessions(ws)}
    if session_id is None:
        if not sessions:
            return None
        session_id = list(sessions)[-1]
    elif session_id not in sessions:
        raise UsageError(f"no agent session {session_id!r} in this workspace; see "
                         "`ctrlz sessions`")
    with opened(ws) as place:
        calls = records.snapshots(place.db, session_id, include_rolled_back=False)
    call = next((c for c in calls if c.snapshot_id == ref), None)
    if call is None:
        return None
    agent = sessions[session_id]
    if call.kind == "bash" and call.ws_snapshot:
        try:
            snap = ws.resolve(call.ws_snapshot)
        except SnapshotNotFound as exc:
            raise SnapshotNotFound(f"the workspace snapshot taken before tool call {ref} "
                                   f"({call.ws_snapshot}) is gone") from exc
        return _Point(snap, ref, session_id, agent)
    before = [s for s in ws.snapshots() if s.created_ns <= call.taken_ns and s.type != "safety"]
    later = next((c for c in calls if c.seq > call.seq and c.kind == "bash"), None)
    hints = []
    if before:
        hints.append(f"snapshot {before[-1].id} (taken before it)")
    if later is not None:
        hints.append(f"shell call {later.snapshot_id} (after it, so with its edits)")
    raise UsageError(f"tool call {ref} is a file tool call, which has no workspace snapshot "
                     "to fork from; fork from " + (" or ".join(hints) or "a snapshot id")
                     + " instead")


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)


def _git_fork(ws: ProtectedWorkspace, snap: Snapshot, dest: Path, branch: str) -> None:
    """A worktree of ``ws`` on the new ``branch`` at ``dest``, holding ``snap``'s files."""
    if shutil.which("git") is None:
        raise WorkspaceError(f"{ws.root} is a git repository but git is not installed")
    if _git(ws.root, "check-ref-format", "--branch", branch).returncode != 0:
        raise UsageError(f"{branch!r} is not a valid branch name")
    if _git(ws.root, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").returncode == 0:
        raise UsageError(f"branch {branch!r} already exists; name another with --branch")
    if _git(ws.root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").returncode != 0:
        raise UsageError(f"the git repository {ws.root} has no commit yet; commit once, or "
                         "fork a copy with `ctrlz restore SNAP --to DIR`")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # extract first, beside the destination (same filesystem, so the files move by rename)
    staging = Path(tempfile.mkdtemp(prefix=".ctrlz-fork-", dir=dest.parent))
    try:
        tree = staging / "tree"
        # every top-level entry but .git, which snapshots hold too: the worktree has its own
        root = ws._entry_at(snap, b"")
        names = [e.name for e in ws.repo.tree(root.oid)] if root is not None else []
        top = [os.fsencode(ws.root) + b"/" + n for n in names if n != b".git"]
        if top:
            restore_to(ws, snap.id, tree, top)
        else:
            tree.mkdir()
        added = _git(ws.root, "worktree", "add", "-b", branch, str(dest), "HEAD")
        if added.returncode != 0:
            message = " ".join(added.stderr.split()) or f"exit status {added.returncode}"
            raise WorkspaceError(f"git worktree add failed: {message}")
        try:
            for entry in os.scandir(dest):
                if entry.name == ".git":
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            for entry in os.scandir(tree):
                os.rename(entry.path, dest / entry.name)
        except BaseException:
            _git(ws.root, "worktree", "remove", "--force", str(dest))
            _git(ws.root, "branch", "-D", branch)
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
