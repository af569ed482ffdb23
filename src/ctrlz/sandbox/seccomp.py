"""Seccomp filters for a sandboxed run: hand-built classic BPF, installed through ctypes.

Landlock decides which files and TCP ports the agent may reach, but it cannot see UDP, raw or
packet sockets, nor io_uring (whose operations bypass the syscall-level rules). This module
closes those gaps with a seccomp filter the sandbox launcher installs on itself just before it
execs the agent; filters survive ``execve`` and are inherited by every child.

Why by hand: libseccomp's Python binding is a Debian package the pyenv interpreters here cannot
import, and a filter of twenty instructions is easier to read (and to test) than a dependency.

Modes (:func:`install`):

``on``     io_uring_setup/enter/register fail with EPERM. Nothing else changes.
``off``    also ``socket()`` of every family but AF_UNIX and AF_NETLINK/NETLINK_ROUTE fails with
           EPERM, and so does ``socketpair()`` of any family but AF_UNIX. No inet, packet,
           vsock, bluetooth or other netlink socket can be made: no TCP, UDP, ping or raw packet.
``proxy``  as ``off``, except that AF_INET/AF_INET6 ``SOCK_STREAM`` sockets with protocol 0 or
           IPPROTO_TCP are allowed (flags SOCK_NONBLOCK and SOCK_CLOEXEC masked out), so that the
           agent can reach the CONNECT proxy; Landlock (ABI >= 4) limits their ``connect`` to the
           proxy's port. UDP (DNS, QUIC), raw and ping sockets fail, and so do SCTP and MPTCP
           stream sockets, which Landlock's TCP rule would not cover. ``sendto``/``sendmsg``/
           ``sendmmsg`` with MSG_FASTOPEN fail too: TCP Fast Open opens a connection without
           ``connect()``, and on Linux 6.18 Landlock's port rule did not stop it (a sendto with
           MSG_FASTOPEN reached a port that ``connect()`` got EACCES for).

Why NETLINK_ROUTE stays allowed: ``getifaddrs()`` and glibc's ``getaddrinfo(AI_ADDRCONFIG)``
read the interface list through it, and a refusal breaks programs that never send a packet.
It carries no traffic off the machine. Its limit: a process with CAP_NET_ADMIN (root under
Landlock alone keeps its capabilities) can change addresses and routes through it; bubblewrap
with ``--unshare-user`` drops that capability. Every other netlink protocol (netfilter, audit,
generic, ...) is refused.

Architecture: the filter first checks ``seccomp_data.arch``. A system call made under another
ABI than the one the filter was built for (i386 ``int 0x80`` from an x86_64 process, x32 calls
with the 0x40000000 bit set) fails with EPERM rather than killing the process: such calls would
otherwise reach syscall numbers the filter does not know, and EPERM is what every other refused
call gets, so a program sees one consistent failure and nothing dies without a trace. Only
x86_64 and aarch64 (little-endian, 64-bit) are known; on any other machine :func:`install`
raises :class:`SeccompError` and installs nothing, because a filter built from the wrong syscall
table would allow what it means to deny.

Tests simulate missing kernel features with :func:`deny_syscalls`, or from the command line::

    python -m ctrlz.sandbox.seccomp --deny landlock:ENOSYS -- CMD ARGS...
    python -m ctrlz.sandbox.seccomp --deny userns -- CMD ARGS...
    python -m ctrlz.sandbox.seccomp --mode off -- CMD ARGS...

A ``--deny`` rule is ``NAME[+FLAG][:ERRNO]`` (ERRNO defaults to EPERM): ``NAME`` is a system
call, or ``landlock`` / ``io_uring`` for the three calls of each; ``+FLAG`` (``CLONE_NEWUSER``
or a number) refuses the call only when that bit is set in its first argument. ``userns`` alone
stands for ``unshare+CLONE_NEWUSER:EPERM clone+CLONE_NEWUSER:EPERM clone3:ENOSYS`` (no user
namespaces, as in Docker's default profile or Ubuntu's AppArmor restriction).
"""

from __future__ import annotations

import ctypes
import errno as errnos
import os
import struct
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ctrlz.errors import CtrlzError

__all__ = ["MODES", "DenyRule", "SeccompError", "build_filter", "deny_syscalls", "install",
           "load", "parse_deny", "syscall_number"]

MODES = ("on", "off", "proxy")


class SeccompError(CtrlzError, OSError):
    """No filter was installed (unknown machine, the kernel refused, a bad rule). Also an
    OSError, so that a launcher which already reports the OSErrors of confinement (Landlock's)
    as "the sandbox could not be made" reports this one the same way."""

    exit_code = 2


# -- kernel constants ------------------------------------------------------------------------

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

# offsets in struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];} (little-endian:
# the low 32 bits of args[i] are at 16 + 8 * i; every argument tested here is an int)
_OFF_NR, _OFF_ARCH = 0, 4


def _off_arg(index: int) -> int:
    return 16 + 8 * index


_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1

_AF_UNIX, _AF_INET, _AF_NETLINK, _AF_INET6 = 1, 2, 16, 10
_NETLINK_ROUTE = 0
_SOCK_STREAM = 1
_SOCK_FLAGS = 0o4000 | 0o2000000  # SOCK_NONBLOCK | SOCK_CLOEXEC on x86_64 and aarch64
_IPPROTO_TCP = 6
_MSG_FASTOPEN = 0x20000000
_X32_SYSCALL_BIT = 0x40000000

_FLAGS = {"CLONE_NEWUSER": 0x10000000, "CLONE_NEWNET": 0x40000000, "CLONE_NEWNS": 0x00020000}


@dataclass(frozen=True)
class _Arch:
    name: str
    audit: int
    seccomp_nr: int
    table: dict[str, int]
    x32: bool  # whether calls with the x32 bit share this audit arch (x86_64 only)


_COMMON = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
           "clone3": 435, "landlock_create_ruleset": 444, "landlock_add_rule": 445,
           "landlock_restrict_self": 446, "openat2": 437, "fchmodat2": 452}

_X86_64 = _Arch("x86_64", 0xC000003E, 317, {
    **_COMMON, "socket": 41, "connect": 42, "sendto": 44, "sendmsg": 46, "bind": 49,
    "listen": 50, "socketpair": 53, "clone": 56, "fork": 57, "vfork": 58, "execve": 59,
    "ptrace": 101, "unshare": 272, "setns": 308, "seccomp": 317, "bpf": 321,
    "sendmmsg": 307, "mount": 165, "chroot": 161,
    # the write-intent calls the observer of refused writes traps (observer.py)
    "open": 2, "openat": 257, "creat": 85, "mkdir": 83, "mkdirat": 258, "mknod": 133,
    "mknodat": 259, "unlink": 87, "unlinkat": 263, "rmdir": 84, "rename": 82,
    "renameat": 264, "renameat2": 316, "link": 86, "linkat": 265, "symlink": 88,
    "symlinkat": 266, "truncate": 76, "chmod": 90, "fchmodat": 268, "chown": 92,
    "lchown": 94, "fchownat": 260, "utimensat": 280}, x32=True)

_AARCH64 = _Arch("aarch64", 0xC00000B7, 277, {
    **_COMMON, "socket": 198, "connect": 203, "sendto": 206, "sendmsg": 211, "bind": 200,
    "listen": 201, "socketpair": 199, "clone": 220, "execve": 221, "ptrace": 117,
    "unshare": 97, "setns": 268, "seccomp": 277, "bpf": 280, "sendmmsg": 269, "mount": 40,
    "chroot": 51,
    "openat": 56, "mkdirat": 34, "mknodat": 33, "unlinkat": 35, "renameat": 38,
    "renameat2": 276, "linkat": 37, "symlinkat": 36, "truncate": 45, "fchmodat": 53,
    "fchownat": 54, "utimensat": 88}, x32=False)

_GROUPS = {"landlock": ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"),
           "io_uring": ("io_uring_setup", "io_uring_enter", "io_uring_register")}


def _arch() -> _Arch:
    """The syscall table of this process, or SeccompError: never guess one."""
    machine = os.uname().machine.lower()  # not platform.machine(): 20 ms of imports
    if struct.calcsize("P") != 8 or sys.byteorder != "little":
        raise SeccompError(f"seccomp: no syscall table for a {struct.calcsize('P') * 8}-bit "
                           f"{sys.byteorder}-endian process on {machine}; refusing to install a "
                           "filter (known: x86_64, aarch64)")
    if machine in ("x86_64", "amd64"):
        return _X86_64
    if machine in ("aarch64", "arm64"):
        return _AARCH64
    raise SeccompError(f"seccomp: no syscall table for machine {machine!r}; refusing to install "
                       "a filter (known: x86_64, aarch64)")


def syscall_number(name: str) -> int:
    """The number of system call ``name`` on this machine (SeccompError if unknown)."""
    table = _arch().table
    if name not in table:
        raise SeccompError(f"seccomp: unknown system call {name!r} (known: "
                           f"{', '.join(sorted(table))})")
    return table[name]


# -- a tiny assembler ------------------------------------------------------------------------

Target = str | None  # a label, or None for the next instruction


class _Program:
    """Instructions with symbolic jump targets, resolved to BPF's relative 8-bit offsets."""

    def __init__(self) -> None:
        self.code: list[tuple[int, Target, Target, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def load(self, offset: int) -> None:
        self.code.append((_LD_W_ABS, None, None, offset))

    def jump(self, op: int, k: int, true: Target, false: Target) -> None:
        self.code.append((op, true, false, k))

    def and_(self, k: int) -> None:
        self.code.append((_AND_K, None, None, k & 0xFFFFFFFF))

    def ret(self, value: int) -> None:
        self.code.append((_RET_K, None, None, value))

    def assemble(self) -> list[tuple[int, int, int, int]]:
        out = []
        for index, (op, true, false, k) in enumerate(self.code):
            jt, jf = (self._offset(index, t) for t in (true, false))
            out.append((op, jt, jf, k))
        return out

    def _offset(self, index: int, target: Target) -> int:
        if target is None:
            return 0
        distance = self.labels[target] - index - 1
        if not 0 <= distance <= 255:
            raise SeccompError(f"seccomp: filter jump of {distance} does not fit BPF")
        return distance


def _errno(value: int) -> int:
    return _RET_ERRNO | (value & 0xFFFF)


def _prologue(program: _Program, arch: _Arch) -> None:
    """Refuse calls made under another ABI (EPERM, see the module doc), then load the nr."""
    program.load(_OFF_ARCH)
    program.jump(_JEQ_K, arch.audit, None, "foreign")
    program.load(_OFF_NR)
    if arch.x32:
        program.jump(_JGE_K, _X32_SYSCALL_BIT, "foreign", None)


def _mode_program(mode: str, arch: _Arch) -> _Program:
    if mode not in MODES:
        raise SeccompError(f"seccomp: unknown network mode {mode!r} (use one of "
                           f"{', '.join(MODES)})")
    t = arch.table
    p = _Program()
    _prologue(p, arch)
    for name in _GROUPS["io_uring"]:
        p.jump(_JEQ_K, t[name], "eperm", None)
    if mode != "on":
        p.jump(_JEQ_K, t["socket"], "socket", None)
        p.jump(_JEQ_K, t["socketpair"], "socketpair", None)
    if mode == "proxy":  # TCP Fast Open connects without connect(), past Landlock's rule
        p.jump(_JEQ_K, t["sendto"], "flags3", None)
        p.jump(_JEQ_K, t["sendmmsg"], "flags3", None)
        p.jump(_JEQ_K, t["sendmsg"], "flags2", None)
    p.ret(_RET_ALLOW)
    if mode == "proxy":
        p.label("flags3")
        p.load(_off_arg(3))
        p.jump(_JSET_K, _MSG_FASTOPEN, "eperm", "allow")
        p.label("flags2")
        p.load(_off_arg(2))
        p.jump(_JSET_K, _MSG_FASTOPEN, "eperm", "allow")
    if mode != "on":
        p.label("socket")
        p.load(_off_arg(0))  # domain
        p.jump(_JEQ_K, _AF_UNIX, "allow", None)
        p.jump(_JEQ_K, _AF_NETLINK, "netlink", None)
        if mode == "proxy":
            p.jump(_JEQ_K, _AF_INET, "inet", None)
            p.jump(_JEQ_K, _AF_INET6, "inet", None)
        p.ret(_errno(errnos.EPERM))
        p.label("netlink")
        p.load(_off_arg(2))  # protocol
        p.jump(_JEQ_K, _NETLINK_ROUTE, "allow", "eperm")
        if mode == "proxy":
            p.label("inet")
            p.load(_off_arg(1))  # type
            p.and_(~_SOCK_FLAGS)
            p.jump(_JEQ_K, _SOCK_STREAM, None, "eperm")
            p.load(_off_arg(2))  # protocol: 0 or TCP, not SCTP or MPTCP
            p.jump(_JEQ_K, 0, "allow", None)
            p.jump(_JEQ_K, _IPPROTO_TCP, "allow", "eperm")
        p.label("socketpair")
        p.load(_off_arg(0))
        p.jump(_JEQ_K, _AF_UNIX, "allow", "eperm")
        p.label("allow")
        p.ret(_RET_ALLOW)
    p.label("eperm")
    p.ret(_errno(errnos.EPERM))
    p.label("foreign")
    p.ret(_errno(errnos.EPERM))
    return p


@dataclass(frozen=True)
class DenyRule:
    """Refuse system call ``name`` with ``errno``; only when ``flag`` is set in its first
    argument if ``flag`` is not 0."""

    name: str
    errno: int
    flag: int = 0


def parse_deny(spec: str) -> list[DenyRule]:
    """The rules of one ``--deny`` spec, ``NAME[+FLAG][:ERRNO]`` or ``userns`` (module doc)."""
    if spec == "userns":
        return [DenyRule("unshare", errnos.EPERM, _FLAGS["CLONE_NEWUSER"]),
                DenyRule("clone", errnos.EPERM, _FLAGS["CLONE_NEWUSER"]),
                DenyRule("clone3", errnos.ENOSYS)]
    head, _, errname = spec.partition(":")
    name, _, flagname = head.partition("+")
    code = errnos.EPERM
    if errname:
        code = int(errname) if errname.isdigit() else getattr(errnos, errname.upper(), -1)
        if not isinstance(code, int) or code <= 0:
            raise SeccompError(f"seccomp: unknown errno {errname!r} in --deny {spec!r}")
    flag = 0
    if flagname:
        try:
            flag = _FLAGS[flagname] if flagname in _FLAGS else int(flagname, 0)
        except ValueError:
            raise SeccompError(f"seccomp: unknown flag {flagname!r} in --deny {spec!r} (use a "
                               f"number or one of {', '.join(_FLAGS)})") from None
    names = _GROUPS.get(name, (name,))
    for each in names:
        syscall_number(each)
    return [DenyRule(each, code, flag) for each in names]


def _deny_program(rules: Sequence[DenyRule], arch: _Arch) -> _Program:
    p = _Program()
    _prologue(p, arch)
    for index, rule in enumerate(rules):
        nxt = f"rule{index + 1}"
        p.label(f"rule{index}")
        p.load(_OFF_NR)
        p.jump(_JEQ_K, arch.table[rule.name], None, nxt)
        if rule.flag:
            p.load(_off_arg(0))
            p.jump(_JSET_K, rule.flag, None, nxt)
        p.ret(_errno(rule.errno))
    p.label(f"rule{len(rules)}")
    p.ret(_RET_ALLOW)
    p.label("foreign")
    p.ret(_errno(errnos.EPERM))
    return p


def build_filter(mode: str | None = None, deny: Sequence[DenyRule] = ()) -> bytes:
    """The filter as the bytes of a ``struct sock_filter`` array (for inspection and tests):
    ``mode``'s filter, or ``deny``'s when ``mode`` is None."""
    arch = _arch()
    program = _mode_program(mode, arch) if mode is not None else _deny_program(deny, arch)
    return b"".join(struct.pack("=HBBI", *insn) for insn in program.assemble())


# -- installing ------------------------------------------------------------------------------


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load(code: bytes) -> None:
    """Set no_new_privs (seccomp requires it of an unprivileged caller, and it keeps a setuid
    program from shedding the filter) and install ``code`` on every thread of the process."""
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0),
                  ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise SeccompError(f"seccomp: prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(err)}")
    # the seccomp syscall with TSYNC filters every thread (prctl only the calling one)
    result = libc.syscall(ctypes.c_long(_arch().seccomp_nr),
                          ctypes.c_ulong(_SECCOMP_SET_MODE_FILTER),
                          ctypes.c_ulong(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog))
    if result == 0:
        return
    err = ctypes.get_errno()
    if err == errnos.ENOSYS:  # a kernel older than 3.17: the prctl form, this thread only
        if libc.prctl(_PR_SET_SECCOMP, ctypes.c_ulong(_SECCOMP_MODE_FILTER), ctypes.byref(prog),
                      ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0:
            return
        err = ctypes.get_errno()
    raise SeccompError(f"seccomp: the kernel refused the filter: {os.strerror(err)} "
                       "(is CONFIG_SECCOMP_FILTER set?)")


def install(mode: str) -> None:
    """Filter this process and everything it execs for network mode ``mode`` (module doc).
    Irreversible; raises SeccompError, with nothing installed, on an unknown mode or machine."""
    load(build_filter(mode))


def deny_syscalls(names: Iterable[str], errno: int) -> None:
    """Make each system call in ``names`` fail with ``errno`` in this process and its children
    (a test's stand-in for a kernel without the feature). A name may be a group (``landlock``,
    ``io_uring``) and may carry ``+FLAG`` as in ``--deny``."""
    rules: list[DenyRule] = []
    for name in names:
        rules += [DenyRule(r.name, errno, r.flag) for r in parse_deny(name)]
    load(build_filter(None, rules))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ctrlz.sandbox.seccomp [--mode M] [--deny SPEC]... -- CMD ARGS...``: install
    the filters, then exec CMD. Exit 2 with one line when no filter can be installed, 127 when
    CMD is not found."""
    args = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: python -m ctrlz.sandbox.seccomp [--mode on|off|proxy] "
             "[--deny NAME[+FLAG][:ERRNO]|userns]... -- CMD [ARGS...]")
    mode: str | None = None
    rules: list[DenyRule] = []
    try:
        while args and args[0] != "--":
            option = args.pop(0)
            if option not in ("--mode", "--deny") or not args:
                print(usage, file=sys.stderr)
                return 2
            value = args.pop(0)
            if option == "--mode":
                mode = value
            else:
                rules += parse_deny(value)
        if not args or len(args) < 2:
            print(usage, file=sys.stderr)
            return 2
        command = args[1:]
        if mode is not None:
            install(mode)
        if rules:
            load(build_filter(None, rules))
    except SeccompError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"seccomp: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
