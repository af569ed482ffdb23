"""The btrfs backend: snapshots read from a read-only subvolume snapshot of the workspace.

When a workspace root is a btrfs subvolume and the store sits on the same btrfs filesystem, a
snapshot can first freeze the whole root in one ioctl (``BTRFS_IOC_SNAP_CREATE_V2`` with
``BTRFS_SUBVOL_RDONLY``: ~10 ms whatever the tree's size) and then scan *the frozen copy*
instead of the live tree. The scan, the catalog rows, the trees and the clone objects are
exactly those of the normal path (same names, modes, sizes, mtimes, inode numbers and ctimes:
a subvolume snapshot copies the inodes as they are), so list, diff and restore cannot tell the
two apart; large files are cloned out of the frozen copy into ``objects/`` like any clone, and
the frozen copy is deleted once the scan is done. What the backend adds is one instant for the
whole tree: the normal scan is consistent file by file (a file that changes while it is read
is read again), the frozen one across files too — a database's data and journal files, or a
build's outputs, are captured as they were together.

It is opt-in, per store (``enable``; the catalog's ``meta.snapshot_backend = "btrfs"``), not
automatic: a subvolume snapshot commits a btrfs transaction, which costs ~10 ms or more on a
busy filesystem on *every* snapshot, including the no-change ones an agent hook takes before
each tool call, where the normal scan of an unchanged tree costs less. A root the backend
cannot freeze exactly is scanned live, silently: not a subvolume, another filesystem than the
store, a nested subvolume or a mount point inside it (a subvolume snapshot does not descend
into those, the normal scan does), or a refused ioctl. Frozen copies live in
``<store>/frozen/`` only while a snapshot holds the store lock; one a crash left there is
deleted by the next snapshot that uses the backend.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import struct
from pathlib import Path

from ... import platform
from ...errors import StoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ..store.repository import Repository


def _log() -> Any:
    import logging  # only when something goes wrong: a snapshot's process never needs it

    return logging.getLogger(__name__)

META_KEY = "snapshot_backend"
FROZEN = "frozen"
FIRST_FREE_OBJECTID = 256  # the inode number of every subvolume's root directory
SUBVOL_RDONLY = 1 << 1
# _IOW/_IOR/_IOWR(0x94, nr, 4096- or 1024-byte structs)
IOC_SNAP_CREATE_V2 = 0x50009417
IOC_SNAP_DESTROY = 0x5000940F
IOC_FS_INFO = 0x8400941F
IOC_GET_SUBVOL_ROOTREF = 0xD000943D
_VOL_ARGS_V2 = struct.Struct("=qQQ32s4040s")  # fd, transid, flags, (unused), name
_VOL_ARGS = struct.Struct("=q4088s")  # fd, name
_OCTAL = re.compile(rb"\\([0-7]{3})")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


def enabled(repo: Repository) -> bool:
    return repo.catalog.get_meta(META_KEY) == "btrfs"


def enable(repo: Repository, roots: Sequence[Path], on: bool = True) -> None:
    """Turn the backend on (checking that every root can be frozen now) or off."""
    if on:
        for root in roots:
            why = _why_not(repo, root)
            if why:
                raise StoreError(f"cannot use btrfs snapshots for {root}: {why}")
        with repo.lock:
            frozen = freeze(repo, roots, force=True)
            frozen.release()
            if frozen.failed:
                raise StoreError(f"cannot use btrfs snapshots: {frozen.failed[0]}")
    with repo.catalog.transaction():
        repo.catalog.set_meta(META_KEY, "btrfs" if on else "scan")


class Frozen:
    """The paths a snapshot reads each root from (a frozen copy, or the root itself), and
    the frozen copies to delete when it is done."""

    def __init__(self, directory: Path, sources: list[Path], made: list[str]) -> None:
        self.directory = directory
        self.sources = sources
        self.made = made
        self.failed: list[str] = []

    def release(self) -> None:
        """Delete the frozen copies (the scan cloned what it keeps out of them)."""
        for name in self.made:
            try:
                _destroy(self.directory, name)
            except OSError as exc:
                self.failed.append(f"cannot delete {self.directory / name}: {exc.strerror}")
                _log().warning("btrfs backend: %s", self.failed[-1])
        self.made = []


def freeze(repo: Repository, roots: Sequence[Path], *, force: bool = False) -> Frozen | None:
    """Freeze every root that can be frozen exactly; ``None`` when the store does not use the
    backend. Call with the store lock held."""
    if not force and not enabled(repo):
        return None
    directory = repo.path / FROZEN
    sources = list(roots)
    made: list[str] = []
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        for leftover in os.listdir(directory):  # a crash's; we hold the lock
            _destroy(directory, leftover)
    except OSError as exc:
        _log().warning("btrfs backend: %s", exc)
        return Frozen(directory, sources, made)
    token = os.urandom(4).hex()
    for index, root in enumerate(roots):
        if _why_not(repo, root):
            continue
        name = f"{token}-{index}"
        try:
            _snapshot(root, directory, name)
        except OSError as exc:
            _log().info("btrfs backend: %s scanned live: %s", root, exc.strerror)
            continue
        made.append(name)
        sources[index] = directory / name
    return Frozen(directory, sources, made)


def _why_not(repo: Repository, root: Path) -> str | None:
    """Why ``root`` cannot be frozen exactly, or ``None`` when it can."""
    if not platform.can_ficlone():
        return "this platform has no btrfs ioctls (ctrlz.platform)"
    try:
        fd = os.open(root, _DIR)
    except OSError as exc:
        return exc.strerror
    try:
        fsid = _fsid(fd)
        if fsid is None:
            return "it is not on btrfs"
        if os.fstat(fd).st_ino != FIRST_FREE_OBJECTID:
            return "it is not the top of a btrfs subvolume"
        store_fd = os.open(repo.path, _DIR)
        try:
            if _fsid(store_fd) != fsid:
                return "the store is on another filesystem"
        finally:
            os.close(store_fd)
        nested = _has_nested_subvolume(fd)
        if nested is None:
            return "the kernel cannot list the subvolumes inside it"
        if nested:
            return "it holds another subvolume, which a subvolume snapshot leaves out"
    finally:
        os.close(fd)
    if _mounts_below(os.path.realpath(root)):
        return "something is mounted inside it, which a subvolume snapshot leaves out"
    return None


def _fsid(fd: int) -> bytes | None:
    """The btrfs filesystem id of ``fd`` (``BTRFS_IOC_FS_INFO``), ``None`` off btrfs."""
    buf = bytearray(1024)
    try:
        fcntl.ioctl(fd, IOC_FS_INFO, buf, True)
    except OSError:
        return None
    return bytes(buf[16:32])


def _has_nested_subvolume(fd: int) -> bool | None:
    """Does the subvolume at ``fd`` hold other subvolumes (``BTRFS_IOC_GET_SUBVOL_ROOTREF``,
    Linux 4.18+)? ``None`` when the kernel will not say."""
    buf = bytearray(4096)
    try:
        fcntl.ioctl(fd, IOC_GET_SUBVOL_ROOTREF, buf, True)
    except OSError as exc:
        if exc.errno == errno.EOVERFLOW:  # more than 255 of them
            return True
        return None
    return buf[8 + 255 * 16] > 0  # num_items


def _mounts_below(root: str) -> bool:
    prefix = os.fsencode(root.rstrip("/") + "/")
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return True  # cannot tell: do not freeze
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4:
            point = _OCTAL.sub(lambda m: bytes([int(m[1], 8)]), fields[4])  # \040: a space
            if point.startswith(prefix):
                return True
    return False


def _snapshot(root: Path, directory: Path, name: str) -> None:
    src = os.open(root, _DIR)
    try:
        dst = os.open(directory, _DIR)
        try:
            args = bytearray(_VOL_ARGS_V2.pack(src, 0, SUBVOL_RDONLY, b"", name.encode()))
            fcntl.ioctl(dst, IOC_SNAP_CREATE_V2, args)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _destroy(directory: Path, name: str) -> None:
    """Delete the subvolume ``directory/name`` (``BTRFS_IOC_SNAP_DESTROY``: needs root, or
    the ``user_subvol_rm_allowed`` mount option)."""
    dst = os.open(directory, _DIR)
    try:
        fcntl.ioctl(dst, IOC_SNAP_DESTROY, bytearray(_VOL_ARGS.pack(0, name.encode())))
    finally:
        os.close(dst)
