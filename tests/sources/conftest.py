"""What the watcher tests share: a recorder of what a watcher delivers, a wait for a
condition that another thread makes true, and a fixture that starts watchers on a fresh
workspace and stops them all after the test."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeAlias

import pytest

from ctrlz.sources.changes import FileEvent


class Recorder:
    """Collects what the watcher delivers (from its thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[FileEvent] = []
        self.overflows: list[str] = []
        self.git: list[bytes] = []

    def on_events(self, events: list[FileEvent]) -> None:
        with self.lock:
            self.events.extend(events)

    def on_overflow(self, reason: str) -> None:
        with self.lock:
            self.overflows.append(reason)

    def on_git_change(self, rel: bytes) -> None:
        with self.lock:
            self.git.append(rel)

    def actions(self) -> dict[bytes, list[str]]:
        out: dict[bytes, list[str]] = {}
        with self.lock:
            for e in self.events:
                out.setdefault(e.path, []).append(e.action)
        return out

    def last(self, path: bytes) -> FileEvent:
        with self.lock:
            return [e for e in self.events if e.path == path][-1]


def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def never_excluded(rel: bytes, is_dir: bool) -> bool:
    return False


#: ``watching(build, setup)``: a fresh ``ws`` folder (``setup`` fills it first), a
#: :class:`Recorder`, and the watcher ``build(root, recorder)`` makes, started
Watching: TypeAlias = Callable[..., tuple[Any, Recorder, Path]]


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[Watching]:
    watchers: list[Any] = []

    def make(build: Callable[[Path, Recorder], Any],
             setup: Callable[[Path], None] | None = None) -> tuple[Any, Recorder, Path]:
        root = tmp_path / "ws"
        root.mkdir(exist_ok=True)
        if setup:
            setup(root)
        rec = Recorder()
        w = build(root, rec)
        w.start()
        watchers.append(w)
        return w, rec, root

    yield make
    for w in watchers:
        w.stop()
