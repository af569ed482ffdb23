"""Pre-images of single paths: capture one into the store, fingerprint one on disk.

A pre-image is what one path was just before a tool call touched it: a file (body, mode), a
symlink (target), ``absent`` (the tool call created it) or ``dir`` (recorded, never restored:
a pre-image is about one file). Capturing validates the path first (relative, no ``..``, no
symlinked parent, inside the root) and never reads through a symlink. Putting pre-images back is
the restore engine's job (:mod:`ctrlz.toolcalls.restore.restore`), which refuses ``absent`` over a
directory rather than removing a tree the agent made later (harn deletes it).
"""

from __future__ import annotations

import os
import stat

from ..errors import CtrlzError
from ..paths import plain_relative
from ..state.fsio.atomic import fsync_dir, temp_name, write_new

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..state.store.objects import ObjectStore, ObjectWriter

FILE, SYMLINK, ABSENT, DIR, OTHER = "file", "symlink", "absent", "dir", "other"
KINDS = (FILE, SYMLINK, ABSENT, DIR, OTHER)


class Image:
    """One path's state: kind plus, for files and symlinks, the body's id.

    Immutable and compared by value, like the frozen dataclass it once was; written out by hand
    because agent hooks import this module and ``dataclasses`` costs them milliseconds."""

    __slots__ = ("kind", "oid", "size", "mode")
    kind: str
    oid: bytes | None
    size: int
    mode: int | None

    def __init__(self, kind: str, oid: bytes | None = None, size: int = 0,
                 mode: int | None = None) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "oid", oid)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "mode", mode)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def _fields(self) -> tuple[str, bytes | None, int, int | None]:
        return (self.kind, self.oid, self.size, self.mode)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"Image(kind={self.kind!r}, oid={self.oid!r}, size={self.size!r}, "
                f"mode={self.mode!r})")

    @property
    def key(self) -> tuple[str, bytes | None]:
        return (self.kind, self.oid)


class UnsafePath(Exception):
    """A path that must not be touched (reason in the message)."""


#: Pre-images smaller than this are stored raw. A hook captures them on every tool call of an
#: agent, in a fresh interpreter, and loading the compressor (with the ``typing`` and
#: ``platform`` modules zstandard imports on Python 3.11) costs a hook ~6 ms, more than a few
#: kilobytes are worth in a store that ``preimage_cap`` bounds and gc empties.
RAW_BELOW = 64 << 10


def is_plain_rel(rel: bytes) -> bool:
    """Whether ``rel`` is a workspace-relative path exactly as the one path check
    (:func:`ctrlz.paths.plain_relative`) writes one: not absolute, no ``..``, ``.`` or empty
    part, no NUL byte, not empty."""
    try:
        return plain_relative(rel) == rel
    except CtrlzError:
        return False


def check_rel(root: bytes, rel: bytes) -> bytes:
    """The absolute path for ``rel``, refusing traversal and symlinked parents."""
    if not is_plain_rel(rel):
        raise UnsafePath("not a plain workspace-relative path (absolute, or with a '..', '.' "
                         "or empty part)")
    parts = rel.split(b"/")
    here = root
    for part in parts[:-1]:
        here = here + b"/" + part
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return root + b"/" + rel  # parents will be created as real directories
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePath("a parent is a symlink or not a directory")
    return root + b"/" + rel


_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def look(full: bytes) -> tuple[str, os.stat_result | None, bytes]:
    """What one path is, never through a symlink: its kind, its ``lstat`` (None when absent)
    and, for a symlink, its target. Every way of taking a pre-image starts here (capture into
    the store, fingerprint, the inbox's record), so they agree on what a path is; a regular
    file is then opened with :data:`_OPEN_FILE`, and read by the caller its own way."""
    try:
        st = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return ABSENT, None, b""
    if stat.S_ISLNK(st.st_mode):
        return SYMLINK, st, os.readlink(full)
    if stat.S_ISDIR(st.st_mode):
        return DIR, st, b""
    return (FILE if stat.S_ISREG(st.st_mode) else OTHER), st, b""


def open_file(full: bytes) -> int:
    """A descriptor on the regular file :func:`look` found (``O_NOFOLLOW``: a symlink put
    there since is refused, not followed)."""
    return os.open(full, _OPEN_FILE)


def capture(root: bytes, rel: bytes, writer: ObjectWriter) -> Image:
    """Store the current state of ``rel`` (its body goes into ``writer``)."""
    full = check_rel(root, rel)
    kind, st, target = look(full)
    if kind == SYMLINK:
        return Image(SYMLINK, writer.put(target), len(target))
    if kind == DIR:
        assert st is not None
        return Image(DIR, mode=stat.S_IMODE(st.st_mode))
    if kind != FILE:
        return Image(kind)
    assert st is not None
    from ..state.store.packs import LOOSE_MIN

    fd = open_file(full)
    try:
        if st.st_size >= LOOSE_MIN:
            # compressed whatever the disk's pace: no gc compresses a pre-image later, and
            # preimage_cap counts stored bytes
            oid, tmp, size, stored, codec = writer.ingest_large(fd, paced=False)
            writer.adopt_large(oid, tmp, size, stored, codec)
        else:
            data = _read_all(fd)
            oid, size = writer.put(data, compress=len(data) >= RAW_BELOW), len(data)
    finally:
        os.close(fd)
    return Image(FILE, oid, size, stat.S_IMODE(st.st_mode))


def fingerprint(root: bytes, rel: bytes, objects: ObjectStore) -> Image:
    """The current state of ``rel`` as an image, hashing without storing."""
    full = root + b"/" + rel
    kind, st, target = look(full)
    if kind == SYMLINK:
        return Image(SYMLINK, objects.digest(target), len(target))
    if kind != FILE:
        return Image(kind)
    assert st is not None
    from ..state.store.packs import LOOSE_MIN

    fd = open_file(full)
    try:
        if st.st_size >= LOOSE_MIN:
            hasher = objects.new_hasher()
            while chunk := os.read(fd, 4 << 20):
                hasher.update(chunk)
            return Image(FILE, hasher.digest(), st.st_size, stat.S_IMODE(st.st_mode))
        data = _read_all(fd)
    finally:
        os.close(fd)
    return Image(FILE, objects.digest(data), len(data), stat.S_IMODE(st.st_mode))


def write_bytes(root: bytes, rel: bytes, data: bytes, mode: int | None) -> None:
    """Atomically write ``data`` at ``rel`` (the ``write_file`` helper's own write)."""
    full = check_rel(root, rel)
    parent = os.path.dirname(full)
    os.makedirs(parent, exist_ok=True)
    if mode is None:
        try:
            st = os.lstat(full)
            mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o644
        except FileNotFoundError:
            mode = 0o644
    tmp = os.path.join(parent, os.fsencode(temp_name(os.path.basename(full))))
    write_new(tmp, data, chmod=mode)
    os.replace(tmp, full)
    fsync_dir(parent)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
