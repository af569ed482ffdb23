"""``ctrlz fork``: a new workspace at one snapshot or tool call, beside the original."""

from __future__ import annotations

import click

from . import render
from .context import State, pass_state


@click.command("fork")
@click.argument("ref", metavar="SNAP|TOOLCALL")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--branch", metavar="NAME",
              help="The new git branch (default: ctrlz/fork-<snapshot id>); git workspaces only.")
@click.option("--session", "session_id", metavar="ID",
              help="The agent session TOOLCALL belongs to (default: the latest).")
@render.json_option
@pass_state
def fork_cmd(state: State, ref: str, directory: str, branch: str | None,
             session_id: str | None, as_json: bool) -> None:
    """Create a new workspace in DIR at SNAP (or just before agent tool call TOOLCALL).

    In a git repository the fork is a `git worktree` on a new branch whose files are the
    snapshot's (git writes the branch and .git/worktrees/ in the original repository; nothing
    else of it is touched); otherwise a plain directory. DIR must be new or empty and outside the
    workspace. The fork is protected with its own store, and `ctrlz status` there names its
    parent. A TOOLCALL is a shell tool call's id (its workspace snapshot is the point); for a
    Claude Code session the command that continues the conversation in the fork is printed.

    \b
    Examples:
      ctrlz fork latest ../app-try2
      ctrlz fork "before refactor" ../app-alt --branch try/alt
      ctrlz fork toolu_01ABC ../app-from-call --json
    """
    from ..toolcalls.restore.fork import fork

    result = fork(state.workspace(), ref, directory, branch=branch, session_id=session_id)
    if as_json:
        render.emit_json(result.to_json())
        return
    where = f"git worktree on branch {result.branch}" if result.git else "directory"
    at = f"{result.snapshot} (before tool call {result.tool_call})" if result.tool_call \
        else result.snapshot
    render.out(f"Forked {result.parent} at {at}")
    render.out(f"New workspace:  {result.workspace} ({where})")
    render.out(f"Store:          {result.store}")
    render.out(f"First snapshot: {result.first_snapshot}")
    if result.resume:
        render.out(f"Continue the conversation there with: {result.resume}")


COMMANDS = [fork_cmd]
