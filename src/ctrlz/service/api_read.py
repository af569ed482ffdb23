"""API routes that only look: workspaces, snapshots, diffs, history, sessions, tool calls.

Each opens the workspace, calls the library function the CLI command of the same name calls,
and returns the same JSON as that command's ``--json`` (docs/json.md); docs/api.md lists them.
"""

from __future__ import annotations

from typing import Any

from ..errors import SnapshotNotFound, UsageError
from .opening import open_known
from .routing import Call, Param, endpoint

#: a file larger than this on either side is summarised, not diffed line by line
PATCH_MAX_BYTES = 1 << 20

OLD = Param("old", "query", "Snapshot to compare from (default: latest).")
NEW = Param("new", "query", "Snapshot to compare to; absent or `working` means the working "
            "tree.")
PATH = Param("path", "query", "A workspace-relative path (no `..`, not absolute).",
             required=True)
SESSION = Param("session", "path", "Session id (or a unique prefix, or `latest`).",
                required=True)


@endpoint("GET", "/v1/service", "The service: version, pid, uptime, socket, gateway, "
          "watchers.", returns="`{type: service, ...}`", tag="service")
def service_info(call: Call) -> Any:
    return call.state.info()


def _watcher(call: Call, ws_id: str) -> dict[str, Any] | None:
    sup = call.state.supervisor
    return sup.info(ws_id) if sup is not None else None


def overview(call: Call, known: Any) -> dict[str, Any]:
    """One workspace for the overview: who it is, its watcher, and its status at a glance."""
    out = known.to_json() | {"watcher": _watcher(call, known.id)}
    if not known.present:
        out["status"] = None
        out["problem"] = f"the workspace {known.root} is gone (its store is kept)"
        return out
    try:
        with open_known(known, call.state.home) as ws:
            out["status"] = ws.status().to_json()
    except Exception as exc:  # one broken store must not hide the others  # noqa: BLE001
        from .routing import error_body

        out["status"] = None
        out["problem"] = error_body(exc)[1]["message"]
    return out


@endpoint("GET", "/v1/workspaces", "Every protected workspace (registered ones first) with "
          "its status and watcher.", returns="a list of workspaces, each with `status` as "
          "`ctrlz status --json`", tag="workspace")
def list_workspaces(call: Call) -> Any:
    from ..session.registry import known

    return [overview(call, w) for w in known(call.state.home)]


@endpoint("GET", "/v1/workspaces/{ws}", "One workspace's status (as `ctrlz status --json`, "
          "plus `id`, `registered`, `watcher`).", tag="workspace")
def workspace_status(call: Call) -> Any:
    from ..toolcalls.restore.fork import lineage

    ws, known = call.workspace(), call.known()
    return ws.status().to_json() | {"forked_from": lineage(ws), "id": known.id,
                                    "registered": known.registered,
                                    "watcher": _watcher(call, known.id)}


@endpoint("GET", "/v1/workspaces/{ws}/snapshots", "Snapshots, newest first; with `limit`, "
          "one page (the next starts `before` the last one's id).",
          params=(Param("limit", "query", "At most this many (default: all).",
                        type="integer"),
                  Param("before", "query", "Only snapshots older than this snapshot id (the "
                        "last one of the previous page).")),
          returns="as `ctrlz list --json`", tag="snapshots")
def list_snapshots(call: Call) -> Any:
    limit, before = call.number("limit"), call.arg("before")
    ws = call.workspace()
    if limit is None and before is None:
        return [s.to_json() for s in reversed(ws.snapshots())]
    # one page straight from the catalog: a long history is never decoded whole for it
    page = ws.repo.catalog.snapshots_before(-1 if limit is None else limit, before)
    if page is None:
        raise SnapshotNotFound(f"no snapshot {before!r} (give the id of a listed snapshot)")
    return [s.to_json() for s in page]


#: the columns of each row of GET …/timeline, in order
TIMELINE_COLUMNS = ("id", "time_ms", "type", "label", "pinned", "files", "bytes",
                    "added_bytes", "created", "modified", "deleted")


@endpoint("GET", "/v1/workspaces/{ws}/timeline", "Every snapshot, oldest first, in a compact "
          "form for drawing a timeline: one array per snapshot, the fields named once in "
          "`columns`.",
          returns="`{type: timeline, count, columns: [id, time_ms, type, label, pinned, "
                  "files, bytes, added_bytes, created, modified, deleted], rows: [[...], "
                  "...]}`; `time_ms` is milliseconds since 1970 (UTC)", tag="snapshots")
def timeline(call: Call) -> Any:
    rows = [[sid, created_ns // 1_000_000, typ, label, bool(pinned), *rest]
            for sid, typ, label, pinned, created_ns, *rest in
            call.workspace().repo.catalog.summaries()]
    return {"type": "timeline", "count": len(rows), "columns": list(TIMELINE_COLUMNS),
            "rows": rows}


@endpoint("GET", "/v1/workspaces/{ws}/snapshots/{ref}", "One snapshot's record.",
          params=(Param("ref", "path", "Snapshot id, id prefix, label, number, cp-N or "
                        "`latest`.", required=True),),
          returns="as `ctrlz show --json`", tag="snapshots")
def show_snapshot(call: Call) -> Any:
    from ..toolcalls.restore.fork import lineage

    ws, ref = call.workspace(), call.path_param("ref").strip()
    # an exact id (what the dashboard asks for) is the first thing a ref resolves to: one
    # catalog row, rather than every snapshot decoded to look for it
    snap = ws.repo.catalog.snapshot(ref) if ref.startswith("snap_") else None
    return (snap or ws.resolve(ref)).to_json() | {"forked_from": lineage(ws)}


def _new_ref(call: Call) -> str | None:
    new = call.arg("new")
    return None if new in (None, "", "working", "working tree") else new


@endpoint("GET", "/v1/workspaces/{ws}/diff", "Changed paths between two snapshots, or a "
          "snapshot and the working tree.",
          params=(OLD, NEW, Param("path", "query", "Limit to these paths (repeatable).",
                                  repeat=True)),
          returns="as `ctrlz diff --json`", tag="diff")
def diff(call: Call) -> Any:
    ws = call.workspace()
    paths = [call.path(p) for p in call.args("path")]
    d = ws.diff(call.arg("old"), _new_ref(call), paths or None)
    return {"type": "diff", "old": d.old, "new": d.new,
            "changes": [c.to_json() for c in d.changes]}


@endpoint("GET", "/v1/workspaces/{ws}/patch", "The unified diff of one changed path; binary "
          "and large files are summarised.", params=(OLD, NEW, PATH),
          returns="`{type: patch, path, change, kind, old, new, old_size, new_size, binary, "
                  "large, patch}`; `patch` is null for binary, large and directory changes",
          tag="diff")
def patch(call: Call) -> Any:
    from ..types import quote_path
    from ..workspace import Diff

    ws = call.workspace()
    path = call.path(call.arg("path") or "")
    rel = ws.relpath(path)
    d = ws.diff(call.arg("old"), _new_ref(call), [path])
    change = next((c for c in d.changes if c.path == rel), None)
    if change is None:
        raise SnapshotNotFound(f"{quote_path(rel)} did not change from {d.old} to {d.new}")
    old_size = change.old.size if change.old and change.old.kind != "d" else None
    new_size = change.new.size if change.new and change.new.kind != "d" else None
    out: dict[str, Any] = change.to_json() | {
        "type": "patch", "old": d.old, "new": d.new, "old_size": old_size,
        "new_size": new_size, "binary": False, "large": False, "patch": None}
    if change.kind == "d" or change.change_type == "permissions_changed":
        return out
    if max(old_size or 0, new_size or 0) > PATCH_MAX_BYTES:
        out["large"] = True
        return out
    text = next(iter(ws.patches(Diff(d.old, d.new, [change]))), "")
    if text.startswith("Binary files "):
        out["binary"] = True
        return out
    out["patch"] = text
    return out


@endpoint("GET", "/v1/workspaces/{ws}/history", "Every version of one path across the "
          "snapshots.", params=(PATH,), returns="as `ctrlz history --json`", tag="diff")
def history(call: Call) -> Any:
    return call.workspace().history(call.path(call.arg("path") or "")).to_json()


@endpoint("GET", "/v1/workspaces/{ws}/operations", "The undo stack: rollbacks, reverts, "
          "rewinds and tool-call restores, oldest first, and what undo/redo would take.",
          returns="`{type: operations, operations: [...], next_undo, next_redo}`; each "
                  "operation as in `ctrlz undo --json`", tag="restore")
def operations(call: Call) -> Any:
    from ..types import iso_utc

    log = call.workspace().oplog
    undo, redo = log.next_undo(), log.next_redo()
    return {"type": "operations",
            "operations": [op.to_json() | {"created_at": iso_utc(op.created_ns),
                                           "session_id": op.session_id}
                           for op in log.operations()],
            "next_undo": undo.to_json() if undo else None,
            "next_redo": redo.to_json() if redo else None}


@endpoint("GET", "/v1/workspaces/{ws}/sessions", "Sessions of `ctrlz run`, newest first.",
          returns="as `ctrlz sessions --json`", tag="sessions")
def sessions(call: Call) -> Any:
    return [r.to_json() for r in reversed(call.workspace().session_db.sessions())]


@endpoint("GET", "/v1/workspaces/{ws}/sessions/{session}", "One session's timeline: "
          "snapshots, file events, commands; and what its sandbox refused (`denials`).",
          params=(SESSION,),
          returns="as `ctrlz session show --json`", tag="sessions")
def session_show(call: Call) -> Any:
    from ..session import records

    ws = call.workspace()
    row = records.resolve_session(ws, call.path_param("session"))
    return records.shown(ws, row)


@endpoint("GET", "/v1/workspaces/{ws}/sessions/{session}/trace", "Every process the session "
          "started (the exec trace).",
          params=(SESSION, Param("grep", "query", "Only commands matching this regex."),
                  Param("failed", "query", "Only failed or killed commands.",
                        type="boolean")),
          returns="as `ctrlz trace --json`", tag="sessions")
def trace(call: Call) -> Any:
    from ..session import records

    ws = call.workspace()
    row = records.resolve_session(ws, call.path_param("session"))
    return records.trace(ws, row, call.arg("grep"), call.flag("failed"))


@endpoint("GET", "/v1/workspaces/{ws}/sessions/{session}/events", "The session's file "
          "events.", params=(SESSION, Param("path", "query", "Only paths matching this glob.")),
          returns="as `ctrlz events --json`", tag="sessions")
def file_events(call: Call) -> Any:
    from ..session import records

    ws = call.workspace()
    row = records.resolve_session(ws, call.path_param("session"))
    return records.file_events(ws, row, call.arg("path"))


@endpoint("GET", "/v1/workspaces/{ws}/toolcalls", "An agent session's turns and tool calls "
          "(default: the latest session), and every agent session.",
          params=(Param("session", "query", "Agent session id."),),
          returns="as `ctrlz rewind --list --json`: `{tool_calls, sessions}`", tag="sessions")
def toolcalls(call: Call) -> Any:
    from ..toolcalls.restore import rewinds

    ws = call.workspace()
    found = rewinds.agent_sessions(ws)
    sid = call.arg("session")
    if sid is None and not found:
        return {"tool_calls": [], "sessions": []}
    if sid is not None and sid not in {s["session_id"] for s in found}:
        raise UsageError(f"no agent session {sid!r} in this workspace")
    return {"tool_calls": rewinds.timeline(ws, sid), "sessions": found}
