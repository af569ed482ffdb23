"""Landlock through ctypes: the kernel's own unprivileged filesystem (and TCP) allow-list.

Why stdlib ctypes and not the PyPI ``landlock`` package: that package knows filesystem rights
only (no ABI 4 TCP ports, no ABI 6 scopes), and a sandbox must not add a dependency that
might be missing. Three syscalls do it all (their numbers are the same on every architecture
of the generic table: 444-446).

Landlock is an allow-list that only grows: a rule on a directory grants its rights to
everything beneath it, and nothing can take a right back for a subdirectory. So a path that
must stay unreadable inside a readable tree is made by *complement* (:func:`path_rules`): the
directories on the way to it get only ``READ_DIR`` (their names stay listable, which Landlock
cannot avoid), and each of their other entries gets its rights one by one.

ABI 2 is the floor: with ABI 1 a rename or link across directories is always refused, which
breaks git and npm. Rights the running kernel does not know are left out (an older kernel
lets them through; :func:`handled_fs` says which are enforced).
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable

from .. import platform
from ..paths import within

__all__ = [
    "FS", "MIN_ABI", "READ", "LandlockError", "Ruleset", "abi", "handled_fs", "path_rules",
    "ruleset_attr", "write_rights",
]

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446
_VERSION = 1 << 0  # LANDLOCK_CREATE_RULESET_VERSION
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

#: Filesystem rights by name, as the kernel's uapi numbers them (the ABI that added each).
FS = {
    "execute": 1 << 0, "write_file": 1 << 1, "read_file": 1 << 2, "read_dir": 1 << 3,
    "remove_dir": 1 << 4, "remove_file": 1 << 5, "make_char": 1 << 6, "make_dir": 1 << 7,
    "make_reg": 1 << 8, "make_sock": 1 << 9, "make_fifo": 1 << 10, "make_block": 1 << 11,
    "make_sym": 1 << 12,  # ABI 1 ends here
    "refer": 1 << 13,  # ABI 2
    "truncate": 1 << 14,  # ABI 3
    "ioctl_dev": 1 << 15,  # ABI 5
}
#: Rights a path rule on a file (not a directory) may carry; others make the kernel refuse it.
FILE_RIGHTS = (FS["execute"] | FS["write_file"] | FS["read_file"] | FS["truncate"]
               | FS["ioctl_dev"])
READ = FS["execute"] | FS["read_file"] | FS["read_dir"]
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
MIN_ABI = 2


class LandlockError(OSError):
    """A Landlock call failed (the message names the call and the errno)."""


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the uapi header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPort(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def abi() -> int:
    """The Landlock ABI version this kernel offers, 0 where there is none (no syscall,
    Landlock not among the LSMs, or a seccomp filter answering ENOSYS)."""
    if platform.system() != "linux":  # 444 is another call elsewhere
        return 0
    n = _syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    return int(n) if n > 0 else 0


def handled_fs(version: int) -> int:
    """Every filesystem right ABI ``version`` can enforce."""
    rights = (1 << 13) - 1
    if version >= 2:
        rights |= FS["refer"]
    if version >= 3:
        rights |= FS["truncate"]
    if version >= 5:
        rights |= FS["ioctl_dev"]
    return rights


def write_rights(version: int) -> int:
    """Full access for a writable tree: every right the ABI knows."""
    return handled_fs(version)


def ruleset_attr(version: int, *, net: bool = False, scopes: bool = True,
                 fs: bool = True) -> tuple[int, int, int, int]:
    """``(handled_access_fs, handled_access_net, scoped, size)`` of a ruleset on ABI
    ``version`` (see :class:`Ruleset`): what is enforced, and the struct's size that ABI
    reads. Rights and scopes a kernel is too old for are left out."""
    net_mask = NET_CONNECT_TCP if net and version >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if scopes and version >= 6 else 0
    size = 24 if version >= 6 else 16 if version >= 4 else 8
    return (handled_fs(version) if fs else 0), net_mask, scoped, size


def _fail(call: str) -> LandlockError:
    err = ctypes.get_errno()
    return LandlockError(err, f"landlock {call}: {os.strerror(err)}")


class Ruleset:
    """One Landlock ruleset being built, then applied to this thread (and what it execs).

    ``net``: handle TCP connect (ABI 4), so that only :meth:`allow_connect` ports may be
    reached; ``scopes``: refuse abstract Unix sockets and signals to processes outside the
    sandbox (ABI 6). Both are skipped on a kernel too old for them: :attr:`net_enforced`
    and :attr:`scoped` say what was kept. ``fs=False``: no filesystem rule at all (under
    bwrap, which did the mounts, only the network part is Landlock's).
    """

    def __init__(self, *, version: int | None = None, net: bool = False,
                 scopes: bool = True, fs: bool = True) -> None:
        self.abi = abi() if version is None else version
        if self.abi < MIN_ABI:
            raise LandlockError(0, f"Landlock ABI {self.abi} is below {MIN_ABI}")
        self._create(*ruleset_attr(self.abi, net=net, scopes=scopes, fs=fs))

    @classmethod
    def from_attr(cls, fs: int, net: int, scoped: int, size: int) -> Ruleset:
        """A ruleset from the masks :func:`ruleset_attr` gave (the launcher's spec)."""
        self = cls.__new__(cls)
        self.abi = 6 if size >= 24 else 4 if size >= 16 else MIN_ABI
        self._create(fs, net, scoped, size)
        return self

    def _create(self, fs: int, net: int, scoped: int, size: int) -> None:
        self.fs, self.net_enforced, self.scoped = fs, bool(net), bool(scoped)
        attr = _RulesetAttr(fs, net, scoped)
        fd = _syscall(_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            raise _fail("create_ruleset")
        self.fd = int(fd)

    def allow_path(self, path: str, rights: int) -> bool:
        """Grant ``rights`` on ``path`` and beneath; on a file only its file rights. False
        when the path is gone (it may vanish between the plan and here)."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                rights &= FILE_RIGHTS
            rights &= self.fs
            if not rights:
                return True
            rule = _PathBeneath(rights, fd)
            if _syscall(_ADD_RULE, ctypes.c_int(self.fd), ctypes.c_int(_RULE_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                raise _fail(f"add_rule {path}")
        finally:
            os.close(fd)
        return True

    def allow_connect(self, port: int) -> None:
        """Let TCP connect reach ``port`` on any address (Landlock matches the port only)."""
        if not self.net_enforced:
            return
        rule = _NetPort(NET_CONNECT_TCP, port)
        if _syscall(_ADD_RULE, ctypes.c_int(self.fd), ctypes.c_int(_RULE_NET_PORT),
                    ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
            raise _fail(f"add_rule port {port}")

    def restrict_self(self) -> None:
        """Confine this thread for good (and every process it execs or forks). Sets
        no_new_privs first, which Landlock requires of a process without CAP_SYS_ADMIN and
        which keeps a setuid program from shedding the sandbox."""
        try:
            if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
            if _syscall(_RESTRICT, ctypes.c_int(self.fd), ctypes.c_uint32(0)) < 0:
                raise _fail("restrict_self")
        finally:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _real(path: str) -> str | None:
    try:
        return os.path.realpath(path, strict=True)
    except OSError:
        return None


def _ancestors(path: str) -> Iterable[str]:
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return
        yield parent
        path = parent


def path_rules(version: int, writable: Iterable[str], unreadable: Iterable[str],
               devices: Iterable[str] = ()) -> list[tuple[str, int]]:
    """The path rules of a policy: read (and execute) everywhere but under ``unreadable``;
    every right under ``writable``; ``devices`` get write and device ioctls (a terminal).

    Paths that do not exist are left out (Landlock needs an open file). A writable path
    that *contains* an unreadable one cannot be expressed (its rule would cover it):
    :class:`ValueError` names both, and the caller picks bwrap or refuses.
    """
    hidden = {p for p in map(_real, unreadable) if p is not None}
    chain: set[str] = {a for h in hidden for a in _ancestors(h)}
    full = write_rights(version)
    rules: list[tuple[str, int]] = []
    for path in writable:
        real = _real(path)
        if real is None:
            continue
        inner = sorted(h for h in hidden if within(h, real))
        if inner:
            raise ValueError(f"{path} is writable but holds {inner[0]}, which must stay "
                             "unreadable")
        rules.append((real, full))
    for dev in devices:
        real = _real(dev)
        if real is not None:
            rules.append((real, READ | FS["write_file"] | FS["truncate"] | FS["ioctl_dev"]
                          | (FS["make_reg"] | FS["remove_file"] if os.path.isdir(real)
                             else 0)))
    if "/" not in chain:
        return [("/", READ), *rules]
    for directory in sorted(chain):
        rules.append((directory, FS["read_dir"]))  # listable; beneath it, entry by entry
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            real = _real(entry.path)  # a link's target is what the rule would cover
            if real is None or any(within(h, real) for h in hidden):
                continue
            rules.append((real, READ))
    return rules

