"""Commands that make, list and manage snapshots: init, snapshot, list, show, rm, pin, unpin."""

from __future__ import annotations

from pathlib import Path

import click

from . import progress, render
from .context import State, pass_state

TYPES = ("manual", "auto", "pre-run", "git", "build", "idle", "tool")


@click.command("init")
@click.argument("directory", required=False, default=".", metavar="[DIR]",
                type=click.Path(file_okay=False))
@render.json_option
def init_cmd(directory: str, as_json: bool) -> None:
    """Start protecting a workspace (DIR, default: here). Safe to run again.

    Prints where the workspace's store lives (outside the workspace) and what is excluded.
    Other commands find the workspace that contains the current directory.

    \b
    Examples:
      ctrlz init
      ctrlz init ~/code/app
      ctrlz init --json
    """
    from ..workspace import Workspace

    known = Workspace.find(directory) if Path(directory).is_dir() else None
    with Workspace.init(directory) as ws:
        ws.open_store()  # a damaged store is an error here, never "Already protecting"
        fresh = known != ws.root
        rules = ws.config.rules.to_json()
        if as_json:
            render.emit_json({"type": "init", "workspace": str(ws.root),
                              "store": str(ws.store_path), "created": fresh,
                              "excluded": rules})
            return
        render.out(f"{'Protecting' if fresh else 'Already protecting'} "
                   f"{render.path_text(str(ws.root))}")
        render.out(f"Store:    {render.path_text(str(ws.store_path))}")
        render.out(f"Excluded: {excluded_text(rules)}")
        if fresh:
            render.note("Next: ctrlz snapshot -m \"baseline\"")


def excluded_text(rules: dict) -> str:
    parts = [".gitignore files (and .git/info/exclude)" if rules["use_gitignore"]
             else "nothing from .gitignore (use_gitignore = false)"]
    if rules["exclude_patterns"]:
        parts.append("patterns " + ", ".join(rules["exclude_patterns"]))
    if rules["exclude_globs"]:
        parts.append("globs " + ", ".join(rules["exclude_globs"]))
    if rules["force_include"]:
        parts.append("but always including " + ", ".join(rules["force_include"]))
    return "; ".join(parts)


@click.command("snapshot")
@click.option("-m", "--message", "label", metavar="LABEL", help="A label to name it by.")
@click.option("--pin", is_flag=True, help="Never drop it automatically.")
@click.option("--type", "type_", type=click.Choice(TYPES), default="manual", show_default=True,
              help="The pool it goes into.")
@render.json_option
@pass_state
def snapshot_cmd(state: State, label: str | None, pin: bool, type_: str, as_json: bool) -> None:
    """Take a snapshot of the workspace now.

    Manual snapshots are capped at manual_max (default 12): over the cap this fails and names
    `ctrlz rm` / `ctrlz prune`; auto snapshots are a ring of auto_max (default 10).

    \b
    Examples:
      ctrlz snapshot
      ctrlz snapshot -m "before refactor" --pin
      ctrlz snapshot --type auto --json
    """
    from .taking import show

    ws = state.workspace()
    with progress.shown():
        snap = ws.snapshot(type=type_, label=label, pinned=pin)
    show(snap.to_json(), as_json)


def _type_text(s) -> str:  # noqa: ANN001
    return s.type + (" (pinned)" if s.pinned else "")


@click.command("list")
@click.option("--remote", "remote", metavar="NAME",
              help="List the snapshots on remote NAME instead, with who made each.")
@render.json_option
@pass_state
def list_cmd(state: State, remote: str | None, as_json: bool) -> None:
    """List snapshots, newest first.

    Columns: ID, TYPE, LABEL, SIZE (+delta against its parent), FILES, CREATED.

    \b
    Examples:
      ctrlz list
      ctrlz list --json | jq '.[0].id'
      ctrlz list --remote origin
    """
    if remote is not None:
        from .remote import list_remote

        list_remote(state, remote, as_json)
        return
    from .listing import show

    show(state.workspace(), as_json)


@click.command("show")
@click.argument("snap")
@render.json_option
@pass_state
def show_cmd(state: State, snap: str, as_json: bool) -> None:
    """Show one snapshot's record: counts, sizes, Merkle root, parent, skipped paths.

    \b
    Examples:
      ctrlz show latest
      ctrlz show baseline --json
    """
    from ..toolcalls.restore.fork import lineage

    ws = state.workspace()
    s, forked_from = ws.resolve(snap), lineage(ws)
    if as_json:
        render.emit_json(s.to_json() | {"forked_from": forked_from})
        return
    lines = [
        ("id", s.id), ("number", str(s.number)), ("type", _type_text(s)),
        ("label", s.label or "-"), ("created", f"{s.created_at} ({render.ago(s.created_ns)})"),
        ("files", f"{s.files} files, {s.dirs} dirs, {s.symlinks} symlinks"),
        ("size", f"{render.size(s.bytes)} ({render.signed_size(s.size_delta)}), "
                 f"{render.size(s.added_bytes)} new in the store"),
        ("changes", f"+{s.created} ~{s.modified} -{s.deleted} against its parent"),
        ("parent", s.parent or "-"), ("root", s.root.hex()),
    ]
    for key, value in lines:
        render.out(f"{key + ':':<9} {value}")
    for k in s.shown_skipped():
        render.out(f"skipped:  {render.path_text(k.to_json()['path'])}: {k.reason}")
    if forked_from:
        render.out(f"forked:   from {forked_from['workspace']} at {forked_from['snapshot']}")


@click.command("rm")
@click.argument("snaps", nargs=-1, required=True, metavar="SNAP...")
@render.json_option
@pass_state
def rm_cmd(state: State, snaps: tuple[str, ...], as_json: bool) -> None:
    """Remove snapshots. Their bytes are reclaimed by `ctrlz gc` (or `ctrlz prune`).

    \b
    Examples:
      ctrlz rm snap_k3x9
      ctrlz rm "old label" cp-5
    """
    gone = state.workspace().remove(list(snaps))
    if as_json:
        render.emit_json({"type": "rm", "removed": [s.id for s in gone]})
        return
    for s in gone:
        render.out(f"removed {s.id}" + (f' "{s.label}"' if s.label else ""))
    render.note("Reclaim their space with: ctrlz gc")


def _pin(state: State, snap: str, pinned: bool, as_json: bool) -> None:
    s = state.workspace().set_pinned(snap, pinned)
    if as_json:
        render.emit_json(s.to_json())
        return
    render.out(f"{'pinned' if pinned else 'unpinned'} {s.id}")


@click.command("pin")
@click.argument("snap")
@render.json_option
@pass_state
def pin_cmd(state: State, snap: str, as_json: bool) -> None:
    """Pin a snapshot: retention never drops it automatically.

    \b
    Examples:
      ctrlz pin baseline
    """
    _pin(state, snap, True, as_json)


@click.command("unpin")
@click.argument("snap")
@render.json_option
@pass_state
def unpin_cmd(state: State, snap: str, as_json: bool) -> None:
    """Unpin a snapshot, so its pool's rules apply to it again.

    \b
    Examples:
      ctrlz unpin baseline
    """
    _pin(state, snap, False, as_json)


COMMANDS = [init_cmd, snapshot_cmd, list_cmd, show_cmd, rm_cmd, pin_cmd, unpin_cmd]
