"""Verify: the restore engine's fifth step, re-reading every path a restore wrote or removed.

A mismatch is an error, not a warning: the engine then leaves the undo entry and says so.

A file restored by cloning a clone object is not re-read: it is checked by its block map,
which must be the stored clone's, block for block (``FIEMAP``, after flushing the file). Two
files that map to the same blocks hold the same bytes, so this proves what re-reading would,
at no cost — except that it does not re-check the stored clone's own bytes against its seal,
which reading it would have (a clone in the store is checked by ``ctrlz verify``). A file whose
map differs (written since, or copied from another filesystem) is read and hashed as before.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence

from ...errors import VerifyMismatch
from ...state.store.objects import ObjectStore
from ...state.trees import FILE, SYMLINK
from ...types import quote_path
from ..dirs import DirHandles, kind_of, matches_at
from .actions import CHMOD, DELETE, DIRMODE, RMDIR, UTIME, Action, restored_mode


def verify_applied(objects: ObjectStore, dest_roots: Sequence[bytes],
                   applied: list[Action]) -> None:
    """Re-read every path the restore wrote or removed and compare it with the snapshot."""
    bad: list[str] = []
    final = {a.path: a for a in applied}  # a path deleted then recreated ends as recreated
    with DirHandles(dest_roots) as dirs:
        for a in final.values():
            parent, _, name = a.path.rpartition(b"/")
            try:
                problem = _check(objects, dirs, a, parent, name)
            except OSError as exc:
                problem = f"{quote_path(a.path)}: {exc.strerror}"
            if problem:
                bad.append(problem)
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise VerifyMismatch("restore verification failed: " + "; ".join(bad[:3]) + more)


def _check(objects: ObjectStore, dirs: DirHandles, a: Action, parent: bytes,
           name: bytes) -> str | None:
    if a.op in (DELETE, RMDIR):
        try:
            os.stat(name, dir_fd=dirs.get(parent), follow_symlinks=False)
        except OSError as exc:  # gone, or its parent is no longer a directory
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                raise
            return None
        return f"{quote_path(a.path)} still exists"
    entry = a.entry
    assert entry is not None
    if a.op == DIRMODE:
        s = os.fstat(dirs.get(a.path))
    else:
        s = os.stat(name, dir_fd=dirs.get(parent), follow_symlinks=False)
    if kind_of(s.st_mode) != entry.kind:
        return f"{quote_path(a.path)} is not a {entry.kind}"
    if entry.kind == FILE:
        if (s.st_mode & 0o7777, s.st_size, s.st_mtime_ns) != (
                restored_mode(entry), entry.size, entry.mtime_ns):
            return f"{quote_path(a.path)} has the wrong mode, size or mtime"
        if a.op not in (CHMOD, UTIME) and not matches_at(
                objects, dirs.get(parent), name, entry.oid):
            return f"{quote_path(a.path)} has the wrong content"
    elif entry.kind == SYMLINK:
        target = os.readlink(name, dir_fd=dirs.get(parent))
        if objects.digest(os.fsencode(target)) != entry.oid:
            return f"{quote_path(a.path)} points to the wrong target"
    elif a.op == DIRMODE and s.st_mode & 0o7777 != restored_mode(entry):
        return f"{quote_path(a.path)} has the wrong mode"
    return None
