"""The store's writer lock.

One process at a time may change a store (snapshot, restore, rm, gc). Readers never take it:
SQLite's WAL gives them a consistent catalog and objects are immutable once indexed, so listing
and diffing keep working while a snapshot runs. The lock is an ``flock`` on a file in the store,
so the kernel releases it when a holder dies, even by ``kill -9``.
"""

from __future__ import annotations

import fcntl
import os
import time

from ...errors import StoreLocked, exhausted

TYPE_CHECKING = False

if TYPE_CHECKING:
    from types import TracebackType


class StoreLock:
    def __init__(self, path: str | os.PathLike[str], timeout: float = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        if self._fd is not None:  # re-entrant within one process
            self._depth += 1
            return
        fd = self._open()
        deadline = time.monotonic() + self.timeout
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise StoreLocked(
                        f"another ctrlz process holds the store lock {self.path}; "
                        "wait for it to finish and try again"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
        self._fd = fd
        self._depth = 1

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            if (err := exhausted(exc, f"opening the store lock {self.path}")) is not None:
                raise err from exc
            raise

    def try_acquire(self) -> bool:
        """Take the lock only if nobody else holds it, without waiting; re-entrant like
        :meth:`acquire`. For readers that must know no writer is mid-way (``verify`` counting
        orphans) but should not wait 30 s for one."""
        if self._fd is not None:
            self._depth += 1
            return True
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        self._depth = 1
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        self._depth -= 1
        if self._depth > 0:
            return
        fd, self._fd = self._fd, None
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
