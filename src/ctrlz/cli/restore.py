"""Commands that put things back: rollback, restore, revert, undo, redo.

Every in-place restore takes a safety snapshot first, and the output says how to undo it.
"""

from __future__ import annotations

import click

from . import progress, render
from .context import State, pass_state
from .rolling import actions as _actions
from .rolling import git_lines as _git_lines
from .rolling import report as _report

#: ``--git``: what a restore does to each ``.git`` in the workspace
# (ctrlz.engine.restore.githistory)
git_option = click.option(
    "--git", "git", type=click.Choice(["auto", "keep", "restore"]), default="auto",
    show_default=True,
    help="keep: leave .git as it is (the working tree only); restore: put .git back too "
         "(branches move, commits made since leave the repository; ctrlz undo brings them "
         "back); auto: restore unless that drops commits, else refuse and say so.")


@click.command("rollback")
@click.argument("snap")
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@git_option
@render.json_option
@pass_state
def rollback_cmd(state: State, snap: str, paths: tuple[str, ...], dry_run: bool, git: str,
                 as_json: bool) -> None:
    """Roll the workspace (or only PATHs) back to SNAP, in place.

    A safety snapshot of the current state is taken first, so the rollback itself can be
    undone with `ctrlz undo`; that is why there is no prompt. Only paths the snapshot covered
    are written or deleted; excluded, ignored and unknown files are left alone.

    A git repository's .git goes back too, which moves its branches: the output names what
    moves. When that would drop commits made since the snapshot, the rollback is refused
    until you choose --git=keep (the working tree only) or --git=restore.

    \b
    Examples:
      ctrlz rollback latest
      ctrlz rollback baseline src/ --dry-run
      ctrlz rollback snap_k3x9 --json
      ctrlz rollback baseline --git=keep      files only; branches stay where they are
    """
    ws = state.workspace()
    with progress.shown():
        result = ws.rollback(snap, list(paths) or None, dry_run=dry_run, git=git)
    _report(result, "rollback", "rolled back to", as_json)


@click.command("restore")
@click.argument("snap")
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@click.option("--to", "dest", required=True, metavar="DIR", type=click.Path(),
              help="Where to extract; must be new or empty, and outside the workspace.")
@render.json_option
@pass_state
def restore_cmd(state: State, snap: str, paths: tuple[str, ...], dest: str,
                as_json: bool) -> None:
    """Extract SNAP (or only PATHs of it) into another directory; the workspace is untouched.

    A snapshot only a remote holds is found there, and only the objects it needs that this
    store lacks are fetched.

    \b
    Examples:
      ctrlz restore baseline --to /tmp/app-baseline
      ctrlz restore latest src/app.py --to ../scratch
    """
    from ..errors import SnapshotNotFound

    ws = state.workspace()
    try:
        with progress.shown():
            result = ws.restore_to(snap, dest, list(paths) or None)
    except SnapshotNotFound:
        from ..session.remotes.remotes import restore_remote_snapshot

        result = restore_remote_snapshot(ws, snap, dest, list(paths) or None)
    if as_json:
        render.emit_json({"type": "restore", **result.to_json()})
        return
    label = f' "{result.target.label}"' if result.target.label else ""
    dest_shown = result.destination or dest
    written = sum(1 for a in result.applied if a.op in ("write", "symlink"))
    render.out(f"Restored {result.target.id}{label} into {render.path_text(dest_shown)}: "
               f"{written} files and symlinks")


@click.command("revert")
@click.argument("path")
@click.option("--from", "from_", metavar="SNAP",
              help="Take it from SNAP (default: the newest snapshot in which it exists).")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@render.json_option
@pass_state
def revert_cmd(state: State, path: str, from_: str | None, dry_run: bool,
               as_json: bool) -> None:
    """Put one file or folder back as it was in the newest snapshot that has it.

    If the chosen snapshot says the path was absent, it is deleted. A safety snapshot is
    taken first; `ctrlz undo` takes the revert back.

    \b
    Examples:
      ctrlz revert src/app.py
      ctrlz revert docs/ --from baseline
    """
    ws = state.workspace()
    with progress.shown():
        result = ws.revert(path, from_, dry_run=dry_run)
    _report(result, "revert", f"reverted {render.path_text(path)} from", as_json)


def _undo_report(res, as_json: bool) -> None:  # noqa: ANN001
    if as_json:
        render.emit_json(res.to_json())
        return
    op = res.operation
    what = f"the {op.kind} to {op.target}"
    if op.paths:
        what += " of " + ", ".join(render.path_text(p.decode(errors="surrogateescape"))
                                   for p in op.paths)
    if res.restore.dry_run:
        render.out(f"Would {res.action} {what}: "
                   f"{render.plan_summary(res.restore.plan.counts())}")
        for err, text in _git_lines(res.restore) + _actions(res.restore):
            render.echo(text, err=err)
        render.note("Nothing was changed (dry run).")
        return
    counts = render.done_summary(res.restore.counts())
    render.out(f"{'Undid' if res.action == 'undo' else 'Redid'} {what}: {counts}")
    for err, text in _git_lines(res.restore):
        render.echo(text, err=err)
    render.out("Redo with: ctrlz redo" if res.action == "undo" else "Undo with: ctrlz undo")


@click.command("undo")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@git_option
@render.json_option
@pass_state
def undo_cmd(state: State, dry_run: bool, git: str, as_json: bool) -> None:
    """Undo the last rollback or revert (from its safety snapshot). Repeat to go further back.

    \b
    Examples:
      ctrlz undo
      ctrlz undo --dry-run         what it would put back
      ctrlz undo && ctrlz undo     two steps back
    """
    ws = state.workspace()
    with progress.shown():
        result = ws.undo(dry_run=dry_run, git=git)
    _undo_report(result, as_json)


@click.command("redo")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@git_option
@render.json_option
@pass_state
def redo_cmd(state: State, dry_run: bool, git: str, as_json: bool) -> None:
    """Redo the last undone rollback or revert. A new rollback or revert clears the redo list.

    \b
    Examples:
      ctrlz redo
      ctrlz redo --dry-run
    """
    ws = state.workspace()
    with progress.shown():
        result = ws.redo(dry_run=dry_run, git=git)
    _undo_report(result, as_json)


COMMANDS = [rollback_cmd, restore_cmd, revert_cmd, undo_cmd, redo_cmd]
