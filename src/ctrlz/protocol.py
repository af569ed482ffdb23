"""The native door's wire protocol, defined once: the command lines the door hands to the
workspace daemon, what its request carries, its version, sizes and timeouts.

Three programs speak it: the C door (``client.c``), the daemon that answers it
(:mod:`ctrlz.door.serve`) and the Python CLI's click-free door (:func:`ctrlz.cli.main`, which
asks the daemon through :mod:`ctrlz.session.daemon_client`). Each used to keep its own copy,
and when the copies disagreed a command silently took the slow path. Now the Python ones read
this module, and the C one includes ``protocol.h``, which ``scripts/gen_door_header.py``
writes from it (``tests/door/test_protocol.py`` fails when the header is stale, and when a
form here has no runner in the CLI or the daemon).

A shared module (``tests/test_architecture.py``, LAYERS): the session's daemon client reads
its timeouts, and the faces their forms. It imports nothing: every hook loads it.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

#: the request's ``op`` and ``version``: a daemon declines a version it does not speak
OP = "door"
VERSION = 1
#: the daemon's socket in the store directory
SOCKET_NAME = "daemon.sock"
#: in the store directory while the daemon starts up: it declines every request but a hook's
#: until then, so a command that sees it works in-process at once, without connecting
STARTING_NAME = "daemon.starting"
#: the program a daemon process runs (``python -m``): the session's daemon with this door's
#: request added; a face (see :mod:`ctrlz.door.program`), named here, beside it, so that the
#: session, which may not import a face, starts it by this one name
DAEMON_PROGRAM = f"{__package__}.door.program"

#: Connecting is instant when a daemon listens; a reply may wait for a full scan (the first
#: snapshot after the daemon started on a changed tree) or for another writer's store lock.
CONNECT_TIMEOUT_S = 2.0
REPLY_TIMEOUT_S = 300.0
#: The caller of :func:`ctrlz.session.daemon_client.dirty` holds the store lock, so a daemon
#: busy with a snapshot that waits for that lock cannot answer until its wait times out;
#: rather than stall, the caller scans fully.
DIRTY_TIMEOUT_S = 3.0
#: A hook's request: an agent kills a hook after 30 s (the timeout `ctrlz install` writes)
#: and runs the tool anyway, so a hook waits this long for the daemon and then does its work
#: itself; and the daemon starts no work for it after ``start_by_ns`` (its request's field,
#: :data:`HOOK_START_BY_S` after it was sent, on the monotonic clock every process of the
#: machine shares). Work the daemon starts in time holds the locks the hook's own process then
#: waits for, so it captures before the tool runs; work it would start later, when the tool may
#: have run, it drops (it used to record that as the state before the tool call).
HOOK_REPLY_TIMEOUT_S = 10.0
HOOK_START_BY_S = 8.0

#: the longest message a daemon reads, and a Python client's reply (a restore's report,
#: which names every path, excepted)
MAX_MESSAGE = 1 << 20
#: the longest reply the C door reads (a listing or a rollback's report, rendered)
DOOR_REPLY_MAX = 256 << 20
#: the most of a hook's payload that is read from stdin, by the C door and the Python hook
HOOK_INPUT_MAX = 16 << 20

#: the variables the request carries, besides every ``CTRLZ_*`` one: what decides the
#: caller's settings, store and workspace (:mod:`ctrlz.session.locator`,
# :mod:`ctrlz.session.config`) and
#: the output's encoding (:data:`ENCODING_VARS` and the locale)
ENV_PREFIX = "CTRLZ_"
ENCODING_VARS = ("PYTHONIOENCODING", "PYTHONUTF8", "PYTHONCOERCECLOCALE",
                 "PYTHONLEGACYWINDOWSSTDIO")
ENV_NAMES = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "LC_ALL", "LC_CTYPE", "LANG",
             *ENCODING_VARS, "CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR")

#: ``CTRLZ_DOOR=0`` sends every command to the Python CLI; ``CTRLZ_DOOR_TRACE=1`` makes
#: both doors say on stderr what they did and why (:func:`trace`)
OFF_VAR = "CTRLZ_DOOR"
TRACE_VAR = "CTRLZ_DOOR_TRACE"
TRACE_PREFIX = "ctrlz door: "

#: a hook's request: ``argv`` is ``["hook", AGENT]`` or ``["hook", AGENT, EVENT]``
HOOK = "hook"
HOOK_ARGS = (1, 2)


class Form:
    """One command line the door hands to the daemon: ``ctrlz COMMAND [OPERAND] [OPTION...]``,
    each option at most once, in any order; the operand, when the form has one, is one
    argument that is not an option (a snapshot, for ``rollback``).

    ``once``: the daemon must never be asked twice (a rollback: once the request is sent
    whole, only the daemon's answer or an error ends it). ``captures``: the form only
    captures, and so may come from a sandboxed session's process
    (:mod:`ctrlz.session.daemon.confined`)."""

    __slots__ = ("captures", "command", "once", "operand", "options")

    def __init__(self, command: str, *, operand: str | None = None,
                 options: tuple[str, ...] = ("--json",), once: bool = False,
                 captures: bool = False) -> None:
        self.command, self.operand, self.options = command, operand, options
        self.once, self.captures = once, captures

    def takes(self, argv: Sequence[str]) -> bool:
        """Whether ``argv`` (the arguments after ``ctrlz``) is this form."""
        if not argv or argv[0] != self.command:
            return False
        rest = list(argv[1:])
        if self.operand is not None:
            if not rest or rest[0].startswith("-"):
                return False
            rest.pop(0)
        return all(a in self.options for a in rest) and len(set(rest)) == len(rest)

    def __repr__(self) -> str:
        return f"Form({self.command!r})"


#: every form the door serves; the CLI, the daemon and the C door each run exactly these
FORMS = (
    Form("snapshot", captures=True),
    Form("list"),
    Form("rollback", operand="SNAP", once=True),
)


def form_of(argv: Sequence[str]) -> Form | None:
    """The form ``argv`` (the arguments after ``ctrlz``) is, or None."""
    for form in FORMS:
        if form.takes(argv):
            return form
    return None


def is_hook(argv: Sequence[str]) -> bool:
    """Whether a request's ``argv`` is a hook's: ``hook AGENT [EVENT]``."""
    return (len(argv) - 1 in range(HOOK_ARGS[0], HOOK_ARGS[1] + 1)
            and argv[0] == HOOK)


def tracing() -> bool:
    value = os.environ.get(TRACE_VAR)
    return bool(value) and value != "0"


def trace(message: str) -> None:
    """Say on stderr, when ``$CTRLZ_DOOR_TRACE`` asks, why the door did what it did: the C
    door's words for the Python one (trace.c)."""
    if tracing():
        sys.stderr.write(f"{TRACE_PREFIX}{message}\n")
