"""Walking snapshots whose trees may live only on the remote, one tree level at a time.

Every tree of a level is fetched in one batch (ranged reads merged per pack, in parallel), so
a 100,000-file snapshot costs a round trip per directory level, not one per directory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...state.trees import DIR, Entry

FetchTrees = Callable[[list[bytes]], dict[bytes, list[Entry]]]


def walk_levels(roots: Iterable[bytes], fetch: FetchTrees,
                enter: Callable[[bytes], bool] = lambda oid: True
                ) -> tuple[set[bytes], dict[bytes, int]]:
    """(every tree entered, every blob found with its size) below ``roots``; ``enter`` says
    whether a tree must be walked at all (a pull skips trees the local store holds)."""
    trees: set[bytes] = set()
    blobs: dict[bytes, int] = {}
    level = [r for r in dict.fromkeys(roots) if enter(r)]
    while level:
        trees.update(level)
        got = fetch(level)
        nxt: dict[bytes, None] = {}
        for oid in level:
            for e in got[oid]:
                if e.kind == DIR:
                    if e.oid not in trees and e.oid not in nxt and enter(e.oid):
                        nxt[e.oid] = None
                else:
                    blobs.setdefault(e.oid, e.size)
        level = list(nxt)
    return trees, blobs
