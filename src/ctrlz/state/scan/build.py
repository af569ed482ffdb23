"""Turning listed directories into tree objects, cache entries and change counts.

Directories are finished deepest first (the walk's order, reversed), so every child's tree id
is known when its parent is encoded. A directory whose listing matches its cache entry keeps
the cached tree id without being encoded again; a directory listed by patching its cached
tree is finished by :func:`~ctrlz.state.scan.incremental.finish_patched`.

While finishing, the scan counts what changed against the stat cache's tree, by the rules of
``engine.diff.count_changes``, so that a snapshot can report its changes without diffing two
trees (which would cost the whole workspace).
"""

from __future__ import annotations

from ..db.statcache import DirCache, Listing, trusted
from ..trees import DIR, FILE, Entry, encode_tree
from .incremental import drop, drop_vanished, finish_patched
from .model import (
    IFDIR,
    KEY,
    KIND,
    MTIME,
    NAME,
    NO_CHANGES,
    OID,
    PERM,
    SIZE,
    Changes,
    DirNode,
    kind_of,
    same_entries,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .context import ScanContext


def finish(sc: ScanContext, node: DirNode, new_cache: dict[bytes, DirCache]) -> None:
    """Encode (or reuse) ``node``'s tree, record its cache entry and hand its id up."""
    if node.unreadable:
        if node.slot is not None:
            node.slot[1][OID] = None
            node.slot[0].dirty = True
        if sc._copied:
            drop(sc, new_cache, node.rel)
        return
    if node.base is not None:
        done(node, finish_patched(sc, node, new_cache), new_cache)
        return
    entries = [e for e in node.entries if e[OID] is not None]
    if node.listed >= 0 and node.stamp is not None \
            and len(entries) + len(node.same) == node.listed and trusted(node.stamp, sc.scan_ns):
        sc.new_stamps[node.rel] = node.stamp  # nothing left out: the listing is whole
    cached = node.cached
    if not node.dirty and cached is not None and len(entries) + len(node.same) == len(cached[1]):
        tree_oid, listing, totals = cached
        sc.stats.reused_trees += 1
        sc._changes[node.rel] = NO_CHANGES
    else:
        if node.same:
            assert cached is not None
            entries += same_entries(cached[1], node.same)
        entries.sort(key=lambda e: e[NAME])
        tree = [Entry(e[NAME], e[KIND], e[PERM], e[SIZE], e[MTIME], e[OID])
                for e in entries]
        tree_oid = sc.sink.put(encode_tree(tree))
        sc.built_trees[tree_oid] = tree
        scan_ns = sc.scan_ns
        mapping = {}
        prefix = node.rel + b"/" if node.rel else b""
        files = dirs = links = nbytes = 0
        for e in entries:
            if e[KIND] == DIR:
                sub = new_cache[prefix + e[NAME]]
                mapping[e[NAME]] = ((IFDIR | e[PERM], 0, 0, 0, 0), e[OID], True)
                f, d, s_, b = sub[2]
                files, dirs, links, nbytes = files + f, dirs + d + 1, links + s_, nbytes + b
            else:
                key = e[KEY]
                mapping[e[NAME]] = (key, e[OID], trusted(key, scan_ns))
                if e[KIND] == FILE:
                    files += 1
                    nbytes += e[SIZE]
                else:
                    links += 1
        totals = (files, dirs, links, nbytes)
        if cached is not None:
            changes = count(sc, node, entries, new_cache)
            if changes is not None:
                sc._changes[node.rel] = changes
            if sc._copied and not node.from_cache:
                drop_vanished(sc, node, mapping, new_cache)
        listing = Listing.pack(mapping.items())
    done(node, (tree_oid, listing, totals), new_cache)


def done(node: DirNode, result: DirCache, new_cache: dict[bytes, DirCache]) -> None:
    """Record a finished directory's cache entry and hand its tree id to its parent."""
    tree_oid = result[0]
    new_cache[node.rel] = result
    if node.slot is not None:
        parent, entry = node.slot
        entry[OID] = tree_oid
        if not parent.dirty:
            before = parent.cached[1].oid(node.rel.rpartition(b"/")[2]) \
                if parent.cached is not None else None
            if before != tree_oid:
                parent.dirty = True


def count(sc: ScanContext, node: DirNode, entries: list[list[Any]],
          new_cache: dict[bytes, DirCache]) -> Changes | None:
    """Changes of a rebuilt directory's subtree against its cached listing, by the rules
    of ``diff_trees`` + ``count_changes``: a file or link whose id or permission bits
    differ is modified, one whose kind changed is deleted and created, and a directory
    that appeared or vanished counts every file and link below it (from the cache's
    subtree totals). A subdirectory whose tree id changed was itself rebuilt and counted
    its own subtree. Costs the directory's entries, never the subtree's; ``None`` when
    the cache lacks a directory it would need (the caller then diffs the trees)."""
    assert node.cached is not None
    old = node.cached[1].decode()
    prefix = node.rel + b"/" if node.rel else b""
    created = modified = deleted = matched = 0
    for e in entries:
        name, kind = e[NAME], e[KIND]
        was = old.get(name)
        if was is None:
            new = _subtree_files(kind, prefix + name, new_cache)
            if new < 0:
                return None
            created += new
            continue
        matched += 1
        old_mode = was[0][0]
        old_kind = kind_of(old_mode)
        if old_kind != kind:
            gone = _subtree_files(old_kind, prefix + name, sc.cache)
            new = _subtree_files(kind, prefix + name, new_cache)
            if gone < 0 or new < 0:
                return None
            deleted += gone
            created += new
        elif kind == DIR:
            if was[1] != e[OID]:
                rel = prefix + name
                sub = sc._changes.get(rel)
                before = sc.cache.get(rel)
                if sub is None or before is None or before[0] != was[1]:
                    return None
                created, modified, deleted = (created + sub[0], modified + sub[1],
                                              deleted + sub[2])
        elif was[1] != e[OID] or old_mode & 0o7777 != e[PERM]:
            modified += 1
    if matched != len(old):
        names = {e[NAME] for e in entries}
        for name, was in old.items():
            if name not in names:
                gone = _subtree_files(kind_of(was[0][0]), prefix + name, sc.cache)
                if gone < 0:
                    return None
                deleted += gone
    return created, modified, deleted


def _subtree_files(kind: str, rel: bytes, cache: dict[bytes, DirCache]) -> int:
    """Files and links at ``rel``: one, or for a directory its cached subtree totals (no
    walk, so no recursion however deep the tree); -1 when the cache has no entry for that
    directory."""
    if kind != DIR:
        return 1
    sub = cache.get(rel)
    if sub is None:
        return -1
    return sub[2][0] + sub[2][2]
