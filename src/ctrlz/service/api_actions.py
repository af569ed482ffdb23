"""API routes that change something: register, snapshot, pin, rm, rollback, revert, rewind,
undo, redo, verify, gc, prune.

Each is the CLI command of the same name over HTTP: the same library call (so every change to
a workspace goes through the one restore engine, with its safety snapshot and undo entry) and
the same JSON. ``dry_run: true`` on rollback, revert, rewind, undo and redo returns the plan
and changes nothing (``GET .../plan`` is the same as a read). Changes to one workspace run one
at a time (:meth:`ServiceState.workspace_lock`).
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from .routing import Call, Param, endpoint

SNAPSHOT_TYPES = ("manual", "auto", "pre-run", "git", "build", "idle", "tool")
REF = Param("ref", "path", "Snapshot id, id prefix, label, number, cp-N or `latest`.",
            required=True)


def _schema(required: tuple[str, ...] = (), **props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


STR = {"type": "string"}
BOOL = {"type": "boolean"}
PATHS = {"type": "array", "items": {"type": "string"}}
#: what a restore does to each .git in the workspace (ctrlz.engine.restore.githistory); the answer's
#: ``git`` list names what moves, and ``auto`` refuses (400) a restore that drops commits
GIT = {"type": "string", "enum": ["auto", "keep", "restore"],
       "description": "keep: leave .git as it is (files only); restore: put .git back too; "
                      "auto (default): restore unless that makes commits unreachable, else "
                      "refuse"}


def _check_fields(call: Call, allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(call.body) - set(allowed))
    if unknown:
        raise UsageError(f"unknown field(s) {', '.join(unknown)}; expected "
                         f"{', '.join(allowed) or 'none'}")


@endpoint("POST", "/v1/workspaces", "Register a workspace: protect it (`ctrlz init`) and have "
          "the service watch it.", body=_schema(("path",), path=STR), status=201,
          returns="the workspace, as in GET /v1/workspaces", tag="workspace")
def register(call: Call) -> Any:
    from ..session.registry import register as do_register
    from .api_read import overview

    _check_fields(call, ("path",))
    path = call.arg("path")
    if not path:
        raise UsageError("path is required: the workspace's absolute path")
    known = do_register(path, call.state.home)
    call.state.changed(known.id)
    return overview(call, known)


@endpoint("DELETE", "/v1/workspaces/{ws}", "Unregister a workspace: its watcher stops; its "
          "store and snapshots stay.", returns="the workspace", tag="workspace")
def unregister(call: Call) -> Any:
    from ..session.registry import unregister as do_unregister

    known = do_unregister(call.known().id, call.state.home)
    call.state.changed(known.id)
    return known.to_json()


@endpoint("POST", "/v1/workspaces/{ws}/snapshots", "Take a snapshot now.",
          body=_schema(label=STR, pin=BOOL, type={"enum": list(SNAPSHOT_TYPES)}), status=201,
          changes=True, returns="as `ctrlz snapshot --json`", tag="snapshots")
def create_snapshot(call: Call) -> Any:
    _check_fields(call, ("label", "pin", "type"))
    kind = call.arg("type") or "manual"
    if kind not in SNAPSHOT_TYPES:
        raise UsageError(f"type must be one of {', '.join(SNAPSHOT_TYPES)}")
    snap = call.workspace().snapshot(type=kind, label=call.arg("label"),
                                     pinned=call.flag("pin"))
    return snap.to_json()


@endpoint("POST", "/v1/workspaces/{ws}/snapshots/{ref}/pin", "Pin (or with `pinned: false` "
          "unpin) a snapshot.", params=(REF,), body=_schema(pinned=BOOL), changes=True,
          returns="as `ctrlz pin --json`", tag="snapshots")
def pin(call: Call) -> Any:
    _check_fields(call, ("pinned",))
    pinned = call.flag("pinned") if "pinned" in call.body else True
    return call.workspace().set_pinned(call.path_param("ref"), pinned).to_json()


@endpoint("DELETE", "/v1/workspaces/{ws}/snapshots/{ref}", "Remove a snapshot (its bytes go "
          "at the next gc).", params=(REF,), changes=True, returns="as `ctrlz rm --json`",
          tag="snapshots")
def remove(call: Call) -> Any:
    gone = call.workspace().remove([call.path_param("ref")])
    return {"type": "rm", "removed": [s.id for s in gone]}


@endpoint("GET", "/v1/workspaces/{ws}/plan", "The restore plan of a rollback, changing "
          "nothing (a dry run).",
          params=(Param("snapshot", "query", "The snapshot to roll back to.", required=True),
                  Param("path", "query", "Only these paths (repeatable).", repeat=True),
                  Param("git", "query", "auto, keep or restore: what becomes of .git "
                        "(see `ctrlz rollback --git`).")),
          returns="as `ctrlz rollback --dry-run --json`", tag="restore")
def plan(call: Call) -> Any:
    ref = call.arg("snapshot")
    if not ref:
        raise UsageError("snapshot is required")
    paths = [call.path(p) for p in call.args("path")]
    result = call.workspace().rollback(ref, paths or None, dry_run=True,
                                       git=call.arg("git") or "auto")
    return {"type": "rollback", **result.to_json()}


@endpoint("POST", "/v1/workspaces/{ws}/rollback", "Roll the workspace (or some paths) back "
          "to a snapshot, after a safety snapshot; `dry_run` returns the plan.",
          body=_schema(("snapshot",), snapshot=STR, paths=PATHS, dry_run=BOOL, git=GIT),
          changes=True, returns="as `ctrlz rollback --json`", tag="restore")
def rollback(call: Call) -> Any:
    _check_fields(call, ("snapshot", "paths", "dry_run", "git"))
    ref = call.arg("snapshot")
    if not ref:
        raise UsageError("snapshot is required")
    paths = [call.path(p) for p in call.args("paths")]
    result = call.workspace().rollback(ref, paths or None, dry_run=call.flag("dry_run"),
                                       git=call.arg("git") or "auto")
    return {"type": "rollback", **result.to_json()}


@endpoint("POST", "/v1/workspaces/{ws}/revert", "One file or folder back from the newest "
          "snapshot that has it (or `from`).",
          body=_schema(("path",), path=STR, **{"from": STR}, dry_run=BOOL), changes=True,
          returns="as `ctrlz revert --json`", tag="restore")
def revert(call: Call) -> Any:
    _check_fields(call, ("path", "from", "dry_run"))
    path = call.path(call.arg("path") or "")
    result = call.workspace().revert(path, call.arg("from"), dry_run=call.flag("dry_run"))
    return {"type": "revert", **result.to_json()}


@endpoint("POST", "/v1/workspaces/{ws}/rewind", "Back to just before an agent's tool call "
          "(a tool_use_id) or turn (a number).",
          body=_schema(("target",), target=STR, session=STR, dry_run=BOOL, force=BOOL),
          changes=True, returns="as `ctrlz rewind --json`", tag="restore")
def rewind(call: Call) -> Any:
    from ..toolcalls.restore import rewinds

    _check_fields(call, ("target", "session", "dry_run", "force"))
    target = call.arg("target")
    if not target:
        raise UsageError("target is required: a tool_use_id or a turn number")
    result = rewinds.rewind(call.workspace(), target, call.arg("session"),
                            dry_run=call.flag("dry_run"), force=call.flag("force"))
    return {"type": "rewind", **result.to_json()}


@endpoint("POST", "/v1/workspaces/{ws}/undo", "Undo the newest rollback, revert or rewind; "
          "`dry_run` returns the plan.", body=_schema((), dry_run=BOOL, git=GIT),
          changes=True, returns="as `ctrlz undo --json`", tag="restore")
def undo(call: Call) -> Any:
    _check_fields(call, ("dry_run", "git"))
    return call.workspace().undo(dry_run=call.flag("dry_run"),
                                 git=call.arg("git") or "auto").to_json()


@endpoint("POST", "/v1/workspaces/{ws}/redo", "Redo the newest undone operation; `dry_run` "
          "returns the plan.", body=_schema((), dry_run=BOOL, git=GIT),
          changes=True, returns="as `ctrlz redo --json`", tag="restore")
def redo(call: Call) -> Any:
    _check_fields(call, ("dry_run", "git"))
    return call.workspace().redo(dry_run=call.flag("dry_run"),
                                 git=call.arg("git") or "auto").to_json()


@endpoint("POST", "/v1/workspaces/{ws}/verify", "Check the store end to end (`ok` says "
          "whether it is sound).", returns="as `ctrlz verify --json`", tag="maintenance")
def verify(call: Call) -> Any:
    return {"type": "verify", **call.workspace().verify().to_json()}


@endpoint("POST", "/v1/workspaces/{ws}/gc",
          "Collect unreferenced objects, repack, and compress what was stored uncompressed.",
          changes=True, returns="as `ctrlz gc --json`", tag="maintenance")
def gc(call: Call) -> Any:
    return {"type": "gc", **call.workspace().gc().to_json()}


@endpoint("POST", "/v1/workspaces/{ws}/prune", "Drop old snapshots (keep the newest `keep`, "
          "and/or those younger than `older_than` seconds) and reclaim space.",
          body=_schema(keep={"type": "integer", "minimum": 1},
                       older_than={"type": "integer", "minimum": 0}, dry_run=BOOL),
          changes=True, returns="as `ctrlz prune --json`", tag="maintenance")
def prune(call: Call) -> Any:
    _check_fields(call, ("keep", "older_than", "dry_run"))
    keep, older = call.number("keep"), call.number("older_than")
    if keep == 0:
        raise UsageError("keep must be at least 1")
    result = call.workspace().prune(keep, older, dry_run=call.flag("dry_run"))
    return result.to_json()
