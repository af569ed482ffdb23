"""The btrfs backend (a read-only subvolume snapshot, then the scan of that frozen copy) gives
the same snapshots as the normal scan: same trees, counts, diffs and restores."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.errors import StoreError
from ctrlz.state import failpoints
from ctrlz.state.scan import btrfs as native
from tests.conftest import make_tree, tree_state

from .conftest import delete_subvolumes, subvolume


def workspace(area: Path) -> Path:
    ws_dir = subvolume(area / "ws")
    make_tree(ws_dir, {"src": {f"m{i}.py": f"print({i})\n" * (i + 1) for i in range(12)},
                       "big.bin": os.urandom(5 << 20), "docs": {"README": "read me\n"}})
    return ws_dir


def edit(ws_dir: Path, n: int) -> None:
    (ws_dir / "src" / f"m{n}.py").write_text(f"changed {n}\n")
    (ws_dir / f"new{n}.txt").write_text("new\n")
    with open(ws_dir / "big.bin", "r+b") as f:
        f.seek(n * 4096)
        f.write(b"edit %d" % n)
    if (ws_dir / "docs").exists():
        os.utime(ws_dir / "docs" / "README", ns=(n, 1_600_000_000_000_000_000 + n))
    if n == 2:
        shutil.rmtree(ws_dir / "docs")


@pytest.fixture
def both(btrfs: Path) -> tuple[Workspace, Workspace, Path]:
    """One subvolume, two stores on the same filesystem: the normal scan and the backend."""
    ws_dir = workspace(btrfs)
    plain = Workspace.init(ws_dir, home=btrfs / "home-plain")
    frozen = Workspace.init(ws_dir, home=btrfs / "home-frozen")
    native.enable(frozen.repo, frozen.roots)
    # one salt, so that the same blocks get the same clone names in both stores (each store's
    # own keeps two stores' names apart; see CloneObjects.clone_name)
    with frozen.repo.catalog.transaction():
        frozen.repo.catalog.set_meta("clone_salt", plain.repo.catalog.get_meta("clone_salt"))
    yield plain, frozen, ws_dir
    plain.close()
    frozen.close()
    delete_subvolumes(ws_dir)


def counts(s):  # type: ignore[no-untyped-def]
    return (s.files, s.dirs, s.symlinks, s.bytes, s.created, s.modified, s.deleted, s.skipped)


def test_both_backends_list_diff_and_restore_alike(both, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plain, frozen, ws_dir = both
    states = [tree_state(ws_dir)]
    for n in range(3):
        if n:
            edit(ws_dir, n)
            states.append(tree_state(ws_dir))
        a, b = plain.snapshot(label=f"s{n}"), frozen.snapshot(label=f"s{n}")
        assert a.root == b.root  # the same Merkle root: same trees, same (clone) ids
        assert counts(a) == counts(b)
        assert os.listdir(frozen.repo.path / native.FROZEN) == []  # released at once
    sa, sb = plain.snapshots(), frozen.snapshots()
    assert [counts(s) for s in sa] == [counts(s) for s in sb]
    for i in range(3):
        for j in range(3):
            da = plain.diff(sa[i].id, sa[j].id).changes
            db = frozen.diff(sb[i].id, sb[j].id).changes
            assert [(c.path, c.change_type) for c in da] == [(c.path, c.change_type) for c in db]
    edit(ws_dir, 7)
    assert ([(c.path, c.change_type) for c in plain.diff(sa[0].id).changes]
            == [(c.path, c.change_type) for c in frozen.diff(sb[0].id).changes])
    for i, state in enumerate(states):
        plain.restore_to(sa[i].id, tmp_path / f"plain{i}")
        frozen.restore_to(sb[i].id, tmp_path / f"frozen{i}")
        assert tree_state(tmp_path / f"plain{i}") == tree_state(tmp_path / f"frozen{i}") == state
    frozen.restore(sb[1].id)  # in place, through the backend's own safety snapshot
    assert tree_state(ws_dir) == states[1]
    assert frozen.verify().ok and plain.verify().ok


def test_the_snapshot_is_one_instant(both) -> None:  # type: ignore[no-untyped-def]
    """Files changed while the scan runs (after the freeze) are not in the snapshot, not
    even in part: the scan reads the frozen copy."""
    _plain, frozen, ws_dir = both
    before = tree_state(ws_dir)

    def meanwhile() -> None:
        (ws_dir / "late.txt").write_text("written during the scan\n")
        (ws_dir / "src" / "m0.py").write_text("changed during the scan\n")

    failpoints.arm_call("pack-append", meanwhile)
    try:
        snap = frozen.snapshot(label="instant")
    finally:
        failpoints.disarm_all()
    out = ws_dir.parent / "out"
    frozen.restore_to(snap.id, out)
    assert tree_state(out) == before


def test_what_cannot_be_frozen_exactly_is_scanned_live(btrfs: Path) -> None:
    ws_dir = workspace(btrfs)
    ws = Workspace.init(ws_dir, home=btrfs / "home")
    native.enable(ws.repo, ws.roots)
    inner = subvolume(ws_dir / "inner")  # a snapshot of ws would show it empty
    (inner / "kept.txt").write_text("inside a nested subvolume\n")
    snap = ws.snapshot(label="nested")
    out = btrfs / "out"
    ws.restore_to(snap.id, out)
    assert (out / "inner" / "kept.txt").read_text() == "inside a nested subvolume\n"
    with pytest.raises(StoreError, match="another subvolume"):
        native.enable(ws.repo, ws.roots)
    ws.close()
    delete_subvolumes(inner, ws_dir)


def test_enable_refuses_what_is_no_subvolume(btrfs: Path, xfs: Path) -> None:
    for area in (btrfs, xfs):
        make_tree(area / "plain", {"a.txt": "a\n"})
        ws = Workspace.init(area / "plain", home=area / "home")
        with pytest.raises(StoreError, match="btrfs snapshots"):
            native.enable(ws.repo, ws.roots)
        assert not native.enabled(ws.repo)
        ws.close()
