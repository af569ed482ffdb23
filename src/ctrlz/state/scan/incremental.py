"""Dirty scans: list only what a watcher saw change, and patch the cached trees above it.

A watcher (``sources/watch``) tells the scanner which directories changed since the stat
cache was written (the dirty set). Every other directory with a matching cache entry is
trusted whole: its cached tree id, listing and subtree totals are reused without a syscall.
The directories between the root and a dirty one (the *needed* ones) are listed from the
cache; when the cached tree's bytes are in memory they are not even decoded: the records of
the entered subdirectories are swapped in place (:func:`patch_from_cache`,
:func:`finish_patched`), so the cost follows the number of directories on the way to a
change, never the size of those directories.

Reused subtrees keep their cache entries, so the new stat cache starts as a copy of the old
one; :func:`drop` and :func:`drop_vanished` remove the subtrees that are gone, so that no
entry outlives the snapshot that holds its objects.

Every function here takes the :class:`~ctrlz.state.scan.context.ScanContext` whose scan it
serves, and works on its state.
"""

from __future__ import annotations

from ..db.statcache import CacheEntry, DirCache, Listing
from ..trees import DIR, FILE, HEADER, SYMLINK
from .model import IFDIR, IFMT, IFREG, NAME, NO_CHANGES, OID, DirNode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from .context import ScanContext


def list_unchanged(sc: ScanContext, node: DirNode, stack: list[DirNode]) -> None:
    """List a directory the watcher saw no change in (one above a changed one) from the
    cache: by patching its cached tree when possible, else entry by entry."""
    if not patch_from_cache(sc, node, stack):
        list_from_cache(sc, node, stack)


def patch_from_cache(sc: ScanContext, node: DirNode, stack: list[DirNode]) -> bool:
    """:func:`list_from_cache` in time proportional to the subdirectories entered, not to
    the directory's entries: when the cached tree is in memory, only the needed
    subdirectories are entered, and the statistics of everything else come from the
    cached subtree totals (the node's totals less those of the entered children, which
    count themselves). :func:`finish_patched` then patches the cached tree. ``False``
    (nothing done) when the tree is not in memory, or an entered child has no cache entry
    matching its tree id or no record in the tree; the caller then lists from the cache
    entry by entry."""
    assert node.cached is not None
    base = sc.tree_cache(node.cached[0]) if sc.tree_cache is not None else None
    if base is None:
        return False
    mapping = node.cached[1]
    prefix = node.rel + b"/" if node.rel else b""
    entered = []
    for name in sc._needed_children.get(node.rel, ()):
        was = mapping.get(name)
        if was is None or was[0][0] & IFMT != IFDIR:
            continue  # not a directory of the cached listing: as list_from_cache
        rel = prefix + name
        sub = sc.cache.get(rel)
        if sub is None or sub[0] != was[1]:
            return False
        at = _find_record(base, _dir_record(was[0][0] & 0o7777, was[1], name))
        if at < 0:
            return False
        entered.append((name, rel, was[0][0] & 0o7777, sub))
        node.at.append(at)
    node.from_cache = True
    node.base = base
    sc._reused = True
    if node.rel and b".gitignore" in mapping and sc.matcher.rules.use_gitignore:
        parent_rules = node.slot[0].rules if node.slot else node.rules
        node.rules = sc.matcher.enter(parent_rules, node.rel.rpartition(b"/")[2],
                                      node.rel, has_ignore=True)
    files, dirs, links, nbytes = node.cached[2]
    for name, rel, perm, sub in entered:
        entry = [name, DIR, perm, 0, 0, None, None]
        node.entries.append(entry)
        child_rules = sc.matcher.enter(node.rules, name, rel, has_ignore=False)
        stack.append(DirNode(rel, node.path + b"/" + name, child_rules, sub, (node, entry),
                             perm))
        f, d, s_, b = sub[2]
        files, dirs, links, nbytes = files - f, dirs - d, links - s_, nbytes - b
    stats = sc.stats
    stats.files += files
    stats.dirs += dirs
    stats.symlinks += links
    stats.bytes += nbytes
    stats.reused_trees += _subdirs(base) - len(entered)
    sc.entry_budget[0] += files + links
    if sc.previous_skipped:
        inside = [e[1] + b"/" for e in entered]
        sc.skipped += [
            k for k in sc.previous_skipped
            if (not node.rel or k.path.startswith(prefix))
            and not any(k.path.startswith(p) for p in inside)]
    return True


def list_from_cache(sc: ScanContext, node: DirNode, stack: list[DirNode]) -> None:
    """A directory above a changed one, which the watcher saw no change in: its listing is
    the cached one, and only the subdirectories on the way to a change are entered."""
    assert node.cached is not None and sc._needed is not None
    node.from_cache = True
    cached_rules(sc, node)
    cached_entries(sc, node, stack, node.cached[1].items())
    sc.skipped += [k for k in sc.previous_skipped
                   if k.path.rpartition(b"/")[0] == node.rel]


def cached_rules(sc: ScanContext, node: DirNode) -> None:
    """Enter the directory's own ``.gitignore`` when its cached listing has one (a changed
    one would have made the watcher ask for a full scan)."""
    assert node.cached is not None
    if node.rel and b".gitignore" in node.cached[1] and sc.matcher.rules.use_gitignore:
        parent_rules = node.slot[0].rules if node.slot else node.rules
        node.rules = sc.matcher.enter(parent_rules, node.rel.rpartition(b"/")[2],
                                      node.rel, has_ignore=True)


def cached_entries(sc: ScanContext, node: DirNode, stack: list[DirNode],
                   items: Iterable[tuple[bytes, CacheEntry]]) -> None:
    """Add cached entries to ``node`` as they were, entering the subdirectories on the way
    to a change and reusing the others whole."""
    assert sc._needed is not None
    prefix = node.rel + b"/" if node.rel else b""
    files = links = nbytes = 0
    for name, (key, oid, _trusted) in items:
        mode = key[0]
        fmt = mode & IFMT
        if fmt == IFDIR:
            rel = prefix + name
            entry = [name, DIR, mode & 0o7777, 0, 0, None, None]
            node.entries.append(entry)
            sub = sc.cache.get(rel)
            if rel not in sc._needed and sub is not None and sub[0] == oid:
                reuse_unlisted(sc, rel, entry, sub)
                continue
            child_rules = sc.matcher.enter(node.rules, name, rel, has_ignore=False)
            stack.append(DirNode(rel, node.path + b"/" + name, child_rules, sub,
                                 (node, entry), mode & 0o7777))
            sc.stats.dirs += 1
            continue
        kind = FILE if fmt == IFREG else SYMLINK
        node.entries.append([name, kind, mode & 0o7777, key[1], key[2], key, oid])
        if kind == FILE:
            files += 1
            nbytes += key[1]
        else:
            links += 1
    sc.stats.files += files
    sc.stats.symlinks += links
    sc.stats.bytes += nbytes
    sc.entry_budget[0] += files + links


def reuse_unlisted(sc: ScanContext, rel: bytes, entry: list[Any], sub: DirCache) -> None:
    """Trust the watcher: nothing changed below ``rel``, so reuse its cached tree whole."""
    entry[OID] = sub[0]
    files, dirs, links, nbytes = sub[2]
    sc.stats.files += files
    sc.stats.dirs += dirs + 1
    sc.stats.symlinks += links
    sc.stats.bytes += nbytes
    sc.stats.reused_trees += 1
    sc.entry_budget[0] += files + links
    sc._reused = True
    prefix = rel + b"/"
    sc.skipped += [s for s in sc.previous_skipped if s.path.startswith(prefix)]


def finish_patched(sc: ScanContext, node: DirNode, new_cache: dict[bytes, DirCache]) -> DirCache:
    """Finish a directory :func:`patch_from_cache` listed: swap the new tree ids of the
    entered subdirectories into the cached tree, listing and totals (dropping those that
    became unreadable), and add up their changes. Returns the directory's new cache entry."""
    assert node.cached is not None and node.base is not None
    tree_oid, listing, totals = node.cached
    mapping = listing.decode()
    changed = [e for e in node.entries if e[OID] != mapping[e[NAME]][1]]
    if not changed:
        sc.stats.reused_trees += 1
        sc._changes[node.rel] = NO_CHANGES
        return node.cached
    files, dirs, links, nbytes = totals
    created = modified = deleted = 0
    counted = True
    prefix = node.rel + b"/" if node.rel else b""
    edits = []  # (where, old record's length, new record)
    for e, at in zip(node.entries, node.at, strict=True):
        if e[OID] == mapping[e[NAME]][1]:
            continue
        name = e[NAME]
        rel = prefix + name
        key, old_oid, _trusted = mapping[name]
        old_size = len(_dir_record(key[0] & 0o7777, old_oid, name))
        f, d, s_, b = sc.cache[rel][2]  # entered only with a matching cache entry
        if e[OID] is None:  # unreadable now: gone from the tree
            edits.append((at, old_size, b""))
            del mapping[name]
            files, dirs, links, nbytes = files - f, dirs - d - 1, links - s_, nbytes - b
            deleted += f + s_
            continue
        edits.append((at, old_size, _dir_record(key[0] & 0o7777, e[OID], name)))
        mapping[name] = (key, e[OID], True)
        nf, nd, ns, nb = new_cache[rel][2]
        files, dirs, links, nbytes = (files + nf - f, dirs + nd - d, links + ns - s_,
                                      nbytes + nb - b)
        sub = sc._changes.get(rel)
        if sub is None:
            counted = False
        else:
            created, modified, deleted = (created + sub[0], modified + sub[1],
                                          deleted + sub[2])
    edits.sort()
    base, pieces, done = node.base, [], 0
    for at, old_size, record in edits:
        pieces += (base[done:at], record)
        done = at + old_size
    pieces.append(base[done:])
    data = b"".join(pieces)
    tree_oid = sc.sink.put(data)
    sc.patched_trees[tree_oid] = data
    if counted:
        sc._changes[node.rel] = (created, modified, deleted)
    return tree_oid, Listing.pack(mapping.items()), (files, dirs, links, nbytes)


def drop_vanished(sc: ScanContext, node: DirNode, mapping: dict[bytes, Any],
                  new_cache: dict[bytes, DirCache]) -> None:
    """Drop from the copied cache the subtrees of ``node``'s cached subdirectories that
    are no longer subdirectories of it (deleted, excluded, unreadable, or replaced by a
    file): their entries must not outlive the snapshot that holds their objects."""
    assert node.cached is not None
    prefix = node.rel + b"/" if node.rel else b""
    for name, was in node.cached[1].items():
        if was[0][0] & IFMT == IFDIR:
            now = mapping.get(name)
            if now is None or now[0][0] & IFMT != IFDIR:
                drop(sc, new_cache, prefix + name)


def drop(sc: ScanContext, new_cache: dict[bytes, DirCache], rel: bytes) -> None:
    """Remove ``rel`` and every directory the old cache holds below it (iteratively: a
    chain of directories may be deeper than Python's recursion limit)."""
    todo = [rel]
    while todo:
        rel = todo.pop()
        new_cache.pop(rel, None)
        sc.dropped.append(rel)
        old = sc.cache.get(rel)
        if old is not None:
            todo += [rel + b"/" + name for name, was in old[1].items()
                     if was[0][0] & IFMT == IFDIR]


def _dir_record(perm: int, oid: bytes, name: bytes) -> bytes:
    """A subdirectory's record in an encoded tree (see :func:`~ctrlz.state.trees.encode_tree`:
    directories have size and mtime 0)."""
    return b"d %o 0 0 %s %s\0" % (perm, oid.hex().encode(), name)


def _find_record(data: bytes, record: bytes) -> int:
    """Where ``record`` starts in the encoded tree ``data``, or -1. Only at a record boundary
    (after the header or a NUL): a name may contain what looks like another record, never a
    NUL."""
    if data.startswith(HEADER + record):
        return len(HEADER)
    at = data.find(b"\0" + record)
    return at + 1 if at >= 0 else -1


def _subdirs(data: bytes) -> int:
    """Subdirectories in an encoded tree: records start after the header or a NUL, and no
    other field holds a NUL."""
    return data.count(b"\0d ") + data.startswith(HEADER + b"d ")
