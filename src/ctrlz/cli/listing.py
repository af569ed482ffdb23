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
    from collections.abc import Callable, Sequence

    from ..types import Snapshot
    from ..workspace import Workspace


def open_here() -> Workspace:
    """The protected workspace containing the current directory (errors clearly if none),
    saying on stderr what an interrupted restore left and opening it cleaned up, and, once,
    which agent hooks failed since the last command."""
    from ..workspace import Workspace

    ws = Workspace.open(".")
    # a snapshot or restore run here starts the workspace daemon for the next command
    ws.start_daemon = True
    for note in ws.recovered:
        render.note(f"ctrlz: {note}")
    tell_hook_failures(ws)
    return ws


def tell_hook_failures(ws: Workspace) -> None:
    """The agent hooks that failed since the last command, on stderr, once. A hook never
    tells the agent (it exits 0 whatever happens, as the agents require), so the person at
    the next command is told: a hook that fails on every call would otherwise stop the
    captures without a word. Telling is never worth failing the command for."""
    from ..toolcalls.hook_log import describe, untold

    try:
        news = untold(ws)
    except Exception:  # noqa: BLE001 - `ctrlz status` still shows them
        return
    if news:
        render.note(f"ctrlz: warning: {describe(news)} (`ctrlz status` shows the last day's)")


HEADERS = ("ID", "TYPE", "LABEL", "SIZE", "FILES", "CREATED")
RIGHT = (3, 4)


def show(ws: Workspace, as_json: bool) -> None:
    """Every snapshot, newest first: a table and the store's use, or the records as JSON."""
    snaps = list(reversed(ws.snapshots()))
    if as_json or not render.is_tty():
        for _, text in lines(snaps, lambda: ws.store_disk_bytes(), ws.config["store_cap"],
                             as_json):
            render.out(text)
        return
    render.table(HEADERS, _rows(snaps), right=RIGHT)
    render.out(_footer(snaps, ws.store_disk_bytes(), ws.config["store_cap"]))


def lines(snaps: Sequence[Snapshot], used: Callable[[], int], cap: int,
          as_json: bool) -> list[tuple[bool, str]]:
    """What ``ctrlz list`` prints when stdout is not a terminal (a terminal gets rich's
    table), each line with whether it goes to stderr (never, here): :func:`show` prints
    them, and the native door (:mod:`ctrlz.door.serve`) sends them to its caller.
    ``used``: the store's bytes on disk, asked only for the table's last line."""
    if as_json:
        return [(False, render.json_text([s.to_json() for s in snaps]))]
    return [(False, line) for line in render.table_lines(HEADERS, _rows(snaps), RIGHT)] + [
        (False, _footer(snaps, used(), cap))]


def _rows(snaps: Sequence[Snapshot]) -> list[list[str]]:
    return [[s.id, s.type + (" (pinned)" if s.pinned else ""), s.label or "",
             f"{render.size(s.bytes)} ({render.signed_size(s.size_delta)})", str(s.files),
             render.ago(s.created_ns)] for s in snaps]


def _footer(snaps: Sequence[Snapshot], used: int, cap: int) -> str:
    return (f"{len(snaps)} snapshot{'s' if len(snaps) != 1 else ''}, "
            f"store {render.size(used)} of cap {render.size(cap)}")


def run(as_json: bool) -> None:
    """The whole of ``ctrlz list [--json]`` (the click-free door)."""
    ws = open_here()
    try:
        show(ws, as_json)
    finally:
        ws.close()
