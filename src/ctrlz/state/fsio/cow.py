"""Copy-on-write: cloning a file's blocks (``FICLONE``), reading its block map (``FIEMAP``), and
naming a clone without reading it.

On XFS (``reflink=1``) and btrfs, ``ioctl(dst, FICLONE, src)`` makes ``dst`` share every block of
``src``: no byte is read or written, and a later write to either file copies only the block it
touches. So a clone is immune to later writes of its source. The kernel holds both inodes'
locks (XFS: the IO and MMAP locks; btrfs: the inode and mmap locks) across the whole remap and
flushes the source's dirty pages first, so a ``write(2)`` or a page fault on the source lands
entirely before or entirely after the clone: the clone is the file at one instant.

Content addressing wants a hash, and a hash wants a read. A clone is named instead by its
*block map*: the (offset, physical address, length) of every written extent, merged where
contiguous, plus the size. Holes and unwritten (preallocated) extents both read as zeros, so
neither is part of the map: XFS leaves unwritten extents in a file it preallocated for, and a
clone of it does not share them. Two files whose maps are equal *at the same instant* read the
same bytes, because they are the same blocks — a copy-on-write filesystem never writes a
shared block in place. That is the only fact this module relies on, and it is why
:func:`extent_map` refuses (returns ``None``) any extent whose physical address does not stand
for its bytes alone: compressed or encrypted (``ENCODED``: the address names a whole compressed
extent, which two files may use different parts of), inline, tail-packed, not yet allocated
(``DELALLOC``) or ``UNKNOWN``. A clone id (:func:`clone_id`) is a digest of that map; it is a
*name*, never a proof: maps move (btrfs balance relocates extents, xfs_fsr may too), so an id
computed long ago may no longer describe its object's blocks. Every decision that equates two
files therefore compares their maps *now* (:func:`same_blocks`), never a stored id.

A clone's content hash, when something needs it (``ctrlz verify``, a copy to another store, a
byte comparison the maps cannot settle), is computed by reading the clone and kept as its
*seal*, an extended attribute of the object file; from then on every read of the object is
checked against the seal, as a hashed object is against its id.

Stores probe once whether they can clone at all (:func:`probe`, cached in the store) and fall
back silently to copying (ext4, tmpfs, overlayfs, or a workspace on another filesystem than
the store: ``EXDEV``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from collections.abc import Callable

from ... import platform
from .atomic import temp_name

FICLONE = 0x40049409  # _IOW(0x94, 9, int)
FS_IOC_FIEMAP = 0xC020660B  # _IOWR('f', 11, struct fiemap)
FIEMAP_FLAG_SYNC = 0x1
_HEAD = struct.Struct("=QQIIII")  # fm_start, fm_length, fm_flags, fm_mapped_extents,
#                                   fm_extent_count, fm_reserved
_EXTENT = struct.Struct("=QQQQQIIII")  # fe_logical, fe_physical, fe_length, reserved64[2],
#                                        fe_flags, reserved[3]
_BATCH = 128  # extents asked for per FIEMAP call
EXTENT_LAST = 0x1
EXTENT_UNWRITTEN = 0x800  # allocated, reads as zeros: left out of the map, like a hole
EXTENT_MERGED = 0x1000
EXTENT_SHARED = 0x2000
#: flags that say nothing about whether the physical address stands for the bytes
_NEUTRAL = EXTENT_LAST | EXTENT_MERGED | EXTENT_SHARED | EXTENT_UNWRITTEN

#: ``FICLONE`` errors that mean "these two files cannot share blocks", so copy them instead:
#: another filesystem (EXDEV), a filesystem without reflink (EOPNOTSUPP: ext4, tmpfs; EINVAL:
#: XFS without reflink, btrfs files of different checksum/compression settings; ENOTTY: no such
#: ioctl), a swap or immutable file (ETXTBSY, EPERM). Anything else (ENOSPC, EIO) is an error.
CANNOT_CLONE = frozenset({errno.EXDEV, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOTTY,
                          errno.ENOSYS, errno.EPERM, errno.ETXTBSY, errno.EBADF, errno.EISDIR})

#: the last 8 bytes of every clone id; a content hash ends so once in 2**64, and even then the
#: catalog's codec decides (this only spares a lookup for the ids that cannot be clones)
MARKER = b"\xc1\x0e" * 4
SEAL = "user.ctrlz.content"  # extended attribute: b"<algorithm>:<hex digest>"
PROBE = "clone-probe"  # in the store directory: "<1|0> <st_dev>" once probed

Extent = tuple[int, int, int]  # logical offset, physical address, length
BlockMap = tuple[Extent, ...]


def clone(dst_fd: int, src_fd: int) -> bool:
    """Make ``dst_fd`` share every block of ``src_fd``; False when the pair cannot clone, or
    :mod:`ctrlz.platform` says there is no ``FICLONE`` here (then the bytes are copied)."""
    if not platform.can_ficlone():
        return False
    try:
        fcntl.ioctl(dst_fd, FICLONE, src_fd)
    except OSError as exc:
        if exc.errno in CANNOT_CLONE:
            return False
        raise
    return True


def extent_map(fd: int, *, sync: bool = False) -> BlockMap | None:
    """The file's extents, merged where contiguous, or ``None`` when one of them does not
    stand for its bytes alone (see the module docstring) or the filesystem has no FIEMAP.

    ``sync`` flushes the file's dirty pages first (``FIEMAP_FLAG_SYNC``): needed for a file
    someone else may be writing, whose newest bytes would otherwise sit in memory, unmapped.
    A clone in the store is never written, so its map needs no flush."""
    out: list[Extent] = []
    start = 0
    flags = FIEMAP_FLAG_SYNC if sync else 0
    buf = bytearray(_HEAD.size + _EXTENT.size * _BATCH)
    while True:
        _HEAD.pack_into(buf, 0, start, (1 << 64) - 1 - start, flags, 0, _BATCH, 0)
        try:
            fcntl.ioctl(fd, FS_IOC_FIEMAP, buf, True)
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EINVAL, errno.EBADR):
                return None
            raise
        flags = 0
        mapped = _HEAD.unpack_from(buf, 0)[3]
        if mapped == 0:
            return tuple(out)
        fl = 0
        for i in range(mapped):
            logical, physical, length, _, _, fl, _, _, _ = _EXTENT.unpack_from(
                buf, _HEAD.size + _EXTENT.size * i)
            if fl & ~_NEUTRAL:
                return None
            if fl & EXTENT_UNWRITTEN:
                continue  # reads as zeros, as a hole does
            if out:
                lo, ph, ln = out[-1]
                if lo + ln == logical and ph + ln == physical:
                    out[-1] = (lo, ph, ln + length)
                    continue
            out.append((logical, physical, length))
        if fl & EXTENT_LAST:  # the flags of the batch's last extent
            return tuple(out)
        start = logical + length


def path_map(path: str | os.PathLike[str]) -> BlockMap | None:
    """:func:`extent_map` of a file by name (a clone in the store); ``None`` if it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        return extent_map(fd)
    finally:
        os.close(fd)


def same_blocks(a: BlockMap | None, b: BlockMap | None) -> bool:
    """Do two maps, taken now, prove the files hold the same bytes? (Sizes are compared by the
    caller.) ``None`` proves nothing."""
    return a is not None and b is not None and a == b


def clone_id(digest: Callable[[bytes], bytes], size: int, blocks: BlockMap,
             salt: bytes = b"") -> bytes:
    """The name of a clone with this size and block map: a digest of both and ``salt`` (the
    store's own, and random bytes for a fresh name when the natural one is not free; see
    :meth:`ctrlz.state.store.clones.CloneObjects.clone_name`), ending in :data:`MARKER`."""
    body = b"".join(struct.pack(">QQQ", *e) for e in blocks)
    return digest(b"ctrlz-clone 1\0" + size.to_bytes(8, "big") + salt + body)[:24] + MARKER


def is_clone_id(oid: bytes) -> bool:
    """Could ``oid`` name a clone? (The catalog's codec is the authority.)"""
    return oid[24:] == MARKER


# -- seals -------------------------------------------------------------------------------------

def read_seal(path: str | os.PathLike[str], algorithm: str) -> bytes | None:
    """The content hash recorded on a clone, or ``None`` when it was never computed."""
    try:
        raw = os.getxattr(path, SEAL)
    except OSError:
        return None
    name, _, value = raw.partition(b":")
    if name != algorithm.encode():
        return None
    try:
        digest = bytes.fromhex(value.decode("ascii"))
    except ValueError:
        return None
    return digest if len(digest) == 32 else None


def write_seal(path: str | os.PathLike[str], algorithm: str, digest: bytes) -> bool:
    """Record a clone's content hash; False where the store cannot keep it (read-only, no
    extended attributes): the hash is then computed again next time, nothing worse."""
    try:
        os.setxattr(path, SEAL, algorithm.encode() + b":" + digest.hex().encode())
    except OSError:
        return False
    return True


# -- the probe and the flush -----------------------------------------------------------------

def probe(store_root: str, objects_dir: str) -> bool | None:
    """Can this store clone? Measured once (two temp files in ``objects/``, one cloned onto
    the other) and kept in ``<store>/clone-probe`` with the device it was measured on, so a
    store copied or moved to another filesystem is probed again.

    ``None`` (not known yet) while ``objects/`` does not exist: the probe never makes it. A
    directory made here would be one no writer knows is new, so none would fsync its parent,
    and a power cut could lose the entry of a directory whose objects a commit names. Writers
    make it before they ask (``ObjectWriter.clones_cheaply``, ``ingest_large``)."""
    if not platform.can_ficlone():
        return False  # before the cached answer: a store probed outside portable mode
    try:
        dev = os.stat(store_root).st_dev
    except OSError:
        return False
    cache = os.path.join(store_root, PROBE)
    try:
        with open(cache) as f:
            said, seen_dev = f.read().split()
        if int(seen_dev) == dev:
            return said == "1"
    except (OSError, ValueError):
        pass
    if not os.path.isdir(objects_dir):
        return None
    able = _try_clone(objects_dir)
    tmp = os.path.join(store_root, temp_name(PROBE))
    try:
        with open(tmp, "w") as f:
            f.write(f"{int(able)} {dev}\n")
        os.replace(tmp, cache)  # a cache: no fsync, a lost answer is only asked again
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return able


def _try_clone(directory: str) -> bool:
    a = os.path.join(directory, temp_name("probe-a"))
    b = os.path.join(directory, temp_name("probe-b"))
    fds: list[int] = []
    try:
        fds.append(os.open(a, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        os.write(fds[0], b"\0" * 4096)
        fds.append(os.open(b, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        return clone(fds[1], fds[0])
    except OSError:
        return False
    finally:
        for fd in fds:
            os.close(fd)
        for p in (a, b):
            try:
                os.unlink(p)
            except OSError:
                pass


def syncfs(path: str | os.PathLike[str]) -> None:
    """Make every clone made on ``path``'s filesystem durable with one flush: a clone is a
    metadata transaction (its data was flushed by the clone itself), and one ``syncfs`` costs
    about what one ``fsync`` does (~10 ms here) where an fsync per clone cost 6–12 ms each."""
    import ctypes  # here: only stores that clone pay for it

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sync = platform.syncfs_function()
        if sync is None:  # pragma: no cover - clones without syncfs: no such platform yet
            os.sync()
        elif sync(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    finally:
        os.close(fd)
