"""Thread pools a process shares, each made on first use: the stage writers of large objects
(:mod:`.direct_io`), the helpers that compress small objects behind a walk
(:mod:`ctrlz.state.store.behind`), the threads that read a scan's small files past its first
few hundred (:mod:`ctrlz.state.scan.reader`) and the restore engine's fsync threads
(:mod:`ctrlz.engine.restore.durable`).

Made on first use because most commands need none of them, and ``concurrent.futures`` is an
import an agent hook should not pay for. Shared because the daemon runs many operations: a
pool per operation would start threads per operation.
"""

from __future__ import annotations

import _thread
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from concurrent.futures import ThreadPoolExecutor

_pools: dict[str, ThreadPoolExecutor] = {}


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The process's pool called ``name`` (threads named ``ctrlz-<name>``), made with
    ``workers`` threads at most the first time it is asked for."""
    pool = _pools.get(name)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        # setdefault is atomic: of two threads here at once, one pool wins, and the other,
        # which has started no thread yet, is dropped
        pool = _pools.setdefault(name, ThreadPoolExecutor(
            workers, thread_name_prefix=f"ctrlz-{name}"))
    return pool


def forget(name: str) -> None:
    """Shut the pool ``name`` down and drop it (tests: to see whether an operation makes it)."""
    pool = _pools.pop(name, None)
    if pool is not None:
        pool.shutdown(wait=True)


def each(name: str, workers: int, fn: Callable[[int], object], items: Sequence[int]) -> None:
    """``fn(item)`` for every item, from up to ``workers`` threads at once; the first error
    raised is raised here, once every call has returned.

    From the pool ``name`` when this process has ``concurrent.futures`` already (a
    long-lived one, the workspace daemon: its threads are started once); otherwise from
    threads started for this call alone with ``_thread``, which a short command, one
    rollback in a fresh process, pays ~0.1 ms a thread for instead of the ~20 ms that
    ``concurrent.futures`` and the ``logging`` and ``threading`` it imports cost it."""
    errors: list[BaseException] = []
    if name in _pools or "concurrent.futures" in sys.modules:
        pool = shared_pool(name, workers)
        for future in [pool.submit(fn, item) for item in items]:
            if (exc := future.exception()) is not None:  # waits for it
                errors.append(exc)
        if errors:
            raise errors[0]
        return
    todo = list(reversed(items))
    done = [_thread.allocate_lock() for _ in range(min(workers, len(todo)))]

    def work(finished: _thread.LockType) -> None:
        try:
            while todo:
                try:
                    item = todo.pop()
                except IndexError:  # another thread took the last one
                    break
                try:
                    fn(item)
                except BaseException as exc:  # noqa: BLE001 - raised by the caller
                    errors.append(exc)
        finally:
            finished.release()

    started = []
    try:
        for lock in done:
            lock.acquire()
            try:
                _thread.start_new_thread(work, (lock,))
            except BaseException:
                lock.release()
                raise
            started.append(lock)
    finally:
        for lock in started:  # every started thread is waited for, even if one failed to start
            lock.acquire()
    if errors:
        raise errors[0]
