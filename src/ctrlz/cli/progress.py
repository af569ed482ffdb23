"""A progress bar on stderr for long work: a first snapshot, a restore, gc, verify.

The command wraps its one library call in :func:`shown`; the engine counts into a
:class:`~ctrlz.state.meter.Meter` and a thread draws it with rich, from ``delay`` seconds on
(0.5 s, or ``$CTRLZ_PROGRESS_DELAY``): work that finishes sooner shows nothing, and so does
anything whose stderr is not a terminal. Stdout is never written, so ``--json`` is unaffected.
rich loads only when a bar is drawn.

``$CTRLZ_PROGRESS_DELAY`` is checked by every command that may draw, terminal or not, as the
other ``CTRLZ_*`` values are: a bad value is a one-line error, never a silent half second.
This module imports nothing past ``os`` and ``sys``, so the click-free doors (``ctrlz
snapshot``, ``ctrlz rollback SNAP``) can check it before their daemon does the work.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading

    from ..state.meter import Meter

DELAY = 0.5
DELAY_ENV = "CTRLZ_PROGRESS_DELAY"


def delay() -> float:
    """Seconds before a bar is drawn: ``$CTRLZ_PROGRESS_DELAY`` (unset or empty: 0.5).

    Anything but a finite number >= 0 is a :class:`~ctrlz.errors.ConfigError` (exit 2),
    named as ``load_config`` names a bad ``CTRLZ_<KEY>``: a typo must not pass for the
    default."""
    raw = os.environ.get(DELAY_ENV, "")
    if not raw.strip():
        return DELAY
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):  # nan, inf and negatives too
        from ..errors import ConfigError

        raise ConfigError(f"${DELAY_ENV} must be a number of seconds >= 0, not {raw!r}; set "
                          f"it to one (e.g. {DELAY}) or unset it")
    return value


def shown() -> _Shown:
    """A context manager that draws the bar around the work it wraps (see the module
    docstring); :func:`delay` is checked on entry, drawn or not."""
    return _Shown()


class _Shown:
    """What :func:`shown` returns: a class, not ``contextlib.contextmanager``, whose import
    (with ``collections`` and ``functools``) would cost the click-free doors milliseconds."""

    def __init__(self) -> None:
        self._stop: threading.Event | None = None
        self._drawer: threading.Thread | None = None

    def __enter__(self) -> None:
        wait = delay()
        if not sys.stderr.isatty():
            return
        import threading

        from ..state import meter

        bar = meter.Meter()
        meter.install(bar)
        self._stop = threading.Event()
        self._drawer = threading.Thread(target=_draw, args=(bar, self._stop, wait),
                                        name="ctrlz-progress", daemon=True)
        self._drawer.start()

    def __exit__(self, *exc: object) -> None:
        if self._stop is None or self._drawer is None:
            return
        from ..state import meter

        self._stop.set()
        self._drawer.join()
        meter.install(None)


def _draw(bar: Meter, stop: threading.Event, wait: float) -> None:
    import threading

    if stop.wait(min(wait, threading.TIMEOUT_MAX)):  # a huge delay: never, not OverflowError
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
