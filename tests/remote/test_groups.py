"""A store whose small objects are compressed in groups (decision 18) pushes each group once
and clones byte-identical, through the real S3 server on loopback."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from ctrlz.session.remotes import remotes
from ctrlz.state.store.groups import GROUP
from ctrlz.workspace import Workspace

from ..conftest import tree_state
from .conftest import S3, ctrlz


def _text(rng: random.Random) -> bytes:
    words = [b"import", b"const", b"return", b"value", b"export", b"module", b"function"]
    return b" ".join(rng.choice(words) for _ in range(rng.randint(100, 1500)))


def test_a_grouped_store_pushes_each_group_once_and_clones_byte_identical(
        s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two snapshots whose files alternate in every folder: the push's walk of the trees
    meets their groups in turns. It reads each local group once (before, it read a group
    again whenever the walk came back to it), and what it sent clones byte for byte."""
    rng = random.Random(7)
    root = tmp_path / "ws"
    for d in range(12):
        (root / f"pkg{d}").mkdir(parents=True)
    ws = Workspace.init(root)
    url = f"s3://{s3.bucket()}/team"
    remotes.add_remote(ws, "origin", url)
    for half in (0, 1):
        for d in range(12):
            for i in range(half, 120, 2):
                (root / f"pkg{d}" / f"f{i:03}.js").write_bytes(_text(rng))
        ws.snapshot()
    repo = ws.repo
    rows = repo.catalog.object_rows()
    assert len({(r[1], r[2]) for r in rows if r[5] == GROUP}) >= 6  # many groups
    packs = repo.path / "packs"
    pack_bytes = sum(f.stat().st_size for f in packs.iterdir())
    read = [0]
    real_pread = os.pread

    def pread(fd: int, length: int, offset: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(packs)):
            read[0] += length
        return real_pread(fd, length, offset)

    monkeypatch.setattr(os, "pread", pread)
    report = remotes.push_snapshots(ws)
    monkeypatch.setattr(os, "pread", real_pread)
    assert report.objects == len(rows)
    assert read[0] <= pack_bytes * 1.05  # each group once (its head read twice)

    clone = tmp_path / "clone"
    ctrlz("clone", url, str(clone), cwd=tmp_path, home=tmp_path / "home-b")
    assert tree_state(clone) == tree_state(root)
    assert ctrlz("verify", "--remote", "origin", "--json", cwd=clone,
                 home=tmp_path / "home-b").json()["ok"]
