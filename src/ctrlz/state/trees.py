"""Tree objects: one directory's listing, the nodes of each snapshot's Merkle tree.

A tree is the canonical encoding of a directory's sorted entries. Each entry names a file, a
symlink or a subdirectory and carries the id of its content (a blob for files and symlink
targets, another tree for directories), so the id of the root tree commits to every byte, mode,
mtime and link in the snapshot. Unchanged directories keep their tree id from one snapshot to the
next, which is what lets diff and restore skip whole subtrees.

Encoding (version 1)::

    b"ctrlz-tree 1\\n" + for each entry, sorted by name bytes:
        kind b" " mode(octal) b" " size b" " mtime_ns b" " oid(hex) b" " name b"\\0"

``kind`` is ``f`` (regular file), ``l`` (symlink; the blob is its target) or ``d`` (directory).
Names are raw bytes (non-UTF-8 names round-trip) and can hold anything but ``/`` and NUL, which
is why the name comes last and NUL ends the record. Directory entries carry size 0 and mtime 0:
a directory's mtime changes whenever it is written to, so committing it would only add noise.
"""

from __future__ import annotations

from binascii import unhexlify
from collections import namedtuple

from ..errors import CorruptObject

HEADER = b"ctrlz-tree 1\n"
FILE, SYMLINK, DIR = "f", "l", "d"
KINDS = frozenset((FILE, SYMLINK, DIR))


class Entry(namedtuple("Entry", "name kind mode size mtime_ns oid")):
    """One tree entry: ``name`` (bytes), ``kind`` (FILE, SYMLINK or DIR), ``mode`` (permission
    bits, st_mode & 0o7777), ``size``, ``mtime_ns`` and ``oid``. A ``collections`` named tuple
    rather than ``typing.NamedTuple``: every ctrlz process opens trees, and ``typing`` would
    cost each one a few milliseconds of start-up."""

    __slots__ = ()
    name: bytes
    kind: str
    mode: int
    size: int
    mtime_ns: int
    oid: bytes

    def same_content(self, other: Entry) -> bool:
        return self.kind == other.kind and self.oid == other.oid


def encode_tree(entries: list[Entry]) -> bytes:
    """Encode entries that are already sorted by name."""
    parts = [HEADER]
    append = parts.append
    for e in entries:
        append(b"%s %o %d %d %s %s\0" % (e.kind.encode(), e.mode, e.size, e.mtime_ns,
                                         e.oid.hex().encode(), e.name))
    return b"".join(parts)


def valid_name(name: bytes) -> bool:
    return bool(name) and name not in (b".", b"..") and b"/" not in name and b"\0" not in name


#: a record's kind field, decoded (a dict lookup instead of ``bytes.decode`` per entry)
_KIND_OF = {b"f": FILE, b"l": SYMLINK, b"d": DIR}


def decode_tree(data: bytes) -> list[Entry]:
    """Decode and validate a tree; a malformed tree is corruption, never a path to follow.

    Every plan, diff and listing decodes the trees on its way, and a directory of a thousand
    entries is a thousand records, so the loop keeps to what each one needs: one split, a
    dict lookup for the kind, ``unhexlify`` straight from bytes, and the entry tuple built
    without the named tuple's keyword machinery."""
    if not data.startswith(HEADER):
        raise CorruptObject("tree object has an unknown header; run `ctrlz verify`")
    body = data[len(HEADER):]
    if not body:
        return []
    if not body.endswith(b"\0"):
        raise CorruptObject("tree object is truncated; run `ctrlz verify`")
    entries: list[Entry] = []
    append = entries.append
    make = tuple.__new__
    kinds = _KIND_OF
    previous = b""  # names are sorted, unique and never empty: each must exceed the last
    try:
        for record in body[:-1].split(b"\0"):
            kind, mode, size, mtime, oid, name = record.split(b" ", 5)
            if name <= previous or name in (b".", b"..") or b"/" in name or kind not in kinds:
                raise CorruptObject(f"tree holds an invalid entry {name!r}; run `ctrlz verify`")
            append(make(Entry, (name, kinds[kind], int(mode, 8), int(size), int(mtime),
                                unhexlify(oid))))
            previous = name
    except ValueError as exc:  # binascii.Error is one
        raise CorruptObject(f"tree record is malformed ({exc}); run `ctrlz verify`") from exc
    return entries
