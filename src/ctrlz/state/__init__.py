"""State: how snapshots are kept on disk.

object
    bytes named by their hash (BLAKE3, or SHA-256 per repository); file contents, symlink
    targets and trees
pack
    an append-only file of small objects, indexed by the catalog
tree
    one directory's sorted listing; trees of trees form a Merkle tree
catalog
    the SQLite database (WAL) that indexes objects and records snapshots; its commit is the
    commit point of every write
stat cache
    the last snapshot's stat data, so unchanged files are not read again

Folders: ``store/`` (objects, packs, groups, clones and their upkeep), ``db/`` (the catalog,
oplog, sessions, stat cache, inbox), ``ignore/`` (what a snapshot covers), ``fsio/`` (atomic
replacement, direct I/O, copy-on-write), ``scan/`` (walking a tree), ``interchange/``
(archives, transfers), ``remote/`` (remote stores).
"""
