"""The live event stream: what changed in any workspace, as server-sent events.

Where events come from: the service cannot see every change as it happens (the CLI, the hooks
and the MCP server write the stores directly), so one source finds them all: the
:class:`Poller` looks at each workspace's store (its SQLite files' size and mtime; nothing is
read unless one moved), compares what it finds with what it saw before and publishes the
difference. It looks when woken: by inotify on the stores' database files
(:mod:`.storewatch`), so a CLI snapshot reaches the stream within milliseconds, and by a route
that changed a workspace (:meth:`Poller.kick`), so the dashboard hears of its own actions at
once, and only once. It also looks once a second whatever happens, which is all there is where
inotify is not available (or runs out of watches).

A look reads each snapshot's id, pin and label only (``Catalog.summaries``), and decodes the
full record of the new and changed ones alone, so a store with thousands of snapshots costs
milliseconds a look, not a decode of its whole history.

Event types: ``snapshot`` (a new one, its record as in ``ctrlz show --json``),
``snapshot-removed``, ``snapshot-updated`` (pinned or label), ``restore`` (an operation on the
undo stack: ``action`` is ``done``, ``undo`` or ``redo``), ``toolcall`` (an agent's tool call
as in ``ctrlz rewind --list --json``), ``hooks`` (an agent hook failed: the day's count, the
last error and its log, as ``hooks`` in ``ctrlz status --json``; the agent is never told, see
:mod:`ctrlz.toolcalls.hook_log`), ``workspace`` (registered, unregistered, new, gone) and
``watcher`` (a watcher's state changed). Each has a per-service ``id``; a client that
reconnects with ``Last-Event-ID`` gets what it missed from the last :data:`REPLAY` events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import StreamingResponse

REPLAY = 1000
QUEUE_MAX = 1000
KEEPALIVE_S = 15.0
#: a store seen for the first time with more snapshots than this (an imported history) is
#: announced by its ``workspace`` event alone, not one event per snapshot
FRESH_MAX = 50
#: ``toolcalls/inbox`` is a directory: a hook's capture renamed into it changes its mtime,
#: and the look that follows indexes it (``ctrlz.toolcalls.intake``); a failed hook writes
#: nothing else, only its line in ``toolcalls/hook-errors.jsonl``
DB_FILES = ("catalog.db", "catalog.db-wal", "session.db-wal", "toolcalls/catalog.db",
            "toolcalls/catalog.db-wal", "toolcalls/inbox", "toolcalls/hook-errors.jsonl")


class EventBus:
    """Fan-out of events to subscribers' queues, with a short replay buffer. Lives on the
    event loop; :meth:`publish` is called there only."""

    def __init__(self) -> None:
        self.seq = 0
        self.recent: deque[dict[str, Any]] = deque(maxlen=REPLAY)
        self._queues: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self.closed = False

    @property
    def subscriber_count(self) -> int:
        return len(self._queues)

    def publish(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        from ..types import iso_utc

        self.seq += 1
        event = {"id": self.seq, "type": kind, "time": iso_utc(time.time_ns()), **data}
        self.recent.append(event)
        for q in list(self._queues):
            try:
                q.put_nowait(event)
            except asyncio.QueueFull:  # a reader that stopped reading: drop it, it reconnects
                self._queues.discard(q)
                with contextlib.suppress(asyncio.QueueFull):
                    q.get_nowait()
                    q.put_nowait(None)
        return event

    def subscribe(self) -> asyncio.Queue[dict[str, Any] | None]:
        q: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(QUEUE_MAX)
        self._queues.add(q)
        return q

    def unsubscribe(self, q: asyncio.Queue[dict[str, Any] | None]) -> None:
        self._queues.discard(q)

    def close(self) -> None:
        self.closed = True
        for q in list(self._queues):
            with contextlib.suppress(asyncio.QueueFull):
                q.put_nowait(None)

    def since(self, last_id: int) -> list[dict[str, Any]] | None:
        """Events after ``last_id`` from the replay buffer; None when some are gone."""
        if last_id > self.seq:
            return None  # an id from before a restart
        missed = [e for e in self.recent if e["id"] > last_id]
        if missed and missed[0]["id"] != last_id + 1:
            return None
        return missed


def _format(event: dict[str, Any]) -> bytes:
    data = json.dumps(event, ensure_ascii=True)
    return f"id: {event['id']}\nevent: {event['type']}\ndata: {data}\n\n".encode()


def stream(bus: EventBus, request: Request) -> StreamingResponse:
    """``GET /v1/events``: the stream, optionally only for ``?workspace=ID``."""
    only = request.query_params.get("workspace")
    last = request.headers.get("last-event-id", "")

    async def body() -> AsyncIterator[bytes]:
        q = bus.subscribe()
        try:
            yield b"retry: 2000\n\n"
            if last.isascii() and last.isdigit():  # (not "²", which int refuses)
                missed = bus.since(int(last))
                if missed is None:
                    yield _format({"id": bus.seq, "type": "resync",
                                   "message": "events were missed; reload everything"})
                for e in missed or []:
                    if only is None or e.get("workspace") in (None, only):
                        yield _format(e)
            else:
                yield _format({"id": bus.seq, "type": "hello", "service_pid": os.getpid()})
            while not bus.closed:
                try:
                    event = await asyncio.wait_for(q.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                if event is None:
                    break
                if only is None or event.get("workspace") in (None, only):
                    yield _format(event)
        finally:
            bus.unsubscribe(q)

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


# -- finding what changed ----------------------------------------------------------------------


def _signature(store: str) -> tuple[tuple[int, int], ...]:
    out = []
    for name in DB_FILES:
        try:
            st = os.stat(os.path.join(store, name))
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((0, 0))
    return tuple(out)


class _Seen:
    """What the poller last saw of one workspace."""

    def __init__(self) -> None:
        self.signature: tuple[tuple[int, int], ...] | None = None
        self.snapshots: dict[str, tuple[bool, str | None]] = {}
        self.operations: dict[int, bool] = {}
        self.toolcalls: set[tuple[str, str]] = set()
        self.hooks: Any = None  # the last hook failure seen (its time and error)
        self.primed = False


Marks = dict[str, tuple[bool, str | None]]  # snapshot id -> (pinned, label)


def _look(known: Any, home: Path, before: Marks, primed: bool
          ) -> tuple[Marks, dict[str, dict[str, Any]], list[Any], list[dict[str, Any]],
                     dict[str, Any] | None]:
    """(every snapshot's marks, the records of the new and changed ones, operations, tool
    calls, the hook failures of the last day) of a workspace; runs in a worker thread.
    ``before`` is what the poller last saw; before the first look (not ``primed``) no record
    is needed, nothing being published."""
    from ..toolcalls.hook_log import DAY_NS, hook_failures
    from ..toolcalls.restore import rewinds
    from .opening import open_known

    with open_known(known, home) as ws:
        catalog = ws.repo.catalog
        marks: Marks = {row[0]: (bool(row[3]), row[2]) for row in catalog.summaries()}
        records: dict[str, dict[str, Any]] = {}
        if primed and (before or len(marks) <= FRESH_MAX):
            for sid, mark in marks.items():
                if before.get(sid) != mark:
                    snap = catalog.snapshot(sid)
                    if snap is not None:
                        records[sid] = snap.to_json()
        ops = ws.oplog.operations()
        calls: list[dict[str, Any]] = []
        for s in rewinds.agent_sessions(ws):
            calls += rewinds.timeline(ws, s["session_id"])
        return marks, records, ops, calls, hook_failures(ws, time.time_ns() - DAY_NS)


class Poller:
    """Publishes what changed in each known workspace (see the module docstring). The
    service's housekeeping loop calls :meth:`poll` once a second, or at once after
    :meth:`kick` sets :attr:`wake`."""

    def __init__(self, bus: EventBus, home: Path) -> None:
        self.bus = bus
        self.home = home
        self.seen: dict[str, _Seen] = {}
        self.present: dict[str, tuple[bool, bool]] = {}  # id -> (registered, present)
        self.wake = asyncio.Event()
        self.looks = 0  # stores read (not only stat'ed), for the service's report
        self.started = False  # the first poll announces nothing: it learns what there is

    def kick(self, ws_id: str) -> None:
        self.wake.set()

    async def poll(self, known: list[Any]) -> None:
        current = {w.id: w for w in known}
        self._workspace_events(current)
        for ws_id, w in current.items():
            if not w.present:
                continue
            seen = self.seen.setdefault(ws_id, _Seen())
            sig = await asyncio.to_thread(_signature, w.store)
            if sig == seen.signature:
                continue
            try:
                found = await asyncio.to_thread(_look, w, self.home,
                                                dict(seen.snapshots), seen.primed)
            except Exception:  # noqa: BLE001 - a store mid-way or gone: try again next time
                continue
            self.looks += 1
            seen.signature = sig
            self._diff(ws_id, seen, *found)

    def _workspace_events(self, current: dict[str, Any]) -> None:
        first, self.started = not self.started, True
        for ws_id, w in current.items():
            state = (w.registered, w.present)
            if not first and self.present.get(ws_id) != state:
                self.bus.publish("workspace", {"workspace": ws_id, "workspace_info":
                                               w.to_json()})
                if ws_id not in self.present:
                    # a store made while we run: what it already holds is news too (the
                    # snapshot right after a `ctrlz init` would be missed otherwise)
                    self.seen[ws_id] = _Seen()
                    self.seen[ws_id].primed = True
            self.present[ws_id] = state
        for ws_id in set(self.present) - set(current):
            del self.present[ws_id]
            self.seen.pop(ws_id, None)
            if not first:
                self.bus.publish("workspace", {"workspace": ws_id, "workspace_info": None})

    def _diff(self, ws_id: str, seen: _Seen, now_snaps: Marks,
              records: dict[str, dict[str, Any]], ops: list[Any],
              calls: list[dict[str, Any]], hooks: dict[str, Any] | None) -> None:
        publish = seen.primed
        for sid, record in records.items():  # oldest first, as the catalog lists them
            kind = "snapshot" if sid not in seen.snapshots else "snapshot-updated"
            self.bus.publish(kind, {"workspace": ws_id, "snapshot": record})
        gone = [i for i in seen.snapshots if i not in now_snaps]
        if publish and gone:
            self.bus.publish("snapshot-removed", {"workspace": ws_id, "ids": gone})
        seen.snapshots = now_snaps
        for op in ops:
            before = seen.operations.get(op.seq)
            if publish and (before is None or before != op.undone):
                action = "done" if before is None and not op.undone else (
                    "undo" if op.undone else "redo")
                self.bus.publish("restore", {"workspace": ws_id, "action": action,
                                             "operation": op.to_json()})
        seen.operations = {op.seq: op.undone for op in ops}
        keys = set()
        for c in calls:
            key = (c["session_id"], c["tool_use_id"])
            keys.add(key)
            if publish and key not in seen.toolcalls:
                self.bus.publish("toolcall", {"workspace": ws_id, "tool_call": c})
        seen.toolcalls = keys
        last = hooks and (hooks["last"]["at"], hooks["last"]["error"])
        if publish and hooks and last != seen.hooks:
            self.bus.publish("hooks", {"workspace": ws_id, "hooks": hooks})
        seen.hooks = last
        seen.primed = True
