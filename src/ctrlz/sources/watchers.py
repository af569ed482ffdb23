"""Which file watcher a session runs: the one place that turns :func:`ctrlz.platform.watcher`
into an object, so the daemon and ``ctrlz run`` cannot pick differently.

- ``inotify``: :class:`~ctrlz.sources.watch.Watcher`, ctrlz's own (Linux);
- ``watchdog:<observer>``: :class:`~ctrlz.sources.observe.ObserverWatcher` (FSEvents on macOS,
  kqueue on the BSDs, polling in portable mode and wherever nothing else exists);
- None: :class:`~ctrlz.sources.nowatch.NoWatcher` (watchdog not installed), which makes every
  snapshot a full walk.

Each is imported only when chosen (inotify_simple is Linux only; watchdog costs an import).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from .. import platform
from .changes import FileEvent

if TYPE_CHECKING:
    from .nowatch import NoWatcher
    from .observe import ObserverWatcher
    from .watch import Watcher

    #: what a session holds: every one has start, stop, sync and take_dirty; the first two
    #: also mark_dirty, is_dirty and renew (``session/daemon/watch_audit.py``)
    AnyWatcher: TypeAlias = Watcher | ObserverWatcher | NoWatcher


def open_watcher(root: Path, is_excluded: Callable[[bytes, bool], bool],
                 on_events: Callable[[list[FileEvent]], None], *,
                 poll_seconds: float = 1.0, **options: Any) -> AnyWatcher:
    """The watcher for ``root`` that this machine offers, not started. ``options`` are
    :class:`~ctrlz.sources.watch.Watcher`'s (callbacks, ``coalesce_seconds``,
    ``max_watches``); ``poll_seconds`` is the polling observer's interval."""
    kind = platform.watcher()
    if kind is None:
        from .nowatch import NoWatcher

        return NoWatcher()
    if kind == "inotify":
        from .watch import Watcher

        return Watcher(root, is_excluded, on_events, **options)
    from .observe import ObserverWatcher

    return ObserverWatcher(root, is_excluded, on_events, backend=kind.partition(":")[2],
                           poll_seconds=poll_seconds, **options)
