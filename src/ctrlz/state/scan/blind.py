"""What a file watcher cannot see, and the checks that make a dirty scan see it anyway.

A watcher (inotify, and any backend like it) reports changes made *through a watched
directory*. A change that reaches a file by another way leaves its directory silent, and a
dirty scan (:mod:`.incremental`) would reuse the cached entry and miss it for good:

- **hard links**: a file with more than one link can be written through a name outside the
  workspace, or in a folder excluded from the watch;
- **mount points**: a file system mounted over a folder (or a file bind-mounted over a
  file) changes what the path shows without an event, and writes through the mount's source
  are never seen;
- **shared writable mappings**: ``mmap`` writes raise no event at all.

So every dirty scan re-stats the files the previous scan found with more than one link, and
lists every mount point inside the root whole (its subtree included), as if the watcher had
seen them change: this costs one ``lstat`` per such file and one read of
``/proc/self/mountinfo``, and nothing where there are none. The last kind, and anything a
broken watch missed, is for :func:`mapped_for_write` and :func:`sample_differs`, which the
workspace daemon runs before the snapshots a restore depends on (``session/daemon/daemon.py``).

What stays out of reach is documented in docs/daemon.md: a file that gets its second link
from outside the workspace *after* the scan that last saw it, and is then written through
that link, is seen by the next full scan, the daemon's background audit, or a sample.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from itertools import islice

from ..db.statcache import DirCache
from .model import IFDIR, IFMT, DirtyDirs

TYPE_CHECKING = False
if TYPE_CHECKING:
    import random

MOUNTINFO = "/proc/self/mountinfo"


def _unescape(field: bytes) -> bytes:
    r"""A mountinfo path field: the kernel writes space, tab, newline and backslash as
    ``\040``, ``\011``, ``\012`` and ``\134``."""
    if b"\\" not in field:
        return field
    out = bytearray()
    i = 0
    while i < len(field):
        if field[i:i + 1] == b"\\" and field[i + 1:i + 4].isdigit():
            out.append(int(field[i + 1:i + 4], 8))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return bytes(out)


def _mounts(mountinfo: str) -> list[tuple[bytes, bytes]]:
    """Every mount as (mount point, file system type); empty where the system has no
    ``/proc/self/mountinfo`` (not Linux)."""
    try:
        with open(mountinfo, "rb") as f:
            data = f.read()
    except OSError:
        return []
    found = []
    for line in data.splitlines():
        fields = line.split(b" ", 5)
        if len(fields) < 6:
            continue
        fstype = line.partition(b" - ")[2].partition(b" ")[0]
        found.append((_unescape(fields[4]), fstype))
    return found


def mount_points(root: bytes, mountinfo: str = MOUNTINFO) -> list[bytes]:
    """The mount points strictly inside ``root`` (an absolute, resolved path), relative to
    it. Empty where the system has no ``/proc/self/mountinfo`` (not Linux): there the
    watcher's backend is the only source, as documented."""
    prefix = root.rstrip(b"/") + b"/"
    return [point[len(prefix):] for point, _fstype in _mounts(mountinfo)
            if point.startswith(prefix)]


def fs_type(path: bytes, mountinfo: str = MOUNTINFO) -> bytes | None:
    """The type of the file system ``path`` (absolute, resolved) is on: that of the last
    mount (the one on top) at the longest mount point above it. None where it cannot be
    told."""
    best, found = -1, None
    for point, fstype in _mounts(mountinfo):
        if (path == point or path.startswith(point.rstrip(b"/") + b"/")) \
                and len(point) >= best:
            best, found = len(point), fstype
    return found


def with_blind_spots(dirty: set[bytes], linked: list[bytes], mounts: list[bytes],
                     cache: dict[bytes, DirCache], root: bytes | None = None) -> set[bytes]:
    """``dirty`` with what the watcher cannot vouch for: each file of ``linked`` is re-stat'ed
    (its directory partly dirty with its name; any path a scan must look at again goes this
    way), and so is each of ``mounts``, a folder then listed whole with every cached
    directory below it.

    With ``root``, a name the watcher reported that is now a file with more than one link and
    not in ``linked`` (a hard link made since: ``ln a b``) brings the other names the cache
    knows for its inode: a write through the new name changes them without an event."""
    if root is not None and isinstance(dirty, DirtyDirs) and dirty.names:
        linked = linked + new_link_names(root, dirty, linked, cache)
    if not linked and not mounts:
        return dirty
    dirs = set(dirty)
    names = dict(dirty.names) if isinstance(dirty, DirtyDirs) else {}

    def restat(path: bytes) -> None:
        parent, _, name = path.rpartition(b"/")
        if parent not in dirs:
            dirs.add(parent)
            names[parent] = frozenset((name,))
        elif parent in names:  # partly dirty: one name more; listed whole: nothing to add
            names[parent] = names[parent] | {name}

    for path in linked:
        restat(path)
    for point in mounts:
        restat(point)  # its mode and owner are the mounted root's
        if point not in cache:  # a mounted file (or a folder the scan did not take)
            continue
        below = point + b"/"
        for d in [point, *(d for d in cache if d.startswith(below))]:
            dirs.add(d)
            names.pop(d, None)
    return DirtyDirs(dirs, names)


def new_link_names(root: bytes, dirty: DirtyDirs, linked: list[bytes],
                   cache: dict[bytes, DirCache]) -> list[bytes]:
    """The other names, in ``cache``, of the files among ``dirty``'s names that now have more
    than one link and are not in ``linked``. One ``lstat`` per name reported (the scan's own
    follows from the page cache); the cache is searched only when such a file is found."""
    known = set(linked)
    inodes: set[int] = set()
    for d, names in dirty.names.items():
        for name in names:
            path = d + b"/" + name if d else name
            if path in known:
                continue
            try:
                st = os.lstat(root + b"/" + path)
            except OSError:
                continue
            if st.st_nlink > 1 and stat.S_ISREG(st.st_mode):
                inodes.add(st.st_ino)
    return names_of(inodes, cache) if inodes else []


def names_of(inodes: set[int], cache: dict[bytes, DirCache]) -> list[bytes]:
    """Every path in ``cache`` whose file has one of ``inodes``: one pass over the cache, for
    the rare snapshot that meets a new hard link."""
    found = []
    for d, (_oid, mapping, _totals) in cache.items():
        prefix = d + b"/" if d else b""
        for name, (key, _eoid, _trusted) in mapping.items():
            if key[4] in inodes and key[0] & IFMT != IFDIR:
                found.append(prefix + name)
    return found


def mapped_for_write(root: bytes, proc: str = "/proc") -> list[bytes]:
    """The files inside ``root`` that some process has mapped shared and writable now, relative
    to it: their writes raise no event, so a snapshot must stat them. Reads every readable
    ``/proc/PID/maps`` (about 60 µs a process); processes it may not read are passed over,
    which is why the daemon runs this only before the snapshots a restore depends on."""
    prefix = root.rstrip(b"/") + b"/"
    found: set[bytes] = set()
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/maps", "rb") as f:
                data = f.read()
        except OSError:
            continue
        if prefix not in data:
            continue
        for line in data.splitlines():
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[1][1:2] == b"w" and fields[1][3:4] == b"s" \
                    and fields[5].startswith(prefix):
                path = fields[5]
                if path.endswith(b" (deleted)"):
                    continue
                found.add(path[len(prefix):])
    return sorted(found)


def sample_differs(root: bytes, cache: dict[bytes, DirCache], dirty: DirtyDirs, count: int,
                   rng: random.Random | None = None, *, after_ns: int = 0,
                   mounts: Sequence[bytes] = (), linked: Sequence[bytes] = ()
                   ) -> bytes | None:
    """Re-stat up to ``count`` files picked at random from the stat cache, and return the
    first one whose stat no longer matches its cached key: the watcher missed a change there,
    so it cannot be trusted. None when every one matches. One ``lstat`` per file picked.

    Not a miss: a file at or below a change the watcher reported in ``dirty`` (a folder
    listed again, or renamed away), one changed at or after ``after_ns`` (its event may still
    be on its way), one of ``linked`` or under ``mounts`` (every dirty scan stats those)."""
    if rng is None:  # only the daemon's audit samples: a snapshot need not import random
        import random

        rng = random.Random()
    dirs = list(cache)
    if not dirs:
        return None
    known = set(linked)
    below = tuple(m + b"/" for m in mounts)
    for _ in range(count):
        rel = rng.choice(dirs)
        mapping = cache[rel][1]
        if not mapping or _reported(rel, dirty) or (rel + b"/").startswith(below):
            continue
        name = next(islice(mapping, rng.randrange(len(mapping)), None))
        key = mapping[name][0]
        path = rel + b"/" + name if rel else name
        if key[0] & IFMT == IFDIR or path in known:
            continue
        try:
            st = os.lstat(root + b"/" + path)
        except FileNotFoundError:
            return path
        except OSError:
            continue  # unreadable now: the scan reports it when it lists the folder
        if st.st_ctime_ns >= after_ns > 0:
            continue
        if stat.S_ISDIR(st.st_mode) or \
                (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != key:
            return path
    return None


def _reported(rel: bytes, dirty: DirtyDirs) -> bool:
    """Whether a change the watcher reported covers folder ``rel``: the folder itself, or a
    folder above it listed whole or with the name of the branch that leads down to ``rel``."""
    if rel in dirty:
        return True
    names = dirty.names
    while rel:
        parent, _, name = rel.rpartition(b"/")
        if parent in dirty:
            changed = names.get(parent)
            if changed is None or name in changed:
                return True
        rel = parent
    return False
