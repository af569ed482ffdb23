"""Damaged objects are never sent: a push or an export checks each object against its id
before it leaves, and `push --repair` replaces a remote copy found damaged."""

from __future__ import annotations

import os
from pathlib import Path

from ..conftest import tree_state
from .conftest import ctrlz, make_ws


def _store(home: Path) -> Path:
    (store,) = (home / "workspaces").iterdir()
    return store


def _flip(path: Path, needle: bytes) -> None:
    """Flip one bit inside ``needle`` where it sits (raw) in ``path``: bit rot."""
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at >= 0, path
    data[at + 5] ^= 1
    path.write_bytes(bytes(data))


def _damage_raw(store: Path, needle: bytes) -> None:
    for p in store.rglob("*"):
        if p.is_file() and needle in p.read_bytes():
            _flip(p, needle)
            return
    raise AssertionError("object not found raw in the store")


def test_a_damaged_packed_object_is_neither_pushed_nor_exported(tmp_path: Path) -> None:
    home = tmp_path / "home"
    precious = os.urandom(400)  # incompressible: stored raw in a pack
    ws = make_ws(tmp_path / "ws", {"precious.bin": precious, "a.txt": "a\n"}, home)
    ctrlz("snapshot", "-m", "base", cwd=ws, home=home)
    ctrlz("remote", "add", "origin", f"file://{tmp_path}/rem", cwd=ws, home=home)
    _damage_raw(_store(home), precious)
    r = ctrlz("push", cwd=ws, home=home, ok=False)
    assert "in the local store is damaged" in r.err and "ctrlz verify" in r.err
    assert ctrlz("list", "--remote", "origin", "--json", cwd=ws, home=home,
                 ok=None).out.count("snap_") == 0
    arc = tmp_path / "a.ctrlz"
    r = ctrlz("export", "latest", "-o", str(arc), cwd=ws, home=home, ok=False)
    assert "in the local store is damaged" in r.err and not arc.exists()


def test_a_damaged_large_loose_object_is_not_exported(tmp_path: Path) -> None:
    home = tmp_path / "home"
    big = os.urandom(6 << 20)  # loose, stored raw, sent in more than one piece
    ws = make_ws(tmp_path / "ws", {"big.bin": big}, home)
    ctrlz("snapshot", "-m", "base", cwd=ws, home=home)
    _damage_raw(_store(home), big[: 1 << 16])
    arc = tmp_path / "a.ctrlz"
    r = ctrlz("export", "latest", "-o", str(arc), cwd=ws, home=home, ok=False)
    assert "in the local store is damaged" in r.err and not arc.exists()
    r = ctrlz("export", "latest", "-o", "-", cwd=ws, home=home, ok=False)
    assert "in the local store is damaged" in r.err
    assert len(r.out) < len(big)  # the stream stopped short of the whole object


def test_push_repair_replaces_a_damaged_remote_copy_with_a_healthy_one(tmp_path: Path) -> None:
    precious = os.urandom(400)
    rem = f"file://{tmp_path}/rem"
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    a = make_ws(tmp_path / "a", {"precious.bin": precious}, home_a)
    ctrlz("snapshot", "-m", "a", cwd=a, home=home_a)
    ctrlz("remote", "add", "origin", rem, cwd=a, home=home_a)
    ctrlz("push", cwd=a, home=home_a)
    _damage_raw(tmp_path / "rem" / "data", precious)  # the remote's copy rots
    r = ctrlz("verify", "--remote", "origin", cwd=a, home=home_a, ok=None)
    assert r.code != 0
    # a healthy machine holding the same file: a plain push relies on the remote's copy
    b = make_ws(tmp_path / "b", {"precious.bin": precious}, home_b)
    ctrlz("snapshot", "-m", "b", cwd=b, home=home_b)
    ctrlz("remote", "add", "origin", rem, cwd=b, home=home_b)
    ctrlz("push", cwd=b, home=home_b)
    r = ctrlz("clone", rem, str(tmp_path / "c1"), "--workspace", "b", cwd=tmp_path,
              home=tmp_path / "home-c1", ok=False)
    assert "damaged" in r.err
    # --repair downloads what it relies on, finds the damaged copy and uploads a good one
    out = ctrlz("push", "--repair", "--json", cwd=b, home=home_b).json()
    assert out["objects_repaired"] == 1
    ctrlz("verify", "--remote", "origin", cwd=b, home=home_b)
    ctrlz("clone", rem, str(tmp_path / "c2"), "--workspace", "b", cwd=tmp_path,
          home=tmp_path / "home-c2")
    assert tree_state(tmp_path / "c2") == tree_state(b)
    # a's snapshot reaches the same object: it is whole again for every workspace
    ctrlz("clone", rem, str(tmp_path / "c3"), "--workspace", "a", cwd=tmp_path,
          home=tmp_path / "home-c3")
    assert (tmp_path / "c3" / "precious.bin").read_bytes() == precious


def test_verify_remote_calls_no_pack_reclaimable_when_a_tree_is_damaged(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = make_ws(tmp_path / "ws", {"a.txt": "hello\n", "d/c.txt": "deep\n"}, home)
    ctrlz("snapshot", cwd=ws, home=home)
    ctrlz("remote", "add", "origin", f"file://{tmp_path}/rem", cwd=ws, home=home)
    ctrlz("push", "--json", cwd=ws, home=home)
    packs = sorted((tmp_path / "rem" / "data").rglob("*"), key=lambda p: p.stat().st_size)
    tree_pack = [p for p in packs if p.is_file()][-1]  # the trees are the largest pack
    data = bytearray(tree_pack.read_bytes())
    data[-2] ^= 1
    tree_pack.write_bytes(bytes(data))
    r = ctrlz("verify", "--remote", "origin", "--json", cwd=ws, home=home, ok=None)
    out = r.json()
    assert not out["ok"] and out["unreferenced_packs"] is None
    r = ctrlz("verify", "--remote", "origin", cwd=ws, home=home, ok=None)
    assert "reclaimable" not in r.out and "not counted" in r.out


def test_a_workspace_name_that_begins_another_workspace_id_names_that_workspace(
        tmp_path: Path) -> None:
    """``clone --workspace NAME`` took NAME as an id prefix first: a workspace whose random id
    began with the other's name was cloned instead, with exit 0. A name now comes first, as
    git takes a ref's name before an abbreviated hash; two workspaces of one name are
    refused as ambiguous."""
    rem = f"file://{tmp_path}/rem"

    def pushed(path: Path, files: dict[str, str], home: Path) -> None:
        w = make_ws(path, files, home)
        ctrlz("snapshot", cwd=w, home=home)
        ctrlz("remote", "add", "origin", rem, cwd=w, home=home)
        ctrlz("push", cwd=w, home=home)

    pushed(tmp_path / "a", {"a.txt": "a\n"}, tmp_path / "home-a")
    [a_id] = [p.name for p in (tmp_path / "rem" / "refs").iterdir() if p.name[0] != "."]
    name = a_id[:4]  # a workspace named like the start of a's id
    pushed(tmp_path / name, {"b.txt": "b\n"}, tmp_path / "home-b")
    ctrlz("clone", rem, str(tmp_path / "c1"), "--workspace", name, cwd=tmp_path,
          home=tmp_path / "home-c1")
    assert sorted(p.name for p in (tmp_path / "c1").iterdir()) == ["b.txt"]
    ctrlz("clone", rem, str(tmp_path / "c2"), "--workspace", a_id, cwd=tmp_path,
          home=tmp_path / "home-c2")
    assert sorted(p.name for p in (tmp_path / "c2").iterdir()) == ["a.txt"]
    # a second workspace of the same name: refused, nothing made
    (tmp_path / "other").mkdir()
    pushed(tmp_path / "other" / name, {"c.txt": "c\n"}, tmp_path / "home-d")
    r = ctrlz("clone", rem, str(tmp_path / "c3"), "--workspace", name, cwd=tmp_path,
              home=tmp_path / "home-c3", ok=False)
    assert f"--workspace '{name}' matches 2 workspaces" in r.err
    assert not (tmp_path / "c3").exists()
