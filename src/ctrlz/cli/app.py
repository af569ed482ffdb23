"""The ``ctrlz`` group: global options and the command list."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from ..workspace import Workspace

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class State:
    """What every command needs: the directory it runs in and a way to open the workspace."""

    def __init__(self) -> None:
        self._ws: Workspace | None = None

    def workspace(self) -> Workspace:
        """The protected workspace containing the current directory (errors clearly if none)."""
        from ..workspace import Workspace

        if self._ws is None:
            self._ws = Workspace.open(".")
        return self._ws

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()


pass_state = click.make_pass_decorator(State, ensure=True)


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
@click.version_option(package_name="ctrlz", prog_name="ctrlz")
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


def _register() -> None:
    from . import (
        agents,
        daemon,
        inspect,
        maintenance,
        mcp_server,
        restore,
        sessions,
        snapshots,
    )

    for module in (snapshots, inspect, restore, maintenance, sessions, mcp_server, agents,
                   daemon):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()
