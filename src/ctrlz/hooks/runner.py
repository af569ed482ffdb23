"""The one runner every agent hook goes through: read stdin, dispatch, never fail the agent.

An agent runs a hook before each tool call and waits for it, so a hook must never break or stall
the agent: whatever happens (garbage on stdin, no workspace, a full disk, a bug) the runner exits
0 and prints nothing, which every supported agent reads as "no decision, go ahead". Errors are
appended to a JSON-lines file in the store (``<store>/toolcalls/hook-errors.jsonl``, or
``$CTRLZ_HOME/hook-errors.jsonl`` when no workspace could be found or its log cannot be
written) with a traceback in ``hooks.log`` next to it (see :mod:`ctrlz.toolcalls.hook_log`,
which reads them back for ``ctrlz status`` and for the next command, which says so once on
stderr: the agent is never told, the user always is).

Imports are lazy: a file-tool hook loads the tool-call store only, never the scanner or engine,
and nothing it does not use (no ``dataclasses``, no ``logging`` unless something else loaded it):
the hook runs once per tool call, and on a cold interpreter import time is most of its cost.
"""

from __future__ import annotations

import os
import sys

from .. import jsontext
from ..protocol import HOOK_INPUT_MAX
from .context import HookContext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, BinaryIO, NoReturn

AGENTS = ("claude", "gemini", "codex", "cursor", "copilot", "opencode", "droid", "auggie")

__all__ = ["AGENTS", "Declined", "HookContext", "handle_recorded", "main", "parse", "run",
           "run_payload", "workspace_of"]


class HookInputError(Exception):
    """The agent sent something that is not a hook payload."""


class Declined(Exception):  # noqa: N818 - a decision, not a failure
    """The workspace daemon will not do this hook's work (see :mod:`ctrlz.door.serve`);
    raised before anything was done, so that the hook's own process does it all."""


def run(agent: str, stdin: BinaryIO | None = None, event: str = "") -> int:
    """Handle one hook invocation; always returns 0. Python-level output (print, warnings,
    logging) is sent to /dev/null while it runs: stdout is the agent's protocol channel.
    ``event`` is the event name for agents whose payload does not carry it (Copilot)."""
    import warnings

    _silence_logging()
    warnings.simplefilter("ignore")
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - closed below
    try:
        try:
            raw = (stdin or sys.stdin.buffer).read(HOOK_INPUT_MAX)
        except BaseException as exc:  # noqa: BLE001 - the agent must never see a failure
            _record(None, agent, {}, exc)
        else:
            run_payload(agent, raw, event, os.environ, os.getcwd)
    finally:
        quiet, (sys.stdout, sys.stderr) = sys.stdout, saved
        quiet.close()
        _silence_logging()  # something may have imported logging while the hook ran
    return 0


def run_payload(agent: str, raw: bytes, event: str, env: Mapping[str, str],
                getcwd: Callable[[], str]) -> None:
    """Handle the hook payload ``raw`` in this process, with the caller's environment ``env``
    and directory (``getcwd``, asked only when the payload names none); whatever fails is
    recorded, nothing raised."""
    payload: dict[str, Any] = {}
    try:
        payload = parse(raw)
        ctx = workspace_of(agent, payload, env, getcwd)
    except BaseException as exc:  # noqa: BLE001 - the agent must never see a failure
        _record(None, agent, payload, exc)  # no store: the home's log
        return
    ctx.index_later = True  # a fresh interpreter: see ctrlz.toolcalls.inbox
    handle_recorded(payload, event, ctx)


def handle_recorded(payload: dict[str, Any], event: str, ctx: HookContext) -> None:
    """Read the call a payload asks for and do it; whatever fails is recorded in the store,
    nothing raised but :class:`Declined` (raised by ``ctx.take_snapshot`` before anything was
    done). The one place the hook's work runs: in the hook's own process
    (:func:`run_payload`) or in the workspace daemon the native door handed it to
    (:mod:`ctrlz.door.serve`)."""
    from importlib import import_module

    from .actions import handle

    try:
        adapter = import_module(f".{ctx.agent}", __package__)
        call = adapter.read(payload, event) if ctx.agent == "copilot" else adapter.read(payload)
        handle(call, ctx)
    except Declined:
        raise
    except BaseException as exc:  # noqa: BLE001 - the agent must never see a failure
        _record(os.path.join(ctx.store_dir, "toolcalls"), ctx.agent, payload, exc)


def _record(log_dir: str | None, agent: str, payload: dict[str, Any],
            exc: BaseException) -> None:
    """Log the failure where ``ctrlz status`` and the next command find it: the store's log,
    else (a store that cannot be written) the home's, which they read too."""
    for where in (log_dir, None) if log_dir else (None,):
        try:
            from ..toolcalls.hook_log import record_error

            record_error(where, agent, payload, exc)
            return
        except BaseException:  # noqa: BLE001 - not even a failure to log fails the agent
            continue


def parse(raw: bytes) -> dict[str, Any]:
    """The hook payload the agent sent on stdin."""
    try:
        payload = jsontext.loads(raw)
    except ValueError as exc:
        raise HookInputError(f"stdin is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise HookInputError("stdin is not a JSON object")
    return payload


def workspace_of(agent: str, payload: dict[str, Any], env: Mapping[str, str],
                 getcwd: Callable[[], str]) -> HookContext:
    """Who sent the payload and where it works: the agent (Copilot CLI and Cursor run Claude's
    hooks with payloads of their own) and the workspace, found with the one locator from the
    directory the payload (or the agent's environment, or ``getcwd``) names. Raises for
    anything that is not a hook call into a protected workspace."""
    if agent not in AGENTS:
        raise HookInputError(f"unknown agent {agent!r}; use one of {', '.join(AGENTS)}")
    from importlib import import_module

    if agent == "claude":
        from .claude import foreign

        agent = foreign(payload) or agent
    here = getattr(import_module(f".{agent}", __package__), "cwd", None)
    from ..session.locator import home_dir, locate

    cwd = str((here(payload) if here else payload.get("cwd"))
              or env.get("CLAUDE_PROJECT_DIR") or env.get("GEMINI_PROJECT_DIR") or getcwd())
    root, store = locate(cwd, home_dir(env))
    return HookContext(agent, root, store, cwd)


def _silence_logging() -> None:
    """Never let a stray log record reach the agent's stderr, now or at exit. Importing
    ``logging`` just for this would cost every hook several milliseconds; a process that never
    imported it cannot log, so it is only configured when something has loaded it."""
    logging = sys.modules.get("logging")
    if logging is None:
        return
    root = logging.getLogger()
    if not any(isinstance(h, logging.NullHandler) for h in root.handlers):
        root.addHandler(logging.NullHandler())
    logging.lastResort = None



def main() -> NoReturn:
    """The ``ctrlz-hook AGENT`` console script: what installed hooks run from PATH. It is the
    same runner as ``ctrlz hook AGENT`` without the CLI's start-up cost (click and every command
    module), which every tool call would otherwise pay, and it ends the same way
    (:func:`ctrlz.ending.leave`)."""
    from ..ending import leave

    args = sys.argv[1:] + ["", ""]
    leave(run(args[0], event=args[1]), closed_pipe=0)
