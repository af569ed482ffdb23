"""The read-only tools: list, changes, history and diff, each with its text rendering.

Every function returns ``data`` (the tool's structured output, JSON-ready), and ``render_*``
turns it into the text an agent reads. Changes are found by content (object ids), never by
size.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..engine.diff import PERMISSIONS, PathChange, diff_trees
from ..errors import UsageError
from ..session.policy import resolve_ref
from ..state.trees import DIR, SYMLINK
from ..types import Snapshot, text_path
from ..workspace import Workspace
from .checkpoints import age, cp_aliases, from_root, pools, snap_ref
from .text import clean


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
            **snap_ref(s, cps, now), "number": s.number, "hash": s.root.hex(),
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
    return {"snapshots": rows, "total": len(rows), **pools(ws, snaps)}


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
    path = from_root(ws, path)
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
            rows.append({**snap_ref(s, cps, now), "size": v.size, "kind": v.kind or "absent",
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
    where = from_root(ws, path) if path is not None else None
    snap = resolve_ref(ws, checkpoint) if checkpoint is not None else ws.resolve("latest")
    d = ws.diff(snap.id, None, [where] if where else None)
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
