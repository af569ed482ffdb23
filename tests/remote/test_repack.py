"""gc --remote repacks a mostly-garbage pack: its live objects are copied out, the old pack
is condemned and later deleted, and a push that made one of its garbage objects live again in
the meantime keeps it (the rule in docs/remote.md, engine/remote/repack.py)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ctrlz.session.remotes import cloning, remotes
from ctrlz.workspace import Workspace

from ..conftest import tree_state
from .test_faults import _hook

BIG = 600 << 10


def _setup(tmp_path: Path) -> tuple[Workspace, str, bytes, int]:
    """A pushed snapshot with big.bin and small.txt in one data pack, then a pushed snapshot
    without big.bin, and the first one forgotten: the pack is live for small.txt only."""
    root = tmp_path / "ws"
    root.mkdir()
    big = os.urandom(BIG)
    (root / "big.bin").write_bytes(big)
    (root / "small.txt").write_text("small\n")
    stamp = (root / "big.bin").stat().st_mtime_ns
    ws = Workspace.init(root)
    url = f"file://{tmp_path / 'remote'}"
    remotes.add_remote(ws, "origin", url)
    first = ws.snapshot()
    remotes.push_snapshots(ws)
    (root / "big.bin").unlink()
    ws.snapshot()
    remotes.push_snapshots(ws)
    remotes.forget(ws, None, [first.id])
    return ws, url, big, stamp


def _data_bytes(remote: Path) -> int:
    return sum(f.stat().st_size for f in (remote / "data").rglob("*") if f.is_file())


def test_a_mostly_garbage_pack_is_repacked_then_deleted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTRLZ_REMOTE_GRACE", "1")
    ws, url, _big, _stamp = _setup(tmp_path)
    assert _data_bytes(tmp_path / "remote") > BIG
    time.sleep(1.2)  # only packs older than the grace period are repacked or condemned
    dry = remotes.gc(ws, None, dry_run=True)
    assert len(dry.repacked) == 1
    assert dry.repacked[0].rpartition("/")[2] not in dry.condemned  # a dry run copies nothing
    first = remotes.gc(ws, None)
    assert first.repacked == dry.repacked
    old = first.repacked[0].rpartition("/")[2]
    assert old in first.condemned  # in the same write that records its replacement
    assert remotes.verify(ws, None).ok
    time.sleep(2.2)
    second = remotes.gc(ws, None)
    assert first.repacked[0] in second.deleted
    assert _data_bytes(tmp_path / "remote") < BIG // 4  # the garbage went with it
    report = remotes.verify(ws, None)
    assert report.ok, report.errors
    other, _pull, _restored = cloning.clone(url, tmp_path / "clone")
    other.close()
    assert tree_state(tmp_path / "clone") == tree_state(ws.root)
    ws.close()


def test_a_push_that_revives_a_garbage_object_keeps_the_old_pack(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTRLZ_REMOTE_GRACE", "2")
    ws, url, big, stamp = _setup(tmp_path)
    time.sleep(2.2)
    # big.bin comes back (the same bytes: an object only the sparse pack holds) with a new
    # file; while this push uploads, another machine's gc repacks and condemns that pack
    (ws.root / "big.bin").write_bytes(big)
    os.utime(ws.root / "big.bin", ns=(stamp, stamp))
    (ws.root / "new.txt").write_text("new\n")
    ws.snapshot()
    ran: list[Any] = []
    started: list[bool] = []
    once = threading.Lock()

    def gc_mid_push(name: str, args: tuple[Any, ...]) -> None:
        if name == "put_new" and str(args[0]).startswith("data/"):
            with once:  # the push uploads on several threads: one gc, first
                if started:
                    return  # (gc's own uploads come through here too)
                started.append(True)
            with Workspace.open(ws.root) as other:
                ran.append(remotes.gc(other, None))

    with pytest.MonkeyPatch.context() as mp:
        _hook(mp, gc_mid_push)
        remotes.push_snapshots(ws)
    assert ran and len(ran[0].repacked) == 1
    old = ran[0].repacked[0]
    time.sleep(3.2)  # past the grace period of the condemned pack
    later = remotes.gc(ws, None)
    assert old not in later.deleted  # it holds big.bin, which the new snapshot names
    assert old.rpartition("/")[2] in later.forgiven
    report = remotes.verify(ws, None)
    assert report.ok, report.errors
    other, _pull, _restored = cloning.clone(url, tmp_path / "clone")
    other.close()
    assert tree_state(tmp_path / "clone") == tree_state(ws.root)
    ws.close()
