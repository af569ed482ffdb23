"""A self-pipe that wakes the watcher thread out of ``poll``: a sync, a stop or a renew asks
it to read the kernel's queue now rather than at the end of its wait."""

from __future__ import annotations

import os


class WakePipe:
    """Non-blocking, close-on-exec; :meth:`wake` never blocks (a full pipe is awake already)."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def wake(self) -> None:
        try:
            os.write(self.w, b"x")
        except OSError:  # pipe full (already awake) or closed
            pass

    def drain(self) -> None:
        try:
            while os.read(self.r, 4096):
                pass
        except OSError:
            pass

    def close(self) -> None:
        for fd in (self.r, self.w):
            if fd >= 0:
                os.close(fd)
        self.r = self.w = -1
