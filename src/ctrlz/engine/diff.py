"""Differences between two trees: snapshot against snapshot, or snapshot against the working tree.

Both sides are Merkle trees, so equal subtree ids are skipped without being read: the cost of a
diff follows what changed. Changes are reported by content (object id), never by size, so an
edit that keeps a file's length is still a modification.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterator

from ..state.trees import DIR, Entry
from ..types import show_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CREATED, MODIFIED, DELETED, PERMISSIONS = "created", "modified", "deleted", "permissions_changed"
TreeReader = Callable[[bytes], list[Entry]]


class PathChange(namedtuple("PathChange", "path change_type old new")):
    """One path that differs: its entry on each side (``None`` where it is absent). ``path``
    is relative to the top of the tree being compared."""

    __slots__ = ()

    @property
    def kind(self) -> str:
        entry = self.new or self.old
        assert entry is not None
        return entry.kind

    @property
    def size_delta(self) -> int | None:
        if self.kind == DIR:
            return None
        return (self.new.size if self.new else 0) - (self.old.size if self.old else 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": show_path(self.path),
            "change": self.change_type,
            "kind": {"f": "file", "l": "symlink", "d": "dir"}[self.kind],
            "size_delta": self.size_delta,
            "old_mode": f"{self.old.mode:o}" if self.old else None,
            "new_mode": f"{self.new.mode:o}" if self.new else None,
        }


def _join(prefix: bytes, name: bytes) -> bytes:
    return prefix + b"/" + name if prefix else name


def _all(read: TreeReader, entry: Entry, path: bytes, change: str) -> Iterator[PathChange]:
    """A whole subtree that exists on one side only, parents first (iteratively: a chain
    thousands of directories deep is no deeper for this than a flat one)."""
    stack = [(path, entry)]
    while stack:
        p, e = stack.pop()
        old, new = (e, None) if change == DELETED else (None, e)
        yield PathChange(p, change, old, new)
        if e.kind == DIR:
            stack.extend((_join(p, c.name), c) for c in reversed(read(e.oid)))


def diff_trees(read_old: TreeReader, old: bytes | None, read_new: TreeReader,
               new: bytes | None, prefix: bytes = b"") -> Iterator[PathChange]:
    """Changes from tree ``old`` to tree ``new``, in path order (parents before children).

    Directories appear as ``created``/``deleted`` when they appear or vanish and as
    ``permissions_changed`` when their mode changes; callers that count files filter on kind.
    A change of kind at one path (file to directory, say) is a deletion followed by a creation.
    Equal subtrees are skipped by id; the walk keeps its own stack, so depth costs no recursion.
    """
    # each frame: the sorted names still to visit in one directory pair, and its entries
    stack: list[tuple[bytes, list[bytes], dict[bytes, Entry], dict[bytes, Entry]]] = []

    def push(path: bytes, a_oid: bytes | None, b_oid: bytes | None) -> None:
        if a_oid == b_oid:
            return
        olds = {e.name: e for e in read_old(a_oid)} if a_oid is not None else {}
        news = {e.name: e for e in read_new(b_oid)} if b_oid is not None else {}
        stack.append((path, sorted(olds.keys() | news.keys(), reverse=True), olds, news))

    push(prefix, old, new)
    while stack:
        prefix_, names, olds, news = stack[-1]
        if not names:
            stack.pop()
            continue
        name = names.pop()
        a, b = olds.get(name), news.get(name)
        path = _join(prefix_, name)
        if a is None:
            assert b is not None
            yield from _all(read_new, b, path, CREATED)
        elif b is None:
            yield from _all(read_old, a, path, DELETED)
        elif a.kind != b.kind:
            yield from _all(read_old, a, path, DELETED)
            yield from _all(read_new, b, path, CREATED)
        elif a.kind == DIR:
            if a.mode != b.mode:
                yield PathChange(path, PERMISSIONS, a, b)
            push(path, a.oid, b.oid)
        elif a.oid != b.oid:
            yield PathChange(path, MODIFIED, a, b)
        elif a.mode != b.mode:
            yield PathChange(path, PERMISSIONS, a, b)


def count_changes(changes: Iterator[PathChange]) -> tuple[int, int, int]:
    """(created, modified, deleted) counting files and symlinks; mode changes count as
    modifications."""
    created = modified = deleted = 0
    for c in changes:
        if c.kind == DIR:
            continue
        if c.change_type == CREATED:
            created += 1
        elif c.change_type == DELETED:
            deleted += 1
        else:
            modified += 1
    return created, modified, deleted


def is_binary(data: bytes) -> bool:
    if b"\0" in data[:8192]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def unified_diff(path: str, old: bytes | None, new: bytes | None, *, context: int = 3) -> str:
    """A git-style unified diff of one file, or a one-line note for binary content."""
    a_name = f"a/{path}" if old is not None else "/dev/null"
    b_name = f"b/{path}" if new is not None else "/dev/null"
    if (old is not None and is_binary(old)) or (new is not None and is_binary(new)):
        return f"Binary files {a_name} and {b_name} differ\n"
    a_lines = old.decode("utf-8").splitlines(keepends=True) if old else []
    b_lines = new.decode("utf-8").splitlines(keepends=True) if new else []
    out = []
    import difflib

    for line in difflib.unified_diff(a_lines, b_lines, a_name, b_name, n=context):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
