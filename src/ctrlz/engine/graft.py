"""Grafting: a new top tree that equals an old one except at a few paths.

Two steps of the restore engine need a tree that is "this snapshot, but with these paths set":

* **capture** puts into the safety snapshot every path a restore was explicitly asked to touch,
  even one the rules ignore (an agent's ``.env``), so that undoing the restore can bring it back;
* a **tool-call restore** (rewind, turn rollback, one tool call) builds its target from a
  workspace snapshot and the tool calls' pre-images, and then restores that like any snapshot.

Only the directories on the way from each changed path to the top are re-encoded; every other
subtree keeps its id, so a graft costs the depth of the changed paths, not the size of the tree.
"""

from __future__ import annotations

import os
import stat as st
from collections.abc import Callable, Mapping

from ..errors import RestoreError
from ..state import failpoints
from ..state.trees import DIR, FILE, SYMLINK, Entry, encode_tree
from ..types import quote_path
from .diff import TreeReader
from .dirs import DirHandles

#: what a path becomes: an entry (its ``name`` is ignored), or None for absent
Changes = Mapping[bytes, Entry | None]
#: reads of a file that changes while it is read, before the capture gives up on it
READ_ATTEMPTS = 3


def _stamp(s: os.stat_result) -> tuple[int, int, int]:
    return s.st_size, s.st_mtime_ns, s.st_ctime_ns


def graft(read: TreeReader, put_tree: Callable[[bytes], bytes], top: bytes, changes: Changes,
          dir_mode: Callable[[bytes], int]) -> bytes:
    """The id of a top tree equal to ``top`` with each virtual path of ``changes`` set.

    A directory the old tree lacks on the way to a changed path is created with
    ``dir_mode(vpath)``; a file or link that stands where a directory is needed is replaced."""
    if not changes:
        return top
    old_oids: dict[bytes, bytes | None] = {b"": top}

    def old_listing(path: bytes) -> dict[bytes, Entry]:
        oid = old_dir(path)
        return {e.name: e for e in read(oid)} if oid is not None else {}

    def old_dir(path: bytes) -> bytes | None:
        if path in old_oids:
            return old_oids[path]
        parent, _, name = path.rpartition(b"/")
        parent_oid = old_dir(parent) if parent not in old_oids else old_oids[parent]
        found = None
        if parent_oid is not None:
            found = next((e for e in read(parent_oid) if e.name == name), None)
        oid = found.oid if found is not None and found.kind == DIR else None
        old_oids[path] = oid
        return oid

    # every directory on the way, deepest first (parents are resolved top-down, iteratively,
    # by walking the sorted list of ancestors before any old_dir call recurses)
    affected: set[bytes] = {b""}
    for path in changes:
        parent = path.rpartition(b"/")[0]
        while parent not in affected:
            affected.add(parent)
            parent = parent.rpartition(b"/")[0]
    for path in sorted(affected, key=lambda p: p.count(b"/") if p else -1):
        if path:
            old_dir(path)  # shallow first: each lookup finds its parent resolved
    children: dict[bytes, list[bytes]] = {}
    for path in affected | set(changes):
        if path:
            children.setdefault(path.rpartition(b"/")[0], []).append(path)
    new_oids: dict[bytes, bytes] = {}
    for path in sorted(affected, key=lambda p: p.count(b"/") if p else -1, reverse=True):
        entries = old_listing(path)
        for child in children.get(path, ()):
            name = child.rpartition(b"/")[2]
            if child in affected:
                old = entries.get(name)
                mode = old.mode if old is not None and old.kind == DIR else dir_mode(child)
                entries[name] = Entry(name, DIR, mode, 0, 0, new_oids[child])
            else:
                want = changes[child]
                if want is None:
                    entries.pop(name, None)
                else:
                    entries[name] = want._replace(name=name)
        new_oids[path] = put_tree(encode_tree([entries[n] for n in sorted(entries)]))
    return new_oids[b""]


class DiskCapture:
    """Reads single paths of the workspace for a graft: through ``O_NOFOLLOW`` directory
    handles, whatever the exclusion rules say. ``store_file(fd, size)`` stores (or only
    hashes) a file's bytes and returns its id; ``digest`` hashes a link target."""

    def __init__(self, dest_roots: list[bytes], store_file: Callable[[int, int], bytes],
                 store_blob: Callable[[bytes], bytes]) -> None:
        self.dirs = DirHandles(dest_roots, limit=16)
        self.store_file = store_file
        self.store_blob = store_blob
        #: ((st_mode, size, mtime_ns, ctime_ns, inode), object id) of each path captured
        self.keys: dict[bytes, tuple[tuple[int, int, int, int, int], bytes]] = {}

    def close(self) -> None:
        self.dirs.close()

    def entry(self, vpath: bytes) -> Entry | None:
        """The path as an entry, or None when it is absent, a directory or a special file
        (a graft never captures a whole directory: the rules decided about that)."""
        parent, _, name = vpath.rpartition(b"/")
        try:
            fd = self.dirs.get(parent)
            s = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if st.S_ISLNK(s.st_mode):
            oid = self.store_blob(os.fsencode(os.readlink(name, dir_fd=fd)))
            kind = SYMLINK
        elif st.S_ISREG(s.st_mode):
            f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                        dir_fd=fd)
            try:
                read = self._read_whole(vpath, f)
            finally:
                os.close(f)
            if read is None:
                return None  # replaced by a special file since the stat
            s, oid = read
            kind = FILE
        else:
            return None
        self.keys[vpath] = ((s.st_mode, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino), oid)
        return Entry(name, kind, s.st_mode & 0o7777, s.st_size, s.st_mtime_ns, oid)

    def _read_whole(self, vpath: bytes, f: int) -> tuple[os.stat_result, bytes] | None:
        """(stat, id) of one version of the open file: the stat taken before and after the
        read agree, so the id names bytes that this stat describes. That pairing is what a
        restore's apply step trusts (``keys``: a path whose stat still matches is unchanged
        since the capture), so a write that lands during the read must never pair the stat
        after it with the bytes before it, which let the restore overwrite that write with
        no copy of it anywhere. Read again, as a snapshot's scan does
        (:mod:`ctrlz.state.scan.reader`); a file that never holds still is an error, before
        anything in the workspace changed."""
        before = os.fstat(f)
        if not st.S_ISREG(before.st_mode):
            return None
        for _ in range(READ_ATTEMPTS):
            oid = self.store_file(f, before.st_size)
            failpoints.hit("capture-read")
            after = os.fstat(f)
            if _stamp(after) == _stamp(before):
                return after, oid
            before = after
            os.lseek(f, 0, os.SEEK_SET)
        raise RestoreError(f"{quote_path(vpath.partition(b'/')[2])} kept changing while the "
                           f"restore's safety snapshot read it ({READ_ATTEMPTS} attempts); "
                           "nothing was restored: stop what writes it and try again")

    def dir_mode(self, vpath: bytes) -> int:
        parent, _, name = vpath.rpartition(b"/")
        try:
            return os.stat(name, dir_fd=self.dirs.get(parent),
                           follow_symlinks=False).st_mode & 0o7777
        except OSError:
            return 0o755


def lookup(read: TreeReader, top: bytes, vpath: bytes) -> Entry | None:
    """The entry at a virtual path of the tree ``top``, or None; one level per iteration."""
    oid: bytes | None = top
    entry = None
    for name in vpath.split(b"/"):
        if oid is None:
            return None
        entry = next((e for e in read(oid) if e.name == name), None)
        if entry is None:
            return None
        oid = entry.oid if entry.kind == DIR else None
    return entry
