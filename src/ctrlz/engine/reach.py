"""Which objects a set of snapshots needs: the walk behind export, push and remote gc.

A snapshot needs its top tree and everything below it. What a receiver already has is left
out, in two ways: a *complete* tree (one whose whole subtree the receiver is known to hold, such
as a tree of the ``--since`` snapshot of an incremental archive) is not even entered; an object
the receiver merely *has* is not sent, but a tree is still walked, because holding a tree object
does not prove holding what it names (a remote may keep an unreachable tree whose children its
gc already removed).

Trees come out children first, so a receiver that adds objects in the order given never holds
a tree before the objects it names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..state.trees import DIR, Entry

TreeReader = Callable[[bytes], list[Entry]]


@dataclass
class Needed:
    trees: list[bytes] = field(default_factory=list)  # children before parents
    blobs: list[bytes] = field(default_factory=list)
    blob_sizes: dict[bytes, int] = field(default_factory=dict)


def needed_objects(read: TreeReader, roots: Iterable[bytes], *,
                   has: Callable[[bytes], bool] = lambda oid: False,
                   complete: Callable[[bytes], bool] = lambda oid: False) -> Needed:
    """Objects reachable from ``roots`` that ``has`` says are missing, walking every tree
    except those ``complete`` vouches for. Iterative: any depth works."""
    out = Needed()
    seen: set[bytes] = set()
    for root in roots:
        if root in seen or complete(root):
            continue
        seen.add(root)
        stack: list[tuple[bytes, list[Entry], int]] = [(root, read(root), 0)]
        while stack:
            oid, entries, i = stack[-1]
            if i == len(entries):
                stack.pop()
                if not has(oid):
                    out.trees.append(oid)
                continue
            stack[-1] = (oid, entries, i + 1)
            e = entries[i]
            if e.oid in seen:
                continue
            seen.add(e.oid)
            if e.kind == DIR:
                if not complete(e.oid):
                    stack.append((e.oid, read(e.oid), 0))
            elif not has(e.oid):
                out.blobs.append(e.oid)
                out.blob_sizes[e.oid] = e.size
    return out


def reachable(read: TreeReader, roots: Iterable[bytes]) -> set[bytes]:
    """Every object reachable from ``roots`` (trees and blobs)."""
    found = needed_objects(read, roots)
    return set(found.trees) | set(found.blobs)
