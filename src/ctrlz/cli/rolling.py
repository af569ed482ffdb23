"""``ctrlz rollback``'s output, and its plain forms without click.

``ctrlz rollback SNAP`` is what a person runs the moment an agent has broken something, and
click is a third of its cold start (~15 ms of ~85 ms with the daemon running, where git's own
checkout takes ~45). :func:`ctrlz.cli.main` runs the two plain forms, ``ctrlz rollback SNAP``
and ``ctrlz rollback SNAP --json``, straight through :func:`run`; every other form (paths,
``--dry-run``) goes through click to ``rollback_cmd``, which prints with the same
:func:`report`. One output, two doors, as :mod:`ctrlz.cli.taking` does for ``snapshot``.
"""

from __future__ import annotations

import os

from . import render

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def actions(result: Any) -> list[tuple[bool, str]]:
    """The files a plan writes or deletes (directory bookkeeping left out), and what it left
    alone; each line with whether it goes to stderr."""
    out = [(False, f"  {a.op:<8} {render.path_text(_rel(a.path))}") for a in result.plan.actions
           if a.op not in ("mkdir", "rmdir", "dirmode", "utime")]
    return out + _left_alone(result)


def left_alone(skipped: Iterable[tuple[str, str]]) -> list[tuple[bool, str]]:
    """A ``left alone: PATH: why`` line (for stderr) per (path, reason) a restore did not
    touch, the path quoted as in every message, so that a name with a newline cannot forge a
    line."""
    return [(True, f"left alone: {render.path_text(path)}: {why}") for path, why in skipped]


def _left_alone(result: Any) -> list[tuple[bool, str]]:
    """:func:`left_alone` of a restore's result, read from its records as they are."""
    return left_alone((_rel(k.path), k.reason) for k in result.skipped)


def _rel(vpath: bytes) -> str:
    """A virtual path (``0/...``) as text, workspace-relative: what ``--json`` gives."""
    return os.fsdecode(vpath.partition(b"/")[2])


def git_lines(result: Any) -> list[tuple[bool, str]]:
    """What the restore does (or did) to each git repository's history, one line each
    (:mod:`ctrlz.engine.restore.githistory`), and for a dry run whether the real one needs a
    ``--git=`` choice."""
    out = [(False, g["summary"]) for g in result.git]
    if result.dry_run and any(g["at_risk"] for g in result.git):
        out.append((True, "Without --git=keep (the working tree only) or --git=restore "
                          "(.git back too) this is refused, as it drops commits."))
    return out


def report(result: Any, kind: str, verb: str, as_json: bool) -> None:
    """Print :func:`report_lines`."""
    for err, text in report_lines(result, kind, verb, as_json):
        render.echo(text, err=err)


def report_lines(result: Any, kind: str, verb: str, as_json: bool) -> list[tuple[bool, str]]:
    """A restore's outcome: what it did (or would do), and how to undo it; each line with
    whether it goes to stderr (:func:`report` prints them, and the native door,
    :mod:`ctrlz.door.serve`, sends them to its caller). Text is read from the result's
    records as they are; only ``--json`` converts it, once."""
    if as_json:
        return [(False, render.json_text({"type": kind, **result.to_json()}))]
    target = result.target
    label = f' "{target.label}"' if target.label else ""
    if result.dry_run:
        return [(False, f"Would restore {target.id}{label}: "
                        f"{render.plan_summary(result.plan.counts())}"),
                *git_lines(result), *actions(result), (True, "Nothing was changed (dry run).")]
    out = [(False, f"{verb[0].upper() + verb[1:]} {target.id}{label}: "
                   f"{render.done_summary(result.counts())}"), *git_lines(result)]
    out += _left_alone(result)
    if result.safety is not None:
        out += [(False, f"Safety snapshot: {result.safety.id}"),
                (False, f"Undo with: ctrlz undo  (or: ctrlz rollback {result.safety.id})")]
    return out


def run(snap: str, as_json: bool) -> None:
    """The whole of ``ctrlz rollback SNAP [--json]`` (the click-free door): handed to the
    workspace daemon without opening the workspace when one runs and no one watches a
    progress bar (:mod:`ctrlz.session.served`), else run through the workspace here."""
    import sys

    from . import progress

    progress.delay()  # a bad $CTRLZ_PROGRESS_DELAY is an error whoever runs the rollback
    result = None
    if not sys.stderr.isatty():  # at a terminal, the bar (in-process) wins over milliseconds
        from ..session import served

        result = served.rollback(".", snap)
    if result is None:
        from .listing import open_here

        ws = open_here()
        try:
            with progress.shown():
                result = ws.rollback(snap, None, dry_run=False)
        finally:
            ws.close()
    report(result, "rollback", "rolled back to", as_json)
