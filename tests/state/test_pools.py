"""``pools.each``: every item done, from several threads, errors raised once all are done; in
a process without ``concurrent.futures`` it starts threads of its own rather than import it."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from ctrlz.state.fsio import pools

#: run in a fresh interpreter: the fan-out a cold rollback's fsyncs take
FRESH = """
import sys, time, _thread
from ctrlz.state.fsio.pools import each
seen, threads = [], set()
def work(i):
    time.sleep(0.01)  # long enough that one thread cannot take every item alone
    threads.add(_thread.get_ident())
    seen.append(i)
each("test", 4, work, list(range(20)))
assert sorted(seen) == list(range(20)), seen
try:
    each("test", 4, lambda i: 1 // (i - 7), list(range(12)))
except ZeroDivisionError:
    pass
else:
    raise SystemExit("no error raised")
print(len(threads) > 1, sorted(m for m in sys.modules if m.startswith(
    ("concurrent", "threading", "logging"))))
"""


def test_a_fresh_process_fans_out_on_threads_of_its_own() -> None:
    run = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split(None, 1) == ["True", "[]\n"]


def test_a_process_with_concurrent_futures_uses_the_shared_pool() -> None:
    import concurrent.futures  # noqa: F401 - as the workspace daemon has it

    names: list[str] = []
    try:
        pools.each("test-each", 2, lambda i: names.append(threading.current_thread().name),
                   [1, 2, 3])
        assert len(names) == 3 and all(n.startswith("ctrlz-test-each") for n in names)
        with pytest.raises(ValueError, match="bad"):
            pools.each("test-each", 2, lambda i: int("bad") if i == 2 else None, [1, 2, 3])
    finally:
        pools.forget("test-each")


def test_every_item_runs_though_one_fails() -> None:
    """The first error is raised after every call has returned: no fsync is left running
    behind the caller's back."""
    done: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        with lock:
            done.append(i)
        if i % 3 == 0:
            raise OSError(i, "failed")

    with pytest.raises(OSError):
        pools.each("test-each-fail", 3, work, list(range(10)))
    pools.forget("test-each-fail")
    assert sorted(done) == list(range(10))
