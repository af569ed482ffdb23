"""Directory handles and the few system calls Python's ``os`` module lacks.

Every restore reaches a path through file descriptors of its parent directories, opened one
component at a time with ``O_NOFOLLOW`` from the root down. A symlink planted in a parent can
never redirect a write or a delete, and no path handed to the kernel is longer than one name, so
a chain thousands of directories deep restores like a shallow one (``PATH_MAX`` never applies).

``renameat2`` (Linux 3.15+; ``renamex_np`` on macOS, where :mod:`ctrlz.platform` finds it) gives
two atomic moves ``os`` does not offer: ``RENAME_NOREPLACE``
(place a file only if nothing is there) and ``RENAME_EXCHANGE`` (swap two names, so the inode a
restore replaces stays reachable and can be checked after the swap). Where the kernel or the
filesystem refuses them, :func:`renameat2` raises :class:`Unsupported` and the caller falls back.
"""

from __future__ import annotations

import errno
import os
import stat as st
from collections import OrderedDict
from collections.abc import Sequence

from ..state.trees import DIR, FILE, SYMLINK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
RENAME_NOREPLACE = 1  # as renameat2 spells them; platform.rename_function translates
RENAME_EXCHANGE = 2

_libc_calls: tuple[Any, Any] | None = None


def _libc() -> tuple[Any, Any]:
    """(syncfs, renameat2) as :mod:`ctrlz.platform` offers them here, either None where
    missing (another system, an old glibc, ``CTRLZ_PLATFORM=portable``). Loaded on first use:
    ctypes costs a snapshot's process more start-up than the calls it never makes."""
    global _libc_calls
    if _libc_calls is None:
        from .. import platform

        _libc_calls = (platform.syncfs_function(), platform.rename_function())
    return _libc_calls


def has_syncfs() -> bool:
    """Whether :func:`syncfs` flushes one filesystem; without it a restore fsyncs each file."""
    return _libc()[0] is not None


class Unsupported(Exception):
    """The kernel or filesystem does not offer this rename; use the fallback."""


def renameat2(src_fd: int, src: bytes, dst_fd: int, dst: bytes, flags: int) -> None:
    rename = _libc()[1]
    if rename is None:
        raise Unsupported
    if rename(src_fd, src, dst_fd, dst, flags) != 0:
        import ctypes

        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise Unsupported
        raise OSError(err, os.strerror(err))


def syncfs(fd: int) -> None:
    """Flush the whole filesystem that holds ``fd``: one call instead of an fsync per file."""
    sync = _libc()[0]
    if sync is None or sync(fd) != 0:
        os.sync()


class DirHandles:
    """Directory fds for virtual paths (``b"0/src/app"``), opened component by component
    without following links; a bounded LRU, since a large restore touches more directories
    than the fd limit allows. Opening walks down from the deepest handle already open, one
    loop iteration per level (never recursion).

    Use an fd right after :meth:`get` returns it: a later ``get`` may close it."""

    def __init__(self, roots: Sequence[bytes], limit: int = 64) -> None:
        self.roots = roots
        self.limit = max(4, limit)
        self._fds: OrderedDict[bytes, int] = OrderedDict()
        #: directories :meth:`writable` opened up, with the mode each had
        self.widened: dict[bytes, int] = {}
        self._checked: set[bytes] = set()

    def writable(self, vdir: bytes) -> int:
        """:meth:`get`, for a directory the caller is about to create, rename or remove names
        in: one whose owner (this process's user) may not write or search it now gets ``u+wx``
        until :meth:`narrow`. A restore writes files first and directory modes last, so a
        directory the target, or the state being put back, has read-only (``chmod 555 docs``)
        could never be written into: the rollback, or its undo, failed the same way on every
        try. A crash in between leaves the directory with ``u+wx``, a mode the next restore
        corrects; never a file lost."""
        fd = self.get(vdir)
        if vdir not in self._checked:
            self._checked.add(vdir)
            s = os.fstat(fd)
            if s.st_uid == os.geteuid() and s.st_mode & 0o300 != 0o300:
                os.fchmod(fd, st.S_IMODE(s.st_mode) | 0o300)
                self.widened[vdir] = st.S_IMODE(s.st_mode)
        return fd

    def narrow(self, keep: set[bytes]) -> None:
        """Give each directory :meth:`writable` opened up its mode back, but those in
        ``keep`` (the restore has set their mode since) and those gone."""
        for vdir, mode in self.widened.items():
            if vdir in keep:
                continue
            try:
                os.fchmod(self.get(vdir), mode)
            except (FileNotFoundError, NotADirectoryError):
                pass
        self.widened.clear()

    def get(self, vdir: bytes) -> int:
        fd = self._fds.get(vdir)
        if fd is not None:
            self._fds.move_to_end(vdir)
            return fd
        # the deepest ancestor already open, then down one name at a time
        missing: list[bytes] = []
        probe = vdir
        base_fd = None
        while True:
            head, sep, name = probe.rpartition(b"/")
            if not sep:
                break
            missing.append(name)
            probe = head
            base_fd = self._fds.get(probe)
            if base_fd is not None:
                break
        owned = False
        if base_fd is None:
            base_fd = os.open(self.roots[int(probe)], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            owned = True
        fd = base_fd
        try:
            for name in reversed(missing):
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                if owned:
                    os.close(fd)
                fd, owned = nxt, True
        except BaseException:
            if owned:
                os.close(fd)
            raise
        if not owned:  # vdir is a root already open under another key: share nothing
            fd = os.dup(fd)
        self._fds[vdir] = fd
        while len(self._fds) > self.limit:
            _, old = self._fds.popitem(last=False)
            os.close(old)
        return fd

    def forget(self, vdir: bytes) -> None:
        """Close the handles of ``vdir`` and below (it is about to be removed)."""
        for key in [k for k in self._fds if k == vdir or k.startswith(vdir + b"/")]:
            os.close(self._fds.pop(key))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> DirHandles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def hash_at(objects: Any, dir_fd: int, name: bytes) -> bytes:
    """The content id of the file ``name`` in ``dir_fd``, read without following a link."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        h = objects.new_hasher()
        while chunk := os.read(fd, 4 << 20):
            h.update(chunk)
        return h.digest()
    finally:
        os.close(fd)


def matches_at(objects: Any, dir_fd: int, name: bytes, oid: bytes) -> bool:
    """Does the file ``name`` in ``dir_fd`` hold exactly the bytes of object ``oid``? Read
    without following a link; for a clone object, by comparing block maps first
    (:meth:`ctrlz.state.store.objects.ObjectStore.file_matches`), so a file restored by cloning is
    checked without reading it."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        return bool(objects.file_matches(oid, fd))
    finally:
        os.close(fd)


def kind_of(mode: int) -> str | None:
    """The tree kind (file, symlink, directory) of a stat mode; None for anything else."""
    if st.S_ISREG(mode):
        return FILE
    if st.S_ISLNK(mode):
        return SYMLINK
    if st.S_ISDIR(mode):
        return DIR
    return None
