"""Turning what a person types into a snapshot: an id, a unique id prefix, a label, a number,
``latest``, or Capsem's ``cp-N`` (N back from the newest: ``cp-0`` is the newest). Tried in
that order: id, ``latest``, ``cp-N``, label, number (digits, or ``#`` and digits), id prefix."""

from __future__ import annotations

from ..errors import AmbiguousSnapshot, SnapshotNotFound
from ..types import Snapshot


def resolve(snapshots: list[Snapshot], ref: str) -> Snapshot:
    """``snapshots`` oldest first, as the catalog lists them."""
    ref = ref.strip()
    if not snapshots:
        raise SnapshotNotFound("there are no snapshots yet; take one with `ctrlz snapshot`")
    if ref in ("latest", "HEAD", "@"):
        return snapshots[-1]
    for s in snapshots:
        if s.id == ref:
            return s
    if ref.startswith("cp-") and _digits(ref[3:]):
        n = int(ref[3:])
        if n < len(snapshots):
            return snapshots[-1 - n]
        raise SnapshotNotFound(f"{ref}: there are only {len(snapshots)} snapshots")
    by_label = [s for s in snapshots if s.label == ref]
    if len(by_label) >= 1:
        return by_label[-1]  # the newest snapshot with that label
    if _digits(ref.removeprefix("#")):
        # a number is a number, never an id prefix: "0" used to pick whichever id began
        # with "snap_0" (a rollback is undoable, but it was not the one asked for)
        number = int(ref.lstrip("#"))
        for s in snapshots:
            if s.number == number:
                return s
        raise SnapshotNotFound(f"no snapshot number {number}; run `ctrlz list` to see them "
                               "(an id prefix of digits only is written snap_...)")
    if not ref:
        raise SnapshotNotFound(f"{ref!r} is no snapshot; give an id, a label, a number or "
                               "`latest` (`ctrlz list` shows them)")
    prefix = ref if ref.startswith("snap_") else "snap_" + ref
    matches = [s for s in snapshots if s.id.startswith(prefix)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        ids = ", ".join(s.id for s in matches[:5])
        raise AmbiguousSnapshot(f"{ref!r} matches {len(matches)} snapshots ({ids}); "
                                "type more of the id")
    raise SnapshotNotFound(f"no snapshot matches {ref!r}; run `ctrlz list` to see them")


def _digits(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` is true of "²", which ``int`` refuses."""
    return text.isascii() and text.isdigit()
