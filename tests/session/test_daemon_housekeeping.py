"""The pools the daemon runs after it has answered (``Daemon.after_reply``): a failure there
never reaches the caller, who already has the answer, and never loses the work: the pools
stay due and run at the next chance, a request or the once-a-second tick.

The daemon runs in this process (its watcher is a real inotify thread) so that a fault can be
armed inside it; ``test_daemon.py`` covers the same pools in a real daemon process."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.session.daemon.daemon import Daemon
from ctrlz.state import failpoints
from ctrlz.state.db.catalog import WAL_KEEP
from ctrlz.workspace import Workspace


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    root = tmp_path / "work"
    root.mkdir()
    (root / ".ctrlz.toml").write_text("tool_max = 2\n")
    (root / "a.txt").write_text("a\n")
    Workspace.init(root).close()
    d = Daemon(Workspace.open(root))
    d.start()
    yield d
    failpoints.disarm_all()
    d.close()


def tool_labels(d: Daemon) -> list[str | None]:
    return [s.label for s in d.ws.snapshots() if s.type == "tool"]


def take(d: Daemon, i: int) -> dict:
    (d.ws.root / "a.txt").write_text(f"edit {i}\n")
    reply = d.handle({"op": "snapshot", "type": "tool", "label": f"t{i}"})
    assert reply["ok"] is True, reply
    return reply


def test_pools_that_fail_after_the_answer_stay_due_and_run_at_the_next_chance(
        daemon: Daemon) -> None:
    for i in range(2):
        take(daemon, i)
        daemon.after_reply()
    failpoints.arm_error("pools", errno.EIO)  # a disk error in the middle of retention
    take(daemon, 2)
    daemon.after_reply()  # fails: logged, nothing raised, nothing dropped
    take(daemon, 3)  # the next request is served all the same
    daemon.after_reply()
    assert tool_labels(daemon) == ["t0", "t1", "t2", "t3"]
    failpoints.disarm_all()
    daemon.tick()  # the next chance: the pools were still due
    assert tool_labels(daemon) == ["t2", "t3"]


def test_pools_never_wait_for_a_busy_store_lock(daemon: Daemon) -> None:
    for i in range(2):
        take(daemon, i)
        daemon.after_reply()
    take(daemon, 2)
    with Workspace.open(daemon.ws.root) as other, other.repo.lock:  # another writer
        daemon.after_reply()  # returns at once: the pools stay due
        assert tool_labels(daemon) == ["t0", "t1", "t2"]
    daemon.tick()
    assert tool_labels(daemon) == ["t1", "t2"]


def test_the_catalogs_log_is_trimmed_after_the_answer_not_before(daemon: Daemon) -> None:
    for i in range(400):  # rows enough for a log past WAL_KEEP
        (daemon.ws.root / f"f{i}.txt").write_text(f"file {i}\n" * 20)
    wal = Path(f"{daemon.ws.repo.catalog.path}-wal")
    take(daemon, 0)
    assert wal.stat().st_size > WAL_KEEP  # the answer waited for no checkpoint
    daemon.after_reply()
    assert wal.stat().st_size == 0
    assert tool_labels(daemon) == ["t0"]
