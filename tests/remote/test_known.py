"""The local cache of trees known complete on a remote (state/remote/known.py): a push walks
only new trees, and the cache is never trusted past a gc that deleted or condemned its packs,
an interrupted push, or a remote made again at the same URL."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ctrlz.errors import RemoteError
from ctrlz.session.remotes import cloning, remotes
from ctrlz.state.remote.known import KnownTrees, load_known
from ctrlz.state.remote.local import LocalBackend
from ctrlz.state.remote.repo import RemoteRepo
from ctrlz.workspace import Workspace

from ..conftest import tree_state
from .test_faults import _hook


def _ws(root: Path, files: dict[str, str]) -> Workspace:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(data)
    return Workspace.init(root)


def _known_path(ws: Workspace, name: str = "origin") -> Path:
    return ws.store_path / "remote-cache" / name / "complete"


def _identity(ws: Workspace) -> str:
    return remotes.open_remote(remotes.list_remotes(ws)[0]).identity


def _clone_matches(ws: Workspace, url: str, dest: Path) -> None:
    assert remotes.verify(ws, None).ok
    other, _pull, _restored = cloning.clone(url, dest)
    other.close()
    assert tree_state(dest) == tree_state(ws.root)


def test_a_second_push_walks_only_the_trees_that_changed(tmp_path: Path) -> None:
    ws = _ws(tmp_path / "ws", {f"d{i}/e{j}/f.txt": f"{i} {j}\n" for i in range(5)
                               for j in range(5)})
    url = f"file://{tmp_path / 'remote'}"
    remotes.add_remote(ws, "origin", url)
    ws.snapshot()
    first = remotes.push_snapshots(ws)
    # the top tree, the root's tree, five d* and twenty-five e* directories
    assert (first.trees_walked, first.trees_known) == (32, 0)
    (ws.root / "d2/e3/f.txt").write_text("changed\n")
    ws.snapshot()
    second = remotes.push_snapshots(ws)
    # top, root, d2, d2/e3 are new; their 4 + 4 unchanged siblings are not entered
    assert (second.trees_walked, second.trees_known) == (4, 8)
    assert second.objects == 5  # four trees and the one new file
    _clone_matches(ws, url, tmp_path / "clone")
    ws.close()


def test_a_pack_the_cache_relies_on_deleted_by_gc_means_a_full_walk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTRLZ_REMOTE_GRACE", "1")
    ws = _ws(tmp_path / "ws", {"sub/x.txt": "only in the first snapshot\n" * 50})
    stamp = (ws.root / "sub/x.txt").stat().st_mtime_ns
    url = f"file://{tmp_path / 'remote'}"
    remotes.add_remote(ws, "origin", url)
    first = ws.snapshot()
    remotes.push_snapshots(ws)
    shutil.rmtree(ws.root / "sub")
    (ws.root / "other.txt").write_text("other\n")
    ws.snapshot()
    remotes.push_snapshots(ws)
    # the first snapshot goes; another machine's gc condemns, then deletes, its packs
    remotes.forget(ws, None, [first.id])
    time.sleep(1.2)
    assert remotes.gc(ws, None).condemned
    time.sleep(2.2)
    assert remotes.gc(ws, None).deleted
    # the same directory again: the cache still names its tree, whose contents are gone
    cached = load_known(_known_path(ws), _identity(ws))
    _put_back(ws.root / "sub/x.txt", "only in the first snapshot\n" * 50, stamp)
    ws.snapshot()
    sub = next(e.oid for e in ws.repo.tree(_root_tree(ws)) if e.name == b"sub")
    assert sub in cached.trees
    report = remotes.push_snapshots(ws)
    assert report.trees_known == 0 and report.objects >= 2  # x.txt and its tree sent again
    _clone_matches(ws, url, tmp_path / "clone")
    ws.close()


def test_a_condemned_pack_the_cache_relies_on_is_not_relied_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTRLZ_REMOTE_GRACE", "1")
    ws = _ws(tmp_path / "ws", {"sub/x.txt": "condemned soon\n" * 50})
    stamp = (ws.root / "sub/x.txt").stat().st_mtime_ns
    url = f"file://{tmp_path / 'remote'}"
    remotes.add_remote(ws, "origin", url)
    first = ws.snapshot()
    remotes.push_snapshots(ws)
    shutil.rmtree(ws.root / "sub")
    (ws.root / "other.txt").write_text("other\n")
    ws.snapshot()
    remotes.push_snapshots(ws)
    remotes.forget(ws, None, [first.id])
    time.sleep(1.2)
    condemned = remotes.gc(ws, None).condemned
    assert condemned
    _put_back(ws.root / "sub/x.txt", "condemned soon\n" * 50, stamp)
    ws.snapshot()
    sub = next(e.oid for e in ws.repo.tree(_root_tree(ws)) if e.name == b"sub")
    assert sub in load_known(_known_path(ws), _identity(ws)).trees
    report = remotes.push_snapshots(ws)
    assert report.trees_known == 0
    # the push relied on nothing condemned: a gc deleting those packs now (which the rule
    # allows once their grace is over, were they still unreached) takes nothing it names
    _delete_packs(tmp_path / "remote", condemned)
    _clone_matches(ws, url, tmp_path / "clone")
    ws.close()


def test_a_pack_of_the_cache_condemned_during_the_push_is_sent_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTRLZ_REMOTE_GRACE", "1")
    ws = _ws(tmp_path / "ws", {"sub/x.txt": "condemned mid-push\n" * 50})
    stamp = (ws.root / "sub/x.txt").stat().st_mtime_ns
    url = f"file://{tmp_path / 'remote'}"
    remotes.add_remote(ws, "origin", url)
    first = ws.snapshot()
    remotes.push_snapshots(ws)
    shutil.rmtree(ws.root / "sub")
    (ws.root / "other.txt").write_text("other\n")
    ws.snapshot()
    remotes.push_snapshots(ws)
    remotes.forget(ws, None, [first.id])
    time.sleep(1.2)  # its packs are old enough to be condemned, but nothing has run yet
    _put_back(ws.root / "sub/x.txt", "condemned mid-push\n" * 50, stamp)
    (ws.root / "new.txt").write_text("new\n")
    ws.snapshot()
    condemned: list[str] = []
    once = threading.Lock()  # packs go up on several threads: one gc, before the first

    def gc_while_uploading(name: str, args: tuple[Any, ...]) -> None:
        if name == "put_new" and str(args[0]).startswith("data/"):
            with once:
                if condemned:
                    return
                with Workspace.open(ws.root) as other:  # another machine's gc, mid-push
                    condemned.extend(remotes.gc(other, None).condemned)
                time.sleep(0.6)  # past grace / 2: the push must read the gc state again

    with pytest.MonkeyPatch.context() as mp:
        _hook(mp, gc_while_uploading)
        report = remotes.push_snapshots(ws)
    assert condemned and report.trees_known == 0  # the cache was used, then dropped
    after = load_known(_known_path(ws), _identity(ws))
    sub = next(e.oid for e in ws.repo.tree(_root_tree(ws)) if e.name == b"sub")
    assert sub in after.trees and not after.packs & {bytes.fromhex(c) for c in condemned}
    _delete_packs(tmp_path / "remote", condemned)
    _clone_matches(ws, url, tmp_path / "clone")
    ws.close()


def _delete_packs(remote: Path, packs: list[str]) -> None:
    for pack in set(packs):
        (remote / "index" / pack).unlink()
        (remote / "data" / pack[:2] / pack).unlink()


def test_an_interrupted_push_records_nothing(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _ws(tmp_path / "ws", {"a/f.txt": "1\n", "b/g.txt": "2\n"})
    url = f"file://{tmp_path / 'remote'}"
    remotes.add_remote(ws, "origin", url)
    ws.snapshot()
    remotes.push_snapshots(ws)
    before = load_known(_known_path(ws), _identity(ws))
    assert before.trees and before.packs
    (ws.root / "a/f.txt").write_text("changed\n")
    ws.snapshot()

    def lose_the_ref_write(name: str, args: tuple[Any, ...]) -> None:
        if name == "put_cas" and str(args[0]).startswith("refs/"):
            raise RemoteError("the connection dropped")

    with pytest.MonkeyPatch.context() as mp:
        _hook(mp, lose_the_ref_write)
        with pytest.raises(RemoteError, match="dropped"):
            remotes.push_snapshots(ws)
    after = load_known(_known_path(ws), _identity(ws))
    assert after == before  # packs were uploaded, but no snapshot names them yet
    report = remotes.push_snapshots(ws)
    assert report.trees_walked == 3 and report.objects == 0  # uploaded the first time
    _clone_matches(ws, url, tmp_path / "clone")
    ws.close()


def test_a_remote_made_again_at_the_same_url_is_another_remote(tmp_path: Path) -> None:
    ws = _ws(tmp_path / "ws", {"a/f.txt": "1\n", "b/g.txt": "2\n"})
    where = tmp_path / "remote"
    url = f"file://{where}"
    remotes.add_remote(ws, "origin", url)
    ws.snapshot()
    remotes.push_snapshots(ws)
    old = _identity(ws)
    assert load_known(_known_path(ws), old).trees
    # wiped and made again, unencrypted: the same config, so the same identity; the cache's
    # packs are gone, and that is what drops it
    shutil.rmtree(where)
    (ws.root / "c.txt").write_text("3\n")
    ws.snapshot()
    report = remotes.push_snapshots(ws)
    assert report.trees_known == 0
    _clone_matches(ws, url, tmp_path / "clone")
    # made again encrypted: another identity, the file is not even read as this remote's
    shutil.rmtree(where)
    enc = RemoteRepo.open(LocalBackend(where), key=b"a key", create="blake3", encrypt=True)
    assert enc.identity != old
    assert load_known(_known_path(ws), enc.identity) == KnownTrees()
    ws.close()


def test_a_damaged_cache_file_is_ignored(tmp_path: Path) -> None:
    ws = _ws(tmp_path / "ws", {"a/f.txt": "1\n"})
    url = f"file://{tmp_path / 'remote'}"
    remotes.add_remote(ws, "origin", url)
    ws.snapshot()
    remotes.push_snapshots(ws)
    path = _known_path(ws)
    raw = path.read_bytes()
    path.write_bytes(raw[:-40] + bytes(8) + raw[-32:])  # a torn write: zeros, old digest
    assert load_known(path, _identity(ws)) == KnownTrees()
    (ws.root / "a/f.txt").write_text("2\n")
    ws.snapshot()
    assert remotes.push_snapshots(ws).trees_known == 0
    _clone_matches(ws, url, tmp_path / "clone")
    ws.close()


def _put_back(path: Path, text: str, mtime_ns: int) -> None:
    """The file as it was, stamp included: its directory's tree is the old tree again."""
    path.parent.mkdir()
    path.write_text(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def _root_tree(ws: Workspace) -> bytes:
    """The tree of the workspace's root in its newest snapshot (under the top tree)."""
    latest = ws.repo.catalog.latest()
    assert latest is not None
    return next(e.oid for e in ws.repo.tree(latest.root) if e.name == b"0")


def test_an_encrypted_remote_walks_only_new_trees_too(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K", "correct horse battery staple")
    ws = _ws(tmp_path / "ws", {"a/f.txt": "1\n", "b/g.txt": "2\n"})
    url = f"file://{tmp_path / 'remote'}"
    remotes.add_remote(ws, "origin", url, encrypt=True, key_env="K")
    ws.snapshot()
    assert remotes.push_snapshots(ws).trees_walked == 4
    (ws.root / "a/f.txt").write_text("changed\n")
    ws.snapshot()
    second = remotes.push_snapshots(ws)
    assert (second.trees_walked, second.trees_known) == (3, 1)
    assert remotes.verify(ws, None).ok
    other, _pull, _restored = cloning.clone(url, tmp_path / "clone", encrypt=True, key_env="K")
    other.close()
    assert tree_state(tmp_path / "clone") == tree_state(ws.root)
    ws.close()


def test_a_forgotten_snapshot_is_unpushed_again(tmp_path: Path) -> None:
    """``remote forget`` takes a snapshot off the remote's list: status and ``remote list``
    count it as unpushed again (they said "everything pushed"), and a push sends it back."""
    ws = _ws(tmp_path / "ws", {"a.txt": "a\n"})
    remotes.add_remote(ws, "origin", f"file://{tmp_path / 'remote'}")
    first = ws.snapshot()
    remotes.push_snapshots(ws)
    assert remotes.unpushed(ws) == {"origin": []}
    remotes.forget(ws, None, [first.id])
    assert remotes.unpushed(ws) == {"origin": [first.id]}
    report = remotes.push_snapshots(ws)
    assert report.pushed == [first.id] and remotes.unpushed(ws) == {"origin": []}
    ws.close()
