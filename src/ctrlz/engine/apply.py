"""Carrying out a restore plan, then checking the result against the snapshot.

Every write goes to a temp file in the target's own directory, gets its mode and mtime, is made
durable, and only then is renamed over the target (or linked into place when nothing was there,
so a file that appeared in the meantime is never clobbered). Directories are reached through
file descriptors opened with ``O_NOFOLLOW`` from the root down, so a symlink planted in a parent
can never redirect a write or a delete outside the workspace.

Before removing or replacing a path the applier checks that it still is what the safety snapshot
captured; if something changed it in between, the path is left alone and reported.

Durability: small restores fsync each file; large ones write a batch of temp files, flush the
filesystem once (``syncfs``), then rename the batch, which is what makes restoring 100,000 files
take seconds rather than minutes.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat as st
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import RestoreError, StoreFull, VerifyMismatch
from ..state import failpoints
from ..state.atomic import temp_name
from ..state.objects import ObjectStore
from ..state.trees import DIR, FILE, SYMLINK, Entry
from ..types import Skipped, show_path
from .plan import (
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
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_BATCH = 512
_FSYNC_EACH_BELOW = 16

try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _syncfs = _libc.syncfs
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _syncfs = None


def syncfs(fd: int) -> None:
    if _syncfs is None or _syncfs(fd) != 0:
        os.sync()


class DirHandles:
    """Directory fds for virtual paths, opened component by component without following links.

    A bounded LRU, since a large restore touches more directories than the fd limit allows."""

    def __init__(self, roots: Sequence[bytes], limit: int = 128) -> None:
        self.roots = roots
        self.limit = limit
        self._fds: OrderedDict[bytes, int] = OrderedDict()

    def get(self, vdir: bytes) -> int:
        fd = self._fds.get(vdir)
        if fd is not None:
            self._fds.move_to_end(vdir)
            return fd
        head, sep, name = vdir.rpartition(b"/")
        if not sep:
            fd = os.open(self.roots[int(vdir)], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        else:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.get(head))
        self._fds[vdir] = fd
        while len(self._fds) > self.limit:
            _, old = self._fds.popitem(last=False)
            os.close(old)
        return fd

    def forget(self, vdir: bytes) -> None:
        for key in [k for k in self._fds if k == vdir or k.startswith(vdir + b"/")]:
            os.close(self._fds.pop(key))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _kind(mode: int) -> str | None:
    if st.S_ISREG(mode):
        return FILE
    if st.S_ISLNK(mode):
        return SYMLINK
    if st.S_ISDIR(mode):
        return DIR
    return None


def _still(expect: Entry, s: os.stat_result) -> bool:
    """Does the path still hold what the safety snapshot captured?"""
    if _kind(s.st_mode) != expect.kind:
        return False
    if expect.kind == DIR:
        return True
    return s.st_size == expect.size and s.st_mtime_ns == expect.mtime_ns


@dataclass
class ApplyResult:
    applied: list[Action] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


class Applier:
    def __init__(self, plan: RestorePlan, objects: ObjectStore,
                 dest_roots: Sequence[bytes]) -> None:
        self.plan = plan
        self.objects = objects
        self.dirs = DirHandles(dest_roots)
        self.result = ApplyResult()
        self._pending: list[tuple[Action, bytes, str]] = []  # action, parent, temp name
        writes = sum(1 for a in plan.writes if a.op in (WRITE, SYMLINK_OP))
        self.fsync_each = writes < _FSYNC_EACH_BELOW

    def run(self) -> ApplyResult:
        try:
            for a in self.plan.removals:
                self._guard(a, self._remove)
            for a in self.plan.writes:
                self._guard(a, self._write)
                if len(self._pending) >= _BATCH:
                    self._commit_pending()
            self._commit_pending()
            for a in self.plan.finals:
                self._guard(a, self._dirmode)
            if not self.fsync_each:
                syncfs(self.dirs.get(b"0"))
        finally:
            for _, parent, tmp in self._pending:
                try:
                    os.unlink(tmp, dir_fd=self.dirs.get(parent))
                except OSError:
                    pass
            self.dirs.close()
        return self.result

    def _guard(self, action: Action, fn) -> None:  # type: ignore[no-untyped-def]
        try:
            fn(action)
        except OSError as exc:
            self._record_failure(action, exc)

    def _record_failure(self, action: Action, exc: OSError) -> None:
        """A path that could not be restored is reported and skipped; a full disk stops all."""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreFull(f"no space left on the workspace's disk while restoring "
                            f"{show_path(action.path)}; free space, then run the rollback "
                            "again (the safety snapshot holds the previous state)") from exc
        reason = {errno.ELOOP: "a parent directory is a symlink",
                  errno.ENOTDIR: "a parent is not a directory",
                  errno.ENOTEMPTY: "kept: it holds files the snapshot does not cover",
                  errno.EEXIST: "left alone: it changed after the safety snapshot was taken",
                  errno.EISDIR: "left alone: a directory with uncovered files is there",
                  }.get(exc.errno or 0, f"failed: {exc.strerror}")
        self.result.skipped.append(Skipped(action.path, reason))

    @staticmethod
    def _split(path: bytes) -> tuple[bytes, bytes]:
        parent, _, name = path.rpartition(b"/")
        return parent, name

    # -- phase 1 -----------------------------------------------------------------------------

    def _remove(self, a: Action) -> None:
        parent, name = self._split(a.path)
        fd = self.dirs.get(parent)
        try:
            s = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            self.result.applied.append(a)
            return
        assert a.expect is not None
        if not _still(a.expect, s):
            self.result.skipped.append(Skipped(a.path, "left alone: changed after the safety "
                                                       "snapshot was taken"))
            return
        if a.op == RMDIR:
            self.dirs.forget(a.path)
            os.rmdir(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)
        self.result.applied.append(a)
        failpoints.hit("restore-remove")

    # -- phase 2 -----------------------------------------------------------------------------

    def _write(self, a: Action) -> None:
        parent, name = self._split(a.path)
        fd = self.dirs.get(parent)
        entry = a.entry
        assert entry is not None
        if a.op == MKDIR:
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                if _kind(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode) != DIR:
                    raise
            self.result.applied.append(a)
        elif a.op == CHMOD:
            self._check_expect(a, fd, name)
            f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
            try:
                os.fchmod(f, entry.mode)
            finally:
                os.close(f)
            self.result.applied.append(a)
        elif a.op == UTIME:
            self._check_expect(a, fd, name)
            os.utime(name, ns=(entry.mtime_ns, entry.mtime_ns), dir_fd=fd, follow_symlinks=False)
            self.result.applied.append(a)
        else:
            tmp = temp_name(name)
            if a.op == WRITE:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                f = os.open(tmp, flags, 0o600, dir_fd=fd)
                try:
                    self.objects.write_to(entry.oid, f)
                    os.fchmod(f, entry.mode)
                    os.utime(f, ns=(entry.mtime_ns, entry.mtime_ns))
                    if self.fsync_each:
                        os.fsync(f)
                except BaseException:
                    os.close(f)
                    os.unlink(tmp, dir_fd=fd)
                    raise
                os.close(f)
            else:
                os.symlink(self.objects.read(entry.oid), tmp, dir_fd=fd)
                os.utime(tmp, ns=(entry.mtime_ns, entry.mtime_ns), dir_fd=fd,
                         follow_symlinks=False)
            self._pending.append((a, parent, tmp))
            if self.fsync_each:
                self._commit_pending()

    def _check_expect(self, a: Action, fd: int, name: bytes) -> None:
        s = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if a.expect is not None and not _still(a.expect, s):
            raise OSError(errno.EEXIST, "changed after the safety snapshot")

    def _commit_pending(self) -> None:
        if not self._pending:
            return
        if not self.fsync_each:
            syncfs(self.dirs.get(self._pending[0][1]))
        pending, self._pending = self._pending, []
        touched: set[bytes] = set()
        for i, (a, parent, tmp) in enumerate(pending):
            try:
                self._place(a, parent, tmp)
                touched.add(parent)
            except OSError as exc:
                try:
                    os.unlink(tmp, dir_fd=self.dirs.get(parent))
                except OSError:
                    pass
                self._pending = pending[i + 1:]  # cleaned up by run() if this raises
                self._record_failure(a, exc)
                self._pending = []
            failpoints.hit("restore-place")
        if self.fsync_each:
            for parent in touched:
                os.fsync(self.dirs.get(parent))

    def _place(self, a: Action, parent: bytes, tmp: str) -> None:
        fd = self.dirs.get(parent)
        _, name = self._split(a.path)
        if a.expect is None:
            # nothing was captured here: link, which fails instead of replacing if a file
            # appeared since the plan was made
            try:
                os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
            except FileExistsError:
                os.unlink(tmp, dir_fd=fd)
                self.result.skipped.append(Skipped(a.path, "left alone: something appeared "
                                                           "there during the restore"))
                return
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
                    raise
                # a filesystem without hard links: check, then rename (a narrower guarantee)
                try:
                    os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
                    self.result.applied.append(a)
                    return
                os.unlink(tmp, dir_fd=fd)
                self.result.skipped.append(Skipped(a.path, "left alone: something appeared "
                                                           "there during the restore"))
                return
            os.unlink(tmp, dir_fd=fd)
        else:
            s = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not _still(a.expect, s):
                os.unlink(tmp, dir_fd=fd)
                self.result.skipped.append(Skipped(a.path, "left alone: changed after the "
                                                           "safety snapshot was taken"))
                return
            os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        self.result.applied.append(a)

    # -- phase 3 -----------------------------------------------------------------------------

    def _dirmode(self, a: Action) -> None:
        assert a.entry is not None
        os.fchmod(self.dirs.get(a.path), a.entry.mode)
        self.result.applied.append(a)


def verify_applied(objects: ObjectStore, dest_roots: Sequence[bytes],
                   applied: list[Action]) -> None:
    """Re-read every path the restore wrote or removed and compare it with the snapshot."""
    dirs = DirHandles(dest_roots)
    bad: list[str] = []
    final = {a.path: a for a in applied}  # a path deleted then recreated ends as recreated
    try:
        for a in final.values():
            parent, _, name = a.path.rpartition(b"/")
            try:
                if a.op in (DELETE, RMDIR):
                    try:
                        os.stat(name, dir_fd=dirs.get(parent), follow_symlinks=False)
                        bad.append(f"{show_path(a.path)} still exists")
                    except OSError as exc:  # gone, or its parent is no longer a directory
                        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                            raise
                    continue
                entry = a.entry
                assert entry is not None
                if a.op == DIRMODE:
                    s = os.fstat(dirs.get(a.path))
                else:
                    s = os.stat(name, dir_fd=dirs.get(parent), follow_symlinks=False)
                if _kind(s.st_mode) != entry.kind:
                    bad.append(f"{show_path(a.path)} is not a {entry.kind}")
                elif entry.kind == FILE:
                    if (s.st_mode & 0o7777, s.st_size, s.st_mtime_ns) != (
                            entry.mode, entry.size, entry.mtime_ns):
                        bad.append(f"{show_path(a.path)} has the wrong mode, size or mtime")
                    elif _hash_file(objects, dirs.get(parent), name) != entry.oid:
                        bad.append(f"{show_path(a.path)} has the wrong content")
                elif entry.kind == SYMLINK:
                    target = os.readlink(name, dir_fd=dirs.get(parent))
                    if objects.digest(os.fsencode(target)) != entry.oid:
                        bad.append(f"{show_path(a.path)} points to the wrong target")
                elif a.op == DIRMODE and s.st_mode & 0o7777 != entry.mode:
                    bad.append(f"{show_path(a.path)} has the wrong mode")
            except OSError as exc:
                bad.append(f"{show_path(a.path)}: {exc.strerror}")
    finally:
        dirs.close()
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise VerifyMismatch("restore verification failed: " + "; ".join(bad[:3]) + more
                             + "; the safety snapshot still holds the previous state")


def _hash_file(objects: ObjectStore, dir_fd: int, name: bytes) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        h = objects.new_hasher()
        while chunk := os.read(fd, 4 << 20):
            h.update(chunk)
        return h.digest()
    finally:
        os.close(fd)


def require_empty_destination(path: bytes) -> None:
    if os.path.lexists(path):
        if os.path.islink(path) or not os.path.isdir(path):
            raise RestoreError(f"{show_path(path)} exists and is not a directory; "
                               "choose a new or empty directory for --to")
        if os.listdir(path):
            raise RestoreError(f"{show_path(path)} is not empty; choose a new or empty "
                               "directory for --to")
