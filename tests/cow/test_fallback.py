"""Where cloning is impossible, ctrlz copies as it always did, silently: filesystems without
reflink (ext4, tmpfs), and a workspace on another filesystem than its store (EXDEV)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.state.fsio import cow as cowlib
from ctrlz.state.store.objects import ObjectStore
from ctrlz.state.store.packs import CLONE
from tests.conftest import make_tree, tree_state

BIG = 5 << 20


def roundtrip(ws_dir: Path, home: Path) -> Workspace:
    """Snapshot, edit, restore: byte for byte back, verify clean."""
    make_tree(ws_dir, {"big.bin": os.urandom(BIG), "small.txt": "small\n"})
    before = tree_state(ws_dir)
    ws = Workspace.init(ws_dir, home=home)
    snap = ws.snapshot(label="one")
    with open(ws_dir / "big.bin", "r+b") as f:
        f.write(b"edited")
    ws.restore(snap.id)
    assert tree_state(ws_dir) == before
    assert ws.verify().ok
    return ws


def codecs(ws: Workspace) -> set[int]:
    return {r[5] for r in ws.repo.catalog.object_rows()}


def probe_said(home_store: Path) -> str:
    return (home_store / cowlib.PROBE).read_text().split()[0]


def test_no_clones_where_the_filesystem_cannot(tmp_path: Path) -> None:
    (tmp_path / "probe").mkdir()
    if cowlib._try_clone(str(tmp_path / "probe")):
        pytest.skip(f"{tmp_path} is on a filesystem that can clone")
    ws = roundtrip(tmp_path / "ws", tmp_path / "home")
    assert CLONE not in codecs(ws)
    assert probe_said(ws.repo.path) == "0"
    ws.close()


def test_no_clones_on_tmpfs(tmpfs_mount: Path) -> None:
    area = tmpfs_mount / "area"
    ws = roundtrip(area / "ws", area / "home")
    assert CLONE not in codecs(ws)
    assert probe_said(ws.repo.path) == "0"
    ws.close()


def test_workspace_on_a_clone_filesystem_store_on_another(xfs: Path, tmp_path: Path) -> None:
    ws = roundtrip(xfs / "ws", tmp_path / "home")
    assert CLONE not in codecs(ws)
    ws.close()


@pytest.mark.parametrize("other", ["ext4", "btrfs"])
def test_store_that_clones_workspace_elsewhere(other: str, xfs: Path, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    """The store could clone, the files cannot reach it: EXDEV, then copies."""
    ws_root = tmp_path if other == "ext4" else request.getfixturevalue("btrfs")
    ws = roundtrip(ws_root / "ws", xfs / "home")
    assert probe_said(ws.repo.path) == "1"
    assert CLONE not in codecs(ws)
    assert ws.repo.objects._refused_from  # asked once per source filesystem, then not again
    ws.close()


def test_the_probe_is_asked_once_per_store(xfs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = roundtrip(xfs / "ws", xfs / "home")
    assert CLONE in codecs(ws)

    def never(directory: str) -> bool:
        raise AssertionError("probed again")

    monkeypatch.setattr(cowlib, "_try_clone", never)
    again = ObjectStore(ws.repo.path, ws.repo.catalog, ws.repo.algorithm)
    assert again.can_clone()
    ws.close()
