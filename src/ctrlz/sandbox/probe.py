"""What this machine offers for a sandbox, and which mechanism ``auto`` takes.

Why probe rather than assume: Landlock may be missing from the kernel or the LSM list, or a
container's seccomp profile may answer ENOSYS; bwrap may be absent, or unable to make a user
namespace (Ubuntu 24.04's AppArmor rule, Docker's default profile). A sandbox that silently
does not happen is the failure users of every other agent sandbox resent most, so each probe
says why it failed, and ``ctrlz sandbox check`` and ``ctrlz run --sandbox`` repeat it.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import asdict, dataclass
from typing import Any

from . import landlock
from .bwrap import find_bwrap

__all__ = ["Support", "bwrap_works", "choose", "support"]


@dataclass(frozen=True)
class Support:
    landlock_abi: int
    landlock_reason: str | None
    bwrap: str | None
    bwrap_reason: str | None
    seccomp: bool
    seccomp_reason: str | None
    auto: str | None  # "landlock", "bwrap", or None: no sandbox can be made
    reason: str | None  # why auto is None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@functools.cache
def bwrap_works(bwrap: str) -> str | None:
    """None when ``bwrap`` makes a sandbox like ours here (user and pid namespaces, /proc);
    else its first line of complaint."""
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev",
            "--proc", "/proc", "--die-with-parent", "--", "true"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap could not be started: {exc}"
    if proc.returncode == 0:
        return None
    lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    return lines[0] if lines else f"bwrap exited with {proc.returncode}"


def _seccomp() -> tuple[bool, str | None]:
    try:
        from . import seccomp  # written beside this module; absent in older trees
    except ImportError:
        return False, "ctrlz.sandbox.seccomp is not installed"
    check = getattr(seccomp, "available", None)
    if check is None:
        return True, None
    try:
        result = check()
    except OSError as exc:
        return False, str(exc)
    if isinstance(result, tuple):
        return bool(result[0]), result[1] if len(result) > 1 else None
    return bool(result), None if result else "seccomp filters are not available"


def support(*, bwrap: bool = True) -> Support:
    """Probe Landlock, bwrap and seccomp (bwrap's probe runs once per process).
    ``bwrap=False`` does not start bwrap (7 ms, 300 ms the first time on a cold cache) and
    takes an installed bwrap for working: for ``ctrlz run``'s native launcher, which finds
    out in the run itself (bwrap dies before the sandbox is made, and its first line is the
    cause), and so never pays a probe; ``ctrlz sandbox check`` always probes."""
    version = landlock.abi()
    ll_reason = None
    if version == 0:
        ll_reason = ("Landlock is not available (kernel older than 5.13, Landlock not in "
                     "the LSM list, or a seccomp profile refuses it)")
    elif version < landlock.MIN_ABI:
        ll_reason = f"Landlock ABI {version} is below {landlock.MIN_ABI} (Linux 5.19)"
    path = find_bwrap()
    bw_reason = "bwrap is not installed (apt-get install bubblewrap)" if path is None \
        else bwrap_works(path) if bwrap else None
    sc, sc_reason = _seccomp()
    auto = "landlock" if ll_reason is None else "bwrap" if bw_reason is None else None
    reason = None if auto else f"{ll_reason}; and {bw_reason}"
    return Support(version, ll_reason, path, bw_reason, sc, sc_reason, auto, reason)


def choose(mode: str, info: Support, *, landlock_fits: str | None = None) -> tuple[str | None,
                                                                                     str]:
    """(mechanism, why) for ``mode``; mechanism None means refuse, and ``why`` says why and
    what to do. ``landlock_fits``: None when Landlock can express the policy, else why not
    (a writable path holding the store), which sends ``auto`` to bwrap."""
    fix = "install bubblewrap, or run on Linux 5.19 or later with Landlock enabled"
    if mode == "landlock":
        if info.landlock_reason:
            return None, f"{info.landlock_reason}; try --sandbox=bwrap, or {fix}"
        if landlock_fits:
            return None, f"Landlock cannot express this policy: {landlock_fits}; use " \
                "--sandbox=bwrap or set CTRLZ_HOME outside the writable paths"
        return "landlock", "Landlock"
    if mode == "bwrap":
        if info.bwrap_reason:
            return None, f"bwrap cannot make a sandbox here: {info.bwrap_reason}; " \
                "try --sandbox=landlock"
        return "bwrap", "bubblewrap"
    if info.landlock_reason is None and not landlock_fits:
        return "landlock", "Landlock"
    if info.bwrap_reason is None:
        return "bwrap", "bubblewrap"
    first = info.landlock_reason or f"Landlock cannot express this policy: {landlock_fits}"
    return None, f"no sandbox can be made here: {first}; and {info.bwrap_reason}; {fix}"
