"""``ctrlz acp -- AGENT [ARGS]``: the ACP proxy over stdio (see ``ctrlz.acp``)."""

from __future__ import annotations

import click

ACP_CONTEXT = {"ignore_unknown_options": True, "allow_interspersed_args": False}


@click.command("acp", context_settings=ACP_CONTEXT)
@click.option("--no-init", is_flag=True,
              help="Do not protect a session's directory that no protected workspace "
                   "contains; relay such sessions unrecorded.")
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="How much to log (always to stderr).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[--] AGENT [ARG]...")
def acp_cmd(no_init: bool, log_level: str, command: tuple[str, ...]) -> None:
    """Run an ACP agent behind a proxy that can undo what it changes.

    Speaks ACP (JSON-RPC over stdio) to an editor on stdin/stdout and forwards everything to
    AGENT, which it starts. Before the editor writes a file for the agent, ctrlz captures the
    file's pre-image under the ACP toolCallId; before it runs a terminal command, a snapshot of
    the workspace. The initialize response gains the session capabilities rollback, redo and
    restoreToolCall, answered by ctrlz: session/restore_tool_call, session/rollback (the last
    completed prompt turn, terminal commands included) and session/redo. A session's cwd is
    protected (ctrlz init) if no protected workspace contains it, unless --no-init. Exits with
    the agent's exit code; logs go to stderr. See docs/acp.md.

    \b
    Examples:
      ctrlz acp -- gemini --experimental-acp
      ctrlz acp --log-level INFO -- python my_agent.py
    \b
    In Zed's settings.json:
      "agent_servers": {"Gemini (ctrlz)": {"command": "ctrlz",
          "args": ["acp", "--", "gemini", "--experimental-acp"]}}
    """
    import asyncio
    import logging
    import shutil
    import sys

    from ..errors import UsageError

    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("ctrlz acp needs an agent to run: ctrlz acp -- AGENT [ARG...]")
    if shutil.which(argv[0]) is None:
        raise UsageError(f"cannot start the agent {argv[0]}: no such executable (looked in "
                         "PATH)")
    logging.basicConfig(stream=sys.stderr, level=log_level.upper(), format="%(message)s")
    from ..acp.proxy import serve

    code = asyncio.run(serve(argv, agent="acp", protect=not no_init))
    sys.exit(code)


COMMANDS: list = [acp_cmd]
