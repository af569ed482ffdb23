"""A workspace's ref: the list of its snapshots on a remote, changed only by compare-and-swap.

The document is ``{"format": "ctrlz-ref 1", "workspace": {"id", "name"}, "snapshots": [...]}``
where each snapshot is its portable record (:mod:`ctrlz.state.interchange.portable`) plus
``origin``: the
machine, user, agent and session that made it. :func:`update_ref` reads it, applies a change,
and writes it back with ``If-Match`` on the ETag it read; a writer that lost the race reads the
winner's version and applies its change again, so concurrent pushers never drop each other's
snapshots (a push only ever adds its own).
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable
from typing import Any

from ...errors import RemoteError
from ...state.remote.backend import Conflict
from ...state.remote.repo import RemoteRepo

REF_FORMAT = "ctrlz-ref 1"
MAX_ATTEMPTS = 200


def empty_ref(workspace: str, name: str) -> dict[str, Any]:
    return {"format": REF_FORMAT, "workspace": {"id": workspace, "name": name},
            "snapshots": []}


def entries(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The ref's snapshot entries, oldest first."""
    if not doc:
        return []
    items = doc.get("snapshots")
    if not isinstance(items, list):
        raise RemoteError("a ref is damaged: its snapshot list is missing")
    return sorted((e for e in items if isinstance(e, dict) and "id" in e),
                  key=lambda e: (e.get("created_ns", 0), e["id"]))


def update_ref(remote: RemoteRepo, workspace: str, name: str,
               change: Callable[[dict[str, Any]], bool],
               before_write: Callable[[], None] | None = None,
               first: tuple[dict[str, Any] | None, str | None] | None = None
               ) -> dict[str, Any]:
    """Apply ``change`` (which edits the document and says whether it changed anything) and
    write the result by compare-and-swap, retrying with jittered backoff on conflict.
    ``before_write`` runs before every write attempt (a push re-checks the gc state there).
    ``first`` is the (document, ETag) the caller read already, tried before reading again
    (a stale one just loses the first compare-and-swap)."""
    delay = 0.01
    for _ in range(MAX_ATTEMPTS):
        if first is not None:
            (doc, etag), first = first, None
            doc = copy.deepcopy(doc)
        else:
            doc, etag = remote.read_ref(workspace)
        doc = doc if doc is not None else empty_ref(workspace, name)
        if doc.get("format") != REF_FORMAT:
            raise RemoteError(f"{remote.url}: refs/{workspace} has an unknown format; "
                              "upgrade ctrlz")
        if not change(doc):
            return doc
        if before_write is not None:
            before_write()
        try:
            remote.write_ref(workspace, doc, etag)
            return doc
        except Conflict:
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 1.5, 0.5)
    raise RemoteError(f"{remote.url}: refs/{workspace} kept changing under this update "
                      f"({MAX_ATTEMPTS} attempts); try again")


def add_entries(new: list[dict[str, Any]]) -> Callable[[dict[str, Any]], bool]:
    """A change that adds the entries not yet in the ref (by snapshot id)."""

    def change(doc: dict[str, Any]) -> bool:
        have = {e.get("id") for e in doc["snapshots"] if isinstance(e, dict)}
        added = [e for e in new if e["id"] not in have]
        doc["snapshots"].extend(added)
        return bool(added)

    return change


def drop_entries(ids: set[str]) -> Callable[[dict[str, Any]], bool]:
    def change(doc: dict[str, Any]) -> bool:
        before = len(doc["snapshots"])
        doc["snapshots"] = [e for e in doc["snapshots"] if e.get("id") not in ids]
        return len(doc["snapshots"]) != before

    return change
