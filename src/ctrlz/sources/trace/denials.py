"""Writes a sandbox refused, read from the same strace output as the exec trace.

Why here: under ``ctrlz run --sandbox`` the agent only sees an errno when a write outside the
workspace is refused (Landlock answers ``EACCES``, bubblewrap's read-only mounts ``EROFS``);
nothing else tells the user what was stopped. The tracer already stops on the syscalls it
traces, so adding the write-intent ones (:data:`WRITE_SYSCALLS`) and keeping their failures
costs one more line per call and no second mechanism (``../shared/reference/sandbox.md`` §3.4).

Why not strace's ``-Z`` (failed calls only): it is global, so it would also drop every
successful ``execve`` and ``clone``, and with them the exec trace. The parser drops the
successes instead (:func:`denial`), and everything that is no refusal: ``ENOENT`` and the other
errors, read-only opens (strace cannot filter open flags), paths inside the writable set.

Pure, like :mod:`.parser`: no I/O, one syscall line at a time, so it is tested with recorded
lines as well as with real strace runs under a real sandbox.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ...paths import within
from ...sandbox.calls import PATH_ARG as _PATH_ARG
from ...types import text_path
from .cstrings import unescape_c_string

#: The write-intent syscalls added to the trace under ``--sandbox``. ``?``: strace skips names
#: this architecture (arm64 has no ``open`` or ``mkdir``) or this strace build does not know.
WRITE_SYSCALLS = ("?open,openat,?openat2,?creat,?mkdir,mkdirat,?mknod,?mknodat,?unlink,"
                  "unlinkat,?rmdir,?rename,?renameat,?renameat2,?link,linkat,?symlink,"
                  "symlinkat,?truncate,?chmod,fchmodat,?fchmodat2,?chown,?lchown,fchownat,"
                  "utimensat")
_NAMES = frozenset(n.lstrip("?") for n in WRITE_SYSCALLS.split(","))
#: The errnos a sandbox answers with; EXDEV is left out: Landlock and a read-only mount give
#: it for a rename across the boundary, and ``mv`` then copies, whose open is refused again.
REFUSALS = frozenset({"EACCES", "EPERM", "EROFS"})
_OPEN_WRITES = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_TMPFILE")


@dataclass(frozen=True)
class Denial:
    """One refused write: when (epoch seconds), which process and program, the syscall, the
    absolute path (when it could be resolved), the errno's name, and ``kind`` ``fs`` (the
    network's refusals, from the proxy, are ``net`` rows of the same table)."""

    timestamp: float
    pid: int
    exe: str | None
    syscall: str
    path: str
    errno: str
    kind: str = "fs"

    def to_json(self) -> dict[str, Any]:
        """The session DB's row: the path as text (bytes that are not UTF-8 as ``\\xNN``,
        as file events store them; SQLite cannot hold the surrogates they decode to)."""
        return {"timestamp": datetime.fromtimestamp(self.timestamp, UTC).isoformat(
                    timespec="microseconds"),
                "pid": self.pid, "exe": None if self.exe is None else stored(self.exe),
                "syscall": self.syscall, "path": stored(self.path), "errno": self.errno,
                "kind": self.kind}


def stored(text: str) -> str:
    """Text that SQLite and JSON take: a name's bytes that are not UTF-8 (decoded to
    surrogates by :func:`.cstrings.unescape_c_string`) become ``\\xNN``."""
    return text_path(os.fsencode(text))


def is_write_syscall(name: str) -> bool:
    return name in _NAMES


def split_args(args: str) -> list[str]:
    """strace's argument text split at its top-level commas: quotes (with escapes), ``<…>``
    fd paths (``-y``; strace escapes a ``>`` inside as ``\\76``), and ``{}``/``[]``/``()``
    nesting keep their commas."""
    out: list[str] = []
    depth = 0
    start = i = 0
    n = len(args)
    while i < n:
        c = args[i]
        if c == '"':
            i += 1
            while i < n and args[i] != '"':
                i += 2 if args[i] == "\\" else 1
        elif c == "<" and i > 0 and (args[i - 1].isdigit() or args[i - 1] == "D"):
            close = args.find(">", i)  # after an fd number or AT_FDCWD
            i = n if close < 0 else close
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(args[start:i].strip())
            start = i + 1
        i += 1
    tail = args[start:].strip()
    if tail:
        out.append(tail)
    return out


def _string(arg: str) -> str | None:
    """The value of a C string argument, ``None`` for ``NULL`` or anything else."""
    if len(arg) >= 2 and arg[0] == '"':
        end = arg.rfind('"')
        if end > 0:
            return unescape_c_string(arg[1:end])
    return None


def _fd_path(arg: str) -> str | None:
    """The path ``-y`` printed for an fd argument (``3</dir>``, ``AT_FDCWD</cwd>``)."""
    lt = arg.find("<")
    if lt <= 0 or not arg.endswith(">"):
        return None
    return unescape_c_string(arg[lt + 1:-1])


def _opens_for_writing(name: str, args: list[str]) -> bool:
    if name == "creat":
        return True
    index = {"open": 1, "openat": 2, "openat2": 2}[name]
    flags = args[index] if len(args) > index else ""
    return any(flag in flags for flag in _OPEN_WRITES)


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(within(path, r) for r in roots)


def denial(pid: int, ts: float, name: str, args_text: str, result: str, *,
           cwd: str | None, exe: str | None,
           writable: Sequence[str] = ()) -> Denial | None:
    """The refusal in one finished syscall line, or None when it is none.

    ``args_text`` is what stands between the call's parentheses, ``result`` what follows
    ``" = "`` (``-1 EACCES (Permission denied)``), ``cwd`` the process's working directory as
    the parser tracks it (for the calls without a directory fd), ``writable`` the roots whose
    refusals are not the sandbox's (a file mode inside the workspace, say).
    """
    if name not in _NAMES:
        return None
    parts = result.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("-") or parts[1] not in REFUSALS:
        return None
    args = split_args(args_text)
    if name in ("open", "openat", "openat2", "creat") and not _opens_for_writing(name, args):
        return None
    path_at, dir_at = _PATH_ARG[name]
    path = _string(args[path_at]) if len(args) > path_at else None
    base = _fd_path(args[dir_at]) if dir_at is not None and len(args) > dir_at else cwd
    if path is None:  # utimensat(fd, NULL, ...): the fd's own file
        if base is None or dir_at is None:
            return None
        path = base
    elif not posixpath.isabs(path) and base is not None:
        path = posixpath.join(base, path)
    if posixpath.isabs(path):
        path = posixpath.normpath(path)
        if _inside(path, writable):
            return None
    return Denial(ts, pid, exe, name, path, parts[1])
