"""Reading sessions back: the list, one session's timeline, its trace and its file events."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import AmbiguousSnapshot, SnapshotNotFound, UsageError
from ..state.db.sessiondb import SessionRow

if TYPE_CHECKING:
    from .protected import ProtectedWorkspace as Workspace


def resolve_session(ws: Workspace, ref: str | None) -> SessionRow:
    """A session by id, unique prefix, or (default) the newest one."""
    sessions = ws.session_db.sessions()
    if not sessions:
        raise SnapshotNotFound("no sessions yet; start one with `ctrlz run -- COMMAND`")
    if ref is None or ref == "latest":
        return sessions[-1]
    exact = [s for s in sessions if s.id == ref]
    if exact:
        return exact[0]
    prefix = ref if ref.startswith("sess_") else "sess_" + ref
    matches = [s for s in sessions if s.id.startswith(prefix)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise AmbiguousSnapshot(f"{ref!r} matches {len(matches)} sessions; type more of the id")
    raise SnapshotNotFound(f"no session matches {ref!r}; run `ctrlz sessions` to see them")


@dataclass(frozen=True)
class TimelineItem:
    timestamp: str
    kind: str  # "snapshot", "file", "exec"
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"timestamp": self.timestamp, "kind": self.kind, **self.data}


def file_events(ws: Workspace, session: SessionRow,
                path_glob: str | None = None) -> list[dict[str, Any]]:
    rows = ws.session_db.fs_events(session.first_fs_event_id, session.last_fs_event_id)
    events = [{"id": r[0], "timestamp": r[1], "action": r[2], "path": r[3], "size": r[4]}
              for r in rows]
    if path_glob:
        events = [e for e in events if fnmatch.fnmatchcase(e["path"].split(" (from ")[0],
                                                           path_glob)]
    return events


def trace(ws: Workspace, session: SessionRow, grep: str | None = None,
          failed: bool = False) -> list[dict[str, Any]]:
    events = ws.session_db.exec_events(session.id)
    if grep:
        try:
            pattern = re.compile(grep)
        except re.error as exc:
            raise UsageError(f"--grep {grep!r} is not a valid regular expression: {exc}") from exc
        events = [e for e in events if pattern.search(" ".join([e["command"], *e["args"]]))]
    if failed:
        events = [e for e in events if (e["exit_code"] not in (0, None)) or e["signal"]]
    return events


def denials(ws: Workspace, session: SessionRow) -> list[dict[str, Any]]:
    """What a sandboxed run's sandbox refused, oldest first: writes (``kind`` ``fs``, from
    the tracer) and connections (``net``, from the proxy); empty for an unsandboxed run."""
    return ws.session_db.denials(session.id)


def shown(ws: Workspace, session: SessionRow) -> dict[str, Any]:
    """``ctrlz session show --json`` and the service's session view: the session's row,
    its timeline and its ``denials``."""
    return {**session.to_json(), "timeline": [i.to_json() for i in timeline(ws, session)],
            "denials": denials(ws, session)}


def snapshots(ws: Workspace, session: SessionRow) -> list[dict[str, Any]]:
    counts = {}
    for row in ws.session_db.snapshot_events(session.id):
        (eid, ts, slot, origin, name, files, start, stop, snap_id, root) = row
        counts[eid] = {"timestamp": ts, "snapshot": snap_id, "type": origin, "label": name,
                       "files": files, "slot": slot, "fs_events": [start, stop], "root": root}
    return list(counts.values())


def timeline(ws: Workspace, session: SessionRow) -> list[TimelineItem]:
    items = [TimelineItem(s["timestamp"], "snapshot", s) for s in snapshots(ws, session)]
    items += [TimelineItem(e["timestamp"], "file", e) for e in file_events(ws, session)]
    items += [TimelineItem(e["timestamp"], "exec", e) for e in trace(ws, session)]
    order = {"snapshot": 1, "exec": 0, "file": 2}
    return sorted(items, key=lambda i: (i.timestamp, order[i.kind]))
