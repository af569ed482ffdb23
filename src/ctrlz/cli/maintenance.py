"""Commands that keep the store healthy: prune, gc, verify, completion."""

from __future__ import annotations

import click

from . import progress, render
from .context import State, pass_state


@click.command("prune")
@click.option("--keep", type=click.IntRange(min=1), metavar="N",
              help="Keep the newest N snapshots.")
@click.option("--older-than", "older_than", metavar="AGE",
              help="Drop snapshots older than AGE (30m, 12h, 7d, 2w).")
@click.option("--dry-run", is_flag=True, help="Print what would go; change nothing.")
@render.json_option
@pass_state
def prune_cmd(state: State, keep: int | None, older_than: str | None, dry_run: bool,
              as_json: bool) -> None:
    """Drop old snapshots and reclaim their space.

    With --keep and --older-than together, a snapshot goes only if both say so. With neither,
    the pool rules apply (auto_max, safety_max, tool_max, max_count, store_cap). Pinned
    snapshots, the newest and those undo still needs are never dropped, nor pre-run ones
    unless delete_initial is set; max_count never drops a manual one.

    \b
    Examples:
      ctrlz prune --keep 5 --dry-run
      ctrlz prune --older-than 7d
      ctrlz prune
    """
    seconds = render.parse_duration(older_than) if older_than else None
    plan = state.workspace().prune(keep, seconds, dry_run=dry_run)
    if as_json:
        render.emit_json(plan.to_json())
        return
    verb = "would drop" if dry_run else "dropped"
    for s in plan.drop:
        label = f' "{s.label}"' if s.label else ""
        render.out(f"{verb} {s.id} {s.type}{label}: {plan.reasons[s.id]}")
    tail = ""
    if plan.gc is not None:
        tail = f", {render.size(plan.gc.removed_bytes)} reclaimed"
    render.out(f"{len(plan.drop)} {verb}, {plan.kept} kept{tail}")


@click.command("gc")
@click.option("--remote", "remote", metavar="NAME",
              help="Collect unreferenced packs on remote NAME instead (safe while others push).")
@click.option("--dry-run", is_flag=True, help="With --remote: say what would go; delete nothing.")
@render.json_option
@pass_state
def gc_cmd(state: State, remote: str | None, dry_run: bool, as_json: bool) -> None:
    """Collect objects that no snapshot references, and repack what is left.

    Also compresses the large files a snapshot stored uncompressed because the disk took
    them faster than they could be compressed.

    \b
    Examples:
      ctrlz rm old-label && ctrlz gc
      ctrlz gc --remote origin
    """
    if remote is not None:
        from .remote import gc_remote

        gc_remote(state, remote, dry_run, as_json)
        return
    ws = state.workspace()
    with progress.shown():
        report = ws.gc()
    if as_json:
        render.emit_json({"type": "gc", **report.to_json()})
        return
    strays = (f"; and {report.strays_removed} files a failed or killed write had left"
              if report.strays_removed else "")
    squeezed = (f"; compressed {report.compressed_objects} large objects stored uncompressed "
                f"({render.size(report.compressed_saved_bytes)} saved)"
                if report.compressed_objects else "")
    render.out(f"removed {report.removed_objects} objects ({render.size(report.removed_bytes)}),"
               f" kept {report.kept_objects}, repacked {report.repacked_packs} packs"
               f"{squeezed}{strays}")


@click.command("verify")
@click.option("--remote", "remote", metavar="NAME",
              help="Check remote NAME instead: every object every snapshot there names.")
@render.json_option
@pass_state
def verify_cmd(state: State, remote: str | None, as_json: bool) -> None:
    """Check the store end to end: every tree decodes, every object re-hashes to its id.

    Exits 6 if anything is damaged (8 for a damaged remote).

    \b
    Examples:
      ctrlz verify
      ctrlz verify --json
      ctrlz verify --remote origin
    """
    if remote is not None:
        from .remote import verify_remote

        verify_remote(state, remote, as_json)
        return
    ws = state.workspace()
    with progress.shown():
        report = ws.verify()
    if as_json:
        render.emit_json({"type": "verify", **report.to_json()})
    else:
        render.out(f"checked {report.snapshots} snapshots, {report.trees} trees, "
                   f"{report.objects} objects ({render.size(report.bytes)})")
        if report.orphans:
            render.out(f"{report.orphans} orphaned objects (reclaimable with `ctrlz gc`)")
        elif report.orphans is None and report.orphans_note:
            render.out(f"orphans not counted: {report.orphans_note}")
        for e in report.errors:
            render.out(f"error: {e}")
        render.out("ok" if report.ok else f"{len(report.errors)} problems found")
    if not report.ok:
        from ..errors import StoreError

        click.get_current_context().exit(StoreError.exit_code)


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]), default="bash")
def completion_cmd(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    Examples:
      eval "$(ctrlz completion bash)"
      ctrlz completion zsh > ~/.zfunc/_ctrlz
      ctrlz completion fish > ~/.config/fish/completions/ctrlz.fish
    """
    from click.shell_completion import get_completion_class

    root = click.get_current_context().find_root().command  # the ctrlz group
    cls = get_completion_class(shell)
    assert cls is not None
    render.out(cls(root, {}, "ctrlz", "_CTRLZ_COMPLETE").source())


COMMANDS = [prune_cmd, gc_cmd, verify_cmd, completion_cmd]
