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

TYPE_CHECKING = False
if TYPE_CHECKING:
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
