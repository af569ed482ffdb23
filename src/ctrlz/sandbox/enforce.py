"""Turning a capability set into kernel rules: ``apply``, ``is_supported``, ``support_info``.

On Linux a set becomes one Landlock ruleset (``landlock.py``): each grant a path-beneath rule
with nono's rights for its mode, every right the kernel knows handled, so whatever is not
granted is refused. A blocked network adds a seccomp filter (``seccomp.py``, mode ``off``):
no socket of an internet family (TCP, UDP, raw, ping) nor io_uring can be made, which is more
than Landlock's TCP rules alone would refuse (nono leaves UDP open). Where Landlock has TCP
rules (ABI 4) they are handled too, with no port allowed, as a second wall.

The rights per mode are nono's, so a program that runs under nono-py runs the same here:

- READ: read files, list directories, execute;
- WRITE: write and truncate files, create and remove every kind of entry, rename and link
  across directories (``refer``), which atomic saves (write a temp file, rename it over) need;
- device ioctls (ABI 5) only for a WRITE grant on a device or a directory under ``/dev``, so
  that a terminal can be set up and no ordinary file gets ioctls.

Signals and abstract Unix sockets (ABI 6 scopes) are confined to the sandbox: a sandboxed
process cannot signal, or connect to an abstract socket of, a process outside it.

Landlock confines the calling thread and what it starts afterwards; :func:`apply` from a
process that already runs other threads leaves those threads free (the seccomp filter, by
contrast, is put on every thread).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from .. import platform
from .capabilities import AccessMode, CapabilitySet

__all__ = ["SupportInfo", "apply", "is_supported", "support_info"]

#: Landlock's features by the ABI that brought them (nono's wording, for ``details``).
_FEATURES = ((2, "File rename across directories (Refer)"), (3, "File truncation (Truncate)"),
             (4, "TCP network filtering"), (5, "Device ioctl filtering"), (6, "Process scoping"))


class SupportInfo:
    """Whether this machine can sandbox, on which platform, and the details in words."""

    __slots__ = ("_details", "_is_supported", "_platform")

    def __init__(self, is_supported: bool, platform: str, details: str) -> None:
        self._is_supported = is_supported
        self._platform = platform
        self._details = details

    @property
    def is_supported(self) -> bool:
        """True if :func:`apply` and :func:`sandboxed_exec` can confine a process here."""
        return self._is_supported

    @property
    def platform(self) -> str:
        """``"linux"``, ``"macos"``, ``"windows"`` or ``"unsupported"``."""
        return self._platform

    @property
    def details(self) -> str:
        """What the kernel offers, or why nothing can be done and what would fix it."""
        return self._details

    def __repr__(self) -> str:
        return f"SupportInfo(supported={self._is_supported}, platform='{self._platform}')"


def _platform() -> str:
    """nono's platform names, from ctrlz.platform (the one place that knows the system)."""
    return {"linux": "linux", "darwin": "macos", "win32": "windows"}.get(platform.system(),
                                                                         "unsupported")


def support_info() -> SupportInfo:
    """What sandbox this machine offers (Landlock ABI 2 or later is needed)."""
    platform = _platform()
    if platform != "linux":
        return SupportInfo(False, platform, "ctrlz.sandbox needs Linux with Landlock; "
                           f"{platform} is not supported")
    from . import landlock
    version = landlock.abi()
    if version == 0:
        return SupportInfo(False, platform, "Landlock not available. Requires Linux kernel "
                           "5.19+ with Landlock enabled (CONFIG_SECURITY_LANDLOCK, and "
                           "'landlock' in the lsm= boot parameter).")
    if version < landlock.MIN_ABI:
        return SupportInfo(False, platform, f"Landlock ABI {version} is too old: renames and "
                           f"links across directories would always be refused. Requires ABI "
                           f"{landlock.MIN_ABI} (Linux 5.19+).")
    features = ["Basic filesystem access control"]
    features += [name for since, name in _FEATURES if version >= since]
    return SupportInfo(True, platform, f"Landlock available (Landlock V{version}, features: "
                       f"{', '.join(features)})")


def is_supported() -> bool:
    """True if this machine can sandbox (Linux with Landlock ABI 2 or later)."""
    if _platform() != "linux":
        return False
    from . import landlock
    return landlock.abi() >= landlock.MIN_ABI


def rights(access: AccessMode, path: str, version: int) -> int:
    """The Landlock rights a grant of ``access`` on ``path`` carries (module doc)."""
    from .landlock import FS, READ
    write = (FS["write_file"] | FS["make_char"] | FS["make_dir"] | FS["make_reg"]
             | FS["make_sock"] | FS["make_fifo"] | FS["make_block"] | FS["make_sym"]
             | FS["remove_file"] | FS["remove_dir"] | FS["refer"] | FS["truncate"])
    value = {AccessMode.READ: READ, AccessMode.WRITE: write,
             AccessMode.READ_WRITE: READ | write}[access]
    if access is not AccessMode.READ and version >= 5 and _is_device(path):
        value |= FS["ioctl_dev"]
    return value


def _is_device(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return True
    return stat.S_ISDIR(st.st_mode) and (path == "/dev" or path.startswith("/dev/"))


def restrict(grants: Iterable[tuple[str, AccessMode]], net_blocked: bool) -> None:
    """Confine this process to ``grants`` (resolved path, mode) and, if ``net_blocked``, no
    network. Irreversible. Raises RuntimeError, naming the cause, when it cannot; nothing is
    applied then, except where the seccomp filter fails after Landlock was in place (a kernel
    without seccomp filters, which Landlock kernels all have)."""
    if _platform() != "linux":
        raise RuntimeError(support_info().details)
    from . import landlock
    version = landlock.abi()
    if version < landlock.MIN_ABI:
        raise RuntimeError(support_info().details)
    if net_blocked:  # imported only when needed: a sandboxed_exec child starts faster
        from . import seccomp
        try:  # built first, so that an unknown machine fails before anything is confined
            seccomp.build_filter("off")
        except seccomp.SeccompError as e:
            raise RuntimeError(f"sandbox initialization failed: {e}") from None
    try:
        ruleset = landlock.Ruleset(version=version, net=net_blocked, scopes=True)
    except OSError as e:
        raise RuntimeError(f"sandbox initialization failed: {e}") from None
    try:
        for path, access in grants:
            if not ruleset.allow_path(path, rights(access, path, version)):
                raise RuntimeError(f"sandbox initialization failed: {path} no longer exists")
        ruleset.restrict_self()
    except OSError as e:
        raise RuntimeError(f"sandbox initialization failed: {e}") from None
    finally:
        ruleset.close()
    if net_blocked:
        try:
            seccomp.install("off")
        except seccomp.SeccompError as e:
            raise RuntimeError(f"sandbox initialization failed: {e}") from None


def apply(caps: CapabilitySet) -> None:
    """Confine this process, irreversibly, to what ``caps`` grants.

    Afterwards this process (its calling thread) and every process it starts can reach only
    the granted paths, and no network if ``caps`` blocks it. Raises RuntimeError if the
    platform cannot sandbox or the kernel refuses.
    """
    if not isinstance(caps, CapabilitySet):
        raise TypeError(f"caps must be a CapabilitySet, not {type(caps).__name__}")
    restrict([(c.resolved, c.access) for c in caps.fs_capabilities()],
             caps.is_network_blocked)
