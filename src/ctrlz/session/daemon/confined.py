"""Capture-only peers: a process of a sandboxed run may ask the daemon and the service to
capture (snapshots, served hooks' pre-images), never to restore, delete, collect, configure
or reach a remote.

Why: under Landlock a sandboxed agent can still ``connect()`` to a pathname Unix socket
(``../shared/reference/sandbox.md`` §2), so ``daemon.sock`` and ``service.sock`` are within its
reach while the store itself is not. Without this rule, ``ctrlz rollback`` or ``DELETE
/v1/workspaces/W/snapshots/S`` through a socket would undo what the sandbox protects.

Who is sandboxed is the kernel's word, not the peer's: ``SO_PEERCRED`` gives the pid that
connected, and ``/proc`` its ancestry. While a sandboxed ``ctrlz run`` lives, its record
``<store>/sandboxed/<session>.json`` (written by the sandbox's launcher before it confines
itself; format in :mod:`ctrlz.sandbox.policy`) names a process ``pid`` with its start time
``start`` and whether it is itself confined (``self``). A peer is capture-only when:

* that process (with that start time, so a recycled pid does not match) is one of the
  peer's ancestors, or the peer itself when ``self``; or
* the peer is ptrace-traced by the same tracer as that process (``TracerPid`` in
  ``/proc/PID/status``). ``strace -f`` follows every descendant and a tracee cannot detach
  itself, so this holds for a process that double-forked and was re-parented to init, which
  the ancestry alone would miss. A record may name that tracer itself (``tracer`` and
  ``tracer_start``, read by the launcher from its own status before it confines itself); then
  the rule holds after the process it names has exited, while an orphan it left lives on.

Every store of the home is looked at, not only the daemon's own: a sandboxed agent could
connect to another workspace's daemon. The lists below are allow-lists, so a request added
later is refused to a confined peer until someone decides it is a capture.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from dataclasses import dataclass

from ...sandbox.policy import tracer_pid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

RECORDS = "sandboxed"  # the directory in each store (ctrlz.session.run.sandboxing.RECORDS)
_UCRED = struct.Struct("3i")  # pid, uid, gid

#: daemon requests a confined peer may make: answer ``ping``, and capture
DAEMON_CAPTURES = frozenset({"ping", "snapshot", "dirty"})
#: service routes a confined peer may use, as (method, path pattern) with ``*`` for one
#: segment: who the service is, its API document, and taking a snapshot. Reads of other
#: workspaces are refused too: the sandbox keeps the store unreadable, and the API must not
#: be the way around it.
SERVICE_CAPTURES = (("GET", "/v1/service"), ("GET", "/v1/openapi.json"),
                    ("POST", "/v1/workspaces/*/snapshots"))


def refusal_text(what: str) -> str:
    """The one line a confined peer gets (the CLI prints it; the API's ``message``)."""
    return (f"refused: {what} comes from a sandboxed session (ctrlz run --sandbox), which may "
            "only take snapshots; run it outside the sandbox")


@dataclass(frozen=True)
class Record:
    """One live sandboxed run: the process named, its start time, whether it is confined
    itself, and its session id."""

    pid: int
    start: int
    self_confined: bool
    session: str
    tracer: int = 0  # the tracer of the whole run, when the record names it
    tracer_start: int = 0


def peer_credentials(sock: socket.socket | Any) -> tuple[int, int, int] | None:
    """(pid, uid, gid) of the process at the other end of a Unix socket, as the kernel
    recorded them at ``connect()`` (the pid in this process's pid namespace); None where the
    system cannot say (not Linux, not a Unix socket). The service's uid check uses it too."""
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None
    try:
        return _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, option, _UCRED.size))
    except (OSError, struct.error):
        return None


def peer_pid(sock: socket.socket | Any) -> int | None:
    """The pid of the process at the other end of a Unix socket (:func:`peer_credentials`)."""
    cred = peer_credentials(sock)
    return cred[0] or None if cred is not None else None


def records(home: str) -> list[Record]:
    """Every sandboxed run's record under the store home ``home`` (one ``listdir`` per store,
    and none of the records' contents when there are none)."""
    from ..locator import stores_dir

    base = stores_dir(home)
    try:
        stores = os.listdir(base)
    except OSError:
        return []
    found: list[Record] = []
    for name in stores:
        folder = os.path.join(base, name, RECORDS)
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".json"):
                record = _read(os.path.join(folder, entry))
                if record is not None:
                    found.append(record)
    return found


def _read(path: str) -> Record | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return Record(int(data["pid"]), int(data["start"]), bool(data.get("self", True)),
                      str(data.get("session", "")), int(data.get("tracer") or 0),
                      int(data.get("tracer_start") or 0))
    except (OSError, ValueError, TypeError, KeyError):
        return None  # half written (the launcher renames it in whole) or not ours


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()
        return int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def confined_by(pid: int, live: Iterable[Record]) -> Record | None:
    """The record that makes process ``pid`` a capture-only peer, or None (module docstring)."""
    anchors = {(r.pid, r.start): r for r in live}
    if not anchors:
        return None
    current, first, seen = pid, True, set()
    while current > 0 and current not in seen:
        seen.add(current)
        stat = _stat(current)
        if stat is None:
            break
        parent, start = stat
        record = anchors.get((current, start))
        if record is not None and (not first or record.self_confined):
            return record
        current, first = parent, False
    tracer = tracer_pid(pid)
    if tracer:
        for record in anchors.values():
            if record.tracer:  # named: still the process that was recorded
                stat = _stat(record.tracer)
                if tracer == record.tracer and stat is not None \
                        and stat[1] == record.tracer_start:
                    return record
            stat = _stat(record.pid)
            if tracer == record.pid or (stat is not None and stat[1] == record.start
                                        and tracer_pid(record.pid) == tracer):
                return record
    return None


def confined_peer(sock: socket.socket | Any, home: str) -> Record | None:
    """The record making the peer of ``sock`` capture-only, or None (also where the peer's
    pid cannot be known: not Linux, a TCP socket)."""
    live = records(home)
    if not live:
        return None
    pid = peer_pid(sock)
    return None if pid is None else confined_by(pid, live)


def home_of_store(store: str | os.PathLike[str]) -> str:
    """The store home a store is in (``<home>/workspaces/<name>``, :mod:`ctrlz.session.locator`)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(store)))


def daemon_allows(message: Mapping[str, Any], captures: Mapping[str, Any]) -> bool:
    """Whether the daemon may answer ``message`` for a confined peer: one of
    :data:`DAEMON_CAPTURES`, or a program op whose ``captures`` check says it captures (the
    native door: a hook, a snapshot)."""
    op = message.get("op")
    if op in DAEMON_CAPTURES:
        return True
    check = captures.get(op) if isinstance(op, str) else None
    return bool(check is not None and check(message))


def daemon_refusal(message: Mapping[str, Any]) -> dict[str, Any]:
    """The reply to a request a confined peer may not make. A restore gets the form of a
    restore that failed, so that the caller raises it rather than trying in-process."""
    from ...errors import CaptureOnly

    op = message.get("op")
    text = refusal_text("a rollback" if op == "restore" else f"this request ({op})")
    if op == "restore":
        return {"ok": True, "failed": {"error": CaptureOnly.__name__, "message": text,
                                       "result": None}}
    return {"ok": False, "error": text, "capture_only": True}


def service_allows(method: str, path: str) -> bool:
    """Whether the service may answer ``method path`` for a confined peer."""
    parts = path.rstrip("/").split("/")
    for allowed_method, pattern in SERVICE_CAPTURES:
        wanted = pattern.split("/")
        if method == allowed_method and len(parts) == len(wanted) and all(
                w in ("*", p) for w, p in zip(wanted, parts, strict=True)):
            return True
    return False
