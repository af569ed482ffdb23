"""One thread that runs the workspace daemon's state-changing work, one job at a time.

The daemon answers each connection on a thread of its own (:mod:`.daemon_process`), so that
a request that need not wait does not: a served hook's file capture touches only the
tool-call store, under that store's own lock, exactly as the hook's own process would, and
it must not queue behind a rollback of a big tree or the first full scan. Everything that
reads or changes the daemon's own state (the watcher's dirty set, the stat cache, the open
workspace and its SQLite connection) runs on the serving thread instead, through
:meth:`Serial.run`: the one-at-a-time order the daemon always had, now for those jobs only.
"""

from __future__ import annotations

import queue
import threading

from ...errors import CtrlzError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")


class DaemonStopping(CtrlzError):
    """The daemon stopped before it started this job: nothing of it was done."""


class _Job:
    __slots__ = ("fn", "dropped", "done", "value", "error")

    def __init__(self, fn: Callable[[], Any], dropped: Callable[[], None] | None = None
                 ) -> None:
        self.fn = fn
        self.dropped = dropped
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class Serial:
    """Jobs handed in by any thread, run by the one thread that calls :meth:`next_job`."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self.owner = threading.current_thread()

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the serving thread, after the jobs before it; its value, or its
        exception raised here. On the serving thread itself it just runs. Raises
        :class:`DaemonStopping` when the daemon stops first."""
        if threading.current_thread() is self.owner:
            return fn()
        job = _Job(fn)
        with self._lock:
            if self._closed:
                raise DaemonStopping("the workspace daemon is stopping")
            self._jobs.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.value  # type: ignore[no-any-return]

    def hand_over(self, fn: Callable[[], None], dropped: Callable[[], None]) -> None:
        """Run ``fn()`` on the serving thread after the jobs before it, without waiting for
        it; ``dropped()`` instead (on the serving thread) if the daemon stops first. Raises
        :class:`DaemonStopping` when it already has."""
        with self._lock:
            if self._closed:
                raise DaemonStopping("the workspace daemon is stopping")
            self._jobs.put(_Job(fn, dropped))

    def next_job(self, timeout: float) -> Callable[[], None] | None:
        """The next job to run on the serving thread (it records its outcome for the thread
        waiting on it), or None after ``timeout`` seconds without one."""
        try:
            job = self._jobs.get(timeout=timeout)
        except queue.Empty:
            return None

        def work() -> None:
            try:
                job.value = job.fn()
            except BaseException as exc:  # noqa: BLE001 - raised again where it was asked
                job.error = exc
            finally:
                job.done.set()

        return work

    def close(self) -> None:
        """Take no more jobs; the ones waiting fail with :class:`DaemonStopping`, untouched."""
        with self._lock:
            self._closed = True
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            job.error = DaemonStopping("the workspace daemon stopped before this request")
            job.done.set()
            if job.dropped is not None:
                job.dropped()
