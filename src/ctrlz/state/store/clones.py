"""Clone objects: the half of the object store that deals with copy-on-write clones.

A snapshot on a store that can clone (:func:`ctrlz.state.fsio.cow.probe`) stores each large file as
a ``FICLONE`` of it — no byte read, no byte written — named by its block map rather than its
hash (:func:`ctrlz.state.fsio.cow.clone_id`), with codec ``CLONE`` in the catalog. This mixin gives
:class:`~ctrlz.state.store.objects.ObjectStore` what that needs, and keeps the rest of the store
unaware of it:

* **naming** (:meth:`ingest_clone`, :meth:`clone_name`): a new clone's natural name is a
  digest of its size, its blocks and the store's salt; one already taken is the same object
  only if both files map to the same blocks *now*, and a deleted clone's name is never given
  out again; otherwise it gets a fresh random name. So an untouched file cloned again (a
  ``touch``, a racily clean re-read) gets the id it had, and dedup, diffs and change counts
  see no change, exactly as with hashing; a file rewritten with the same bytes gets a new id
  (new blocks) — the one place clones and hashes disagree, and a diff then says "modified"
  until both sides are sealed. No two stores, and no two objects of one store over time,
  name different bytes alike, so an id that an archive or a remote holds is the same bytes
  wherever it is found.
* **sealing** (:meth:`content_ok`, :meth:`content_id`): the first full read of a clone (by
  ``ctrlz verify``, a restore to another filesystem, a copy to a remote) records its hash as
  the object's seal; every later read is checked against it.
* **restoring** (:meth:`clone_to`): a clone goes back into a workspace by cloning it again.
* **matching** (:meth:`file_matches`, :meth:`known_clone`): "does this file hold that object's
  bytes" answered by comparing block maps, with a hash only when the maps cannot tell.
"""

from __future__ import annotations

import os

from ...errors import CorruptObject
from ..fsio import cow
from .packs import CHUNK, CLONE, RAW, full_disk

TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ..db.catalog import Catalog
    from ..hashing import Hasher

_OPEN = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW


class CloneObjects:
    """Mixed into the object store; relies on its ``catalog``, ``algorithm``, ``digest``,
    ``new_hasher``, ``root``, ``_loose``, ``loose_name`` and ``iter_chunks``."""

    root: str | os.PathLike[str]
    catalog: Catalog
    algorithm: str
    digest: Callable[[bytes], bytes]
    new_hasher: Callable[[], Hasher]
    _loose: str

    def loose_name(self, oid: bytes) -> str:  # pragma: no cover - the store's
        raise NotImplementedError

    def iter_chunks(self, oid: bytes) -> Iterator[bytes]:  # pragma: no cover - the store's
        raise NotImplementedError

    def _init_clones(self) -> None:
        self._can_clone: bool | None = None
        self._refused_from: set[int] = set()  # devices a clone into the store failed from
        self._refused_to: set[int] = set()  # devices a clone out of the store failed to
        self._clone_hashed = False  # a clone's blocks could not name it: it was read
        self._clone_salt: bytes | None = None

    #: False for stores whose ids must be content hashes (a SnapshotManager session's)
    clones_allowed = True

    def can_clone(self) -> bool:
        """Can this store's filesystem clone? Probed once per store, then cached on disk; no
        (for now, not remembered) before anything has made ``objects/``, which the probe
        never does (:func:`ctrlz.state.fsio.cow.probe`)."""
        if not self.clones_allowed:
            return False
        if self._can_clone is None:
            able = cow.probe(os.fspath(self.root), self._loose)
            if able is None:
                return False
            self._can_clone = able
        return self._can_clone

    def clones_cheaply(self) -> bool:
        """Whether a large file given to :meth:`ingest_clone` will, as far as is known, be a
        clone and not a read: the store can clone, no device has refused, and no clone has had
        to be hashed (blocks that cannot name it)."""
        return not self._refused_from and not self._clone_hashed and self.can_clone()

    def is_clone(self, oid: bytes) -> bool:
        if not cow.is_clone_id(oid):
            return False
        row = self.catalog.lookup(oid)
        return row is not None and row[5] == CLONE

    # -- writing ---------------------------------------------------------------------------

    def ingest_clone(self, fd: int, tmp: str) -> tuple[bytes, str, int, int, int] | None:
        """Clone the open file ``fd`` to ``tmp``: (id, tmp, size, size, codec), or ``None``
        when this file cannot be cloned into the store (the caller copies it). A file whose
        blocks cannot name it (compressed extents, say) is hashed from the clone instead: a
        plain content-addressed object that still shares its blocks."""
        try:
            src_dev = os.fstat(fd).st_dev
        except OSError:
            return None
        if src_dev in self._refused_from:
            return None
        try:
            out = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise full_disk(exc, tmp) from exc
        keep = False
        try:
            if not cow.clone(out, fd):
                self._refused_from.add(src_dev)
                return None
            size = os.fstat(out).st_size
            blocks = cow.extent_map(out)
            if blocks is None:
                self._clone_hashed = True
                digest = _hash_fd(self.new_hasher(), out)
                os.fsync(out)
                keep = True
                return digest, tmp, size, size, RAW
            keep = True
            return self.clone_name(size, blocks), tmp, size, size, CLONE
        except OSError as exc:
            raise full_disk(exc, tmp) from exc
        finally:
            os.close(out)
            if not keep:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def clone_name(self, size: int, blocks: cow.BlockMap) -> bytes:
        """The id of a new clone: its natural name, unless that names other bytes, then a
        name made fresh with random bytes.

        A natural name is a digest of the size, the block map and this store's salt
        (:meth:`clone_salt`). Blocks are not bytes for ever, so the name is given out only
        when nothing else can hold it: an object file of that name that maps to the same
        blocks now is the same object; one that maps to others (its extents moved since it
        was named) is not, nor is a deleted clone's name (:meth:`Catalog.is_retired
        <ctrlz.state.db.catalog.Catalog.is_retired>`): gc freed its blocks for new files, and
        an archive or a remote may still hold its old bytes under it. The salt keeps two
        stores from naming different bytes alike: two machines made from one image put a
        new file of the same size on the same blocks, and a remote they share took the
        second for the first (one object, "already there")."""
        salt = self.clone_salt()
        oid = cow.clone_id(self.digest, size, blocks, salt)
        path = self.loose_name(oid)
        if os.path.lexists(path):
            if cow.same_blocks(blocks, cow.path_map(path)):
                return oid
        elif not self.catalog.is_retired(oid):
            return oid
        return cow.clone_id(self.digest, size, blocks, salt + os.urandom(16))

    def clone_salt(self) -> bytes:
        """What makes this store's clone names its own: random bytes made with the store, or
        for a store made before them its creation time and roots."""
        if self._clone_salt is None:
            meta = self.catalog.get_meta
            made = meta("clone_salt")
            self._clone_salt = (bytes.fromhex(made) if made is not None else
                                f"{meta('created_ns')}:{meta('roots')}".encode())
        return self._clone_salt

    # -- reading ---------------------------------------------------------------------------

    def content_ok(self, oid: bytes, codec: int, digest: bytes) -> bool:
        """Do bytes that hash to ``digest`` belong to object ``oid``? For a clone: they match
        its seal, or there was none yet and they become it."""
        if codec != CLONE:
            return digest == oid
        path = self.loose_name(oid)
        seal = cow.read_seal(path, self.algorithm)
        if seal is None:
            cow.write_seal(path, self.algorithm, digest)
            return True
        return seal == digest

    def content_matches(self, oid: bytes, digest: bytes) -> bool:
        """:meth:`content_ok` for a caller that streamed the object (``ctrlz verify``)."""
        if digest == oid:
            return True
        row = self.catalog.lookup(oid)
        return row is not None and row[5] == CLONE and self.content_ok(oid, CLONE, digest)

    def content_id(self, oid: bytes) -> bytes:
        """The hash of the object's bytes: its id, or for a clone its seal (computed and
        recorded now if it has none, which reads the clone once)."""
        if not self.is_clone(oid):
            return oid
        seal = cow.read_seal(self.loose_name(oid), self.algorithm)
        if seal is not None:
            return seal
        hasher = self.new_hasher()
        for chunk in self.iter_chunks(oid):
            hasher.update(chunk)
        digest = hasher.digest()
        cow.write_seal(self.loose_name(oid), self.algorithm, digest)
        return digest

    def clone_to(self, oid: bytes, fd: int) -> bool:
        """Put a clone object's bytes into the open, empty file ``fd`` by cloning; False
        when it is no clone or cannot be cloned there (the caller copies it instead)."""
        if not cow.is_clone_id(oid):
            return False
        dev = os.fstat(fd).st_dev
        if dev in self._refused_to:
            return False
        row = self.catalog.lookup(oid)
        if row is None or row[5] != CLONE or row[1] is not None:
            return False
        try:
            src = os.open(self.loose_name(oid), _OPEN)
        except FileNotFoundError:
            return False  # the copy path looks again and reports it
        try:
            if not cow.clone(fd, src):
                self._refused_to.add(dev)
                return False
        finally:
            os.close(src)
        if os.fstat(fd).st_size != row[4]:
            raise CorruptObject(f"object {oid.hex()[:16]} has the wrong length; "
                                "run `ctrlz verify`")
        return True

    def file_matches(self, oid: bytes, fd: int) -> bool:
        """Does the open file ``fd`` hold exactly the bytes of object ``oid``?

        For a clone, first by block maps: a file that maps to the very blocks of the stored
        clone (as one restored by cloning does, until someone writes to it) holds its bytes,
        and nothing needs reading. Otherwise by hash: the file's against the id, or against
        the clone's seal."""
        if self.is_clone(oid):
            if cow.same_blocks(_map_or_none(fd), cow.path_map(self.loose_name(oid))):
                return True
            return _hash_fd(self.new_hasher(), fd) == self.content_id(oid)
        return _hash_fd(self.new_hasher(), fd) == oid

    def known_clone(self, fd: int, size: int) -> bytes | None:
        """The id of a stored clone that the open file ``fd`` shares every block with now,
        or ``None``: lets a scan that stores nothing (a diff against the working tree) name
        an untouched large file as the snapshot did, without reading it. Nothing at all on
        a store that cannot clone (the map's flush would only cost writeback there)."""
        if not self.can_clone():
            return None
        blocks = _map_or_none(fd)
        if blocks is None:
            return None
        oid = cow.clone_id(self.digest, size, blocks, self.clone_salt())
        row = self.catalog.lookup(oid)
        if row is None or row[5] != CLONE or row[4] != size:
            return None
        return oid if cow.same_blocks(blocks, cow.path_map(self.loose_name(oid))) else None


def _map_or_none(fd: int) -> cow.BlockMap | None:
    """The block map of a file someone else may be writing (flushed first), or ``None``."""
    try:
        return cow.extent_map(fd, sync=True)
    except OSError:
        return None


def _hash_fd(hasher: Hasher, fd: int) -> bytes:
    offset = 0
    while chunk := os.pread(fd, CHUNK, offset):
        hasher.update(chunk)
        offset += len(chunk)
    return hasher.digest()
