"""Giving an inode the restore took aside its name back, when someone changed it meanwhile.

The apply step replaces a file by swapping its new version in (``RENAME_EXCHANGE``) or takes a
file away by renaming it aside, then checks the inode it displaced. When that inode was
written after the check, it is the user's and must end up under its name; when yet another
version took the name in the meantime (an editor's atomic save), both are kept, one of them
as ``ctrlz-rescued-…``. Only the restore's own inode is ever deleted. Each function returns
the reason the path was left alone, for the caller's list of conflicts.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

from ...state import failpoints
from ...types import quote_path
from ..dirs import RENAME_EXCHANGE, RENAME_NOREPLACE, Unsupported, renameat2
from .durable import let_go

CHANGED = "left alone: it changed after the safety snapshot was taken"


def put_back(fd: int, aside: bytes, name: bytes, prefix: bytes) -> str:
    """Someone changed the path while we took it away: give them their name back."""
    try:
        renameat2(fd, aside, fd, name, RENAME_NOREPLACE)
    except Unsupported:  # link() is the no-replace rename without renameat2
        try:
            os.link(aside, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        except FileExistsError:  # (raised here, the clause below would not catch it)
            return rescue(fd, aside, name, prefix)
        os.unlink(aside, dir_fd=fd)
    except FileExistsError:
        # a third version appeared meanwhile: keep both, under a name the user will see
        return rescue(fd, aside, name, prefix)
    return CHANGED


def rescue(fd: int, aside: bytes, name: bytes, prefix: bytes) -> str:
    """Keep someone's file that lost its name to another version, under a name the user
    sees, and say so."""
    rescued = b"ctrlz-rescued-" + aside[len(prefix):] + b"-" + name[:120]
    os.rename(aside, rescued, src_dir_fd=fd, dst_dir_fd=fd)
    return CHANGED + "; its bytes were kept as " + quote_path(rescued)


def swap_back(fd: int, aside: bytes, name: bytes, ours: os.stat_result, prefix: bytes) -> str:
    """The inode swapped out was written after the check: its name goes back to it, and only
    our own inode (``ours``) is ever deleted. An editor's atomic save may have replaced the
    name since the swap: that save keeps the name, and the written inode is rescued; one that
    lands between the check and the swap back ends up aside, and is rescued too."""
    mine = (ours.st_dev, ours.st_ino)
    try:
        now = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        now = None
    if now is None or (now.st_dev, now.st_ino) != mine:
        return put_back(fd, aside, name, prefix)  # the name is theirs (or free) already
    renameat2(fd, aside, fd, name, RENAME_EXCHANGE)  # theirs back in place
    out = os.stat(aside, dir_fd=fd, follow_symlinks=False)
    if (out.st_dev, out.st_ino) != mine:
        return rescue(fd, aside, name, prefix)
    os.unlink(aside, dir_fd=fd)
    return CHANGED


def replace_by_rename(fd: int, aside: bytes, name: bytes, ours: os.stat_result, prefix: bytes,
                      written: Callable[[bytes, os.stat_result], bool]) -> str | None:
    """Put our file (at ``aside``) at ``name`` where there is no atomic exchange (macOS
    without ``renamex_np``, other systems, ``CTRLZ_PLATFORM=portable``); None when it is
    placed, else why the path was left alone. ``written(kept, stat)``: whether the replaced
    inode, under ``kept``, was written since the caller checked it.

    The replaced inode is kept reachable first, as the exchange keeps it: a hard link with
    the taken-aside mark (``…-a<n>o``). So a kill at any instant leaves ``name`` on one whole
    version (theirs, then ours: ``rename`` is atomic), and the next ctrlz process removes the
    link only if the store holds its bytes (:func:`ctrlz.engine.restore.journal.sweep`). After the
    rename the kept inode is checked as after a swap, and one written since the check gets
    its name back. What this cannot see, unlike the exchange: a *new* inode renamed over
    ``name`` (an editor's atomic save) between the caller's check and our rename is
    replaced. Without hard links either, it is the check and a plain rename."""
    kept = aside + b"o"
    try:
        os.link(name, kept, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:  # it went away after the check
        os.unlink(aside, dir_fd=fd)
        return CHANGED
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        os.rename(aside, name, src_dir_fd=fd, dst_dir_fd=fd)  # checked by the caller
        return None
    os.rename(aside, name, src_dir_fd=fd, dst_dir_fd=fd)
    failpoints.hit("restore-exchanged")  # the same instant as just after a swap
    after = os.stat(kept, dir_fd=fd, follow_symlinks=False)
    if not written(kept, after):
        let_go(fd, kept, after)
        return None
    now = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if (now.st_dev, now.st_ino) == (ours.st_dev, ours.st_ino):
        os.rename(kept, name, src_dir_fd=fd, dst_dir_fd=fd)  # ours goes, theirs comes back
        return CHANGED
    return put_back(fd, kept, name, prefix)  # the name is someone else's now: keep both
