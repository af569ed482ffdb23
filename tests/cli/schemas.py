"""JSON schemas of every ``--json`` output (documented in docs/json.md)."""

from __future__ import annotations

from typing import Any

STR_OR_NULL = {"type": ["string", "null"]}
INT = {"type": "integer"}
ISO = {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"}
SNAP_ID = {"type": "string", "pattern": "^snap_[a-z0-9]+$"}
SNAP_ID_OR_NULL = {"anyOf": [SNAP_ID, {"type": "null"}]}
SKIPPED = {"type": "array", "items": {
    "type": "object", "required": ["path", "reason"],
    "properties": {"path": {"type": "string"}, "reason": {"type": "string"}}}}
COUNTS = {"type": "object", "required": ["created", "modified", "deleted", "permissions_changed"],
          "properties": {k: INT for k in ("created", "modified", "deleted",
                                          "permissions_changed")}}


def obj(required: dict[str, Any], **optional: Any) -> dict[str, Any]:
    return {"type": "object", "required": sorted(required),
            "properties": {**required, **optional}}


SNAPSHOT = obj({
    "id": SNAP_ID, "number": {"type": ["integer", "null"]},
    "type": {"enum": ["pre-run", "post-run", "auto", "manual", "git", "build", "idle", "tool",
                      "safety"]},
    "label": STR_OR_NULL, "created_at": ISO, "pinned": {"type": "boolean"},
    "files": INT, "dirs": INT, "symlinks": INT, "bytes": INT, "added_bytes": INT,
    "size_delta": INT,
    "changes": obj({"created": INT, "modified": INT, "deleted": INT}),
    "root": {"type": "string", "pattern": "^[0-9a-f]{64}$"}, "parent": SNAP_ID_OR_NULL,
    "skipped": SKIPPED,
})
#: where a forked workspace came from (`ctrlz fork`); null in a workspace that is not a fork
FORKED_FROM = {"anyOf": [{"type": "null"}, obj(
    {"workspace": {"type": "string"}, "snapshot": SNAP_ID, "tool_call": STR_OR_NULL,
     "session_id": STR_OR_NULL})]}
#: `ctrlz show` adds `forked_from` to the snapshot record
SNAPSHOT["properties"]["forked_from"] = FORKED_FROM
LIST = {"type": "array", "items": SNAPSHOT}
CHANGE = obj({"path": {"type": "string"},
              "change": {"enum": ["created", "modified", "deleted", "permissions_changed"]},
              "kind": {"enum": ["file", "symlink", "dir"]},
              "size_delta": {"type": ["integer", "null"]},
              "old_mode": STR_OR_NULL, "new_mode": STR_OR_NULL})
DIFF = obj({"type": {"const": "diff"}, "old": SNAP_ID,
            "new": {"anyOf": [SNAP_ID, {"const": "working tree"}]},
            "changes": {"type": "array", "items": CHANGE}})
INIT = obj({"type": {"const": "init"}, "workspace": {"type": "string"},
            "store": {"type": "string"}, "created": {"type": "boolean"},
            "excluded": obj({"use_gitignore": {"type": "boolean"},
                             "exclude_patterns": {"type": "array"},
                             "exclude_globs": {"type": "array"},
                             "force_include": {"type": "array"}})})
_REFS = obj({"present": {"type": "boolean"}, "head": STR_OR_NULL, "head_oid": STR_OR_NULL})
GIT_CHANGES = {"type": "array", "items": obj({
    "repository": {"type": "string"}, "mode": {"enum": ["restore", "keep"]},
    "before": _REFS, "after": _REFS,
    "refs": {"type": "array", "items": obj({"ref": {"type": "string"}, "before": STR_OR_NULL,
                                            "after": STR_OR_NULL})},
    "unreachable_commits": {"type": ["integer", "null"]}, "at_risk": {"type": "boolean"},
    "summary": {"type": "string"}})}
RESTORE = obj({
    "type": {"enum": ["rollback", "revert", "restore"]}, "target": SNAP_ID,
    "safety_snapshot": SNAP_ID_OR_NULL,
    "dry_run": {"type": "boolean"}, "destination": STR_OR_NULL, "counts": COUNTS,
    "actions": {"type": "array", "items": obj({"op": {"type": "string"},
                                               "path": {"type": "string"},
                                               "change": {"type": "string"}})},
    "skipped": SKIPPED,
    "conflicts": SKIPPED,  # paths someone changed while the restore ran, left as they are
    "git": GIT_CHANGES,  # what it does to each git repository's history (engine.githistory)
})
OPERATION = obj({"seq": INT,
                 "kind": {"enum": ["rollback", "revert", "rewind", "toolcall", "turn-rollback",
                                   "restore"]},
                 "target": SNAP_ID, "paths": {"type": "array", "items": {"type": "string"}},
                 "before": SNAP_ID_OR_NULL, "after": SNAP_ID_OR_NULL,
                 "undone": {"type": "boolean"},
                 "status": {"enum": ["done", "failed", "interrupted"]}})
UNDO = obj({"type": {"enum": ["undo", "redo"]}, "operation": OPERATION, "restore": RESTORE})
HISTORY = obj({"type": {"const": "history"}, "path": {"type": "string"},
               "versions": {"type": "array", "items": obj({
                   "kind": {"enum": ["file", "symlink", "dir", "absent"]},
                   "oid": STR_OR_NULL, "size": {"type": ["integer", "null"]},
                   "mode": STR_OR_NULL, "first": SNAP_ID, "last": SNAP_ID,
                   "first_created_at": ISO,
                   "snapshots": {"type": "array", "items": SNAP_ID, "minItems": 1}})}})
STATUS = obj({"type": {"const": "status"}, "workspace": {"type": "string"},
              "store": {"type": "string"}, "excluded": {"type": "object"},
              "snapshots": INT, "by_type": {"type": "object", "additionalProperties": INT},
              "last": {"anyOf": [SNAPSHOT, {"type": "null"}]},
              "last_created_at": {"anyOf": [ISO, {"type": "null"}]},
              "age_seconds": {"type": ["number", "null"]}, "store_bytes": INT,
              "store_cap": INT, "skipped": SKIPPED,
              "problems": {"type": "array", "items": {"type": "string"}},
              "can_undo": {"type": "boolean"}, "can_redo": {"type": "boolean"},
              # unwatched*: when it runs, the folders it has no watch on (none left)
              "daemon": obj({"running": {"type": "boolean"}, "last_failure": STR_OR_NULL},
                            unwatched_count=INT,
                            unwatched={"type": "array", "items": {"type": "string"}}),
              "dropped": {"type": "array", "items": obj({
                  "id": SNAP_ID, "type": {"type": "string"}, "label": STR_OR_NULL,
                  "reason": {"type": "string"}, "dropped_at": ISO})},
              # the agent hooks that failed in the last day (ctrlz.toolcalls.hook_log)
              "hooks": {"anyOf": [{"type": "null"}, obj({
                  "failures": INT, "since": ISO, "log": {"type": "string"},
                  "last": obj({"at": ISO, "agent": STR_OR_NULL, "event": STR_OR_NULL,
                               "tool": STR_OR_NULL, "cwd": STR_OR_NULL,
                               "error": STR_OR_NULL})})]}},
             forked_from=FORKED_FROM)
CONFIG = obj({"type": {"const": "config"}, "user_file": {"type": "string"},
              "workspace_file": STR_OR_NULL,
              "values": {"type": "object", "additionalProperties": obj(
                  {"value": {}, "source": {"type": "string"}})}})
RM = obj({"type": {"const": "rm"}, "removed": {"type": "array", "items": SNAP_ID}})
GC = obj({"removed_objects": INT, "removed_bytes": INT,
          "repacked_packs": INT, "kept_objects": INT, "strays_removed": INT,
          "compressed_objects": INT, "compressed_saved_bytes": INT})
PRUNE = obj({"type": {"const": "prune"}, "dry_run": {"type": "boolean"},
             "dropped": {"type": "array", "items": obj({
                 "id": SNAP_ID, "type": {"type": "string"}, "label": STR_OR_NULL,
                 "reason": {"type": "string"}})},
             "kept": INT, "gc": {"anyOf": [GC, {"type": "null"}]}})
VERIFY = obj({"type": {"const": "verify"}, "ok": {"type": "boolean"}, "snapshots": INT,
              "trees": INT, "objects": INT, "bytes": INT,
              "errors": {"type": "array", "items": {"type": "string"}},
              "orphans": {"type": ["integer", "null"]}},
             orphans_note={"type": "string"})

FORK = obj({"type": {"const": "fork"}, "workspace": {"type": "string"},
            "store": {"type": "string"}, "forked_from": FORKED_FROM,
            "first_snapshot": SNAP_ID, "git": {"type": "boolean"}, "branch": STR_OR_NULL,
            "agent": STR_OR_NULL, "resume": STR_OR_NULL})

#: commands whose --json output tests/cli/test_fork.py validates (documented with the rest)
#: one refusal of a sandboxed run: a write (``fs``, from the tracer) or a connection (``net``,
#: from the proxy; ``path`` is ``host:port``, ``syscall`` the request's method, ``errno`` why)
DENIAL = obj({"timestamp": {"type": "string"}, "pid": {"type": ["integer", "null"]},
              "exe": STR_OR_NULL, "syscall": STR_OR_NULL, "path": {"type": "string"},
              "errno": STR_OR_NULL, "kind": {"enum": ["fs", "net"]}})
SESSION_SHOW = obj({
    "id": {"type": "string", "pattern": "^sess_[a-z0-9]+$"}, "started": {"type": "string"},
    "ended": STR_OR_NULL, "label": STR_OR_NULL,
    "command": {"type": "array", "items": {"type": "string"}},
    "tracked_paths": {"type": "array", "items": {"type": "string"}},
    "exit_code": {"type": ["integer", "null"]}, "snapshot_count": INT,
    "merkle_roots": {"type": "array", "items": {"type": "string"}},
    "traced": {"type": "boolean"}, "trace_note": STR_OR_NULL,
    "timeline": {"type": "array", "items": obj({
        "timestamp": {"type": "string"}, "kind": {"enum": ["snapshot", "file", "exec"]}})},
    "denials": {"type": "array", "items": DENIAL}})
OTHER_SCHEMAS: dict[str, dict[str, Any]] = {"fork": FORK, "session show": SESSION_SHOW}

#: command -> schema of its --json output
SCHEMAS: dict[str, dict[str, Any]] = {
    "init": INIT, "snapshot": SNAPSHOT, "list": LIST, "show": SNAPSHOT, "pin": SNAPSHOT,
    "unpin": SNAPSHOT, "rm": RM, "diff": DIFF, "changes": DIFF, "history": HISTORY,
    "status": STATUS, "config": CONFIG, "rollback": RESTORE, "restore": RESTORE,
    "revert": RESTORE, "undo": UNDO, "redo": UNDO, "prune": PRUNE,
    "gc": {**GC, "required": sorted([*GC["required"], "type"]),
           "properties": {**GC["properties"], "type": {"const": "gc"}}},
    "verify": VERIFY,
}
