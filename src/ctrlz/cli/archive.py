"""``ctrlz export`` and ``ctrlz import``: snapshots as one self-contained archive file.

``-`` is stdin or stdout, so ``ctrlz export latest -o - | ssh host ctrlz import -`` works.
Parsing and rendering only; the archive work is :mod:`ctrlz.session.archives`.
"""

from __future__ import annotations

import click

from . import render
from .context import State, pass_state


@click.command("export")
@click.argument("snaps", nargs=-1, required=True, metavar="SNAP...")
@click.option("-o", "--output", "output", required=True, metavar="FILE",
              help="Where to write the archive; - for stdout.")
@click.option("--since", metavar="SNAP",
              help="Leave out everything SNAP already holds (an incremental archive).")
@render.json_option
@pass_state
def export_cmd(state: State, snaps: tuple[str, ...], output: str, since: str | None,
               as_json: bool) -> None:
    """Write SNAPs and exactly the objects they need to one verifiable archive.

    The archive holds a manifest, the objects (compressed) and a checksum of everything;
    `ctrlz import` checks every object and refuses a truncated or changed archive.

    \b
    Examples:
      ctrlz export latest -o app.ctrlz
      ctrlz export baseline latest --since baseline -o delta.ctrlz
      ctrlz export latest -o - | ssh host ctrlz import - --to ~/app
    """
    from ..session import archives

    report = archives.export(state.workspace(), list(snaps), output, since)
    summary = (f"exported {len(report.snapshots)} snapshot"
               f"{'s' if len(report.snapshots) != 1 else ''}, {report.objects} objects, "
               f"{render.size(report.bytes)}" + (f" (since {report.since})" if since else ""))
    if as_json:
        data = report.to_json() | {"output": output}
        if output == "-":
            render.note(summary)
        else:
            render.emit_json(data)
        return
    if output == "-":
        render.note(summary)
    else:
        render.out(f"{summary} -> {output}")


@click.command("import")
@click.argument("file", metavar="FILE")
@click.option("--to", "dest", metavar="DIR", type=click.Path(file_okay=False),
              help="Make DIR (new or empty) a workspace from the archive and restore the "
                   "newest snapshot into it.")
@render.json_option
@pass_state
def import_cmd(state: State, file: str, dest: str | None, as_json: bool) -> None:
    """Add the snapshots of an archive (FILE, or - for stdin) to this workspace's store.

    Every object is checked; a truncated or tampered archive is refused with one line and
    nothing is imported. With --to, DIR becomes a new protected workspace holding the
    archive's snapshots, with the newest one restored into it.

    \b
    Examples:
      ctrlz import app.ctrlz
      ctrlz import - --to ~/app < app.ctrlz
    """
    from ..session import archives

    if dest is not None:
        ws, report, restored = archives.import_to(file, dest)
        with ws:
            if as_json:
                render.emit_json(report.to_json() | {"workspace": str(ws.root),
                                                     "restored": restored.target.id})
                return
            files = sum(1 for a in restored.applied if a.op in ("write", "symlink"))
            k = len(report.imported)
            render.out(f"imported {k} snapshot{'s' if k != 1 else ''} into "
                       f"{render.path_text(str(ws.root))}; restored "
                       f"{restored.target.id} ({files} files)")
        return
    report = archives.import_into(state.workspace(), file)
    if as_json:
        render.emit_json(report.to_json())
        return
    render.out(f"imported {len(report.imported)} snapshot"
               f"{'s' if len(report.imported) != 1 else ''}: {report.objects} new objects "
               f"({render.size(report.bytes)})")
    for i in report.imported:
        render.out(f"  {i}")
    if report.already:
        render.note(f"{len(report.already)} were here already")


COMMANDS = [export_cmd, import_cmd]
