"""``ctrlz list``'s work, without click: opening the workspace here and printing its snapshots.

``ctrlz list`` is the command people (and scripts polling for new snapshots) run most, and click
is a third of its cold start. :func:`ctrlz.cli.main` runs the two plain forms, ``ctrlz list``
and ``ctrlz list --json``, straight through :func:`show`; every other form goes through click to
``list_cmd``, which calls the same :func:`show`. One listing, two doors.
"""

from __future__ import annotations

from . import render

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..workspace import Workspace


def open_here() -> Workspace:
    """The protected workspace containing the current directory (errors clearly if none),
    saying on stderr what an interrupted restore left and opening it cleaned up."""
    from ..workspace import Workspace

    ws = Workspace.open(".")
    # a snapshot or restore run here starts the workspace daemon for the next command
    ws.start_daemon = True
    for note in ws.recovered:
        render.note(f"ctrlz: {note}")
    return ws


def show(ws: Workspace, as_json: bool) -> None:
    """Every snapshot, newest first: a table and the store's use, or the records as JSON."""
    snaps = list(reversed(ws.snapshots()))
    if as_json:
        render.emit_json([s.to_json() for s in snaps])
        return
    rows = [[s.id, s.type + (" (pinned)" if s.pinned else ""), s.label or "",
             f"{render.size(s.bytes)} ({render.signed_size(s.size_delta)})", str(s.files),
             render.ago(s.created_ns)] for s in snaps]
    render.table(["ID", "TYPE", "LABEL", "SIZE", "FILES", "CREATED"], rows, right=(3, 4))
    used, cap = ws.store_disk_bytes(), ws.config["store_cap"]
    render.out(f"{len(snaps)} snapshot{'s' if len(snaps) != 1 else ''}, "
               f"store {render.size(used)} of cap {render.size(cap)}")


def run(as_json: bool) -> None:
    """The whole of ``ctrlz list [--json]`` (the click-free door)."""
    ws = open_here()
    try:
        show(ws, as_json)
    finally:
        ws.close()
