"""The child side of ``sandboxed_exec``: change directory, confine this process, exec.

Run by ``execute.sandboxed_exec`` in a fresh interpreter (``python -I -S -c ...``), with an
ASCII JSON request cut into arguments of at most 100,000 characters: the grants (resolved path,
access word), whether the network is blocked, the program, its argv and environment, and the
working directory. It imports only the
sandbox's own modules, so the interpreter is small and single-threaded when it confines itself.

Exit codes when the command never starts, as nono-py's child reports them: 126 when the
directory cannot be entered or the sandbox cannot be applied, 127 when the exec fails (a line
on stderr says which). Otherwise the process *is* the command from the exec on, so its exit
code and signals are the command's own.
"""

from __future__ import annotations

import os
import sys

from ctrlz import jsontext as json

__all__ = ["main"]


def _die(code: int, message: str) -> None:
    try:
        os.write(2, f"ctrlz: {message}\n".encode(errors="surrogateescape"))
    finally:
        os._exit(code)


def main(payload: str) -> None:
    """Do what ``payload`` says; never returns."""
    try:
        spec = json.loads(payload)
        from .capabilities import AccessMode
        grants = [(path, AccessMode(word)) for path, word in spec["grants"]]
        program, argv, env = spec["program"], spec["argv"], spec["env"]
        cwd = spec["cwd"]
    except Exception as e:  # a broken payload is a bug in the parent: say so, start nothing
        _die(126, f"sandbox apply failed: bad request from the parent: {e}")
        return
    if cwd is not None:
        try:
            os.chdir(cwd)
        except OSError as e:
            _die(126, f"failed to chdir to {cwd}: {e.strerror}")
    try:
        from .enforce import restrict
        restrict(grants, bool(spec["net_blocked"]))
    except Exception as e:
        _die(126, f"sandbox apply failed: {e}")
    sys.stdout.flush()
    try:
        os.execve(program, argv, env)
    except OSError as e:
        _die(127, f"exec failed: {e.strerror} ({program})")


if __name__ == "__main__":  # pragma: no cover - run by execute.py with -c
    main("".join(sys.argv[1:]))
