"""The watcher ``ctrlz run`` uses where :mod:`ctrlz.platform` offers none (no inotify and no
``watchdog`` installed): it sees nothing, and says so on every take.

Its dirty set always has ``rescan_all``, so every snapshot of the session walks the whole tree
(the same snapshot a watcher would have narrowed, only slower), and nothing is trusted that no
event vouched for. The run's snapshots before and after, its timer and its triggers from exec
events are unchanged; only the file-event rows and the idle trigger's "files changed" are
missing.
"""

from __future__ import annotations

from .changes import DirtySet


class NoWatcher:
    """:class:`~ctrlz.sources.watch.Watcher`'s interface as ``ctrlz run`` uses it, watching
    nothing."""

    active = False

    def start(self) -> None:
        """Nothing to watch with."""

    def stop(self) -> None:
        """Nothing was started."""

    def sync(self, timeout: float = 10.0) -> bool:
        """No event can be waited for: False, as a watcher whose thread is not running."""
        return False

    def take_dirty(self) -> DirtySet:
        """Every take: nothing can be vouched for, scan everything."""
        return DirtySet(frozenset(), True)
