"""A progress bar on stderr for long work: a first snapshot, a restore, gc, verify.

The command wraps its one library call in :func:`shown`; the engine counts into a
:class:`~ctrlz.state.meter.Meter` and a thread draws it with rich, from ``delay`` seconds on
(0.5 s, or ``$CTRLZ_PROGRESS_DELAY``): work that finishes sooner shows nothing, and so does
anything whose stderr is not a terminal. Stdout is never written, so ``--json`` is unaffected.
rich loads only when a bar is drawn.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading

    from ..state.meter import Meter

DELAY = 0.5


@contextmanager
def shown() -> Iterator[None]:
    if not sys.stderr.isatty():
        yield
        return
    import threading

    from ..state import meter

    bar = meter.Meter()
    meter.install(bar)
    stop = threading.Event()
    drawer = threading.Thread(target=_draw, args=(bar, stop), name="ctrlz-progress",
                              daemon=True)
    drawer.start()
    try:
        yield
    finally:
        stop.set()
        drawer.join()
        meter.install(None)


def _draw(bar: Meter, stop: threading.Event) -> None:
    try:
        delay = float(os.environ.get("CTRLZ_PROGRESS_DELAY", DELAY))
    except ValueError:
        delay = DELAY
    if stop.wait(delay):
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    with Progress(TextColumn("{task.description:<15}"), BarColumn(),
                  TextColumn("{task.fields[files]}"), DownloadColumn(binary_units=True),
                  TransferSpeedColumn(),
                  TimeRemainingColumn(), console=Console(stderr=True), transient=True) as p:
        task = p.add_task(bar.phase, total=None, files="")
        while True:
            stopping = stop.wait(0.1)
            unit = bar.unit
            files = (f"{bar.files:,}/{bar.files_total:,} {unit}" if bar.files_total
                     else f"{bar.files:,} {unit}")
            p.update(task, description=bar.phase, completed=bar.bytes,
                     total=bar.bytes_total or None, files=files)
            if stopping:  # the last phase is drawn once at least, however short it was
                p.refresh()
                break
