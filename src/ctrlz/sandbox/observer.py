"""The observer of refused writes: which calls the native launcher traps, and what it found.

Why not strace: to record a refusal, the tracer had to stop on every ``openat`` (strace cannot
filter on flags), which made a sandboxed build 1.3-1.5x and a ``git status`` loop 1.7-2x as
slow as a plain run. Instead the native launcher (``observe.c``) forks: the child confines
itself, adds a seccomp filter whose answer is ``SECCOMP_RET_USER_NOTIF`` only for calls that
intend to write (:func:`notify_filter`: ``open``/``openat`` with a write flag tested in BPF,
``creat``, ``mkdir*``, ``unlink*``, ``rename*``, ``link*``, ``symlink*``, ``truncate``, ...),
hands the listener to the parent and execs the agent. The parent, outside the sandbox, answers
each notification ``SECCOMP_USER_NOTIF_FLAG_CONTINUE`` (the kernel then runs the call and
Landlock or bwrap decides, as without the observer) after reading its path (``/proc/PID/mem``,
relative to ``/proc/PID/cwd`` or the dirfd's ``/proc/PID/fd/N``). Reads never stop.

What it can know: the call and its path *before* the kernel answers, not the answer. So it
records a write whose target lies outside the writable set (real paths: a symlink out of the
workspace counts as out) and would pass the checks the kernel makes before the sandbox's: the
parent directory exists for a create, the target for an open without ``O_CREAT``, a removal or
a change, the source for a rename or a link, and a name to create is not there yet. Such a
call is the sandbox's to refuse, with the errno each mechanism answers (:data:`ERRNO`; a
rename out of a Landlock sandbox gets EACCES too, checked by the tests). Recorded in ``log``
as NUL-separated fields (time, pid, name, syscall, path), read by :func:`read`.

bwrap: the filter goes on inside the sandbox (a second ``ctrlz-sandbox`` as bwrap's command,
so that bwrap's own mounts are not observed) and its listener comes back to the observer
outside through an inherited socket.
"""

from __future__ import annotations

import os

from . import seccomp
from .calls import PATH_ARG

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .policy import SandboxPolicy

__all__ = ["ERRNO", "items", "notify_filter", "read"]

#: The errno the sandbox answers a write outside, by mechanism.
ERRNO = {"landlock": "EACCES", "bwrap": "EROFS"}

#: How the observer checks a call (observe.c): ``open`` by its flags, ``make`` needs the
#: parent and not the name, ``remove``/``change`` the target, ``move``/``link`` the source.
KIND = {"open": "open", "openat": "open", "openat2": "open", "creat": "open",
        "mkdir": "make", "mkdirat": "make", "mknod": "make", "mknodat": "make",
        "symlink": "make", "symlinkat": "make", "link": "link", "linkat": "link",
        "rename": "move", "renameat": "move", "renameat2": "move",
        "unlink": "remove", "unlinkat": "remove", "rmdir": "remove",
        "truncate": "change", "chmod": "change", "fchmodat": "change", "fchmodat2": "change",
        "chown": "change", "lchown": "change", "fchownat": "change", "utimensat": "change"}
#: Calls Landlock lets through outside the writable set (docs/sandbox.md): only bwrap's
#: read-only mounts refuse them, so only then are they observed.
BWRAP_ONLY = frozenset({"chmod", "fchmodat", "fchmodat2", "chown", "lchown", "fchownat",
                        "utimensat"})
#: The flags argument of each open (-1: creat, whose flags are fixed; -2: openat2's
#: ``struct open_how``, whose first member the observer reads).
FLAGS_ARG = {"open": 1, "openat": 2, "openat2": -2, "creat": -1}
#: The flags argument the observer reads besides the opens': renameat2's, whose
#: RENAME_NOREPLACE onto an existing name fails (EEXIST) before any sandbox is asked.
CALL_FLAGS = {**FLAGS_ARG, "renameat2": 4}
#: The source (path argument, dirfd argument) of a rename or a link.
SOURCE_ARG = {"rename": (0, -1), "link": (0, -1), "renameat": (1, 0), "renameat2": (1, 0),
              "linkat": (1, 0)}
#: open flags that ask for writing (x86_64 and aarch64 alike): O_WRONLY, O_RDWR, O_CREAT,
#: O_TRUNC, and __O_TMPFILE's own bit
WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o20000000
_RET_USER_NOTIF = 0x7FC00000
MAX_RECORDS = 10_000


def calls(mechanism: str) -> list[tuple[str, int]]:
    """(name, number) of each call observed under ``mechanism`` on this machine."""
    table = seccomp._arch().table
    return [(name, table[name]) for name in KIND
            if name in table and (mechanism == "bwrap" or name not in BWRAP_ONLY)]


def notify_filter(mechanism: str) -> bytes:
    """The filter that hands write-intent calls to the observer and lets everything else
    through (the other filters and Landlock still apply to all of it)."""
    arch = seccomp._arch()
    p = seccomp._Program()
    seccomp._prologue(p, arch)
    for name, number in calls(mechanism):
        flags = FLAGS_ARG.get(name, -1)
        p.jump(seccomp._JEQ_K, number, f"flags{flags}" if flags >= 0 else "notify", None)
    p.ret(seccomp._RET_ALLOW)
    for index in sorted({v for v in FLAGS_ARG.values() if v >= 0}):
        p.label(f"flags{index}")
        p.load(seccomp._off_arg(index))
        p.jump(seccomp._JSET_K, WRITE_FLAGS, "notify", "allow")
    p.label("notify")
    p.ret(_RET_USER_NOTIF)
    p.label("allow")
    p.ret(seccomp._RET_ALLOW)
    p.label("foreign")  # the network filter refuses those; nothing to observe
    p.ret(seccomp._RET_ALLOW)
    import struct

    return b"".join(struct.pack("=HBBI", *insn) for insn in p.assemble())


def writable(policy: SandboxPolicy, mechanism: str) -> list[str]:
    """The real paths where a write is the sandbox's to allow: not recorded."""
    paths = list(policy.writable)
    paths += ["/dev"] if mechanism == "bwrap" else list(policy.devices)  # bwrap's own /dev
    out = []
    for path in paths:
        try:
            out.append(os.path.realpath(path, strict=True))
        except OSError:
            continue
    return list(dict.fromkeys(out))


def items(policy: SandboxPolicy, mechanism: str, log: str) -> list[tuple[str, str]]:
    """The spec's items for the observer (:mod:`.spec`): its log, the cap on its records,
    the filter, each call (``NR:NAME:KIND:PATH:DIR:SRCPATH:SRCDIR:FLAGS``, arguments
    0-based, -1 for none) and the writable set."""
    out = [("log", log), ("max", str(MAX_RECORDS)), ("notify", notify_filter(mechanism).hex())]
    for name, number in calls(mechanism):
        path, directory = PATH_ARG[name]
        source, source_dir = SOURCE_ARG.get(name, (-1, -1))
        out.append(("call", f"{number}:{name}:{KIND[name]}:{path}:"
                            f"{-1 if directory is None else directory}:{source}:{source_dir}:"
                            f"{CALL_FLAGS.get(name, -1)}"))
    out += [("writable", path) for path in writable(policy, mechanism)]
    return out


def read(log: str) -> tuple[list[tuple[float, int, str | None, str, str]], int]:
    """The refused writes the observer wrote to ``log`` (time, pid, process name, call,
    path), and how many more it only counted (past :data:`MAX_RECORDS`)."""
    try:
        with open(log, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return [], 0
    fields = data.split(b"\0")
    found, dropped = [], 0
    for i in range(0, len(fields) - 4, 5):
        when, pid, name, call, path = fields[i:i + 5]
        if not call:  # the closing count
            dropped = int(path or 0)
            continue
        found.append((float(when), int(pid), os.fsdecode(name) or None, call.decode("ascii"),
                      os.fsdecode(path)))
    return found, dropped
