"""Run one command confined by a capability set: nono-py's ``sandboxed_exec`` and ``ExecResult``.

The caller stays unconfined and may call it again with other capabilities. The command runs
in a child that confines itself, then execs it; its stdout and stderr come back as bytes,
its stdin is the caller's.

Why a fresh interpreter as that child (``exec_child.py``), and not ``fork()`` plus Python code
before ``exec``: a forked child of a threaded program may deadlock on a lock another thread
held at the fork (``preexec_fn`` warns of it), and Landlock confines only the thread that asks.
A new single-threaded process has neither problem; it costs one interpreter start (about
20 ms, with ``-I -S``). Everything the child needs (grants, program, argv, env, cwd) travels
as ASCII JSON in its arguments, so no name is mangled by a locale.

The same outcomes as nono-py's: ValueError for an empty command, a negative timeout or a
refused environment variable; RuntimeError for a program or working directory that cannot be
found; exit code 124 on timeout (the child is killed), ``-N`` when killed by signal N, 126 when
the sandbox could not be applied and 127 when the command could not be executed (a line on
stderr says which). The child gets only ``env`` unless ``inherit_env`` is true, and never a
dynamic-loader variable (``LD_*``, ``DYLD_*``, ``LIBPATH``, ``SHLIB_PATH``); every inherited
file descriptor but 0, 1 and 2 is closed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from collections.abc import Sequence

from .capabilities import CapabilitySet

__all__ = ["ExecResult", "sandboxed_exec"]

#: How long to wait for the output pipes after the child ended or was killed: a grandchild
#: that kept them open must not hold the caller forever (nono-py would wait for it).
_DRAIN_SECONDS = 2.0
#: Characters per argument of the child's request (ASCII, so bytes too), under MAX_ARG_STRLEN.
_PIECE = 100_000


class ExecResult:
    """What a sandboxed command did: its output and how it ended."""

    __slots__ = ("_exit_code", "_stderr", "_stdout")

    def __init__(self, stdout: bytes, stderr: bytes, exit_code: int) -> None:
        self._stdout = stdout
        self._stderr = stderr
        self._exit_code = exit_code

    @property
    def stdout(self) -> bytes:
        """Everything the command wrote to its stdout."""
        return self._stdout

    @property
    def stderr(self) -> bytes:
        """Everything the command wrote to its stderr."""
        return self._stderr

    @property
    def exit_code(self) -> int:
        """The exit status; ``-N`` if killed by signal N, 124 on timeout."""
        return self._exit_code

    def __repr__(self) -> str:
        return (f"ExecResult(exit_code={self._exit_code}, stdout_len={len(self._stdout)}, "
                f"stderr_len={len(self._stderr)})")


def _is_loader_variable(key: str) -> bool:
    return key.startswith(("LD_", "DYLD_")) or key in ("LIBPATH", "SHLIB_PATH")


def _check_variable(key: str, value: str) -> None:
    if not key:
        raise ValueError("environment variable name must not be empty")
    if "=" in key:
        raise ValueError(f"environment variable name '{key}' must not contain '='")
    if "\0" in key:
        raise ValueError("environment variable name contains null byte")
    if "\0" in value:
        raise ValueError(f"environment variable value for '{key}' contains null byte")
    if _is_loader_variable(key):
        raise ValueError(f"environment variable '{key}' is not allowed in sandboxed_exec")


def child_environment(env: Sequence[tuple[str, str]] | None,
                      inherit_env: bool) -> dict[str, str]:
    """The child's environment: the parent's if asked, then ``env`` over it, each checked."""
    out: dict[str, str] = {}
    pairs: list[tuple[str, str]] = list(os.environ.items()) if inherit_env else []
    for pair in env or ():
        key, value = pair
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("env must be a list of (str, str) tuples")
        pairs.append((key, value))
    for key, value in pairs:
        _check_variable(key, value)
        out[key] = value
    return out


def resolve_program(program: str) -> str:
    """The file ``program`` names: a path as given (made absolute, so a ``cwd`` does not
    change it), else the first regular file of that name along the caller's ``PATH``."""
    if "/" in program:
        if os.path.exists(program):
            return os.path.abspath(program)
        raise RuntimeError(f"Program not found: {program}")
    for directory in os.environ.get("PATH", "").split(":"):
        candidate = os.path.join(directory, program)
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise RuntimeError(f"Program not found in PATH: {program}")


def _command(command: Sequence[str]) -> list[str]:
    if isinstance(command, (str, bytes)):
        raise TypeError("command must be a list of strings, not a single string")
    args = [os.fspath(a) for a in command]
    if any(not isinstance(a, str) for a in args):
        raise TypeError("command must be a list of strings")
    if not args:
        raise ValueError("command must not be empty")
    if any("\0" in a for a in args):
        raise RuntimeError("Argument contains null byte")
    return args


def _launcher() -> list[str]:
    """The interpreter command that runs ``exec_child``: isolated (no user site, no
    ``PYTHON*`` variables, no cwd on the path) and without ``site``, ctrlz found where this
    process found it."""
    if not sys.executable:
        raise RuntimeError("cannot start the sandbox child: sys.executable is unknown")
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from ctrlz.sandbox.exec_child import main; main(''.join(sys.argv[2:]))")
    # names travel as str: the child must encode them back as this process decoded them,
    # and -I drops PYTHONUTF8, so UTF-8 mode is passed on explicitly
    utf8 = ["-X", "utf8"] if sys.flags.utf8_mode else []
    return [sys.executable, "-I", "-S", *utf8, "-c", code, package_parent]


def _pieces(payload: str) -> list[str]:
    """``payload`` cut into arguments the kernel takes: one argument may hold at most 128 KiB
    (MAX_ARG_STRLEN), and an inherited environment can be larger than that."""
    return [payload[i:i + _PIECE] for i in range(0, len(payload), _PIECE)] or [""]


def _drain(fd: int, chunks: list[bytes]) -> None:
    """Read the pipe ``fd`` to its end into ``chunks``, then close it. The thread owns the
    descriptor: a grandchild that keeps the pipe open keeps only this thread waiting."""
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        pass
    finally:
        os.close(fd)


def sandboxed_exec(caps: CapabilitySet, command: list[str], cwd: str | None = None,
                   timeout_secs: float | None = None, env: list[tuple[str, str]] | None = None,
                   inherit_env: bool = False) -> ExecResult:
    """Run ``command`` in a child confined to ``caps``; wait for it and return its output.

    ``cwd``: the child's working directory (it need not be granted: the child changes to it
    before it is confined). ``timeout_secs``: kill the child after that long and report 124.
    ``env``: the child's whole environment, unless ``inherit_env`` is true, when it overrides
    entries of the caller's.
    """
    if not isinstance(caps, CapabilitySet):
        raise TypeError(f"caps must be a CapabilitySet, not {type(caps).__name__}")
    args = _command(command)
    if timeout_secs is not None and (math.isnan(timeout_secs) or timeout_secs < 0):
        raise ValueError(f"timeout_secs must be non-negative, got {timeout_secs}")
    program = resolve_program(args[0])
    child_env = child_environment(env, inherit_env)
    workdir = None
    if cwd is not None:
        try:
            workdir = os.path.realpath(os.fspath(cwd), strict=True)
        except OSError as e:
            raise RuntimeError(f"Cannot resolve working directory '{cwd}': {e}") from None
    payload = json.dumps({
        "grants": [[c.resolved, c.access.value] for c in caps.fs_capabilities()],
        "net_blocked": caps.is_network_blocked, "program": program, "argv": args,
        "env": child_env, "cwd": workdir,
    })  # ensure_ascii: surrogate-escaped names survive as \udcXX
    out: list[bytes] = []
    err: list[bytes] = []
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        # the launcher gets the caller's environment (its interpreter may need it to start,
        # and -I makes it ignore PYTHON*); the command gets only child_env, from the request
        proc = subprocess.Popen([*_launcher(), *_pieces(payload)], stdin=None, stdout=out_w,
                                stderr=err_w, close_fds=True)
    except OSError as e:
        for fd in (out_r, err_r):
            os.close(fd)
        raise RuntimeError(f"cannot start the sandbox child: {e}") from None
    finally:
        os.close(out_w)
        os.close(err_w)
    readers = [threading.Thread(target=_drain, args=(out_r, out), daemon=True),
               threading.Thread(target=_drain, args=(err_r, err), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        code = proc.wait(timeout=timeout_secs)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = 124
        proc.wait()
    except BaseException:  # KeyboardInterrupt: leave no confined orphan behind
        proc.kill()
        proc.wait()
        raise
    for reader in readers:
        reader.join(_DRAIN_SECONDS)
    return ExecResult(b"".join(list(out)), b"".join(list(err)), code)
