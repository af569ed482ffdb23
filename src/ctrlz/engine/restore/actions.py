"""What a restore plan is: its actions and their order, as data.

Apart from the planner (:mod:`ctrlz.engine.restore.plan`), which decides them, so that whatever only
carries or renders a plan (the apply step, the checks, the daemon's wire format, a caller
waiting for the daemon's answer) loads none of the planner's machinery: the exclusion rules
and the directory handles cost a short-lived process milliseconds.
"""

from __future__ import annotations

import stat as st
from collections import namedtuple

from ...state.trees import FILE, Entry
from ...types import Skipped, Snapshot, show_path
from ..diff import CREATED, DELETED, MODIFIED, PERMISSIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# operations, in the order the phases run them
DELETE, RMDIR = "delete", "rmdir"  # phase 1: removals, children before parents
MKDIR, WRITE, SYMLINK_OP, CHMOD, UTIME = "mkdir", "write", "symlink", "chmod", "utime"  # phase 2
DIRMODE = "dirmode"  # phase 3: directory modes, children before parents
#: ops that change only a file's metadata; both put back the mode *and* the mtime
METADATA_OPS = (CHMOD, UTIME)
#: the change of a directory above the requested paths of a path-limited restore
ANCESTOR = "ancestor"

#: set-user-id and set-group-id: never put back on a file (snapshots do not record owners, so
#: a restore would make whoever runs it the owner of an s-bit program; tar --no-same-owner)
SBITS = st.S_ISUID | st.S_ISGID


def restored_mode(entry: Entry) -> int:
    """The mode a restore gives this entry: files lose their s-bits, directories keep theirs."""
    return entry.mode & ~SBITS if entry.kind == FILE else entry.mode


class Action(namedtuple("Action", "op path entry expect change")):
    """One step of a restore: ``path`` is virtual (root index, then the path inside that
    root); ``entry`` is what the target wants there, ``expect`` what the current state holds
    (None: nothing captured); ``change`` (created, modified, deleted, permissions_changed,
    touched) is for reports."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "path": show_path(self.path), "change": self.change}


class RestorePlan:
    """What a restore will do to reach ``target``, in three passes: removals, writes, then
    the final directory modes and times; and what it leaves alone (``skipped``)."""

    __slots__ = ("target", "removals", "writes", "finals", "skipped")

    def __init__(self, target: Snapshot) -> None:
        self.target = target
        self.removals: list[Action] = []
        self.writes: list[Action] = []
        self.finals: list[Action] = []
        self.skipped: list[Skipped] = []

    @property
    def actions(self) -> list[Action]:
        return self.removals + self.writes + self.finals

    def counts(self, actions: list[Action] | None = None) -> dict[str, int]:
        """Changes by kind, of the whole plan or of ``actions`` (what an apply did)."""
        counts = {CREATED: 0, MODIFIED: 0, DELETED: 0, PERMISSIONS: 0}
        for a in self.actions if actions is None else actions:
            if a.op in (MKDIR, RMDIR, DIRMODE, UTIME) or (a.entry or a.expect) is None:
                continue  # directories, and mtime-only fixes, are not counted as changes
            counts[a.change] += 1
        return counts

    @property
    def empty(self) -> bool:
        return not (self.removals or self.writes or self.finals)

    def parents(self) -> set[bytes]:
        """Every directory in which the apply step may create a temp file."""
        return {a.path.rpartition(b"/")[0] for a in self.actions
                if a.op in (WRITE, SYMLINK_OP, DELETE)}
