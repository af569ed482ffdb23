"""Writing a new large object past the page cache (``O_DIRECT``), and through it where that fails.

Why: a first snapshot of large files is CPU-bound, and a write through the page cache costs
more CPU than one would think. On the 2-core ext4 machine of docs/benchmarks.md, writing and
fsyncing 1.3 GB took 1.3 to 1.9 s of system time through the page cache (allocating,
accounting and writing back every page), and 0.05 s of system time (0.73 s of wall time)
with ``O_DIRECT``, where the disk reads our buffer itself. The first snapshot of the
benchmark's 2 GB tree went from 3.1 s user + 2.15 s system to 3.4 s + 0.54 s, and from
2.9 s to 2.3 s of wall time. A store object is read back seldom (a restore of that file,
``ctrlz verify``), so it has no business pushing the user's own files out of the page cache
either; the one that is read back comes from the disk.

``O_DIRECT`` wants the buffer, the file offset and every length aligned to the device's
block size. The bytes are staged in page-aligned anonymous ``mmap`` buffers and written a whole
stage at a time; the tail, which is shorter, is written through the page cache once
``O_DIRECT`` is switched off on the descriptor. A direct write returns only once the disk
has the bytes, so each file has two stages, and a stage is written on a writer thread while
the caller fills the other: reading the source and writing the object overlap as they do
through the page cache. (With one stage, one 250 MB file read from a cold cache took 0.42 s
against 0.32 s buffered.) Where the filesystem refuses ``O_DIRECT``
(ramfs, some FUSE filesystems, tmpfs before Linux 6.6), or refuses a write for its
alignment, the rest of the file goes through the page cache as every write did before.
Durability is unchanged: :meth:`ObjectFile.sync` fsyncs (``O_DIRECT`` alone flushes
neither the disk's cache nor the file's size), and the caller renames the temp file only
after that.
"""

from __future__ import annotations

import errno
import mmap
import os

from ... import platform
from .. import failpoints
from .pools import shared_pool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from concurrent.futures import Future

#: bytes staged before a write (twice per file); a multiple of every block size a disk has.
#: 2 MiB: on the 2 GB tree as fast as 4 MiB with 30 MiB less at the peak (125-131 MiB
#: against 152-162 MiB, 6 files at once), and within 5% on one large file alone.
STAGE = 2 << 20
#: stage writes in flight at once, over all files (one per file at most)
WRITERS = 8
#: how long :meth:`ObjectFile.keeping_up` waits for the stage write in flight: a tenth of
#: what compressing a 4 MiB read at zstd level 1 takes (20 ms of log-like text on the
#: machine of docs/benchmarks.md). Written as soon as a read has filled the stages, that
#: write is often still going when the next read is ready; a disk that writes a 2 MiB stage
#: within it (1 GB/s and up) is not behind, one that takes longer is.
GRACE = 0.002

#: O_DIRECT where ctrlz.platform lets the fast path use it (Linux, not portable mode); 0
#: elsewhere: always buffered
_DIRECT = platform.direct_io_flag()
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


class ObjectFile:
    """A new file written once from start to end (``write``), then made durable (``sync``);
    for the temp files of large objects. Use it as a context manager: it closes its
    descriptor and its buffers whatever happens. One thread uses a given ObjectFile."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.fd = -1
        if _DIRECT:
            try:
                self.fd = os.open(path, _FLAGS | _DIRECT, 0o666)
            except OSError as exc:
                if exc.errno != errno.EINVAL:  # EINVAL: this filesystem has no O_DIRECT
                    raise
        self.direct = self.fd >= 0
        if not self.direct:
            self.fd = os.open(path, _FLAGS, 0o666)
        self._stages = [mmap.mmap(-1, STAGE), mmap.mmap(-1, STAGE)] if self.direct else []
        self._cur = 0  # the stage being filled
        self._fill = 0  # bytes in it
        self._written = 0  # bytes handed to writes: the file offset of the current stage
        self._pending: Future[None] | None = None  # the other stage's write

    def __enter__(self) -> ObjectFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tell(self) -> int:
        return self._written + self._fill

    def keeping_up(self) -> bool:
        """Does the disk take this file's bytes as fast as they come? Yes while they go past
        the page cache and the stage handed over last is written already (or none was), or
        is within ``GRACE``: the disk then waits for the caller, and time spent compressing
        is time added to the whole. Through the page cache, a write returns before the disk
        has the bytes, so there is nothing to tell by, and the answer is no."""
        if not self.direct:
            return False
        pending = self._pending
        if pending is None or pending.done():
            return True
        from concurrent.futures import wait

        return bool(wait([pending], timeout=GRACE).done)

    def write(self, data: bytes | memoryview) -> None:
        data = memoryview(data).cast("B")
        if not self._stages:
            self._write_at(data, self._written)
            self._written += len(data)
            return
        while data:
            n = min(len(data), STAGE - self._fill)
            self._stages[self._cur][self._fill:self._fill + n] = data[:n]
            self._fill += n
            data = data[n:]
            if self._fill == STAGE:
                self._hand_over()

    def sync(self) -> None:
        """Write what is staged and fsync: the file's bytes and length are durable."""
        self._wait()
        if self._fill:
            self._buffered()  # a tail shorter than a block: through the page cache
            self._write_at(memoryview(self._stages[self._cur])[:self._fill], self._written)
            self._written += self._fill
            self._fill = 0
        os.fsync(self.fd)

    def close(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:  # an error came first: the write ends before its buffer
            try:
                pending.result()
            except Exception:
                pass  # the error being raised already is the one to see
        stages, self._stages = self._stages, []
        for stage in stages:
            try:
                stage.close()
            except BufferError:
                pass  # a slice of it is in the traceback being raised: it goes with that
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def _hand_over(self) -> None:
        """The full stage goes to a writer thread; the other one, once written, is filled."""
        self._wait()
        stage = memoryview(self._stages[self._cur])
        self._pending = shared_pool("stage", WRITERS).submit(self._write_stage, stage,
                                                             self._written)
        self._written += STAGE
        self._cur ^= 1
        self._fill = 0

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()  # its error is raised here, in the caller's thread

    def _write_stage(self, stage: memoryview, offset: int) -> None:
        """On a writer thread; the caller waits for it before it touches the descriptor."""
        n = 0
        if self.direct:
            try:
                failpoints.hit("direct-write")
                n = os.pwrite(self.fd, stage, offset)
            except OSError as exc:
                if exc.errno != errno.EINVAL:  # EINVAL: refused for its alignment
                    raise
        if n != len(stage):  # refused, short (a short write is never aligned), or buffered
            self._buffered()  # already: the rest goes through the page cache
            self._write_at(stage[n:], offset + n)

    def _buffered(self) -> None:
        if self.direct:
            import fcntl

            fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) & ~_DIRECT)
            self.direct = False

    def _write_at(self, view: memoryview, offset: int) -> None:
        while view:
            n = os.pwrite(self.fd, view, offset)
            if n <= 0:  # never for a regular file; looping on it would be forever
                raise OSError(errno.EIO, "the filesystem took none of a write")
            view, offset = view[n:], offset + n
