"""What the MCP tools do, as plain functions on a :class:`Workspace` (no SDK in here).

Every function returns ``(data, text)`` or ``data``: ``data`` is a JSON-ready dict (the tool's
structured output), ``text`` the rendering an agent reads. Expected failures raise
:class:`~ctrlz.errors.CtrlzError` subclasses with one-line messages.

Differences from Capsem, on purpose:

- Changes are found by content (object ids), never by size.
- A snapshot is the full state of the workspace, so compaction keeps the newest of the given
  snapshots (renamed) and drops the older ones: a file deleted by then stays deleted. Capsem
  merged the file sets and brought deleted files back.
- Pagination slices ``str`` (code points), never bytes.
- Paths are checked lexically against the workspace root: ``a..b.txt`` is a name, ``../x`` and
  ``/etc/passwd`` are refused.
- ``checkpoint`` values are stable snapshot ids; ``cp-N`` (the Nth newest) is accepted as input
  and reported as ``cp`` alongside.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.diff import PERMISSIONS, PathChange, diff_trees
from ..errors import LimitExceeded, UsageError
from ..state.trees import DIR, SYMLINK
from ..types import Snapshot, text_path
from ..workspace import Workspace

DEFAULT_MAX_LENGTH = 5000
MAX_ACTIONS = 200
NAME_MAX = 64
_RESERVED = re.compile(r"^(latest|HEAD|@|cp-\d+|#?\d+|snap_.*)$")
_DELETE_HINT = "free a slot with snapshots_delete or snapshots_compact (or `ctrlz rm` in a shell)"


# -- pagination --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """A window ``[start_index, end_index)`` of a text, in characters (code points)."""

    text: str
    start_index: int
    end_index: int
    total_length: int

    @property
    def next_start_index(self) -> int | None:
        return self.end_index if self.end_index < self.total_length else None

    @property
    def complete(self) -> bool:
        return self.start_index == 0 and self.end_index >= self.total_length

    def render(self) -> str:
        """The page, prefixed (like Capsem) with where it lies when it is not the whole text."""
        if self.complete:
            return self.text
        if self.start_index >= self.total_length:
            return (f"Content length: {self.total_length}\n"
                    f"start_index={self.start_index} is past the end; there is nothing more.\n")
        head = (f"Content length: {self.total_length}\n"
                f"Showing: {self.start_index}..{self.end_index}\n")
        if self.next_start_index is not None:
            head += f"Use start_index={self.next_start_index} to continue.\n"
        return head + "\n" + self.text

    def to_json(self) -> dict[str, Any]:
        return {"start_index": self.start_index, "end_index": self.end_index,
                "total_length": self.total_length, "next_start_index": self.next_start_index}


def paginate(text: str, start_index: int = 0, max_length: int = DEFAULT_MAX_LENGTH) -> Page:
    """Characters ``start_index`` to ``start_index + max_length`` of ``text``."""
    if start_index < 0:
        raise UsageError("start_index must be 0 or more")
    if max_length < 1:
        raise UsageError("max_length must be 1 or more")
    total = len(text)
    end = min(start_index + max_length, total) if start_index < total else start_index
    return Page(text[start_index:end], start_index, end, total)


def clean(text: str) -> str:
    """Text safe to put on the wire: undecodable path bytes (surrogate escapes) as ``\\xNN``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def to_json_text(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)


# -- small helpers -----------------------------------------------------------------------------


def age(ns: int, now_ns: int | None = None) -> str:
    seconds = max(0.0, ((now_ns or time.time_ns()) - ns) / 1e9)
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} hr ago"
    return f"{int(seconds // 86400)} days ago"


def cp_aliases(snaps: Sequence[Snapshot]) -> dict[str, str]:
    """Snapshot id → ``cp-N`` (``cp-0`` is the newest), for ``snaps`` oldest first."""
    return {s.id: f"cp-{len(snaps) - 1 - i}" for i, s in enumerate(snaps)}


def check_name(name: str) -> str:
    """A snapshot name: 1-64 printable characters that cannot be mistaken for another
    reference (``latest``, ``cp-3``, ``snap_…``, a number)."""
    name = name.strip()
    if not name:
        raise UsageError("the name is empty")
    if len(name) > NAME_MAX:
        raise UsageError(f"the name is {len(name)} characters long; the limit is {NAME_MAX}")
    if any(not ch.isprintable() for ch in name):
        raise UsageError("the name contains control characters")
    if _RESERVED.match(name):
        raise UsageError(f"{name!r} reads as a snapshot reference (latest, cp-N, snap_…, a "
                         "number); choose another name")
    return name


def check_path(path: str) -> str:
    if not path or not path.strip():
        raise UsageError("the path is empty")
    if "\0" in path:
        raise UsageError("the path contains a NUL byte")
    return path


def _ref(ws: Workspace, ref: str) -> Snapshot:
    if not ref or not ref.strip():
        raise UsageError("the checkpoint is empty; give a snapshot id, prefix, label or cp-N")
    return ws.resolve(ref)


def _changes_between(ws: Workspace, old: Snapshot | None, new: Snapshot) -> list[PathChange]:
    """Changes of files and symlinks from ``old`` (None: nothing) to ``new``."""
    out = []
    for c in diff_trees(ws.repo.tree, old.root if old else None, ws.repo.tree, new.root):
        if c.path.startswith(b"0/") and c.kind != DIR:
            out.append(PathChange(c.path[2:], c.change_type, c.old, c.new))
    return out


def _merge_kind_changes(changes: list[PathChange]) -> list[tuple[bytes, str, PathChange]]:
    """(path, op, change) per path; a deletion plus a creation at one path (a kind change)
    is one modification; a mode change is a modification."""
    merged: dict[bytes, tuple[str, PathChange]] = {}
    for c in changes:
        op = "modified" if c.change_type == PERMISSIONS else c.change_type
        if c.path in merged:
            op = "modified"
        merged[c.path] = (op, c)
    return [(p, op, c) for p, (op, c) in merged.items()]


def _snap_ref(s: Snapshot, cps: dict[str, str], now: int) -> dict[str, Any]:
    return {"checkpoint": s.id, "cp": cps[s.id], "origin": s.type, "name": s.label,
            "age": age(s.created_ns, now), "created_at": s.created_at}


def _pools(ws: Workspace, snaps: Sequence[Snapshot]) -> dict[str, int]:
    policy = ws.policy
    manual = sum(1 for s in snaps if s.type == "manual")
    return {"auto_max": policy.auto_max, "manual_max": policy.manual_max,
            "manual_available": max(0, policy.manual_max - manual)}


# -- read-only tools ---------------------------------------------------------------------------


def list_snapshots(ws: Workspace, include_changes: bool = False) -> dict[str, Any]:
    """Every snapshot, newest first, with what changed since the snapshot before it."""
    snaps = ws.snapshots()
    cps, now = cp_aliases(snaps), time.time_ns()
    rows = []
    for i, s in enumerate(snaps):
        changes = _merge_kind_changes(_changes_between(ws, snaps[i - 1] if i else None, s))
        counts = {"created": 0, "edited": 0, "deleted": 0}
        for _, op, _c in changes:
            counts[{"created": "created", "modified": "edited", "deleted": "deleted"}[op]] += 1
        row: dict[str, Any] = {
            **_snap_ref(s, cps, now), "number": s.number, "hash": s.root.hex(),
            "pinned": s.pinned, "files_count": s.files + s.symlinks, "bytes": s.bytes,
            "changes_summary": {**counts, "total": sum(counts.values())},
        }
        if include_changes:
            row["changes"] = [
                {"path": text_path(p), "op": {"created": "new"}.get(op, op),
                 "size": c.new.size if c.new else None,
                 "is_symlink": (c.new or c.old).kind == SYMLINK}
                for p, op, c in changes]
        rows.append(row)
    rows.reverse()
    return {"snapshots": rows, "total": len(rows), **_pools(ws, snaps)}


def render_list(data: dict[str, Any]) -> str:
    rows = data["snapshots"]
    if not rows:
        return "No checkpoints available yet.\n"
    lines = [f"Snapshots ({data['total']} total, {data['manual_available']} manual slots "
             "available)", ""]
    lines.append(f"{'Cp':<6} {'Checkpoint':<24} {'Origin':<8} {'Name':<20} {'Age':<12} "
                 f"{'Hash':<12} {'Files':>6} {'Created':>7} {'Edited':>6} {'Deleted':>7}")
    for r in rows:
        c = r["changes_summary"]
        lines.append(f"{r['cp']:<6} {r['checkpoint']:<24} {r['origin']:<8} "
                     f"{(r['name'] or '-'):<20} {r['age']:<12} {r['hash'][:12]:<12} "
                     f"{r['files_count']:>6} {c['created']:>7} {c['edited']:>6} "
                     f"{c['deleted']:>7}")
        for ch in r.get("changes", []):
            lines.append(f"{'':<6}   {ch['op']:<8} {ch['path']}")
    return "\n".join(lines) + "\n"


def changed_files(ws: Workspace) -> dict[str, Any]:
    """Files that differ now from a snapshot. Snapshots are walked newest first and each path
    is reported once, under the newest snapshot it differs from (revert it from there)."""
    snaps = ws.snapshots()
    if not snaps:
        return {"changes": [], "total": 0, "checkpoints": 0}
    cps, now = cp_aliases(snaps), time.time_ns()
    newest_first = list(reversed(snaps))
    seen: set[bytes] = set()
    rows = []
    for snap, d in zip(newest_first, ws.diffs_to_working([s.id for s in newest_first]),
                       strict=True):
        files = [c for c in d.changes if c.kind != DIR]
        for path, op, c in _merge_kind_changes(files):
            if path in seen:
                continue
            seen.add(path)
            rows.append({"path": text_path(path), "op": op,
                         "size": c.new.size if c.new else None,
                         "is_symlink": (c.new or c.old).kind == SYMLINK,
                         "checkpoint": snap.id, "cp": cps[snap.id],
                         "checkpoint_age": age(snap.created_ns, now),
                         "checkpoint_origin": snap.type, "checkpoint_name": snap.label})
    return {"changes": rows, "total": len(rows), "checkpoints": len(snaps)}


def render_changes(data: dict[str, Any]) -> str:
    if not data["checkpoints"]:
        return "No checkpoints available yet.\n"
    if not data["changes"]:
        return "No changes: the workspace matches every checkpoint it was compared with.\n"
    lines = [f"Changed Files ({data['total']} total)", ""]
    for r in data["changes"]:
        size = "-" if r["size"] is None else str(r["size"])
        name = f" \"{r['checkpoint_name']}\"" if r["checkpoint_name"] else ""
        link = " (symlink)" if r["is_symlink"] else ""
        lines.append(f"{r['op']:<8} {r['path']}{link}  size {size}  since {r['cp']} "
                     f"{r['checkpoint']}{name} ({r['checkpoint_origin']}, "
                     f"{r['checkpoint_age']})")
    return "\n".join(lines) + "\n"


def history(ws: Workspace, path: str) -> dict[str, Any]:
    """Every snapshot holding ``path`` (from its first appearance), newest first, each with its
    status against the snapshot before it: new / modified / unchanged / deleted / absent."""
    check_path(path)
    rel = ws.relpath(path)
    if not rel:
        raise UsageError("history takes a file or folder path, not the workspace root")
    h = ws.history(path)
    snaps = ws.snapshots()
    cps, now = cp_aliases(snaps), time.time_ns()
    rows = []
    prev_present = False
    for v in h.versions:
        for i, s in enumerate(v.snapshots):
            if v.kind is None:
                status = "deleted" if i == 0 else "absent"
            elif i > 0:
                status = "unchanged"
            else:
                status = "modified" if prev_present else "new"
            rows.append({**_snap_ref(s, cps, now), "size": v.size, "kind": v.kind or "absent",
                         "hash": v.oid, "mode": f"{v.mode:o}" if v.mode is not None else None,
                         "status": status})
        prev_present = v.kind is not None
    rows.reverse()
    full = os.path.join(os.fsencode(ws.root), rel)
    try:
        st = os.lstat(full)
        current_size: int | None = st.st_size
    except OSError:
        current_size = None
    return {"path": text_path(rel), "current_size": current_size,
            "exists_now": current_size is not None, "versions": rows}


def diff(ws: Workspace, path: str | None = None, checkpoint: str | None = None
         ) -> tuple[dict[str, Any], str]:
    """A unified diff from ``checkpoint`` (default: the newest snapshot) to the working tree."""
    if path is not None:
        check_path(path)
    snap = _ref(ws, checkpoint) if checkpoint is not None else ws.resolve("latest")
    d = ws.diff(snap.id, None, [path] if path else None)
    text = clean("".join(ws.patches(d)))
    for c in d.changes:
        if c.kind != DIR and c.change_type == PERMISSIONS:
            assert c.old is not None and c.new is not None
            text += clean(f"mode {c.old.mode:o} -> {c.new.mode:o} {os.fsdecode(c.path)}\n")
    cps = cp_aliases(ws.snapshots())
    files = [{"path": text_path(p), "op": op, "kind": {"f": "file", "l": "symlink"}[c.kind]}
             for p, op, c in _merge_kind_changes([c for c in d.changes if c.kind != DIR])]
    data = {"checkpoint": snap.id, "cp": cps[snap.id], "name": snap.label,
            "against": "working tree", "path": path, "files": files}
    if not text:
        text = f"No differences between {snap.id} and the working tree.\n"
    return data, text


# -- tools that change things ------------------------------------------------------------------


def _limit_hint(exc: LimitExceeded) -> LimitExceeded:
    msg = str(exc).split("; remove some with")[0]
    return LimitExceeded(f"{msg}; {_DELETE_HINT}")


def create(ws: Workspace, name: str) -> dict[str, Any]:
    """A manual snapshot named ``name``; a full manual pool is an error, never an eviction."""
    name = check_name(name)
    try:
        snap = ws.snapshot(type="manual", label=name)
    except LimitExceeded as exc:
        raise _limit_hint(exc) from None
    snaps = ws.snapshots()
    return {"checkpoint": snap.id, "cp": cp_aliases(snaps).get(snap.id), "name": snap.label,
            "hash": snap.root.hex(), "available": _pools(ws, snaps)["manual_available"],
            "files_count": snap.files + snap.symlinks, "number": snap.number,
            "created_at": snap.created_at,
            "skipped": [s.to_json() | {"path": text_path(s.path)} for s in snap.skipped]}


def _check_deletable(ws: Workspace, snaps: Sequence[Snapshot]) -> None:
    needed = ws.oplog.referenced()
    for s in snaps:
        if s.id in needed:
            raise UsageError(f"{s.id} is a safety snapshot that `ctrlz undo` still needs; it "
                             "can only be removed from a shell with `ctrlz rm`")
        if s.pinned:
            raise UsageError(f"{s.id} is pinned; unpin it from a shell before removing it")


def delete(ws: Workspace, checkpoint: str) -> dict[str, Any]:
    snap = _ref(ws, checkpoint)
    _check_deletable(ws, [snap])
    cps = cp_aliases(ws.snapshots())
    ws.remove([snap.id])
    return {"deleted": True, "checkpoint": snap.id, "cp": cps[snap.id], "name": snap.label,
            "origin": snap.type,
            "available": _pools(ws, ws.snapshots())["manual_available"]}


def compact(ws: Workspace, checkpoints: Sequence[str], name: str | None = None
            ) -> dict[str, Any]:
    """Fold several snapshots into one: the newest of them, renamed ``name`` and moved to the
    manual pool; the older ones are removed.

    Each snapshot is the complete state of the workspace, so the newest one already holds
    everything the others led up to, including deletions: a file deleted before the newest
    snapshot stays deleted (Capsem's merge of file sets brought such files back)."""
    if not checkpoints:
        raise UsageError("give at least one checkpoint to compact")
    name = check_name(name if name is not None else f"compacted_{int(time.time())}")
    chosen: dict[str, Snapshot] = {}
    for ref in checkpoints:
        s = _ref(ws, ref)
        chosen[s.id] = s
    ordered = sorted(chosen.values(), key=lambda s: (s.created_ns, s.number or 0))
    keep, drop = ordered[-1], ordered[:-1]
    _check_deletable(ws, drop)
    snaps = ws.snapshots()
    if keep.type != "manual":
        dropped = {s.id for s in drop}
        manual = sum(1 for s in snaps if s.type == "manual" and s.id not in dropped)
        if manual >= ws.policy.manual_max:
            raise LimitExceeded(f"the manual pool is full ({manual} of manual_max="
                                f"{ws.policy.manual_max}) and the result of a compaction is a "
                                f"manual snapshot; {_DELETE_HINT}")
    if drop:
        ws.remove([s.id for s in drop])
    kept = ws.relabel(keep.id, name, type="manual")
    snaps = ws.snapshots()
    return {"compacted": True, "checkpoint": kept.id, "cp": cp_aliases(snaps)[kept.id],
            "name": kept.label, "hash": kept.root.hex(), "merged_count": len(ordered),
            "deleted_checkpoints": [s.id for s in drop],
            "files_count": kept.files + kept.symlinks,
            "available": _pools(ws, snaps)["manual_available"]}


def _undo_hint(safety: Snapshot | None) -> str | None:
    if safety is None:
        return None
    return (f"snapshots_restore(checkpoint=\"{safety.id}\") puts back what this replaced "
            "(or `ctrlz undo` in a shell)")


def revert(ws: Workspace, path: str, checkpoint: str | None = None) -> dict[str, Any]:
    """One file or folder back to ``checkpoint`` (default: the newest snapshot that has it;
    if none has it, the newest snapshot, which deletes it)."""
    check_path(path)
    rel = ws.relpath(path)
    if not rel:
        raise UsageError("revert takes a file or folder; use snapshots_restore for the whole "
                         "workspace")
    ref = _ref(ws, checkpoint).id if checkpoint is not None else None
    if ref is not None and ws.entry_at(ref, path) is None and not os.path.lexists(
            os.path.join(os.fsencode(ws.root), rel)):
        raise UsageError(f"{text_path(rel)} exists neither in {ref} nor in the workspace")
    if ref is None and not ws.snapshots():
        ws.resolve("latest")  # the "no snapshots yet" error
    result = ws.revert(path, ref)
    counts = result.plan.counts()
    present = ws.entry_at(result.target.id, path) is not None
    action = ("unchanged" if not any(counts.values())
              else "restored" if present else "deleted")
    cps = cp_aliases(ws.snapshots())
    return {"reverted": True, "path": text_path(rel), "action": action,
            "checkpoint": result.target.id, "cp": cps.get(result.target.id),
            "name": result.target.label, "counts": counts,
            "safety_snapshot": result.safety.id if result.safety else None,
            "undo": _undo_hint(result.safety)}


def restore(ws: Workspace, checkpoint: str, paths: Sequence[str] | None = None,
            dry_run: bool = False) -> dict[str, Any]:
    """Roll the workspace (or ``paths``) back to ``checkpoint`` in place, after a safety
    snapshot; ``dry_run`` only plans."""
    for p in paths or ():
        check_path(p)
    snap = _ref(ws, checkpoint)
    result = ws.rollback(snap.id, list(paths) if paths else None, dry_run=dry_run)
    data = result.to_json()
    actions = [{"op": a["op"], "path": clean(a["path"]), "change": a["change"]}
               for a in data["actions"] if a["op"] not in ("mkdir", "rmdir", "dirmode", "utime")]
    cps = cp_aliases(ws.snapshots())
    return {"restored": not dry_run, "dry_run": dry_run, "checkpoint": snap.id,
            "cp": cps.get(snap.id), "name": snap.label, "paths": list(paths or []),
            "counts": data["counts"], "actions": actions[:MAX_ACTIONS],
            "actions_total": len(actions),
            "skipped": [{"path": clean(k["path"]), "reason": k["reason"]}
                        for k in data["skipped"]],
            "safety_snapshot": data["safety_snapshot"], "undo": _undo_hint(result.safety)}

