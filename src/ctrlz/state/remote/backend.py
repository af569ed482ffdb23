"""The one seam between ctrlz and an object store: a handful of calls on keys.

Everything ctrlz keeps on a remote is a key holding bytes. Two kinds of write exist, and they
are the whole concurrency story (see ``docs/remote.md``):

* :meth:`Backend.put_new` writes a key only if it does not exist (``If-None-Match: *``).
  Content-addressed keys (packs, their indexes) are written this way: an existing key already
  holds the same bytes, so "it exists" is success, and nothing is ever overwritten.
* :meth:`Backend.put_cas` replaces a key only if it still holds what the caller read
  (``If-Match: <ETag>``), or creates it only if absent. The mutable keys (a workspace's ref,
  the gc state) are written this way, so two writers never lose each other's update: the loser
  gets :class:`Conflict`, reads again and merges.

Backends: :mod:`.s3` (any service speaking the S3 API) and :mod:`.local` (``file://``).
:class:`Limited` wraps one to bound upload bandwidth, as restic's limiter backend does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Protocol

from ...errors import RemoteError


class Missing(RemoteError):
    """The key does not exist."""


class Conflict(RemoteError):
    """A conditional write lost: the key exists (create-only) or changed (compare-and-swap)."""


class Backend(Protocol):
    #: how the remote is shown to people (``s3://bucket/prefix``, ``file:///path``)
    url: str

    def get(self, key: str) -> tuple[bytes, str]:
        """(bytes, ETag); raises :class:`Missing`."""
        ...

    def get_range(self, key: str, start: int, length: int) -> bytes:
        ...

    def put_new(self, key: str, data: bytes) -> bool:
        """Create ``key``; False (and nothing written) if it already exists."""
        ...

    def put_cas(self, key: str, data: bytes, etag: str | None) -> str:
        """Replace ``key`` if its ETag is ``etag`` (create it if ``etag`` is None); returns
        the new ETag or raises :class:`Conflict`."""
        ...

    def delete(self, key: str) -> None:
        ...

    def list(self, prefix: str) -> Iterator[tuple[str, int, float]]:
        """(key, size, modification time in server seconds) under ``prefix``."""
        ...

    def server_time(self) -> float:
        """The server's clock (seconds since the epoch): gc ages things by one clock."""
        ...

    def check(self) -> None:
        """Raise a clear :class:`RemoteError` if the remote cannot be used at all."""
        ...


class Limited:
    """A backend whose uploads are bounded to ``rate`` bytes per second (a token bucket:
    short bursts of one second's worth, then the average holds)."""

    def __init__(self, inner: Backend, rate: int) -> None:
        self.inner = inner
        self.url = inner.url
        self.rate = max(1, rate)
        self._lock = threading.Lock()
        self._allowance = float(self.rate)
        self._last = time.monotonic()

    def _spend(self, n: int) -> None:
        with self._lock:
            now = time.monotonic()
            self._allowance = min(float(self.rate),
                                  self._allowance + (now - self._last) * self.rate)
            self._last = now
            self._allowance -= n
            wait = -self._allowance / self.rate if self._allowance < 0 else 0.0
        if wait > 0:
            time.sleep(wait)

    def get(self, key: str) -> tuple[bytes, str]:
        return self.inner.get(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        return self.inner.get_range(key, start, length)

    def put_new(self, key: str, data: bytes) -> bool:
        self._spend(len(data))
        return self.inner.put_new(key, data)

    def put_cas(self, key: str, data: bytes, etag: str | None) -> str:
        self._spend(len(data))
        return self.inner.put_cas(key, data, etag)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def list(self, prefix: str) -> Iterator[tuple[str, int, float]]:
        return self.inner.list(prefix)

    def server_time(self) -> float:
        return self.inner.server_time()

    def check(self) -> None:
        self.inner.check()
