"""What a person types to name a snapshot (engine/refs.py), on real catalogs' rows."""

from __future__ import annotations

import pytest

from ctrlz.engine.refs import resolve
from ctrlz.errors import AmbiguousSnapshot, SnapshotNotFound
from ctrlz.types import Snapshot


def snap(sid: str, number: int, label: str | None = None) -> Snapshot:
    return Snapshot(id=sid, number=number, parent=None, type="manual", label=label,
                    pinned=False, created_ns=number, root=b"", files=0, dirs=0, symlinks=0,
                    bytes=0, added_bytes=0, size_delta=0, created=0, modified=0, deleted=0,
                    rules={}, skipped=(), roots=())


SNAPS = [snap("snap_l9bmejtr", 0, "v0"), snap("snap_09zlz4ow", 1), snap("snap_1aaa", 2),
         snap("snap_1aab", 3, "release")]


@pytest.mark.parametrize(("ref", "want"), [
    ("snap_09zlz4ow", "snap_09zlz4ow"), ("latest", "snap_1aab"), ("cp-0", "snap_1aab"),
    ("cp-3", "snap_l9bmejtr"), ("release", "snap_1aab"), ("v0", "snap_l9bmejtr"),
    ("0", "snap_l9bmejtr"),  # number 0, though "snap_0" prefixes another id
    ("#1", "snap_09zlz4ow"), ("09z", "snap_09zlz4ow"), ("snap_09", "snap_09zlz4ow"),
    ("l9b", "snap_l9bmejtr"), (" 2 ", "snap_1aaa"),
])
def test_each_way_of_naming_a_snapshot(ref: str, want: str) -> None:
    assert resolve(SNAPS, ref).id == want


@pytest.mark.parametrize("ref", ["²", "#²", "cp-²"])
def test_other_digits_are_no_number(ref: str) -> None:
    with pytest.raises(SnapshotNotFound, match="no snapshot matches"):
        resolve(SNAPS, ref)


@pytest.mark.parametrize("ref", ["", "  "])
def test_an_empty_name_names_nothing(ref: str) -> None:
    """It used to be the prefix "snap_" of every id: with one snapshot, `ctrlz rollback ""`
    rolled the workspace back. (``snap_`` itself, typed, is the prefix of every id.)"""
    with pytest.raises(SnapshotNotFound, match="is no snapshot"):
        resolve(SNAPS[:1], ref)


def test_a_number_no_snapshot_has_is_not_taken_for_a_prefix() -> None:
    pruned = [snap(s.id, s.number + 10, s.label) for s in SNAPS]
    with pytest.raises(SnapshotNotFound, match="no snapshot number 0"):
        resolve(pruned, "0")


def test_a_prefix_of_two_ids_is_refused() -> None:
    with pytest.raises(AmbiguousSnapshot, match="matches 2 snapshots"):
        resolve(SNAPS, "1aa")
