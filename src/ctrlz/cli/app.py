"""The ``ctrlz`` group: global options and the command list.

The command modules know nothing of this group (they take :mod:`.context`). The group knows
them by name only (:data:`COMMANDS`) and imports a module when one of its commands runs, so
``ctrlz --version``, ``ctrlz --help`` and every command pay for one command module, not for
all of them. ``--help`` lists the commands from the short help kept here;
``tests/cli/test_lazy_commands.py`` checks that the list and every line equal what the commands
themselves say.
"""

from __future__ import annotations

import os
from importlib import import_module

import click

from .. import __version__
from .context import CONTEXT, State

#: every command: its module in this package, and its short help (None: hidden)
COMMANDS: dict[str, tuple[str, str | None]] = {
    'acp': ('acp', 'Run an ACP agent behind a proxy that can undo what it changes.'),
    'changes': ('inspect', 'List the paths that changed in the working tree since a snapshot.'),
    'clone': ('remote', 'Make DIRECTORY (new or empty) a workspace from the remote at URL.'),
    'completion': ('maintenance', 'Print the shell completion script for SHELL.'),
    'config': ('inspect', 'Show the effective configuration and where each value came from.'),
    'daemon': ('daemon', 'The workspace daemon: a file watcher that keeps snapshots and rollbacks'
                         ' incremental.'),
    'doctor': ('doctor', 'Show what this machine offers ctrlz (atomic renames, whole-filesystem '
                         'flush, direct I/O, copy-on-write clones, file watching, exec tracing, '
                         'the sandbox, service registration, the native door), one line each, '
                         'and what ctrlz does without each.'),
    'diff': ('inspect', 'Show what changed: by default from the latest snapshot to the working '
                        'tree.'),
    'events': ('sessions', 'The file events of a session: created, modified, deleted, restored.'),
    'export': ('archive', 'Write SNAPs and exactly the objects they need to one verifiable '
                          'archive.'),
    'fork': ('fork', 'Create a new workspace in DIR at SNAP (or just before agent tool call '
                     'TOOLCALL).'),
    'gc': ('maintenance', 'Collect objects that no snapshot references, and repack what is left.'),
    'history': ('inspect', 'Every version of one file (or folder) across the snapshots, by '
                           'content.'),
    'hook': ('agents', "Handle one agent hook: the agent's hook JSON on stdin."),
    'import': ('archive', 'Add the snapshots of an archive (FILE, or - for stdin) to this '
                          "workspace's store."),
    'init': ('snapshots', 'Start protecting a workspace (DIR, default: here).'),
    'install': ('agents', "Register ctrlz's hooks and MCP server with AGENT (merging, never "
                          'clobbering).'),
    'list': ('snapshots', 'List snapshots, newest first.'),
    'mcp': ('mcp_server', "Serve this workspace's snapshots to an agent over MCP (stdio)."),
    'pin': ('snapshots', 'Pin a snapshot: retention never drops it automatically.'),
    'prune': ('maintenance', 'Drop old snapshots and reclaim their space.'),
    'pull': ('remote', "Download this workspace's snapshots from a remote (default: all it has "
                       'and we lack).'),
    'push': ('remote', 'Upload snapshots to a remote (default: every snapshot it does not have '
                       'yet).'),
    'redo': ('restore', 'Redo the last undone rollback or revert.'),
    'remote': ('remote', "Manage this workspace's remotes (S3-compatible buckets, or file:// "
                         'directories).'),
    'restore': ('restore', 'Extract SNAP (or only PATHs of it) into another directory; the '
                           'workspace is untouched.'),
    'revert': ('restore', 'Put one file or folder back as it was in the newest snapshot that has '
                          'it.'),
    'rewind': ('agents', "Put the workspace back to just before an agent's tool call or turn, "
                         'Bash included.'),
    'rm': ('snapshots', 'Remove snapshots.'),
    'rollback': ('restore', 'Roll the workspace (or only PATHs) back to SNAP, in place.'),
    'run': ('sessions', 'Run an agent (or any command) under protection, and exit with its exit '
                        'code.'),
    'sandbox': ('sandbox', 'What `ctrlz run --sandbox` can use on this machine.'),
    'service': ('service', 'The ctrlz service: one per user, with the HTTP API, the web dashboard'
                           ' and a file watcher for every registered workspace.'),
    'session': ('sessions', 'Look at one session of `ctrlz run`.'),
    'sessions': ('sessions', 'List the sessions of this workspace, newest first.'),
    'show': ('snapshots', "Show one snapshot's record: counts, sizes, Merkle root, parent, "
                          'skipped paths.'),
    'snapshot': ('snapshots', 'Take a snapshot of the workspace now.'),
    'status': ('inspect', 'What is protected and excluded, what was skipped and why, the last '
                          'snapshot, the store against its cap, and any health problems.'),
    'trace': ('sessions', 'Every process a session started: pid, ppid, argv, cwd, exit code, '
                          'duration.'),
    'ui': ('service', "Print the dashboard's address with a one-time login (and with --open, open"
                      ' it).'),
    'undo': ('restore', 'Undo the last rollback or revert (from its safety snapshot).'),
    'uninstall': ('agents', 'Remove exactly the hooks and MCP server `ctrlz install AGENT` added.'),
    'unpin': ('snapshots', "Unpin a snapshot, so its pool's rules apply to it again."),
    'verify': ('maintenance', 'Check the store end to end: every tree decodes, every object re-'
                              'hashes to its id.'),
}


class LazyGroup(click.Group):
    """A group whose commands load on first use (see the module docstring)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = import_module(f".{entry[0]}", __package__)
        return next((c for c in module.COMMANDS if c.name == cmd_name), None)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """What :class:`click.Group` prints, from :data:`COMMANDS` (no command imported):
        a stand-in command per name, carrying the short help, shortens it as click does."""
        rows = [(name, short) for name, (_, short) in sorted(COMMANDS.items())
                if short is not None]
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(name, click.Command(name, help=short).get_short_help_str(limit))
                                for name, short in rows])


@click.group(cls=LazyGroup, context_settings=CONTEXT, epilog="""\b
Examples:
  ctrlz init                    start protecting the current directory
  ctrlz snapshot -m "before refactor"
  ctrlz diff --name-status      what changed since the latest snapshot
  ctrlz rollback latest         put everything back (undo with: ctrlz undo)
  ctrlz -C ~/code/app list      run in another directory, like git -C

A snapshot is named by its id (snap_...), a unique id prefix, its label, its number, cp-N
(N back from the newest: cp-0 is the newest) or `latest`. The store lives under
$CTRLZ_HOME (default: the platform's user data directory). Every command that lists or
reports takes --json.""")
@click.option("-C", "directory", metavar="DIR", type=click.Path(file_okay=False),
              help="Run as if ctrlz was started in DIR (like git -C).")
@click.version_option(__version__, prog_name="ctrlz")  # not importlib.metadata: 15 ms
@click.pass_context
def cli(ctx: click.Context, directory: str | None) -> None:
    """ctrlz: snapshots of a workspace, and safe rollbacks that can themselves be undone."""
    if directory is not None:
        from ..errors import UsageError

        try:
            os.chdir(os.path.expanduser(directory))
        except OSError as exc:
            raise UsageError(f"cannot change to {directory}: {exc.strerror}") from exc
    state = ctx.ensure_object(State)
    ctx.call_on_close(state.close)
