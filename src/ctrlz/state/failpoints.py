"""Named crash points for crash-safety tests.

Tests run a real subprocess that arms a point and then calls ctrlz; when execution reaches the
point the process kills itself with SIGKILL, exactly as an OOM killer or a power cut would stop
it. Unarmed points cost one set lookup.
"""

from __future__ import annotations

import os
import signal

_armed: set[str] = set()


def arm(name: str) -> None:
    _armed.add(name)


def disarm_all() -> None:
    _armed.clear()


def hit(name: str) -> None:
    if name in _armed:
        os.kill(os.getpid(), signal.SIGKILL)
