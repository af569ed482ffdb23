"""``ctrlz mcp``: the MCP server over stdio (see ``ctrlz.mcp``)."""

from __future__ import annotations

import click


@click.command("mcp")
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="How much to log (always to stderr).")
def mcp_cmd(log_level: str) -> None:
    """Serve this workspace's snapshots to an agent over MCP (stdio).

    Serves the protected workspace that contains the current directory (or the one -C DIR
    names). stdout carries the protocol only; logs go to stderr. Tools: snapshots_create,
    snapshots_list, snapshots_changes, snapshots_diff, snapshots_history, snapshots_revert,
    snapshots_restore, snapshots_delete, snapshots_compact, snapshots_rewind, snapshots_undo,
    snapshots_redo.

    \b
    Examples:
      claude mcp add ctrlz -- ctrlz mcp     register it with Claude Code
      ctrlz -C ~/code/app mcp               serve another workspace
    """
    from ..mcp.server import serve

    serve(".", log_level=log_level)


COMMANDS: list = [mcp_cmd]
