"""Reading and hashing the files a scan could not trust, small ones inline, large ones on a pool.

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
        self._pending: deque[tuple[list[tuple[DirNode, list[Any]]], Future[Any]]] = deque()
        self._batch: list[tuple[DirNode, list[Any], bytes, int]] = []
        self._batch_bytes = 0

    def queue(self, node: DirNode, entry: list[Any], path: bytes, size: int) -> None:
        """Small files are read right here: measured on 100,000 files, handing them to threads
        costs more in GIL hand-offs than it saves. So are large files the sink clones rather
        than reads (a store on XFS or btrfs): a clone is one ioctl, and starting the pool's
        threads for them cost a first snapshot of 20 such files more than the clones. Other
        large files go to the pool in batches, where reading, hashing and compressing run in
        parallel without the GIL."""
        if size < INLINE_MAX or (size >= LOOSE_MIN and self.sink.clones()):
            self.apply(node, entry, self.read(path, size))
            return
        self._batch.append((node, entry, path, size))
        self._batch_bytes += size
        if len(self._batch) >= _BATCH_FILES or self._batch_bytes >= _BATCH_BYTES:
            self.submit_batch()

    def submit_batch(self) -> None:
        """Hand the files queued so far to the pool."""
        if not self._batch:
            return
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        fut = self.pool.submit(self._read_batch, [(p, n) for _, _, p, n in batch])
        self._pending.append(([(node, entry) for node, entry, _, _ in batch], fut))
        if len(self._pending) > _MAX_INFLIGHT:
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
        ``limit`` batches are in flight; otherwise only those already done, oldest first."""
        pending = self._pending
        while pending:
            if not block and not (limit and len(pending) > limit) and not pending[0][1].done():
                break
            items, fut = pending.popleft()
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
