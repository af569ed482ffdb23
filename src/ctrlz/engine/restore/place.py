"""Placing a written temp file under its target's name, the last step of each write of an apply
(:mod:`ctrlz.engine.restore.apply`).

With ``RENAME_NOREPLACE`` when nothing was captured there (so a file that appeared in the
meantime is never clobbered), with ``RENAME_EXCHANGE`` when something was (so the replaced inode
stays reachable under the temp name and is checked *after* the swap; if someone changed it, the
swap is undone and their bytes stay). Each function returns ``None`` when the file was placed,
or the reason it was not (a conflict, left as it is).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

from ...state import failpoints
from ..dirs import RENAME_EXCHANGE, RENAME_NOREPLACE, Unsupported, renameat2
from . import aside as aside_
from .aside import CHANGED
from .durable import let_go

APPEARED = "left alone: something appeared there during the restore"

#: is the inode under this name (in the target's directory) still what the capture saw?
Unchanged = Callable[[bytes, os.stat_result], bool]


def same_inode(before: os.stat_result, after: os.stat_result) -> bool:
    """Did nothing write to the inode between two stats? (A rename changes its ctime, so
    ctime cannot be compared across the swap.)"""
    return (before.st_ino, before.st_mode, before.st_size, before.st_mtime_ns) == (
        after.st_ino, after.st_mode, after.st_size, after.st_mtime_ns)


def place_over(fd: int, tmp: bytes, name: bytes, prefix: bytes,
               unchanged: Unchanged) -> str | None:
    """Something was captured here: swap the file in only if that is still what stands there."""
    try:
        before = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        before = None
    if before is None or not unchanged(name, before):
        os.unlink(tmp, dir_fd=fd)
        return CHANGED
    # the swap leaves the replaced inode under our name: give that name the "taken aside"
    # mark first, so that after a crash it is deleted only if the store holds its bytes
    aside = prefix + b"a" + tmp[len(prefix):]
    os.rename(tmp, aside, src_dir_fd=fd, dst_dir_fd=fd)
    ours = os.stat(aside, dir_fd=fd, follow_symlinks=False)
    try:
        renameat2(fd, aside, fd, name, RENAME_EXCHANGE)
    except Unsupported:
        return _place_by_rename(fd, aside, name, prefix, unchanged, before, ours)
    except FileNotFoundError:  # it went away after the check
        os.unlink(aside, dir_fd=fd)
        return CHANGED
    # was the replaced inode written after the check?
    failpoints.hit("restore-exchanged")
    after = os.stat(aside, dir_fd=fd, follow_symlinks=False)
    if not same_inode(before, after) and not unchanged(aside, after):
        return aside_.swap_back(fd, aside, name, ours, prefix)
    let_go(fd, aside, after)
    return None


def _place_by_rename(fd: int, aside: bytes, name: bytes, prefix: bytes, unchanged: Unchanged,
                     before: os.stat_result, ours: os.stat_result) -> str | None:
    """No atomic exchange here (:mod:`ctrlz.platform`): :func:`.aside.replace_by_rename`."""

    def written(kept: bytes, after: os.stat_result) -> bool:
        return not same_inode(before, after) and not unchanged(kept, after)

    return aside_.replace_by_rename(fd, aside, name, ours, prefix, written)


def place_new(fd: int, tmp: bytes, name: bytes) -> str | None:
    """Nothing was captured here: place the file only if the name is still free."""
    try:
        renameat2(fd, tmp, fd, name, RENAME_NOREPLACE)
    except FileExistsError:
        os.unlink(tmp, dir_fd=fd)
        return APPEARED
    except Unsupported:
        try:
            os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        except FileExistsError:
            os.unlink(tmp, dir_fd=fd)
            return APPEARED
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            # no hard links here either: check, then rename (a narrower guarantee)
            try:
                os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
                return None
            os.unlink(tmp, dir_fd=fd)
            return APPEARED
        os.unlink(tmp, dir_fd=fd)
    return None
