"""The native door's request (``op: door``), answered inside the workspace daemon.

The C program ``ctrlz`` (see :mod:`ctrlz.door`) sends, for the forms
:data:`ctrlz.protocol.FORMS` names (``ctrlz snapshot [--json]``, ``ctrlz list [--json]``
and ``ctrlz rollback SNAP [--json]``; :data:`COMMANDS` runs each)::

    {"op": "door", "version": 1, "argv": ["snapshot", "--json"], "cwd": "/w/src",
     "tty": false, "tty_err": false,
     "root": "/w", "store": "/home/u/.local/share/ctrlz/workspaces/w-0123456789abcdef",
     "env": {"HOME": "...", "CTRLZ_HOME": "...", "LANG": "...", ...}}

(paths and values as Python's ``os.fsdecode`` reads them; for ``ctrlz-hook AGENT [EVENT]``,
``"argv": ["hook", AGENT, EVENT]`` and the payload, as read from stdin, in ``"stdin"``) and
gets either ``{"ok": true,
"exit": 0, "out": ..., "err": ...}``, the bytes to write on its stdout and stderr as Latin-1
text (one character a byte), or ``{"ok": false, "error": ...}``: the door declines, nothing
was done, and the client runs the Python CLI, which meets the case with its full handling.

A request of another version or form than this daemon's is drift (the door and the daemon are
not the same ctrlz): declined, and said in the daemon's log as well as in the door's trace.

It declines whatever the Python CLI would not hand to this daemon or would print differently:
another command or form; another workspace or store than this daemon's, as the one locator
finds them from the caller's directory and environment; settings other than this daemon's
(the caller's files and ``CTRLZ_*`` variables, as for any served request); an output that
would not be UTF-8; a ``$CTRLZ_PROGRESS_DELAY`` (the CLI checks it); a configuration or home
that is an error (the CLI says which); an agent hook failure the user has not been told of
yet (the CLI tells, once: :func:`ctrlz.toolcalls.hook_log.untold`); a listing's table bound
for a terminal (``tty``: rich draws that); a rollback whose stderr is a terminal (the CLI
draws its progress bar there); a restore's journal; and whatever the snapshot or restore
request itself declines.

A rollback is at most once, as :func:`ctrlz.session.served.ask_restore` has it: once this
daemon has started it, the answer is its outcome, a failure included (its one error line
and exit status), never a decline; and a client that sent the request whole and got no
answer says so and stops (``client.c``), it never runs the rollback a second time.
"""

from __future__ import annotations

import os
import time

from .. import jsontext, protocol
from ..cli import listing, render, rolling, taking
from ..errors import CtrlzError
from ..session import daemon_client
from ..session.config import load_config
from ..session.locator import home_dir, locate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..session.daemon.daemon import Daemon

def at_once(message: dict[str, Any]) -> bool:
    """A hook is answered on its connection's thread, not after the daemon's other requests:
    its work is the tool-call store's, under that store's own lock, as in the hook's own
    process, and a shell call's snapshot goes through ``daemon.serial`` (see :func:`_hook`).
    So an agent's file edit never waits behind a rollback of a big tree or the first scan."""
    argv = message.get("argv")
    return isinstance(argv, list) and argv[:1] == [protocol.HOOK]


def captures(message: dict[str, Any]) -> bool:
    """Whether the request only captures, and so may come from a sandboxed session's
    process (:mod:`ctrlz.session.daemon.confined`): a hook (its pre-images, a shell call's
    snapshot) or a form that only captures (``ctrlz snapshot``: :attr:`Form.captures
    <ctrlz.protocol.Form>`). A rollback and a listing are refused to it."""
    argv = message.get("argv")
    if not (isinstance(argv, list) and argv and isinstance(argv[0], str)):
        return False
    return argv[0] == protocol.HOOK or any(
        form.captures for form in protocol.FORMS if form.command == argv[0])


def handle(daemon: Daemon, message: dict[str, Any]) -> dict[str, Any]:
    """The reply to one door request (see the module docstring)."""
    if at_once(message):
        return _answer(lambda: _hook(daemon, message))
    return daemon.serial.run(lambda: _answer(lambda: _command(daemon, message)))


def _answer(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return work()
    except _Declined as exc:
        return {"ok": False, "error": f"the native door declines: {exc}"}


def _command(daemon: Daemon, message: dict[str, Any]) -> dict[str, Any]:
    """``ctrlz snapshot``, ``list`` or ``rollback``, on the daemon's serving thread."""
    as_json, config = _check(daemon, message)
    printed = COMMANDS[message["argv"][0]](daemon, config, as_json, message)
    if isinstance(printed, dict):  # the request itself declined: nothing was done
        return printed
    status, lines = printed if isinstance(printed, tuple) else (0, printed)
    out, err = bytearray(), bytearray()
    for to_err, text in lines:
        (err if to_err else out).extend(render.encoded(text + "\n", to_err))
    return {"ok": True, "exit": status, "out": out.decode("latin-1"),
            "err": err.decode("latin-1")}


def _snapshot(daemon: Daemon, config: dict[str, Any], as_json: bool,
              message: dict[str, Any]) -> list[tuple[bool, str]] | dict[str, Any]:
    """``ctrlz snapshot [--json]``: a manual snapshot, as any served request takes it."""
    reply = daemon.snapshot({"op": "snapshot", "type": "manual", "label": None,
                             "pinned": False, "session_id": None, "config": config})
    if reply.get("ok") is not True:
        return reply
    return taking.lines(reply["snapshot"], as_json)


def _list(daemon: Daemon, config: dict[str, Any], as_json: bool,
          message: dict[str, Any]) -> list[tuple[bool, str]] | dict[str, Any]:
    """``ctrlz list [--json]``, unless its table would go to a terminal (rich draws that,
    to the terminal's width) or a restore's journal is there (opening the workspace
    recovers it, and says so, first)."""
    if not as_json and message.get("tty") is not False:
        raise _Declined("the table goes to a terminal")
    refusal = daemon.refusal({"config": config})
    if refusal is not None:
        return refusal
    from ..engine.restore import journal

    ws = daemon.ws
    if journal.pending(ws.store_path):
        raise _Declined("a restore's journal is there")
    return listing.lines(list(reversed(ws.snapshots())), ws.store_disk_bytes,
                         config["store_cap"], as_json)


def _rollback(daemon: Daemon, config: dict[str, Any], as_json: bool,
              message: dict[str, Any]) -> tuple[int, list[tuple[bool, str]]] | dict[str, Any]:
    """``ctrlz rollback SNAP [--json]``, as the Python CLI hands it to this daemon
    (:func:`ctrlz.session.served.rollback`), unless its stderr is a terminal (where the CLI
    runs it itself, to draw the progress bar). Once the daemon has started the restore,
    its outcome is the answer, a failure included: never a decline, so that the client
    never runs it a second time."""
    if message.get("tty_err") is not False:
        raise _Declined("stderr is a terminal: the rollback draws its progress there")
    from ..cli import error_line
    from ..session import restore_wire

    ref = message["argv"][1]
    try:  # the result as the engine returned it: in this process, no wire form is needed
        outcome = daemon.restore({**restore_wire.encode_rollback(ref, [], "rollback"),
                                  "config": config})
    except CtrlzError as exc:
        status, line = error_line(exc)
        return status, [(True, line)]
    if isinstance(outcome, dict):
        return outcome  # declined before anything started
    return 0, rolling.report_lines(outcome, "rollback", "rolled back to", as_json)


#: the daemon's runner of each form :data:`ctrlz.protocol.FORMS` names
COMMANDS: dict[str, Callable[[Daemon, dict[str, Any], bool, dict[str, Any]], Any]] = {
    "snapshot": _snapshot, "list": _list, "rollback": _rollback}


def _hook(daemon: Daemon, message: dict[str, Any]) -> dict[str, Any]:
    """``ctrlz-hook AGENT [EVENT]``, its payload in ``stdin``: the hook's work done here
    exactly as in the hook's own process (:func:`ctrlz.hooks.runner.handle_recorded`, which
    records what fails and never fails the agent), with the caller's environment and
    directory, when the payload's workspace is this daemon's and the caller's settings are its
    settings. A shell call's snapshot is this daemon's (it must not ask itself over its own
    socket). Anything the hook's own process would handle otherwise (a payload it cannot
    read, another workspace, no workspace) is declined, so that it is recorded where that
    process records it."""
    from ..engine.restore import journal
    from ..hooks.runner import AGENTS, Declined, handle_recorded, parse, workspace_of

    argv, env, cwd = _fields(message, protocol.is_hook)
    stdin = message.get("stdin")
    if argv[1] not in AGENTS:  # the hook's own process records it
        raise _Declined(f"no agent {argv[1]!r}")
    if not isinstance(stdin, str):
        raise _Declined("no payload")
    try:
        payload = parse(stdin.encode("utf-8", "surrogateescape"))
        ctx = workspace_of(argv[1], payload, env, lambda: cwd)
        config = load_config(ctx.root_dir, env=env)
    except Exception as exc:  # the hook's own process records it
        raise _Declined(f"{type(exc).__name__}: {exc}") from None
    if (os.path.realpath(ctx.root_dir) != os.path.realpath(daemon.ws.root)
            or os.path.realpath(ctx.store_dir) != os.path.realpath(daemon.ws.store_path)):
        raise _Declined(f"the payload's workspace is {ctx.root_dir} with the store "
                        f"{ctx.store_dir}")
    settings = jsontext.loads(jsontext.dumps(config.values))
    refusal = daemon.refusal({"config": settings})
    if refusal is not None:
        raise _Declined(refusal["error"])
    if journal.pending(daemon.ws.store_path):
        raise _Declined("a restore's journal is there")

    start_by = message.get("start_by_ns")

    def take_snapshot(label: str) -> str:
        from ..session.daemon.serial import DaemonStopping

        try:  # on the serving thread, after the requests before it: the daemon's own state
            reply = daemon.serial.run(lambda: daemon.snapshot({
                "op": "snapshot", "type": "tool", "label": label, "pinned": False,
                "session_id": None, "config": settings, "start_by_ns": start_by}))
        except DaemonStopping as exc:
            raise Declined(str(exc)) from None
        if reply.get("ok") is not True:
            raise Declined(str(reply.get("error")))
        return str(reply["snapshot"]["id"])

    ctx.take_snapshot = take_snapshot
    daemon.last_request = time.monotonic()  # an agent at work keeps its daemon
    if daemon_client.too_late(message):  # see daemon_client.HOOK_START_BY_S
        import logging

        logging.getLogger("ctrlz.daemon").warning("dropped a hook: its caller stopped waiting")
        raise _Declined("the hook stopped waiting; it does its work itself")
    try:
        handle_recorded(payload, (argv + [""])[2], ctx)
    except Declined as exc:
        raise _Declined(str(exc)) from None
    return {"ok": True, "exit": 0, "out": "", "err": ""}


class _Declined(Exception):
    pass


class _Drift(_Declined):
    """A request this daemon cannot read although a door sent it: the door and the daemon
    are not the same ctrlz (an upgrade half done, two installs), and every such command
    takes the slow path. Said in the daemon's log as well as in the door's trace."""

    def __init__(self, why: str) -> None:
        import logging

        logging.getLogger("ctrlz.daemon").warning("door: %s; the command runs without the "
                                                  "daemon", why)
        super().__init__(why)


def _fields(message: dict[str, Any],
            serves: Callable[[list[str]], bool]) -> tuple[list[str], dict[str, str], str]:
    """The request's ``argv``, ``env`` and ``cwd``, when its version is this daemon's and
    ``serves`` its ``argv``; :class:`_Declined` otherwise."""
    if message.get("version") != protocol.VERSION:
        raise _Drift(f"door version {message.get('version')!r}, this daemon speaks "
                     f"{protocol.VERSION}")
    argv, env, cwd = message.get("argv"), message.get("env"), message.get("cwd")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise _Drift(f"no arguments a door sends ({argv!r})")
    if not serves(argv):
        raise _Drift(f"not a form the door serves ({' '.join(argv)})")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str)
                                          for k, v in env.items())):
        raise _Declined("no environment")
    if not isinstance(cwd, str):
        raise _Declined("no working directory")
    return argv, env, cwd


def _check(daemon: Daemon, message: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the request's form prints JSON, and the caller's settings as a served request
    carries them; :class:`_Declined` when the door must not serve it."""
    argv, env, cwd = _fields(message, lambda argv: protocol.form_of(argv) is not None)
    if "CTRLZ_PROGRESS_DELAY" in env:
        raise _Declined("$CTRLZ_PROGRESS_DELAY is set (the CLI checks it)")
    if not _utf8_output(env):
        raise _Declined("the output would not be UTF-8")
    try:
        root, store = locate(cwd, home_dir(env))
        config = load_config(root, env=env)
    except (CtrlzError, OSError) as exc:  # the CLI reports it
        raise _Declined(str(exc)) from None
    if (os.path.realpath(root) != os.path.realpath(daemon.ws.root)
            or os.path.realpath(store) != os.path.realpath(daemon.ws.store_path)):
        raise _Declined(f"the caller's workspace is {root} with the store {store}")
    if (message.get("root"), message.get("store")) != (root, store):
        # the client found this daemon by another way than the one locator: serve (the
        # locator decided), but say so, since a mismatch means the door misses elsewhere
        import logging

        logging.getLogger("ctrlz.daemon").warning(
            "door: the client located %r %r, the locator %r %r",
            message.get("root"), message.get("store"), root, store)
    from ..toolcalls.hook_log import pending

    if pending(store, home_dir(env)):
        raise _Declined("an agent hook failed since the last command (the CLI says so, once)")
    as_json = "--json" in argv[1:]
    return as_json, jsontext.loads(jsontext.dumps(config.values))


def _utf8_output(env: dict[str, str]) -> bool:
    """Whether Python would write the caller's stdout and stderr in UTF-8, as rendered here:
    nothing overrides its choice, and the locale is C or POSIX (Python's UTF-8 mode) or
    names UTF-8 as its codeset. Anything else goes to the Python CLI, which asks the C
    library."""
    if any(name in env for name in protocol.ENCODING_VARS):
        return False
    locale = env.get("LC_ALL") or env.get("LC_CTYPE") or env.get("LANG") or "C"
    if locale in ("C", "POSIX"):
        return True
    codeset = locale.partition(".")[2].partition("@")[0]
    return codeset.lower().replace("-", "") == "utf8"
