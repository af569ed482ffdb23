"""The bubblewrap command line of a :class:`~.policy.SandboxPolicy`.

Why bwrap at all, beside Landlock: it works where Landlock is missing (kernels before 5.13,
the LSM turned off), and its read-only mounts also stop what Landlock lets through (chmod,
chown, utimes and xattrs outside the writable set); tmpfs hides secrets and ctrlz's store
entirely (not even their names), and a network namespace leaves only loopback.

Always ``--unshare-user``: run by real root without it, the sandbox keeps every capability,
and ``mount -o remount,rw /`` inside succeeded and wrote to the host (the reference's root
pitfall). Mounts go parent before child, or a later tmpfs hides an earlier bind beneath it.
No ``--new-session``: it would detach the controlling terminal, and TUI agents open
``/dev/tty``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from .policy import SandboxPolicy

__all__ = ["bwrap_argv", "find_bwrap"]


def find_bwrap() -> str | None:
    """The system bwrap (on Ubuntu 24.04 AppArmor grants user namespaces to that path only)."""
    for path in ("/usr/bin/bwrap", "/bin/bwrap"):
        if os.access(path, os.X_OK):
            return path
    return shutil.which("bwrap")


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.split("/") if p)


def bwrap_argv(policy: SandboxPolicy, command: Sequence[str], *, bwrap: str,
               placeholder: str | None = None) -> list[str]:
    """``bwrap ... -- COMMAND`` for ``policy``. The daemon sockets of :attr:`~.policy.
    SandboxPolicy.sockets` are bound into the tmpfs that hides the store, and
    ``placeholder`` (an empty regular file) read-only over each of its ``markers``, so that
    a hook inside still finds its workspace's store (the locator looks for its
    ``catalog.db``) and reaches the daemon, while the store itself stays hidden."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
    if os.path.isdir("/dev/pts"):
        argv += ["--dev-bind", "/dev/pts", "/dev/pts"]  # the terminal we run on, by its name
    argv += ["--unshare-user", "--unshare-pid", "--proc", "/proc", "--die-with-parent"]
    if policy.net == "off":
        argv.append("--unshare-net")
    mounts: list[tuple[tuple[str, ...], int, list[str]]] = []
    for path in policy.writable:
        real = _real(path)
        if real is None or real.startswith(("/dev/", "/proc/")) and real != "/dev/shm":
            continue  # the devices are bwrap's own /dev
        mounts.append((_parts(real), 0, ["--bind", real, real]))
    for path in policy.unreadable:
        real = _real(path)
        if real is None:
            continue
        if os.path.isdir(real):
            mounts.append((_parts(real), 1, ["--tmpfs", real]))
        else:
            mounts.append((_parts(real), 1, ["--ro-bind", "/dev/null", real]))
    for sock in policy.sockets:
        real = _real(sock)
        if real is not None:
            mounts.append((_parts(real), 2, ["--bind", real, real]))
    for marker in policy.markers if placeholder is not None else ():
        real = os.path.realpath(marker)
        mounts.append((_parts(real), 2, ["--ro-bind", placeholder, real]))
    for _, _, args in sorted(mounts, key=lambda m: (m[0], m[1])):
        argv += args
    for _, kind, args in mounts:  # an empty tmpfs the agent cannot fill either
        if kind == 1 and args[0] == "--tmpfs":
            argv += ["--remount-ro", args[1]]
    return [*argv, "--", *command]


def _real(path: str) -> str | None:
    try:
        return os.path.realpath(path, strict=True)
    except OSError:
        return None
