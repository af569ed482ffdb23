"""Snapshots and rollbacks the workspace daemon runs, asked for without opening the workspace.

Opening a :class:`~ctrlz.session.protected.ProtectedWorkspace` builds ``pathlib`` paths and
loads the modules around it: ~10 ms of a fresh process's start-up (``pathlib`` alone brings
``re``, ``urllib`` and ``ipaddress``), where the daemon takes a no-change snapshot in ~2 ms.
When a daemon runs, a short-lived process needs none of that: the one locator on strings
(:func:`ctrlz.session.locator.locate`), the configuration (which the daemon checks against its own),
one request, and the record the daemon sends back. This module is that path, for the plain
``ctrlz snapshot`` and ``ctrlz rollback SNAP``; and it holds the one way each request is asked
(:func:`ask_snapshot`, :func:`ask_restore`), which an opened workspace uses too.

It answers only when the daemon did the whole job. Anything else is ``None`` and the caller
opens the workspace as usual, where the same case is met with its full handling: no
workspace here or an unreadable store (its error), no daemon or one that declined (the work
done in-process), a restore's journal left by a crash (the daemon declines while one is
there: the opened workspace recovers it, and shows its notes, before anything else runs).
Once a daemon has a restore, its outcome is final (see :func:`ask_restore`).

A served snapshot comes back in its JSON form (``Snapshot.to_json()``, which the daemon sends
whole), and the CLI prints from that form on both of its doors: building the
:class:`~ctrlz.types.Snapshot` record would load ``collections`` for its named tuple, ~2 ms
of a command whose whole budget is twice git's ~8 ms.
"""

from __future__ import annotations

import os

from ..errors import CtrlzError, RestoreError, WorkspaceError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..engine.restore.requests import RestoreResult
    from ..types import Snapshot


def _served_here(start: str) -> tuple[str, str, dict[str, Any]] | None:
    """(root, store, settings) of the workspace containing ``start`` when a daemon may serve
    it, else None (see the module docstring). A configuration file that cannot be read is
    an error here as it is when the workspace opens."""
    from . import daemon_client
    from .locator import locate

    try:
        root, store = locate(start)
    except WorkspaceError:
        return None
    socket = os.path.join(store, daemon_client.SOCKET_NAME)
    if not os.path.exists(socket):  # no daemon: one stat, and the workspace opens as usual
        _in_process(f"no daemon: {socket} is not there")
        return None
    from .config import load_config

    return root, store, load_config(root).values


def snapshot(start: str = ".", *, type: str = "manual", label: str | None = None,
             pinned: bool = False, session_id: str | None = None) -> dict[str, Any] | None:
    """The JSON form (``Snapshot.to_json()``) of the snapshot the daemon of the workspace
    containing ``start`` took, or None when no daemon did."""
    here = _served_here(start)
    if here is None:
        return None
    _, store, config = here
    reply = _ask_snapshot(store, config, type=type, label=label, pinned=pinned,
                          session_id=session_id)
    if reply is None:
        return None
    view = reply.get("snapshot")
    if isinstance(view, dict) and str(view.get("id", "")).startswith("snap_") \
            and isinstance(view.get("changes"), dict):
        return view
    try:  # not a form this ctrlz prints: the catalog has the record
        snap = _lookup(store, str(reply["snapshot"]["id"]))
    except (KeyError, TypeError):
        return None
    return snap.to_json() if snap is not None else None


def _ask_snapshot(store: str | os.PathLike[str], config: dict[str, Any], *, type: str,
                  label: str | None, pinned: bool,
                  session_id: str | None) -> dict[str, Any] | None:
    """The daemon's reply to a snapshot request, or None when no daemon answered or it
    declined (a full manual pool, another configuration, a restore's journal...), so that
    the caller takes the snapshot in-process and meets the error itself."""
    from . import daemon_client

    try:
        return daemon_client.snapshot(store, type=type, label=label, session_id=session_id,
                                      pinned=pinned, config=config)
    except daemon_client.DaemonUnavailable as exc:
        _in_process(str(exc))
        return None


def rollback(start: str, ref: str) -> RestoreResult | None:
    """The whole workspace containing ``start`` rolled back to snapshot ``ref`` by its
    daemon (which resolves ``ref`` itself), or None when no daemon took it. Its errors are
    final: a daemon that took the rollback and failed raises that failure here."""
    here = _served_here(start)
    if here is None:
        return None
    from . import restore_wire

    _, store, config = here
    return ask_restore(store, config, restore_wire.encode_rollback(ref, [], "rollback"),
                       "rollback")


def ask_snapshot(store: str | os.PathLike[str], config: dict[str, Any], *, type: str,
                 label: str | None, pinned: bool, session_id: str | None,
                 lookup: Callable[[str], Snapshot]) -> Snapshot | None:
    """A snapshot taken by the daemon, as the record an opened workspace returns: None when
    no daemon took it (see :func:`_ask_snapshot`). ``lookup``: the catalog's record of a
    snapshot id, for a daemon that sent none."""
    reply = _ask_snapshot(store, config, type=type, label=label, pinned=pinned,
                          session_id=session_id)
    if reply is None:
        return None
    from ..state.interchange.portable import from_record

    try:  # the whole record: this process need not open the store to read it
        record = reply["record"]
        return from_record(record, int(record["number"]))
    except (CtrlzError, KeyError, TypeError, ValueError):
        pass  # a daemon from before records: read it from the catalog
    try:
        return lookup(str(reply["snapshot"]["id"]))
    except (KeyError, TypeError):
        return None


def ask_restore(store: str | os.PathLike[str], config: dict[str, Any],
                body: dict[str, object], kind: str) -> RestoreResult | None:
    """The one way a restore is handed to the daemon: ``body`` (:mod:`.restore_wire`) run
    there, or None when none runs or it declined before starting (the caller then restores
    in-process). Once the daemon has the request, its outcome is final: its error is raised
    here, and a daemon that died mid-way is an error that says how to see what happened,
    never a second attempt. (Never for a target built from the captured state: code, which
    a socket cannot carry.)"""
    from . import daemon_client, restore_wire

    try:
        reply = daemon_client.restore(store, body, config=config)
    except daemon_client.DaemonUnavailable as exc:
        _in_process(str(exc))
        return None
    except KeyboardInterrupt:
        # the daemon has the request and goes on without us: say so, rather than let the
        # usual "interrupted" suggest that nothing happened
        raise RestoreError(
            f"interrupted; the workspace daemon goes on with the {kind} if it had "
            "received it: run `ctrlz list` in a moment for its safety snapshot, which "
            "`ctrlz undo` returns to") from None
    except daemon_client.DaemonLost as exc:
        raise RestoreError(
            f"the workspace daemon stopped during the {kind} without answering ({exc}); "
            "it may have been applied in part. The next ctrlz command cleans up after it from "
            "its journal and records its undo entry: run `ctrlz status`, then `ctrlz undo` "
            "to return to the state before it"
        ) from None
    failed = reply.get("failed")
    if failed is not None:
        raise restore_wire.decode_error(failed)
    try:
        return restore_wire.decode_result(reply["result"])
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RestoreError(
            f"the workspace daemon ran the {kind}, but its report could not be read "
            f"({type(exc).__name__}: {exc}); run `ctrlz list` for its safety snapshot, which "
            "`ctrlz undo` returns to") from None


def _lookup(store: str, snapshot_id: str) -> Snapshot | None:
    from pathlib import Path

    from ..state.store.repository import Repository

    repo = Repository.open(Path(store), readonly=True)
    try:
        return repo.catalog.snapshot(snapshot_id)
    finally:
        repo.close()


def _in_process(why: str) -> None:
    """Say why the work is done in this process rather than by the daemon, when
    ``$CTRLZ_DOOR_TRACE`` asks (the native door names its own hand-overs the same way): a
    daemon that declines is a speed loss nothing else shows."""
    from ..protocol import trace

    trace(f"in this process: {why}")
