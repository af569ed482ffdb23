"""How a short ctrlz process ends (the click-free commands of :mod:`ctrlz.cli`, and the hook
runner): :func:`leave`. A module of its own, importing nothing of ctrlz, so that both faces
reach it without importing each other."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

__all__ = ["leave"]


def leave(code: int, program: bool = True, *, closed_pipe: int = 1) -> NoReturn:
    """End a short command without the interpreter's teardown, when this process is the
    program (``program``; an in-process caller such as a test gets ``SystemExit``).

    By then the command has closed its workspace (the catalog's connections), and whatever it
    wrote to the store or the workspace the engine made durable itself, so what is left is
    freeing every module's objects one by one: ~5 ms of a ~45 ms rollback served by the
    workspace daemon. So: flush what was printed, then ``os._exit``. A flush that fails (the
    reader closed the pipe) turns a success into ``closed_pipe``: 1 for a command, as
    ``BrokenPipeError`` is elsewhere, and 0 for the hook runner, which never fails an agent.
    Only the click-free doors and the hook runner end this way: they are the commands whose
    whole run is known here (no server, no child process left to wait for)."""
    if not program:
        sys.exit(code)
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe, or a stream someone closed
            code = code or closed_pipe
    os._exit(code)
