"""Compressing small objects on helper threads while the writer's caller reads the next files.

Why: a snapshot reads small files on the thread that walks the tree (handing each one to a
thread costs more than reading it, see :mod:`ctrlz.state.scan.reader`), and used to compress
them there too. Profiled on the first snapshot of git's source (4,020 small files stored),
zstd took a third of that thread's time while the other core sat idle. zstd releases the GIL,
so a batch of objects compressed on a helper thread overlaps the walk's reads and hashes. A
batch is one call into zstd (:func:`ctrlz.state.store.packs.encode_many`): compressing its objects
one call each made the GIL change hands three times per object, and a first snapshot of
100,000 small files took as long as inline, for a third more CPU.

What it keeps: objects are appended to the pack in the order they were given (lane by lane),
on the caller's thread (the only one that appends, see
:class:`ctrlz.state.store.object_writer.ObjectWriter`), so a pack's layout does not depend on
thread timing. A batch is one group (:mod:`ctrlz.state.store.groups`): its objects are compressed
together, as one zstd frame, and appended as one group record; a batch of one object is
stored alone, as before groups. A batch that fails to compress (out of
memory), or whose append fails (a full disk), raises on the caller's thread at the next
:meth:`CompressBehind.add` or at :meth:`CompressBehind.finish`, and again at every later
call, and the caller's operation fails as any failed write does. At most
:data:`MAX_PENDING` raw bytes wait at once: past that, the caller waits for the oldest batch.
"""

from __future__ import annotations

import os
from collections import deque

from .. import failpoints
from ..fsio.pools import shared_pool
from .groups import GROUP_BYTES, GROUP_LEVEL, encode_group
from .packs import encode_small

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future

    #: ids, raw sizes, raw bytes in all, and the future of their group record (of one
    #: object's codec and stored bytes, for a batch of one)
    _Batch = tuple[list[bytes], list[int], int, Future[bytes | tuple[int, bytes]]]

#: small objects a writer compresses itself before it starts handing them over: a snapshot
#: that stores a few files (the usual one) never wakes a thread
START_AFTER = 256
#: a batch (a group) is handed over at this many objects or bytes, whichever comes first
BATCH_OBJECTS = 2048
BATCH_BYTES = GROUP_BYTES
#: raw bytes handed over and not yet appended, at most
MAX_PENDING = 16 << 20
#: helper threads: the caller keeps one core busy reading and hashing
HELPERS = max(1, min(4, (os.cpu_count() or 2) - 1))


def _encode(oids: list[bytes], items: list[bytes]) -> bytes:
    failpoints.hit("compress-behind")  # on the helper thread
    return encode_group(oids, items)


class CompressBehind:
    """Small objects in the order given, grouped and compressed (on helper threads once more
    than :data:`START_AFTER` were given), then handed in that order on the caller's thread to
    ``append_group(oids, sizes, record)``, or, for a group of one, to ``append(oid, size,
    codec, stored)``.

    Each lane fills groups of its own: a snapshot puts trees and link targets in lane 1 and
    files in lane 0, so a restore that walks trees decodes groups of trees alone, not the
    files stored between them (and trees compress better beside trees). Groups are appended
    in the order they fill."""

    def __init__(self, append: Callable[[bytes, int, int, bytes], None],
                 append_group: Callable[[list[bytes], list[int], bytes], None]) -> None:
        self._append = append
        self._append_group = append_group
        self._lanes: dict[int, tuple[list[bytes], list[bytes], list[int]]] = {}
        self._given = 0
        self._pending: deque[_Batch] = deque()
        self._pending_bytes = 0
        self._failed: BaseException | None = None

    def add(self, oid: bytes, data: bytes, lane: int = 0) -> None:
        """Queue one object (already hashed, known to be new); append whatever is done."""
        if self._failed is not None:
            raise self._failed
        batch = self._lanes.get(lane)
        if batch is None:
            batch = self._lanes[lane] = ([], [], [0])
        oids, items, nbytes = batch
        oids.append(oid)
        items.append(data)
        nbytes[0] += len(data)
        self._given += 1
        if len(oids) >= BATCH_OBJECTS or nbytes[0] >= BATCH_BYTES:
            del self._lanes[lane]
            self._hand_over(batch, inline=self._given <= START_AFTER)
            self._collect(MAX_PENDING)

    def finish(self) -> None:
        """Append everything queued, waiting for the helpers as needed. Raises again after a
        batch failed: its objects were promised to the caller (``contains`` says yes) and never
        appended, so nothing queued here may ever be committed."""
        if self._failed is not None:
            raise self._failed
        lanes, self._lanes = self._lanes, {}
        for lane in sorted(lanes):
            self._hand_over(lanes[lane], inline=not self._pending)
        self._collect(-1)

    def _hand_over(self, batch: tuple[list[bytes], list[bytes], list[int]],
                   inline: bool) -> None:
        oids, items, (nbytes,) = batch
        if not oids:
            return
        if inline and not self._pending:  # nothing ahead of it: append it now
            try:
                if len(oids) == 1:
                    self._append(oids[0], len(items[0]), *encode_small(items[0], GROUP_LEVEL))
                else:
                    self._append_group(oids, [len(d) for d in items], encode_group(oids, items))
            except BaseException as exc:
                self._failed = exc
                raise
            return
        if len(oids) == 1:  # alone: stored as before groups, compressed there
            future = shared_pool("compress", HELPERS).submit(_encode_alone, items[0])
        else:
            future = shared_pool("compress", HELPERS).submit(_encode, oids, items)
        self._pending.append((oids, [len(d) for d in items], nbytes, future))
        self._pending_bytes += nbytes

    def _collect(self, keep: int) -> None:
        """Append finished batches, oldest first; wait while more than ``keep`` bytes are
        pending (``-1``: until none are)."""
        pending = self._pending
        while pending and (self._pending_bytes > keep or pending[0][3].done()):
            oids, sizes, nbytes, future = pending.popleft()
            self._pending_bytes -= nbytes
            try:
                record = future.result()
                if isinstance(record, tuple):
                    self._append(oids[0], sizes[0], *record)
                else:
                    self._append_group(oids, sizes, record)
            except BaseException as exc:  # compressing or appending (a full disk): either
                self._failed = exc  # way, objects promised to the caller are not in the pack
                raise


def _encode_alone(data: bytes) -> tuple[int, bytes]:
    """A batch of one object, stored alone (a record header costs what a group's head and
    index do): at the groups' level, not :func:`encode_small`'s faster one, since it is
    compressed behind the walk as a group is. Most are files of half a group or more that
    found their lane empty (git's source: 12 translations of 0.6-0.9 MB, 2.2 MB stored at
    level 2, 0.13 MB less at level 3)."""
    failpoints.hit("compress-behind")
    return encode_small(data, GROUP_LEVEL)
