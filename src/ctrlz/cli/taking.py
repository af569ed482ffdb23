"""``ctrlz snapshot``'s output, and its plain forms without click.

Agents' shell wrappers and people's muscle memory run ``ctrlz snapshot`` more than any other
writing command, and click is a third of its cold start. :func:`ctrlz.cli.main` runs the two
plain forms, ``ctrlz snapshot`` and ``ctrlz snapshot --json``, straight through :func:`run`;
every other form (a label, a pin, a type) goes through click to ``snapshot_cmd``, which
prints with the same :func:`show`. One output, two doors.
"""

from __future__ import annotations

from . import render

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: skipped paths printed under a snapshot; the rest are counted (``ctrlz show`` lists them)
SHOWN_SKIPPED = 10


def lines(snap: dict[str, Any], as_json: bool) -> list[tuple[bool, str]]:
    """What ``ctrlz snapshot`` prints of the new snapshot, from its JSON form
    (``Snapshot.to_json()``: what ``--json`` prints, and what a daemon that took it sends
    whole, see :mod:`ctrlz.session.served`): that form, or one line and what it left out.
    Each line with whether it goes to stderr; :func:`show` prints them, and the native door
    (:mod:`ctrlz.door.serve`) sends them to its caller."""
    if as_json:
        return [(False, render.json_text(snap))]
    name = f' "{snap["label"]}"' if snap["label"] else ""
    out = [(False, f"{snap['id']}{name}  {render.snapshot_summary(snap)}")]
    skipped = snap["skipped"]
    for k in skipped[:SHOWN_SKIPPED]:  # paths as `ctrlz status` shows them, no root
        out.append((True, f"skipped {render.path_text(k['path'])}: {k['reason']}"))
    if len(skipped) > SHOWN_SKIPPED:
        out.append((True, f"skipped {len(skipped) - SHOWN_SKIPPED} more path(s); "
                          f"see `ctrlz show {snap['id']}`"))
    return out


def show(snap: dict[str, Any], as_json: bool) -> None:
    """Print :func:`lines`."""
    for err, text in lines(snap, as_json):
        render.echo(text, err=err)


def run(as_json: bool) -> None:
    """The whole of ``ctrlz snapshot [--json]`` (the click-free door): a manual snapshot,
    taken by the workspace daemon without opening the workspace when one runs
    (:mod:`ctrlz.session.served`), else here."""
    from ..session import served
    from . import progress

    progress.delay()  # a bad $CTRLZ_PROGRESS_DELAY is an error whoever takes the snapshot
    snap = served.snapshot(".")
    if snap is None:
        from .listing import open_here

        ws = open_here()
        try:
            with progress.shown():
                snap = ws.snapshot().to_json()
        finally:
            ws.close()
    show(snap, as_json)
