"""Per-tool-call snapshots (harn's ``fs_snapshot`` family), durable and deduplicated.

A snapshot is keyed by ``(session_id, snapshot_id)``; ``snapshot_id`` is the ``scope_id`` given
(canonically the agent's tool-call id), so the snapshot and the transcript share one id space.
Explicit mode captures the given paths now; lazy mode opens a scope and the :func:`write_file` /
:func:`delete_file` helpers capture each path the first time they touch it inside
``with tool_call(...)``. Unlike harn, the state is in SQLite and survives a restart, bodies are
deduplicated across every tool call, and a restore does not clobber a later edit unless forced.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from . import ACP_TURN, records
from .core import (
    Place,
    WorkspaceLike,
    capture_into,
    check_id,
    evict,
    index_images,
    opened,
    opened_workspace,
    read_images,
    record_post,
    rel_of,
    require,
)
from .images import write_bytes
from .register import ENDED, enter_turn, next_turn, register_rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PathArg = str | os.PathLike[str] | bytes


def fs_snapshot(session_id: str, scope_id: str, paths: Sequence[PathArg] | None = None,
                root: str | os.PathLike[str] | None = None, *,
                workspace: WorkspaceLike = None, agent: str | None = None,
                tool: str | None = None, args_key: str | None = None,
                turn_key: str | None = None) -> dict[str, Any]:
    """Register the snapshot ``scope_id`` (re-registering is an upsert) and capture ``paths``
    now; without paths, open it so the helpers capture lazily. ``turn_key``: the agent's turn
    id, which may start the next turn (:func:`enter_turn`) in the same transaction. Returns
    ``{snapshot_id, captured_paths, byte_count}``; paths are workspace-relative everywhere in
    this API."""
    check_id("session_id", session_id)
    check_id("scope_id", scope_id)
    with opened(workspace, root) as place:
        base = os.fspath(root) if root is not None else None
        rels = [rel_of(place, p, base, on_disk=True) for p in paths or ()]
        return _capture(place, session_id, scope_id, rels, lazy=not paths, agent=agent,
                        tool=tool, args_key=args_key, turn_key=turn_key)


def capture_rels(session_id: str, scope_id: str, rels: Sequence[bytes], *,
                 workspace: WorkspaceLike, agent: str | None = None, tool: str | None = None,
                 args_key: str | None = None, turn_key: str | None = None) -> dict[str, Any]:
    """:func:`fs_snapshot` of paths already checked and made workspace-relative (a hook's,
    :func:`ctrlz.hooks.actions.inside`): they are not converted a second time."""
    check_id("session_id", session_id)
    check_id("scope_id", scope_id)
    with opened(workspace) as place:
        return _capture(place, session_id, scope_id, rels, lazy=not rels, agent=agent,
                        tool=tool, args_key=args_key, turn_key=turn_key)


def _capture(place: Place, session_id: str, scope_id: str, rels: Sequence[bytes], *,
             lazy: bool, agent: str | None, tool: str | None, args_key: str | None,
             turn_key: str | None) -> dict[str, Any]:
    with place.store.lock:
        # One commit for registration, pre-images and eviction (each commit is an fsync):
        # the bodies are read first, then fsynced and indexed inside that transaction.
        known = records.find(place.db, session_id, scope_id)
        try:
            pending = read_images(place, known.seq if known else None, rels)
        except BaseException:
            # as before: the snapshot is registered even when a path cannot be captured
            _register(place, session_id, scope_id, lazy=lazy, agent=agent, tool=tool,
                      args_key=args_key, turn_key=turn_key)
            raise
        with place.store.catalog.transaction():
            snap = register_rows(place.db, session_id, scope_id, lazy=lazy,
                                 agent=agent, tool=tool, args_key=args_key,
                                 turn_key=turn_key)
            if pending is not None:
                index_images(place, snap, pending)
            gone = records.enforce_cap(place.db, session_id, snap.seq)
        if gone:
            place.store.compact()
        snap = require(place, session_id, scope_id)
    return {"snapshot_id": snap.snapshot_id,
            "captured_paths": [os.fsdecode(p) for p in snap.paths],  # types.show_path
            "byte_count": snap.byte_count}


def _register(place: Place, session_id: str, scope_id: str, *, lazy: bool,
              agent: str | None = None, tool: str | None = None, kind: str = "files",
              detail: str | None = None, args_key: str | None = None,
              ws_snapshot: str | None = None, turn_key: str | None = None) -> records.SnapRow:
    with place.store.catalog.transaction():
        return register_rows(place.db, session_id, scope_id, lazy=lazy, agent=agent, tool=tool,
                             kind=kind, detail=detail, args_key=args_key,
                             ws_snapshot=ws_snapshot, turn_key=turn_key)


def fs_restore(session_id: str, snapshot_id: str, paths: Sequence[PathArg] | None = None, *,
               force: bool = False, workspace: WorkspaceLike = None) -> dict[str, Any]:
    """Put the snapshot's pre-images back (a path captured as absent is deleted), through the
    restore engine: the current state of those paths is captured first, so ``ctrlz undo``
    takes the restore back. A path whose content is no longer what the tool call left there
    is skipped and reported, unless ``force``. Returns ``{snapshot_id, restored_paths,
    skipped_paths_with_reasons, safety_snapshot}``."""
    from .restore.restore import restore_tool_calls

    with opened_workspace(workspace) as ws, ws.repo.lock, opened(ws) as place, \
            place.store.lock:
        snap = require(place, session_id, snapshot_id)
        wanted = {rel_of(place, p) for p in paths} if paths else None
        if snap.kind == "bash":
            return {"snapshot_id": snapshot_id, "restored_paths": [],
                    "skipped_paths_with_reasons": [{
                        "path": snap.detail or "", "reason": "a shell command: its changes are "
                        f"in workspace snapshot {snap.ws_snapshot}; use `ctrlz rewind "
                        f"{snapshot_id}`"}], "safety_snapshot": None}
        entries = [e for e in records.entries(place.db, snap.seq)
                   if wanted is None or e.path in wanted]
        outcome = restore_tool_calls(ws, place, session_id, [snap], only=wanted, force=force,
                                     kind="toolcall", label=snapshot_id)
        report = outcome.per_call(snap, entries)  # before clear_redo, which may forget snap
        with place.store.catalog.transaction():
            records.clear_redo(place.db, session_id)
        safety = outcome.result.safety
        return report | {"safety_snapshot": safety.id if safety else None}


def finish_tool_call(session_id: str, snapshot_id: str | None = None, *,
                     args_key: str | None = None, workspace: WorkspaceLike = None) -> bool:
    """Record what a tool call left at its paths (an agent's PostToolUse/AfterTool), so a later
    restore can tell the tool's own result from a later edit. ``args_key`` finds the newest
    snapshot registered with that key (Gemini sends no tool-call id). Returns whether found."""
    with opened(workspace) as place, place.store.lock:
        if snapshot_id is not None:
            snap = records.find(place.db, session_id, snapshot_id)
        else:
            row = place.db.execute("SELECT snapshot_id FROM tc_snapshots WHERE session_id = ? "
                                   "AND args_key = ? ORDER BY seq DESC LIMIT 1",
                                   (session_id, args_key)).fetchone()
            snap = records.find(place.db, session_id, row[0]) if row else None
        if snap is None or snap.kind != "files":
            return False
        record_post(place, snap)
        return True


def list_snapshots(session_id: str, *, workspace: WorkspaceLike = None) -> list[dict[str, Any]]:
    """The session's tool-call snapshots, sorted by capture time."""
    with opened(workspace) as place:
        return [s.to_json() for s in records.snapshots(place.db, session_id)]


def drop_snapshot(session_id: str, snapshot_id: str, *,
                  workspace: WorkspaceLike = None) -> dict[str, Any]:
    """Forget one snapshot and its bodies (idempotent)."""
    with opened(workspace) as place, place.store.lock:
        snap = records.find(place.db, session_id, snapshot_id)
        if snap is not None:
            with place.store.catalog.transaction():
                records.delete_snapshot(place.db, snap.seq)
            place.store.compact()
        return {"snapshot_id": snapshot_id, "dropped": snap is not None}


def drop_session(session_id: str, *, workspace: WorkspaceLike = None) -> dict[str, Any]:
    """Forget every snapshot, turn and redo entry of a session."""
    with opened(workspace) as place, place.store.lock:
        with place.store.catalog.transaction():
            n = records.drop_session(place.db, session_id)
        place.store.compact()
        return {"session_id": session_id, "dropped_snapshots": n}


def configure_byte_cap(session_id: str, cap: int, *, workspace: WorkspaceLike = None) -> list[str]:
    """Set the session's byte cap (default 1 GiB) and enforce it now; returns evicted ids."""
    with opened(workspace) as place, place.store.lock:
        with place.store.catalog.transaction():
            records.ensure_session(place.db, session_id)
            records.set_byte_cap(place.db, session_id, cap)
        open_seq = place.db.execute("SELECT seq FROM tc_snapshots WHERE session_id = ? AND "
                                    "open = 1", (session_id,)).fetchone()
        return evict(place, session_id, protected=open_seq[0] if open_seq else None)


def start_session(session_id: str, *, workspace: WorkspaceLike = None,
                  agent: str | None = None) -> None:
    """Start (or resume) an agent session; idempotent."""
    with opened(workspace) as place, place.store.lock, place.store.catalog.transaction():
        records.ensure_session(place.db, session_id, agent)


def begin_turn(session_id: str, *, workspace: WorkspaceLike = None,
               agent: str | None = None, turn_key: str | None = None) -> int:
    """Start the next turn (a user prompt); later snapshots belong to it. Clears redo.

    ``turn_key`` is the agent's own id for the turn (Claude Code's ``prompt_id``, Codex's
    ``turn_id``, Cursor's ``generation_id``): a prompt with the key the session already has is
    the same turn and changes nothing (see :func:`enter_turn`, which tool calls use too).
    A prompt without a key that comes while the session's turn is one ``ctrlz acp`` began
    (:data:`~ctrlz.toolcalls.ACP_TURN`) is the agent's own hook for that same prompt: it joins
    that turn, once (two doors, one turn; a second turn made the proxy roll back the wrong
    one)."""
    with opened(workspace) as place, place.store.lock, place.store.catalog.transaction():
        if turn_key is not None:
            return enter_turn(place.db, session_id, agent, turn_key, prompt=True)
        turn = records.ensure_session(place.db, session_id, agent)
        known = records.turn_key(place.db, session_id)
        if known is not None and known.startswith(ACP_TURN) and turn > 0:
            records.set_turn_key(place.db, session_id, None)
            return turn
        return next_turn(place.db, session_id, None)


def end_turn(session_id: str, *, workspace: WorkspaceLike = None,
             agent: str | None = None) -> None:
    """The agent finished its turn (a Stop event). Only sessions that pass
    :data:`UNTIL_STOP` as their turn key need it: the next prompt or tool call starts a turn."""
    with opened(workspace) as place, place.store.lock, place.store.catalog.transaction():
        records.ensure_session(place.db, session_id, agent)
        records.set_turn_key(place.db, session_id, ENDED)


# -- lazy capture -----------------------------------------------------------------------------

class _Scope:
    """One open lazy scope (a plain class: see :class:`~ctrlz.toolcalls.core.Place`)."""

    __slots__ = ("session_id", "scope_id", "workspace", "root")

    def __init__(self, session_id: str, scope_id: str, workspace: WorkspaceLike,
                 root: str | None) -> None:
        self.session_id = session_id
        self.scope_id = scope_id
        self.workspace = workspace
        self.root = root


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("ctrlz_tool_call",
                                                                       default=None)


@contextmanager
def tool_call(session_id: str, scope_id: str, *, workspace: WorkspaceLike = None,
              root: str | os.PathLike[str] | None = None) -> Iterator[dict[str, Any]]:
    """Open the snapshot ``scope_id`` for the duration of one tool call; ``write_file`` and
    ``delete_file`` inside it capture pre-images lazily. The scope is closed on exit."""
    info = fs_snapshot(session_id, scope_id, None, root, workspace=workspace)
    token = _SCOPE.set(_Scope(session_id, scope_id, workspace,
                              os.fspath(root) if root is not None else None))
    try:
        yield info
    finally:
        _SCOPE.reset(token)
        with opened(workspace, root) as place, place.store.lock, \
                place.store.catalog.transaction():
            place.db.execute("UPDATE tc_snapshots SET open = 0 WHERE session_id = ? AND "
                             "snapshot_id = ?", (session_id, scope_id))


def _with_capture(path: PathArg, action: Any) -> None:
    scope = _SCOPE.get()
    if scope is None:
        action(None, None)
        return
    with opened(scope.workspace, scope.root) as place, place.store.lock:
        snap = require(place, scope.session_id, scope.scope_id)
        rel = rel_of(place, path, on_disk=True)
        capture_into(place, snap, [rel])
        action(place, rel)
        record_post(place, snap, [rel])
        evict(place, scope.session_id, protected=snap.seq)


def write_file(path: PathArg, data: bytes | str, mode: int | None = None) -> None:
    """Write ``data`` atomically at ``path``, capturing its pre-image first when inside
    :func:`tool_call`."""
    body = data.encode() if isinstance(data, str) else bytes(data)

    def action(place: Place | None, rel: bytes | None) -> None:
        if place is None or rel is None:
            full = os.path.abspath(os.fsencode(path))
            write_bytes(os.path.dirname(full), os.path.basename(full), body, mode)
        else:
            write_bytes(place.rootb, rel, body, mode)

    _with_capture(path, action)


def delete_file(path: PathArg) -> None:
    """Delete the file at ``path``, capturing its pre-image first when inside
    :func:`tool_call`. A missing file raises ``FileNotFoundError`` (after the capture)."""

    def action(place: Place | None, rel: bytes | None) -> None:
        full = os.fsencode(path) if place is None or rel is None else place.rootb + b"/" + rel
        os.unlink(full)

    _with_capture(path, action)
