"""Compressing small objects on helper threads while the writer's caller reads the next files.

Why: a snapshot reads small files on the thread that walks the tree (handing each one to a
thread costs more than reading it, see :mod:`ctrlz.state.scan.reader`), and used to compress
them there too. Profiled on the first snapshot of git's source (4,020 small files stored),
zstd took a third of that thread's time while the other core sat idle. zstd releases the GIL,
so a batch of objects compressed on a helper thread overlaps the walk's reads and hashes. A
batch is one call into zstd (:func:`ctrlz.state.packs.encode_many`): compressing its objects
one call each made the GIL change hands three times per object, and a first snapshot of
100,000 small files took as long as inline, for a third more CPU.

What it keeps: objects are appended to the pack in the order they were given, on the caller's
thread (the only one that appends, see :class:`ctrlz.state.object_writer.ObjectWriter`), so a
pack's layout does not depend on thread timing. A batch that fails to compress (out of
memory), or whose append fails (a full disk), raises on the caller's thread at the next
:meth:`CompressBehind.add` or at :meth:`CompressBehind.finish`, and again at every later
call, and the caller's operation fails as any failed write does. At most
:data:`MAX_PENDING` raw bytes wait at once: past that, the caller waits for the oldest batch.
"""

from __future__ import annotations

import os
from collections import deque

from . import failpoints
from .packs import encode_many
from .pools import shared_pool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future

    #: ids, raw sizes, raw bytes in all, and the future of their (codec, stored) pairs
    _Batch = tuple[list[bytes], list[int], int, Future[list[tuple[int, bytes]]]]

#: small objects a writer compresses itself before it starts handing them over: a snapshot
#: that stores a few files (the usual one) never wakes a thread
START_AFTER = 256
#: a batch is handed over at this many objects or bytes, whichever comes first: one hand-off
#: per object would cost more in GIL switches than the compression it moves
BATCH_OBJECTS = 64
BATCH_BYTES = 512 << 10
#: raw bytes handed over and not yet appended, at most
MAX_PENDING = 16 << 20
#: helper threads: the caller keeps one core busy reading and hashing
HELPERS = max(1, min(4, (os.cpu_count() or 2) - 1))


def _encode(items: list[bytes]) -> list[tuple[int, bytes]]:
    failpoints.hit("compress-behind")  # on the helper thread
    return encode_many(items)


class CompressBehind:
    """Small objects in the order given, compressed on helper threads, then handed to
    ``append(oid, size, codec, stored)`` in that order on the caller's thread."""

    def __init__(self, append: Callable[[bytes, int, int, bytes], None]) -> None:
        self._append = append
        self._oids: list[bytes] = []
        self._items: list[bytes] = []
        self._batch_bytes = 0
        self._pending: deque[_Batch] = deque()
        self._pending_bytes = 0
        self._failed: BaseException | None = None

    def add(self, oid: bytes, data: bytes) -> None:
        """Queue one object (already hashed, known to be new); append whatever is done."""
        if self._failed is not None:
            raise self._failed
        self._oids.append(oid)
        self._items.append(data)
        self._batch_bytes += len(data)
        if len(self._oids) >= BATCH_OBJECTS or self._batch_bytes >= BATCH_BYTES:
            self._hand_over()
            self._collect(MAX_PENDING)

    def finish(self) -> None:
        """Append everything queued, waiting for the helpers as needed. Raises again after a
        batch failed: its objects were promised to the caller (``contains`` says yes) and never
        appended, so nothing queued here may ever be committed."""
        if self._failed is not None:
            raise self._failed
        self._hand_over()
        self._collect(-1)

    def _hand_over(self) -> None:
        if not self._oids:
            return
        future = shared_pool("compress", HELPERS).submit(_encode, self._items)
        self._pending.append((self._oids, [len(d) for d in self._items], self._batch_bytes,
                              future))
        self._pending_bytes += self._batch_bytes
        self._oids, self._items, self._batch_bytes = [], [], 0

    def _collect(self, keep: int) -> None:
        """Append finished batches, oldest first; wait while more than ``keep`` bytes are
        pending (``-1``: until none are)."""
        pending = self._pending
        while pending and (self._pending_bytes > keep or pending[0][3].done()):
            oids, sizes, nbytes, future = pending.popleft()
            self._pending_bytes -= nbytes
            try:
                for oid, size, (codec, stored) in zip(oids, sizes, future.result(),
                                                      strict=True):
                    self._append(oid, size, codec, stored)
            except BaseException as exc:  # compressing or appending (a full disk): either
                self._failed = exc  # way, objects promised to the caller are not in the pack
                raise
