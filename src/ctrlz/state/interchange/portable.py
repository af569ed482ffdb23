"""Portable snapshot records: the JSON form of a snapshot row that travels in archives and in
remote refs.

It keeps every column of the catalog's ``snapshots`` table except ``number`` (a store's own
counter, assigned again by the store that receives the snapshot), so a snapshot that went
through an archive or a remote is the same snapshot: same id, same Merkle root, same rules,
same skipped paths. Unknown keys are ignored on the way in, so a newer ctrlz may add fields.
"""

from __future__ import annotations

from ...errors import CorruptObject
from ...types import Skipped, Snapshot

TYPE_CHECKING = False
if TYPE_CHECKING:  # a restore the daemon served decodes its records: typing stays out
    from typing import Any

RECORD_KEYS = ("id", "parent", "type", "label", "pinned", "created_ns", "root", "files", "dirs",
               "symlinks", "bytes", "added_bytes", "size_delta", "created", "modified",
               "deleted", "rules", "skipped", "roots")


def to_record(s: Snapshot) -> dict[str, Any]:
    return {"id": s.id, "parent": s.parent, "type": s.type, "label": s.label,
            "pinned": s.pinned, "created_ns": s.created_ns, "root": s.root.hex(),
            "files": s.files, "dirs": s.dirs, "symlinks": s.symlinks, "bytes": s.bytes,
            "added_bytes": s.added_bytes, "size_delta": s.size_delta, "created": s.created,
            "modified": s.modified, "deleted": s.deleted, "rules": dict(s.rules),
            "skipped": [[k.path.hex(), k.reason] for k in s.skipped], "roots": list(s.roots)}


#: what an id may hold after ``snap_``: ids are made of letters and digits
#: (``engine.snapshot.new_snapshot_id``); ``_`` and ``-`` are allowed for ids made elsewhere.
#: Nothing else: an id is printed as it is, and a newline or a terminal escape in one (a
#: crafted archive or ref) would forge output
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_INT_KEYS = ("created_ns", "files", "dirs", "symlinks", "bytes", "added_bytes", "size_delta",
             "created", "modified", "deleted")


def valid_id(sid: object) -> bool:
    return (isinstance(sid, str) and sid.startswith("snap_") and 5 < len(sid) <= 69
            and all(c in _ID_CHARS for c in sid[5:]))


def from_record(d: Any, number: int | None = None) -> Snapshot:
    """A :class:`Snapshot` from a record; a malformed record is corruption, never guessed."""
    try:
        if not isinstance(d, dict) or not valid_id(d.get("id")):
            raise ValueError("not a snapshot record, or an id that is not a snapshot id")
        for key in _INT_KEYS:  # the catalog keeps them as SQLite's 64-bit integers
            if key in d and not -(1 << 63) <= int(d[key]) < (1 << 63):
                raise ValueError(f"{key} is out of range")
        root = bytes.fromhex(d["root"])
        if len(root) != 32:
            raise ValueError("bad root")
        return Snapshot(
            id=str(d["id"]), number=number, parent=d.get("parent"), type=str(d["type"]),
            label=d.get("label"), pinned=bool(d.get("pinned")), created_ns=int(d["created_ns"]),
            root=root, files=int(d["files"]), dirs=int(d["dirs"]),
            symlinks=int(d["symlinks"]), bytes=int(d["bytes"]),
            added_bytes=int(d.get("added_bytes", 0)), size_delta=int(d.get("size_delta", 0)),
            created=int(d.get("created", 0)), modified=int(d.get("modified", 0)),
            deleted=int(d.get("deleted", 0)), rules=dict(d.get("rules") or {}),
            skipped=tuple(Skipped(bytes.fromhex(p), str(r)) for p, r in d.get("skipped", [])),
            roots=tuple(str(r) for r in d.get("roots", [])))
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptObject(f"a snapshot record is malformed ({exc})") from exc
