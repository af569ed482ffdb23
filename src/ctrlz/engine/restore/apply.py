"""Carrying out a restore plan, then checking the result against the snapshot.

Every write goes to a temp file in the target's own directory, gets its mode and mtime, is made
durable, and only then takes the target's name (:mod:`ctrlz.engine.restore.place`): with
``RENAME_NOREPLACE`` when nothing was captured there (so a file that appeared in the meantime is
never clobbered), with ``RENAME_EXCHANGE`` when something was (so the replaced inode stays
reachable under the temp name and is checked *after* the swap; if someone changed it, the swap
is undone and their bytes stay).
Directories are reached through ``O_NOFOLLOW`` file descriptors from the root down.

"Unchanged since the capture" means the same (mode, size, mtime, ctime, inode) as the capture's
stat cache recorded, or, failing that, the same content hash: an editor that rewrites a file
keeping its size and mtime (``cp -p``, ``rsync -t``, ``tar x``) still changes its ctime.

Any OS error stops the apply and is raised as :class:`ApplyFailed` with what was done so far; the
caller (:mod:`ctrlz.engine.restore.restore`) cleans up and leaves an undo path. Paths that changed
under
the restore are *conflicts*: left as they are, listed, and reported as an incomplete restore.

Temp files are named ``.ctrlz-tmp-<token>-<n>`` (``…-a<n>`` for a replaced inode taken aside),
with the token of the restore's journal, so the next ctrlz process can find and remove them
after a crash (:mod:`ctrlz.engine.restore.journal`).

Durability: a batch of temp files is written, made durable, then renamed, and the directories
are made durable after. Small restores fsync each temp file and then each touched directory,
all at once from a few threads (:func:`ctrlz.engine.restore.durable.fsync_fds`). Large ones flush
each
filesystem that holds a temp file (``syncfs``) instead, which is what makes restoring 100,000
files take seconds rather than minutes; where there is no ``syncfs`` (:mod:`ctrlz.platform`)
every restore fsyncs each file and directory, in batches of 16. At the end every filesystem the
restore touched is flushed, not only the first. Large files (loose objects, 4 MiB and up) are
decoded, checked, written and fsynced by a few worker threads while the main thread goes on
(:class:`ctrlz.engine.restore.durable.LargeWrites`); a batch is renamed only once all of its workers
are done, so the order (data durable, then the rename) holds.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence

from ...state import failpoints, meter
from ...state.store.objects import LOOSE_MIN, ObjectStore
from ...state.trees import DIR, SYMLINK, Entry
from ...types import Skipped, quote_path
from ..dirs import DirHandles, has_syncfs, kind_of, matches_at, syncfs
from . import aside as aside_
from .actions import (
    ANCESTOR,
    METADATA_OPS,
    MKDIR,
    RMDIR,
    SYMLINK_OP,
    WRITE,
    Action,
    RestorePlan,
    restored_mode,
)
from .aside import CHANGED
from .durable import JOBS_MAX, LargeWrites, fsync_fds, let_go
from .journal import temp_prefix
from .place import APPEARED, place_new, place_over, same_inode

_BATCH = 512
#: a batch when each file is fsynced (no syncfs): each stays open until the batch's fsync, and
#: a restore under `ulimit -n 64` over hundreds of packs has few descriptors to spare
_BATCH_EACH = 16
_FSYNC_EACH_BELOW = 16

StatKey = tuple[int, int, int, int, int]  # st_mode, size, mtime_ns, ctime_ns, inode
#: what the capture saw at a virtual path: its stat key and object id, when it trusted them
Identity = Callable[[bytes], tuple[StatKey, bytes] | None]

KEPT_NOT_EMPTY = ("kept: it holds files the restore leaves alone (not covered, or new since "
                  "the capture)")
#: the snapshot has a file where a directory stands that could not be removed (it holds files
#: the restore leaves alone): the file is not written, and the restore says so
KEPT_IN_THE_WAY = ("not restored: a directory stands there holding files the restore leaves "
                   "alone; move them away and run it again")


def _key(s: os.stat_result) -> StatKey:
    return (s.st_mode, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino)


class ApplyResult:
    """What an apply did: the actions ``applied``, the paths ``skipped`` by policy (kept,
    not an error) and the ``conflicts`` (changed under the restore)."""

    __slots__ = ("applied", "skipped", "conflicts")

    def __init__(self) -> None:
        self.applied: list[Action] = []
        self.skipped: list[Skipped] = []
        self.conflicts: list[Skipped] = []


class ApplyFailed(Exception):
    """An OS error stopped the apply; ``result`` holds what was done before it."""

    def __init__(self, action: Action, error: OSError, result: ApplyResult) -> None:
        super().__init__(f"{quote_path(action.path)}: {error.strerror or error}")
        self.action = action
        self.error = error
        self.result = result


class Applier:
    def __init__(self, plan: RestorePlan, objects: ObjectStore, dest_roots: Sequence[bytes],
                 *, token: str, identity: Identity | None = None) -> None:
        self.plan = plan
        self.objects = objects
        self.dirs = DirHandles(dest_roots)
        self.identity = identity
        self.result = ApplyResult()
        self._prefix = os.fsencode(temp_prefix(token))
        self._count = 0
        self._current: Action | None = None
        self._blocked: set[bytes] = set()  # directories the restore could not make
        self._kept: set[bytes] = set()  # directories kept because they hold uncovered files
        self._emptied: set[bytes] = set()  # directories something was removed from
        self._pending: list[tuple[Action, bytes, bytes]] = []  # action, parent, temp name
        self._devices: dict[int, int] = {}  # st_dev -> an fd on it, for syncfs
        self._dev_of: dict[bytes, int] = {}
        writes = sum(1 for a in plan.writes if a.op in (WRITE, SYMLINK_OP))
        # without syncfs (macOS, other systems, CTRLZ_PLATFORM=portable) every restore
        # fsyncs each file and directory, in smaller batches: each file stays open until
        # its batch's fsync, and 512 of them could exhaust a low descriptor limit
        self.fsync_each = writes < _FSYNC_EACH_BELOW or not has_syncfs()
        self._batch = _BATCH if writes < _FSYNC_EACH_BELOW or has_syncfs() else _BATCH_EACH
        self._meter: meter.Meter | None = None
        self._written: list[int] = []  # temp files written, open until the batch's fsync
        self._large = LargeWrites()  # large temp files being filled by worker threads

    # -- driving -----------------------------------------------------------------------------

    def run(self) -> ApplyResult:
        progress = meter.current()
        if progress is not None:
            placed = [a for a in self.plan.writes if a.op in (WRITE, SYMLINK_OP)]
            progress.start("Restore", len(placed),
                           sum(a.entry.size for a in placed if a.entry is not None))
        self._meter = progress
        try:
            for action in self.plan.removals:
                self._current = action
                self._remove(action)
            for action in self.plan.writes:
                self._current = action
                if action.path.rpartition(b"/")[0] in self._blocked:
                    self._block(action, "left alone: its parent directory was left alone")
                    continue
                self._write(action)
                if len(self._pending) >= self._batch:
                    self._commit_pending()
            self._commit_pending()
            for action in self.plan.finals:
                self._current = action
                if action.path not in self._blocked:
                    self._dirmode(action)
            self.dirs.narrow({a.path for a in self.plan.finals if a.path not in self._blocked})
            failpoints.hit("restore-before-sync")
            if self.fsync_each:  # each file and its directory were fsynced as they landed
                emptied = []
                for parent in sorted(self._emptied):
                    try:
                        self.dirs.get(parent)
                    except (FileNotFoundError, NotADirectoryError):
                        continue  # removed itself, from a parent listed here too
                    emptied.append((parent, None))
                self._fsync_all(emptied)
            else:  # one flush per filesystem the restore wrote to
                for fd in self._devices.values():
                    syncfs(fd)
        except OSError as exc:
            assert self._current is not None
            raise ApplyFailed(self._current, exc, self.result) from exc
        finally:
            self._large.stop()
            for f in self._written:  # an error before the batch's fsync
                os.close(f)
            self._written = []
            self.dirs.close()
            for fd in self._devices.values():
                os.close(fd)
            self._devices.clear()
        return self.result

    def _block(self, a: Action, reason: str) -> None:
        """A path left alone; what the plan puts below it is left alone too."""
        self._blocked.add(a.path)
        self.result.conflicts.append(Skipped(a.path, reason))

    def _temp(self, aside: bool = False) -> bytes:
        self._count += 1
        return self._prefix + (b"a%d" % self._count if aside else b"%d" % self._count)

    def _note_device(self, parent: bytes, fd: int) -> None:
        if parent in self._dev_of:
            return
        dev = os.fstat(fd).st_dev
        self._dev_of[parent] = dev
        if dev not in self._devices:
            self._devices[dev] = os.dup(fd)

    @staticmethod
    def _split(path: bytes) -> tuple[bytes, bytes]:
        parent, _, name = path.rpartition(b"/")
        return parent, name

    # -- is it still what the capture saw? --------------------------------------------------

    def _unchanged(self, fd: int, name: bytes, vpath: bytes, expect: Entry,
                   s: os.stat_result) -> bool:
        kind = kind_of(s.st_mode)
        if kind != expect.kind:
            return False
        if kind == DIR:
            return True
        seen = self.identity(vpath) if self.identity is not None else None
        if seen is not None and seen[1] == expect.oid and seen[0] == _key(s):
            return True
        if kind == SYMLINK:
            return self.objects.digest(os.fsencode(os.readlink(name, dir_fd=fd))) == expect.oid
        return s.st_size == expect.size and matches_at(self.objects, fd, name, expect.oid)

    # -- phase 1: removals -------------------------------------------------------------------

    def _remove(self, a: Action) -> None:
        parent, name = self._split(a.path)
        fd = self.dirs.writable(parent)
        self._note_device(parent, fd)
        assert a.expect is not None
        try:
            s = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            self.result.applied.append(a)  # already gone
            return
        if not self._unchanged(fd, name, a.path, a.expect, s):
            self.result.conflicts.append(Skipped(a.path, CHANGED))
            return
        if a.op == RMDIR:
            self.dirs.forget(a.path)
            fd = self.dirs.get(parent)
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                self._kept.add(a.path)
                if a.change != ANCESTOR:  # a parent of the requested paths: kept, unremarked
                    self.result.skipped.append(Skipped(a.path, KEPT_NOT_EMPTY))
                return
        else:
            # take it aside first, check the inode that went, then let it go
            aside = self._temp(aside=True)
            os.rename(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
            gone = os.stat(aside, dir_fd=fd, follow_symlinks=False)
            if not same_inode(s, gone) and not self._unchanged(fd, aside, a.path, a.expect, gone):
                self.result.conflicts.append(
                    Skipped(a.path, aside_.put_back(fd, aside, name, self._prefix)))
                return
            let_go(fd, aside, gone)
        self.result.applied.append(a)
        self._emptied.add(parent)
        failpoints.hit("restore-remove")

    # -- phase 2: directories, files, links, metadata -----------------------------------------

    def _write(self, a: Action) -> None:
        parent, name = self._split(a.path)
        entry = a.entry
        assert entry is not None
        if a.op == MKDIR:
            fd = self.dirs.writable(parent)
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                if kind_of(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode) != DIR:
                    self._block(a, APPEARED)
                    return
            self.result.applied.append(a)
        elif a.op in METADATA_OPS:
            self._metadata(a, parent, name, entry)
        elif a.path in self._kept:  # the directory kept there stays: the file is not placed
            self.result.conflicts.append(Skipped(a.path, KEPT_IN_THE_WAY))
        else:
            fd = self.dirs.writable(parent)
            self._note_device(parent, fd)
            tmp = self._temp()
            if a.op == WRITE:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                f = os.open(tmp, flags, 0o600, dir_fd=fd)
                keep = False
                try:
                    # a clone object goes back by cloning it (no byte copied), where it can;
                    # a large loose one is written by a worker thread (`durable.LargeWrites`)
                    write = None
                    if not self.objects.clone_to(entry.oid, f):
                        if entry.size >= LOOSE_MIN:
                            write = self.objects.loose_writer(entry.oid)
                        if write is None:
                            self.objects.write_to(entry.oid, f)
                    if write is not None:
                        self._wait_large(JOBS_MAX - 1)
                        self._large.submit(a, f, write, restored_mode(entry), entry.mtime_ns)
                        keep = True  # the worker closes it
                    else:
                        os.fchmod(f, restored_mode(entry))
                        os.utime(f, ns=(entry.mtime_ns, entry.mtime_ns))
                        # kept open for the batch's fsync: once its mode is restored, the
                        # file may be one its owner cannot open (0o200, 0o000)
                        keep = self.fsync_each
                        if keep:
                            self._written.append(f)
                finally:
                    if not keep:
                        os.close(f)
            else:
                os.symlink(self.objects.read(entry.oid), tmp, dir_fd=fd)
                os.utime(tmp, ns=(entry.mtime_ns, entry.mtime_ns), dir_fd=fd,
                         follow_symlinks=False)
            self._pending.append((a, parent, tmp))
            failpoints.hit("restore-temp-written")
            if self._meter is not None:
                self._meter.files += 1
                self._meter.bytes += entry.size

    def _metadata(self, a: Action, parent: bytes, name: bytes, entry: Entry) -> None:
        """Mode *and* mtime, whichever of them differs: a formatter that rewrote a file with
        the same bytes changed both."""
        fd = self.dirs.get(parent)
        s = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if a.expect is not None and not self._unchanged(fd, name, a.path, a.expect, s):
            self.result.conflicts.append(Skipped(a.path, CHANGED))
            return
        try:
            f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                        dir_fd=fd)
        except PermissionError:  # a file we may not read: change it through an O_PATH handle
            f = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                os.chmod(f"/proc/self/fd/{f}", restored_mode(entry))
            finally:
                os.close(f)
        else:
            try:
                os.fchmod(f, restored_mode(entry))
            finally:
                os.close(f)
        os.utime(name, ns=(entry.mtime_ns, entry.mtime_ns), dir_fd=fd, follow_symlinks=False)
        self.result.applied.append(a)

    def _wait_large(self, keep: int = 0) -> None:
        """Wait for the large files' workers until at most ``keep`` are in flight; the first
        error is raised as the error of that file's action."""
        try:
            self._large.wait(keep)
        except BaseException:
            self._current = self._large.failed
            raise

    def _commit_pending(self) -> None:
        self._wait_large()
        if not self._pending:
            return
        if self.fsync_each:
            written, self._written = self._written, []
            try:
                fsync_fds(written)
            finally:
                for f in written:
                    os.close(f)
        else:
            for dev in {self._dev_of[parent] for _, parent, _ in self._pending}:
                syncfs(self._devices[dev])
        touched: set[bytes] = set()
        for i, (a, parent, tmp) in enumerate(self._pending):
            self._current = a
            try:
                self._place(a, parent, tmp)
            except BaseException:
                self._pending = self._pending[i + 1:]  # the rest are swept with the journal
                raise
            touched.add(parent)
            failpoints.hit("restore-place")
        self._pending = []
        if self.fsync_each:
            self._fsync_all([(parent, None) for parent in touched])

    def _fsync_all(self, targets: list[tuple[bytes, bytes | None]]) -> None:
        """fsync each directory of ``targets`` (``(directory, None)`` pairs), concurrently.
        Each gets its own descriptor first, on this thread: the directory handles are an
        LRU whose fds a later lookup may close."""
        fds: list[int] = []
        try:
            for parent, _ in targets:
                fds.append(os.dup(self.dirs.get(parent)))
            fsync_fds(fds)
        finally:
            for fd in fds:
                os.close(fd)

    def _place(self, a: Action, parent: bytes, tmp: bytes) -> None:
        fd = self.dirs.get(parent)
        _, name = self._split(a.path)
        if a.expect is None:
            reason = place_new(fd, tmp, name)
        else:
            expect = a.expect

            def unchanged(kept: bytes, s: os.stat_result) -> bool:
                return self._unchanged(fd, kept, a.path, expect, s)

            reason = place_over(fd, tmp, name, self._prefix, unchanged)
        if reason is None:
            self.result.applied.append(a)
        else:
            self.result.conflicts.append(Skipped(a.path, reason))

    # -- phase 3: directory modes ------------------------------------------------------------

    def _dirmode(self, a: Action) -> None:
        assert a.entry is not None
        os.fchmod(self.dirs.get(a.path), restored_mode(a.entry))
        self.result.applied.append(a)

