"""The ``ctrlz`` group: global options and the command list.

The command modules know nothing of this group (they take :mod:`.context`); it imports them to
register their ``COMMANDS``, so imports run one way only.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from .. import __version__
from . import acp, agents, daemon, inspect, maintenance, mcp_server, restore, sessions, snapshots
from . import archive as archive_commands
from . import fork as fork_commands
from . import remote as remote_commands
from . import service as service_commands
from .context import CONTEXT, State


@click.group(context_settings=CONTEXT, epilog="""\b
Examples:
  ctrlz init                    start protecting the current directory
  ctrlz snapshot -m "before refactor"
  ctrlz diff --name-status      what changed since the latest snapshot
  ctrlz rollback latest         put everything back (undo with: ctrlz undo)
  ctrlz -C ~/code/app list      run in another directory, like git -C

A snapshot is named by its id (snap_...), a unique id prefix, its label, its number, cp-N
(the Nth newest) or `latest`. The store lives under $CTRLZ_HOME (default: the platform's
user data directory). Every command that lists or reports takes --json.""")
@click.option("-C", "directory", metavar="DIR", type=click.Path(file_okay=False),
              help="Run as if ctrlz was started in DIR (like git -C).")
@click.version_option(__version__, prog_name="ctrlz")  # not importlib.metadata: 15 ms
@click.pass_context
def cli(ctx: click.Context, directory: str | None) -> None:
    """ctrlz: snapshots of a workspace, and safe rollbacks that can themselves be undone."""
    if directory is not None:
        from ..errors import UsageError

        try:
            os.chdir(Path(directory).expanduser())
        except OSError as exc:
            raise UsageError(f"cannot change to {directory}: {exc.strerror}") from exc
    state = ctx.ensure_object(State)
    ctx.call_on_close(state.close)


for _module in (snapshots, inspect, restore, maintenance, sessions, mcp_server, agents, daemon,
                fork_commands, acp, service_commands, archive_commands, remote_commands):
    for _command in _module.COMMANDS:
        cli.add_command(_command)
