"""Giving an inode the restore took aside its name back, when someone changed it meanwhile.

The apply step replaces a file by swapping its new version in (``RENAME_EXCHANGE``) or takes a
file away by renaming it aside, then checks the inode it displaced. When that inode was
written after the check, it is the user's and must end up under its name; when yet another
version took the name in the meantime (an editor's atomic save), both are kept, one of them
as ``ctrlz-rescued-…``. Only the restore's own inode is ever deleted. Each function returns
the reason the path was left alone, for the caller's list of conflicts.
"""

from __future__ import annotations

import os

from ..types import quote_path
from .dirs import RENAME_EXCHANGE, RENAME_NOREPLACE, Unsupported, renameat2

CHANGED = "left alone: it changed after the safety snapshot was taken"


def put_back(fd: int, aside: bytes, name: bytes, prefix: bytes) -> str:
    """Someone changed the path while we took it away: give them their name back."""
    try:
        renameat2(fd, aside, fd, name, RENAME_NOREPLACE)
    except Unsupported:
        os.link(aside, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
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
