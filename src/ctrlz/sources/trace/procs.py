"""Process starts without strace: what ``ctrlz run`` records where exec tracing is off (macOS,
Linux without strace or ptrace, ``CTRLZ_PLATFORM=portable``).

strace sees every exec as it happens; nothing portable does. What is left is looking:
``psutil`` (an optional dependency, the ``procs`` extra) lists the command's descendants, and a
thread looks every :data:`INTERVAL` seconds. So a process that starts and ends between two
looks is not recorded, an exec that keeps its pid shows as one process, and only the command's
own exit status is known (the others are not our children). It is a record of what ran, not a
complete one; the session says exec tracing is off either way. Without psutil, only the command
itself is recorded.
"""

from __future__ import annotations

import os
import posixpath
import threading
import time
from collections.abc import Sequence
from typing import Any

from ...types import signal_name
from .events import ExecCallback, ExecEvent

#: seconds between two looks at the process tree
INTERVAL = 0.05


def psutil_module() -> Any:
    """``psutil``, or None where it is not installed (then only the command is recorded)."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil


class ProcessSampler:
    """The command ``pid`` (started with ``argv`` in ``cwd``) and what psutil sees start under
    it; :meth:`stop` returns them all, closed, in start order."""

    def __init__(self, pid: int, argv: Sequence[str], cwd: str, *,
                 on_exec: ExecCallback | None = None, on_exit: ExecCallback | None = None,
                 interval: float = INTERVAL) -> None:
        self.pid = pid
        self.interval = interval
        self._on_exec = on_exec
        self._on_exit = on_exit
        self._psutil = psutil_module()
        root = _event(time.time(), pid, os.getpid(), list(argv), cwd)
        self._running: dict[tuple[int, float], ExecEvent] = {}  # (pid, start time) -> event
        self._done: list[ExecEvent] = []
        self._root = root
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._call(on_exec, root)

    @property
    def sampling(self) -> bool:
        """Whether processes under the command are looked for (psutil is installed)."""
        return self._psutil is not None

    def start(self) -> None:
        if self._psutil is None:
            return
        self._thread = threading.Thread(target=self._run, name="ctrlz-procs", daemon=True)
        self._thread.start()

    def stop(self, returncode: int) -> list[ExecEvent]:
        """Stop looking; the command ended with ``returncode`` (negative: that signal)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        now = time.time()
        for event in self._running.values():  # still running, or gone since the last look
            self._end(event.ended(now))
        self._running.clear()
        if returncode < 0:
            self._end(self._root.ended(now, None, signal_name(-returncode)))
        else:
            self._end(self._root.ended(now, returncode))
        return sorted(self._done, key=lambda e: (e.timestamp, e.pid))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._look()
            self._stop.wait(self.interval)

    def _look(self) -> None:
        psutil = self._psutil
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return  # the command has ended (or is a zombie waiting for us)
        seen: set[tuple[int, float]] = set()
        for proc in children:
            try:
                with proc.oneshot():
                    key = (proc.pid, proc.create_time())
                    seen.add(key)
                    if key in self._running:
                        continue
                    event = _event(key[1], proc.pid, proc.ppid(), proc.cmdline(),
                                   _cwd(proc, psutil))
            except psutil.Error:
                continue  # gone, a zombie or not ours to read: not recorded
            self._running[key] = event
            self._call(self._on_exec, event)
        now = time.time()
        for key in [k for k in self._running if k not in seen]:
            self._end(self._running.pop(key).ended(now))

    def _end(self, event: ExecEvent) -> None:
        self._done.append(event)
        self._call(self._on_exit, event)

    @staticmethod
    def _call(fn: ExecCallback | None, event: ExecEvent) -> None:
        if fn is not None:
            fn(event)


def _event(ts: float, pid: int, ppid: int, argv: list[str], cwd: str | None) -> ExecEvent:
    name = argv[0] if argv else "?"
    return ExecEvent(timestamp=ts, pid=pid, ppid=ppid, command=posixpath.basename(name) or name,
                     args=argv[1:], argv=argv, cwd=cwd)


def _cwd(proc: Any, psutil: Any) -> str | None:
    try:
        return str(proc.cwd())
    except psutil.Error:
        return None
