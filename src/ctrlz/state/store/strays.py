"""The "writing" marker: whether a writer may have died with files no index row names.

A writer's pack and loose files are named by no index row until its catalog transaction
commits; a crash before that leaves them behind. Finding them means listing every pack and
loose object against the index, which grows with the history, so recovery does it only when
this marker says a writer may have died (``Repository.recover``).

The rule: a writer creates the marker before its first file (:meth:`StrayMarker.writer_started`)
and removes it once its rows are committed (:meth:`StrayMarker.writer_done`), unless another
writer of the process may have left files (one is still open, or gave up, or was dropped on an
error without either): then the marker stays for the next sweep, which removes it
(:meth:`StrayMarker.swept`). The marker survives kill -9 (the page cache does); after a power
cut it may not, and the files it covered waste space until ``ctrlz gc``, which always sweeps.
"""

from __future__ import annotations

import os

from .packs import full_disk

#: the marker's name in the store directory
WRITING = "writing"


class StrayMarker:
    """The marker's half of :class:`~ctrlz.state.store.objects.ObjectStore` (a mixin, as
    :class:`~ctrlz.state.store.clones.CloneObjects` is its clones' half)."""

    def _init_strays(self, root: str | os.PathLike[str]) -> None:
        self._writing = os.path.join(os.fspath(root), WRITING)
        self._open_writers = 0  # writers of this process with files down and nothing committed
        self._aborted = False  # one of them gave up: its files stay until a sweep

    def writer_started(self) -> None:
        """Before a writer's first file (the caller holds the store lock)."""
        try:
            os.close(os.open(self._writing, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        except OSError as exc:
            raise full_disk(exc, self._writing) from exc
        self._open_writers += 1

    def writer_done(self, aborted: bool) -> None:
        """A writer that started committed its rows (``aborted`` false) or gave up."""
        self._open_writers = max(0, self._open_writers - 1)
        self._aborted = self._aborted or aborted
        if not aborted and self._open_writers == 0 and not self._aborted:
            self.swept()

    def may_have_strays(self) -> bool:
        return os.path.exists(self._writing)

    def swept(self) -> None:
        """No stray is left now: just swept (under the lock, with no writer open: the lock's
        holder sweeps before it writes), or every writer committed."""
        self._open_writers = 0
        self._aborted = False
        try:
            os.unlink(self._writing)
        except OSError:  # gone already; or it stays, and the next writer sweeps for nothing
            pass
