"""Following strace's ``-o`` file while the traced command runs.

Why a regular file rather than a FIFO: strace writes a line at a time, so a file that we tail
sees events promptly, and a file can never block strace (and with it the traced command) if
the reader is slow or has died. A FIFO could.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from .events import ExecEvent
from .parser import StraceParser


class TraceFollower(threading.Thread):
    """Tails strace's output file while the command runs and feeds the parser.

    Reads whatever is new, sleeps ``poll`` seconds at end of file, and after :meth:`stop`
    reads to the end once more, so nothing strace wrote before exiting is lost. Completed
    events accumulate in :attr:`events`. An exception from a callback stops the follower
    and is re-raised by :meth:`stop`.
    """

    def __init__(self, path: str | os.PathLike[str], parser: StraceParser,
                 poll: float = 0.05) -> None:
        super().__init__(name="ctrlz-trace-follower", daemon=True)
        self.path = Path(path)
        self.parser = parser
        self.poll = poll
        self.events: list[ExecEvent] = []
        self._stop_requested = threading.Event()
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._follow()
        except BaseException as exc:  # surfaced by stop()
            self._error = exc

    def _follow(self) -> None:
        tail = b""
        with open(self.path, "rb") as f:
            while True:
                stopping = self._stop_requested.is_set()
                chunk = f.read(1 << 16)
                if not chunk:
                    if stopping:
                        break
                    self._stop_requested.wait(self.poll)
                    continue
                lines = (tail + chunk).split(b"\n")
                tail = lines.pop()
                for raw in lines:
                    self.events += self.parser.feed(raw.decode("utf-8", "surrogateescape"))
        if tail:
            self.events += self.parser.feed(tail.decode("utf-8", "surrogateescape"))

    def stop(self) -> list[ExecEvent]:
        """Drain, close out still-running processes, and return every completed event."""
        self._stop_requested.set()
        self.join()
        if self._error is not None:
            raise self._error
        self.events += self.parser.finish()
        return self.events
