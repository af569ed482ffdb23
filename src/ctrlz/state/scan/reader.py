"""Reading and hashing the files a scan could not trust: the first few small ones inline, the
rest in batches on a pool.

A read is consistent or it is not recorded: the file is opened with ``O_NOFOLLOW``, its stat
taken before and after, and a file that keeps changing while it is read (``_READ_ATTEMPTS``
times) is skipped and reported. The id goes into the walk's entry together with the stat it
is consistent with, so the stat cache never vouches for bytes it did not hash.
"""

from __future__ import annotations

import os
import stat as st
from collections import deque
from collections.abc import Callable

from ...errors import exhausted
from ...types import Skipped
from .. import meter
from ..fsio.pools import shared_pool
from ..store.packs import LOOSE_MIN
from .model import KEY, MTIME, NAME, OID, PERM, SIZE, DirNode, ScanStats
from .sinks import INLINE_MAX, Sink

TYPE_CHECKING = False
if TYPE_CHECKING:  # every snapshot loads this module: typing stays out of it
    from concurrent.futures import Future
    from typing import Any, Protocol

    class Pool(Protocol):
        """Where large files are read: a ``ThreadPoolExecutor``, or the snapshot engine's
        wrapper that starts one only when a file is big enough to need it."""

        def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]: ...

    #: one read: ("ok", oid, sink payload, stat after) | ("skip", reason, …) | ("gone", …)
    ReadResult = tuple[str, Any, Any, Any]


_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MAX_INFLIGHT = 256
_READ_ATTEMPTS = 3
_BATCH_FILES = 8
_BATCH_BYTES = 16 << 20
#: small files a scan reads on its own thread before it hands them to the pool: a snapshot
#: that reads a few (the usual one) never wakes a thread for them
INLINE_FIRST = 512
#: small files in one batch for the pool: enough that a batch costs a worker far more than
#: the hand-off, few enough that the walk keeps every worker fed
_SMALL_BATCH = 64
#: threads that read small files, a pool of their own rather than the large files' (4-8
#: threads): one, two and three measured alike on two cores, and every thread that allocates
#: file contents may add a malloc arena to the process's RSS
SMALL_READERS = 2
#: bytes of files under ``LOOSE_MIN`` read (so held in memory until :meth:`FileReader.drain`
#: hands them to the sink) but not yet drained, at most: a first snapshot's memory stays flat
#: however many files it reads (large files go to temp files, not memory)
MAX_INFLIGHT_BYTES = 8 << 20


class FileReader:
    """Reads, hashes and (through the sink) stores files for one scan.

    ``stats`` and ``skipped`` are the scan's own: a read that fails takes its file back out
    of the counts and says why it was skipped."""

    def __init__(self, sink: Sink, pool: Pool, stats: ScanStats,
                 skipped: list[Skipped]) -> None:
        self.sink = sink
        self.pool = pool
        self.stats = stats
        self.meter = meter.current()  # a progress bar's counters, when a face installed one
        self.skipped = skipped
        #: batches in flight: their (node, entry) pairs, bytes held in memory, future
        self._pending: deque[tuple[list[tuple[DirNode, list[Any]]], int, Future[Any]]] = \
            deque()
        self._inflight_bytes = 0
        self._batch: list[tuple[DirNode, list[Any], bytes, int]] = []  # large files
        self._batch_bytes = 0
        self._smalls: list[tuple[DirNode, list[Any], bytes, int]] = []
        self._small = 0  # small files queued so far

    def queue(self, node: DirNode, entry: list[Any], path: bytes, size: int) -> None:
        """The first :data:`INLINE_FIRST` small files are read right here: a snapshot that
        reads a handful should not start threads for them. Past those (a first snapshot),
        small files go to :data:`SMALL_READERS` threads in batches of :data:`_SMALL_BATCH`,
        so that reading and hashing them overlap the walk: measured on 100,000 small files
        (docs/benchmarks.md), the first snapshot took 0.7-0.9x the time for the same CPU;
        handing them over one by one had cost more in GIL hand-offs than it saved. Large
        files the sink clones rather than reads (a store on XFS or btrfs) are cloned here: a
        clone is one ioctl, and starting the pool's threads for them cost a first snapshot
        of 20 such files more than the clones. Other large files go to the pool in batches
        of their own, where reading, hashing and compressing run in parallel without the
        GIL."""
        if size < INLINE_MAX:
            self._small += 1
            if self._small <= INLINE_FIRST:
                self.apply(node, entry, self.read(path, size))
                return
            self._smalls.append((node, entry, path, size))
            if len(self._smalls) >= _SMALL_BATCH:
                self._submit(self._smalls, True)
                self._smalls = []
            return
        if size >= LOOSE_MIN and self.sink.clones():
            self.apply(node, entry, self.read(path, size))
            return
        self._batch.append((node, entry, path, size))
        self._batch_bytes += size
        if len(self._batch) >= _BATCH_FILES or self._batch_bytes >= _BATCH_BYTES:
            self._submit(self._batch, False)
            self._batch, self._batch_bytes = [], 0

    def submit_batch(self) -> None:
        """Hand the files queued so far to the readers."""
        if self._smalls:
            self._submit(self._smalls, True)
            self._smalls = []
        if self._batch:
            self._submit(self._batch, False)
            self._batch, self._batch_bytes = [], 0

    def _submit(self, batch: list[tuple[DirNode, list[Any], bytes, int]], small: bool) -> None:
        """Hand one batch over; past :data:`_MAX_INFLIGHT` batches or
        :data:`MAX_INFLIGHT_BYTES` held, wait for the oldest ones."""
        held = sum(n for _, _, _, n in batch if n < LOOSE_MIN)
        items = [(p, n) for _, _, p, n in batch]
        pool = shared_pool("read", SMALL_READERS) if small else self.pool
        fut = pool.submit(self._read_batch, items)
        self._pending.append(([(node, entry) for node, entry, _, _ in batch], held, fut))
        self._inflight_bytes += held
        if len(self._pending) > _MAX_INFLIGHT or self._inflight_bytes > MAX_INFLIGHT_BYTES:
            self.drain(block=False, limit=_MAX_INFLIGHT // 2)

    def _read_batch(self, items: list[tuple[bytes, int]]) -> list[ReadResult]:
        return [self.read(path, size) for path, size in items]

    def read(self, path: bytes, size: int) -> ReadResult:
        """One file's id, read consistently (any thread); never raises except when the store
        is full."""
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except FileNotFoundError:
            return ("gone", None, None, None)
        except OSError as exc:
            _stop_if_exhausted(exc, path)
            return ("skip", f"unreadable: {exc.strerror}", None, None)
        try:
            before = os.fstat(fd)
            if not st.S_ISREG(before.st_mode):
                return ("skip", "replaced by a non-regular file while scanning", None, None)
            for _ in range(_READ_ATTEMPTS):
                oid, got, payload = self.sink.read_file(fd, before.st_size)
                after = os.fstat(fd)
                # the stats agreeing is not enough: a truncate and rewrite can show the old
                # times with the new size for an instant, and an entry whose size is not its
                # object's length cannot be restored (its check after the write fails)
                still = (before.st_size, before.st_mtime_ns, before.st_ctime_ns) == (
                    after.st_size, after.st_mtime_ns, after.st_ctime_ns)
                if still and (got is None or got == after.st_size):
                    return ("ok", oid, payload, after)
                self.sink.discard(payload)
                before = after
                os.lseek(fd, 0, os.SEEK_SET)
            if still:  # (a /proc or /sys file: its size says 0 or 4096, whatever it holds)
                return ("skip", f"read {got:,} bytes where its size says {after.st_size:,} "
                        f"({_READ_ATTEMPTS} attempts)", None, None)
            return ("skip", f"kept changing while being read ({_READ_ATTEMPTS} attempts)",
                    None, None)
        except OSError as exc:
            if exc.errno in (28, 122):  # ENOSPC, EDQUOT: the store is full, stop everything
                raise
            _stop_if_exhausted(exc, path)
            return ("skip", f"unreadable: {exc.strerror}", None, None)
        finally:
            os.close(fd)

    def drain(self, block: bool, limit: int = 0) -> None:
        """Consume finished reads. ``block``: all of them; ``limit``: wait until at most
        ``limit`` batches are in flight and at most :data:`MAX_INFLIGHT_BYTES` held;
        otherwise only those already done, oldest first."""
        pending = self._pending
        while pending:
            if not block and not (limit and (len(pending) > limit or self._inflight_bytes
                                             > MAX_INFLIGHT_BYTES)) \
                    and not pending[0][2].done():
                break
            items, held, fut = pending.popleft()
            self._inflight_bytes -= held
            for (node, entry), result in zip(items, fut.result(), strict=True):
                self.apply(node, entry, result)

    def apply(self, node: DirNode, entry: list[Any], result: ReadResult) -> None:
        """Record one read: the id and the stat it is consistent with, or why it was skipped."""
        status, value, payload, after = result
        stats = self.stats
        if status == "ok":
            m = self.meter
            if m is not None:  # counted at the size the walk found, as the totals are
                m.files += 1
                m.bytes += entry[SIZE]
            self.sink.accept(value, payload)
            stats.bytes += after.st_size - entry[SIZE]
            entry[OID] = value
            entry[SIZE], entry[MTIME] = after.st_size, after.st_mtime_ns
            entry[PERM] = after.st_mode & 0o7777
            entry[KEY] = (after.st_mode, after.st_size, after.st_mtime_ns, after.st_ctime_ns,
                          after.st_ino)
            stats.hashed += 1
        else:
            entry[OID] = None
            stats.files -= 1
            stats.bytes -= entry[SIZE]
            if status == "skip":
                rel = (node.rel + b"/" if node.rel else b"") + entry[NAME]
                self.skipped.append(Skipped(rel, value))


def _stop_if_exhausted(exc: OSError, path: bytes) -> None:
    """A file this process could not open or read for want of descriptors or memory is not
    an unreadable file: stop the scan rather than skip it (see :func:`ctrlz.errors.exhausted`)."""
    err = exhausted(exc, f"reading {os.fsdecode(path)}")
    if err is not None:
        raise err from exc
