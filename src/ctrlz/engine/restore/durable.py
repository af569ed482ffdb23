"""Making a restore's writes durable from a few threads at once.

Two helpers of the apply step (:mod:`ctrlz.engine.restore.apply`), apart from its rules about what
may be written where:

* :func:`fsync_fds` fsyncs a batch of files or directories concurrently: a journaling
  filesystem folds concurrent fsyncs into one commit (measured on ext4: ten files in 2 ms,
  against 40 ms one after another). Its pool lives as long as the process: a restore calls it
  up to three times (the temp files, the directories they were renamed into, the directories
  emptied), and a pool made per call started its threads again each time, about 3 ms of a
  20 ms restore in the workspace daemon, which restores many times.
* :class:`LargeWrites` fills large temp files on worker threads (decoding, checking and
  writing release the GIL) and fsyncs each as it is done, while the main thread goes on.
  The apply step waits for them before it renames anything, so the order holds: data
  durable, then the rename.
* :func:`let_go` unlinks the inode a restore replaced or removed. Unlinking the last name of
  an inode frees its blocks there and then (on ext4, ~0.08 ms for a small file: 1.6 ms of a
  20-path rollback), unless the file is still open. A long-lived process that answers
  someone (the workspace daemon) calls :func:`hold_released` once; from then on the inode is
  kept open across its unlink, and :func:`close_released`, called once the answer is sent,
  lets the filesystem free it. Nothing is visible in between: the name is gone at once.
  At most 256 files (an eighth of the open-file limit, if that is less) and 256 MiB are held.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from ... import platform
from ...state.fsio.pools import each

TYPE_CHECKING = False
if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from .actions import Action

FSYNC_THREADS = 8
WRITE_THREADS = 3  # large files written at once
JOBS_MAX = 8  # and at most this many waiting, each holding two open files

HELD_MAX = 256  # released inodes kept open at once (file descriptors)
HELD_SHARE = 8  # and at most this fraction of the process's open-file limit
HELD_BYTES_MAX = 256 << 20  # and the disk space they may keep from being freed
_held: list[int] | None = None  # None: release at once
_held_bytes = 0
_held_max = 0


def fsync_fds(fds: list[int]) -> None:
    """fsync every descriptor, from a few threads at once (see the module docstring); with
    ``F_FULLFSYNC`` where :mod:`ctrlz.platform` says a plain fsync is not enough (macOS)."""
    sync = platform.full_fsync if platform.fs_sync() == "F_FULLFSYNC" else os.fsync
    if len(fds) == 1:
        sync(fds[0])
    elif fds:
        each("fsync", FSYNC_THREADS, sync, fds)


def fill(write: Callable[[int], int], f: int, mode: int, mtime_ns: int) -> None:
    """A large temp file on a worker thread: its bytes (verified against the object's id),
    mode and mtime, then fsync; the file is closed whatever happens."""
    try:
        write(f)
        os.fchmod(f, mode)
        os.utime(f, ns=(mtime_ns, mtime_ns))
        os.fsync(f)
    finally:
        os.close(f)


def hold_released(on: bool = True) -> None:
    """From now on, free released inodes at :func:`close_released`, not at their unlink
    (``on``), or at their unlink again (off, which frees those held now)."""
    global _held, _held_max
    if not on:
        close_released()
        _held = None
    elif _held is None:
        import resource

        # the restore itself needs descriptors (temp files, directories, packs): under a low
        # `ulimit -n` hold a few, never enough to make it fail with EMFILE
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        _held_max = HELD_MAX if soft == resource.RLIM_INFINITY else min(HELD_MAX,
                                                                         soft // HELD_SHARE)
        _held = []


def let_go(dir_fd: int, name: bytes, st: os.stat_result) -> None:
    """Unlink ``name`` (in ``dir_fd``, last seen as ``st``); see the module docstring for
    when the filesystem frees it. Within the caps, and for regular files only (opening
    anything else could block or have effects): past them, or if it cannot be opened, it
    is freed at once, as without :func:`hold_released`."""
    global _held_bytes
    held = None
    if (_held is not None and len(_held) < min(_held_max, HELD_MAX) and stat.S_ISREG(st.st_mode)
            and _held_bytes + st.st_size <= HELD_BYTES_MAX):
        try:
            held = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                           dir_fd=dir_fd)
        except OSError:
            held = None
    try:
        os.unlink(name, dir_fd=dir_fd)
    except BaseException:
        if held is not None:
            os.close(held)
        raise
    if held is not None:
        assert _held is not None
        _held.append(held)
        _held_bytes += st.st_size


def close_released() -> None:
    """Let the filesystem free every inode :func:`let_go` kept open."""
    global _held_bytes
    _held_bytes = 0
    while _held:
        os.close(_held.pop())  # popped first: one that fails is not closed twice


class LargeWrites:
    """The large temp files of one restore, being filled by worker threads (:func:`fill`).

    ``failed``: the action whose job raised, after :meth:`wait` raised its error."""

    def __init__(self) -> None:
        self._jobs: list[tuple[Action, int, Future[None]]] = []
        self._pool: ThreadPoolExecutor | None = None
        self.failed: Action | None = None

    def submit(self, a: Action, f: int, write: Callable[[int], int], mode: int,
               mtime_ns: int) -> None:
        """Hand temp file ``f`` of action ``a`` to a worker, which closes it (the caller,
        if this raises). The caller waits first (``wait(JOBS_MAX - 1)``): bounded open
        files, and errors surface early."""
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(WRITE_THREADS)
        self._jobs.append((a, f, self._pool.submit(fill, write, f, mode, mtime_ns)))

    def wait(self, keep: int = 0) -> None:
        """Wait for the oldest jobs until at most ``keep`` are in flight; the first error is
        raised, with its action in :attr:`failed`."""
        while len(self._jobs) > keep:
            a, _, job = self._jobs[0]
            try:
                job.result()
            except BaseException:
                self.failed = a
                raise
            self._jobs.pop(0)

    def stop(self) -> None:
        """At the end, and after an error: the workers finish before the caller sweeps the
        temp files, and the files of jobs that never started are closed."""
        for _, f, job in self._jobs:
            if job.cancel():
                os.close(f)
        self._jobs = []
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
