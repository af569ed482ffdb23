"""Named fault points for crash- and fault-injection tests.

Tests arm a point, then run ctrlz; when execution reaches it, the point does what it was armed
with:

* ``arm(name)``: the process kills itself with SIGKILL, exactly as an OOM killer or a power cut
  would stop it (crash tests run this in a real child process);
* ``arm_error(name, errno)``: it raises that ``OSError``, as a failing disk or a full one would
  (for the errors no rlimit or small filesystem can produce on demand, such as ``EIO``);
* ``arm_call(name, fn)``: it calls ``fn()`` — a concurrent writer striking at an exact instant;
* ``arm_pause(name, path)``: it makes ``path + ".held"``, then waits until ``path`` exists —
  a process held at an exact instant while a test does something else alongside.

``after`` lets the point pass that many times first, so a test can strike the 7th file of a
restore rather than the first. Unarmed points cost one dict lookup.

A process a test cannot reach into (the workspace daemon it starts) arms kill points from a
spec its entry point reads from the environment (:func:`arm_spec`).
"""

from __future__ import annotations

import errno as errnos
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_armed: dict[str, tuple[str, object, list[int]]] = {}


def arm(name: str, after: int = 0) -> None:
    _armed[name] = ("kill", None, [after])


def arm_error(name: str, code: int = errnos.EIO, after: int = 0) -> None:
    _armed[name] = ("error", code, [after])


def arm_call(name: str, fn: Callable[[], None], after: int = 0) -> None:
    _armed[name] = ("call", fn, [after])


def arm_pause(name: str, path: str, after: int = 0) -> None:
    _armed[name] = ("pause", path, [after])


def disarm_all() -> None:
    _armed.clear()


def arm_spec(spec: str) -> None:
    """Points from ``"name[:after][,...]"`` (kill) or ``"name@path"`` (pause until ``path``
    exists); empty: none."""
    for item in spec.split(","):
        name, at, path = item.strip().partition("@")
        if at:
            arm_pause(name, path)
            continue
        name, _, after = name.partition(":")
        if name:
            arm(name, int(after) if after.isdigit() else 0)


def hit(name: str) -> None:
    armed = _armed.get(name)
    if armed is None:
        return
    action, arg, left = armed
    if left[0] > 0:
        left[0] -= 1
        return
    if action == "kill":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "pause":
        import time

        with open(f"{arg}.held", "w"):  # the test waits for this: we are here now
            pass
        deadline = time.monotonic() + 120  # a test that forgot to let go fails, not hangs
        while not os.path.exists(str(arg)) and time.monotonic() < deadline:
            time.sleep(0.01)
    elif action == "error":
        code = int(arg)  # type: ignore[call-overload]
        raise OSError(code, os.strerror(code))
    else:
        del _armed[name]  # once: the callback may run ctrlz code that passes here again
        arg()  # type: ignore[operator]
