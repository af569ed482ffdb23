"""Trigger rules and the scheduler, with real threads and a controllable clock."""

from __future__ import annotations

import threading

from ctrlz.session.run.scheduler import GIT_DEBOUNCE, Scheduler, TriggerConfig
from ctrlz.session.run.triggers import is_build, is_git_commit, is_git_ref_change


def test_build_commands_follow_moats_list() -> None:
    assert is_build(["/usr/bin/make"]) and is_build(["make", "-j4", "test"])
    assert is_build(["npm", "run", "build"]) and not is_build(["npm", "run", "lint"])
    assert is_build(["cargo", "build", "--release"]) and not is_build(["cargo", "test"])
    assert not is_build([])


def test_git_commit_detection() -> None:
    assert is_git_commit(["git", "commit", "-m", "x"])
    assert is_git_commit(["/usr/bin/git", "-C", "repo", "-c", "a=b", "commit"])
    assert not is_git_commit(["git", "status"]) and not is_git_commit(["gitx", "commit"])
    assert is_git_ref_change(b".git/refs/heads/main") and is_git_ref_change(b".git/logs/HEAD")
    assert not is_git_ref_change(b".git/objects/ab/cd") and not is_git_ref_change(b"src/a")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_until(scheduler: Scheduler, taken: list, n: int, clock: FakeClock) -> None:
    done = threading.Event()
    for _ in range(2000):
        if len(taken) >= n:
            return
        clock.now += 0.5
        scheduler._cond.acquire()
        scheduler._cond.notify_all()
        scheduler._cond.release()
        done.wait(0.005)


def test_scheduler_fires_each_trigger_once() -> None:
    clock = FakeClock()
    taken: list[tuple[str, str | None]] = []
    s = Scheduler(TriggerConfig(auto_interval=10, idle_threshold=5),
                  lambda t, lbl: taken.append((t, lbl)), clock=clock)
    s.start()
    try:
        s.activity(files_changed=True)
        s.git_commit()
        s.git_commit()  # a second signal for the same commit is debounced away
        s.build_finished("make all")
        run_until(s, taken, 3, clock)
        assert [t for t, _ in taken][:1] == ["build"]
        assert sorted(t for t, _ in taken[:3]) == ["build", "git", "idle"]
        assert clock.now >= GIT_DEBOUNCE
        n = len(taken)
        run_until(s, taken, n + 1, clock)  # idle does not fire again until activity resumes
        assert all(t != "idle" for t, _ in taken[n:])
    finally:
        s.stop()


def test_disabled_triggers_never_fire() -> None:
    clock = FakeClock()
    taken: list[tuple[str, str | None]] = []
    s = Scheduler(TriggerConfig(auto_interval=1, idle_threshold=1, disable_auto=True,
                                disable_git_commits=True, disable_builds=True,
                                disable_idle=True), lambda t, lbl: taken.append((t, lbl)),
                  clock=clock)
    s.start()
    try:
        s.activity(files_changed=True)
        s.git_commit()
        s.build_finished("make")
        clock.now += 100
        threading.Event().wait(0.2)
    finally:
        s.stop()
    assert taken == []
