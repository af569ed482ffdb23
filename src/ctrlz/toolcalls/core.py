"""Shared machinery of the tool-call API: open the store, capture paths, record results.

Capturing runs under the tool-call store's lock. Restoring goes through the restore engine
(:mod:`ctrlz.toolcalls.restore.restore`) and takes the workspace store's lock first, then this one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from ..errors import SnapshotNotFound, UsageError
from ..paths import workspace_relative
from ..state.store.objects import ObjectWriter
from . import intake, records
from .images import Image, UnsafePath, capture, fingerprint
from .place import Place
from .store import ToolcallStore, locate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# a ctrlz.Workspace, a path inside one, or None (the cwd); only annotations use it
WorkspaceLike = Any if TYPE_CHECKING else object


@contextmanager
def opened(workspace: WorkspaceLike = None, root: str | os.PathLike[str] | None = None
           ) -> Iterator[Place]:
    """The tool-call store of ``workspace`` (a Workspace, or a path), else of the workspace
    containing ``root`` or the current directory, with every capture hooks left in its
    inbox indexed first (:mod:`ctrlz.toolcalls.intake`): no caller sees the store without
    them, a restore included."""
    if isinstance(getattr(workspace, "store_dir", None), str):
        # a hook's context: its paths as strings, so no Path is made (pathlib stays unloaded)
        ws_root, store = workspace.root_dir, workspace.store_dir
    elif workspace is not None and hasattr(workspace, "store_path"):
        ws_root, store = os.fspath(workspace.root), os.fspath(workspace.store_path)
    else:
        ws_root, store = locate(workspace if workspace is not None else (root or "."))
    tc = ToolcallStore(store)
    try:
        place = Place(os.path.realpath(ws_root), tc)
        if intake.waiting(place):
            intake.take_in(place)
        yield place
    finally:
        tc.close()


@contextmanager
def opened_workspace(workspace: WorkspaceLike = None) -> Iterator[Any]:
    """The :class:`~ctrlz.session.protected.ProtectedWorkspace` for ``workspace`` (one, a
    :class:`ctrlz.Workspace`, or a path; None: the current directory), for the operations that
    restore through the engine. Imported here, not at the top: hooks never need it."""
    from ..session.protected import ProtectedWorkspace

    if isinstance(workspace, ProtectedWorkspace):
        yield workspace
        return
    if hasattr(workspace, "store_dir"):  # a hook's context: its store is located already
        ws = ProtectedWorkspace.located(workspace.root_dir, workspace.store_dir)
    else:
        start: Any = workspace if workspace is not None else "."
        if not isinstance(workspace, (str, bytes, os.PathLike, type(None))):
            start = workspace.root
        root, store = locate(start)
        ws = ProtectedWorkspace.located(root, store)
    try:
        yield ws
    finally:
        ws.close()


def check_id(name: str, value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{name} must be a non-empty string")
    return value


def rel_of(place: Place, path: str | os.PathLike[str] | bytes, base: str | None = None, *,
           on_disk: bool = False) -> bytes:
    """A path (absolute, or relative to ``base``/the cwd) as workspace-relative bytes, by the
    one path check (:func:`ctrlz.paths.where`): ``on_disk`` for a path about to be captured
    and written (its parents' links followed, as the write would), else a name to restore
    (lexical: the restore engine refuses a link in its way)."""
    start = os.fsencode(base) if base else os.fsencode(os.getcwd())
    return workspace_relative(place.rootb, path, start, allow_root=False, on_disk=on_disk)


def require(place: Place, session_id: str, snapshot_id: str) -> records.SnapRow:
    if not records.session_exists(place.db, session_id):
        raise SnapshotNotFound(f"no snapshots registered for session {session_id}")
    snap = records.find(place.db, session_id, snapshot_id)
    if snap is None:
        raise SnapshotNotFound(f"unknown snapshot {snapshot_id} in session {session_id}")
    return snap


def capture_into(place: Place, snap: records.SnapRow, rels: Iterable[bytes],
                 invalidate: bool = True) -> list[bytes]:
    """Capture the pre-image of every path the snapshot has not seen yet (first touch wins).
    Returns the paths captured now. Call with the store lock held."""
    pending = read_images(place, snap.seq, rels)
    if pending is None:
        return []
    with place.store.catalog.transaction():
        index_images(place, snap, pending, invalidate)
    return [rel for rel, _ in pending[1]]


Pending = tuple[ObjectWriter, list[tuple[bytes, Image]]]


def read_images(place: Place, seq: int | None, rels: Iterable[bytes]) -> Pending | None:
    """Read the pre-images of the paths snapshot ``seq`` (None: not registered yet) has not
    captured, into a writer whose bytes are not yet durable; None when there is nothing to
    capture. Follow with :func:`index_images` inside a transaction, so a caller can make the
    capture and its other rows one commit."""
    todo = [r for r in dict.fromkeys(rels)
            if seq is None or not records.has_entry(place.db, seq, r)]
    if not todo:
        return None
    writer = place.store.objects.writer()
    try:
        images = [(rel, capture(place.rootb, rel, writer)) for rel in todo]
    except UnsafePath as exc:
        writer.abort()
        raise UsageError(f"cannot capture a pre-image there: {exc}") from None
    except BaseException:
        writer.abort()
        raise
    return writer, images


def index_images(place: Place, snap: records.SnapRow, pending: Pending,
                 invalidate: bool = True) -> None:
    """Make the bodies durable (fsync), then add their index rows and the snapshot's entries.
    Call inside a catalog transaction: its commit is what makes the capture visible."""
    writer, images = pending
    writer.commit(place.store.catalog)
    for rel, image in images:
        records.add_entry(place.db, snap.seq, rel, image)
    if invalidate:
        records.clear_redo(place.db, snap.session_id)


def record_post(place: Place, snap: records.SnapRow, rels: Iterable[bytes] | None = None) -> None:
    """Remember what the tool call left at its paths (checked by later restores)."""
    wanted = set(rels) if rels is not None else None
    posts = [(e.path, fingerprint(place.rootb, e.path, place.store.objects))
             for e in records.entries(place.db, snap.seq)
             if wanted is None or e.path in wanted]
    with place.store.catalog.transaction():
        for rel, image in posts:
            records.set_post(place.db, snap.seq, rel, image)


def expected_now(place: Place, snap: records.SnapRow, entry: records.EntryRow) -> Image | None:
    """What should be at the path if nobody changed it after this tool call."""
    return entry.post or records.next_pre(place.db, snap.session_id, snap.seq, entry.path)


def evict(place: Place, session_id: str, protected: int | None) -> list[str]:
    with place.store.catalog.transaction():
        gone = records.enforce_cap(place.db, session_id, protected)
    if gone:
        place.store.compact()
    return gone
