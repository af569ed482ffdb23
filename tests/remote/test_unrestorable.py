"""Snapshots a restore cannot put back (a file entry whose size is not its object's, a top tree
without root directories) are refused by import and pull, and reported by verify."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ctrlz.state.hashing import digest_function
from ctrlz.state.interchange.archive import ArchiveWriter
from ctrlz.state.interchange.portable import from_record
from ctrlz.state.interchange.transfer import commit_received, receiving
from ctrlz.state.store.objects import RAW
from ctrlz.state.store.repository import Repository
from ctrlz.state.trees import DIR, FILE, Entry, encode_tree

from .conftest import ctrlz, make_ws

H = digest_function("blake3")
BLOB = b"hello\n"


def _record(sid: str, root: bytes) -> dict[str, object]:
    return {"id": sid, "parent": None, "type": "manual", "label": "crafted", "pinned": False,
            "created_ns": time.time_ns(), "root": root.hex(), "files": 1, "dirs": 0,
            "symlinks": 0, "bytes": 6, "rules": {}, "skipped": [], "roots": []}


def _wrong_size() -> tuple[list[tuple[bytes, bytes]], bytes]:
    t = encode_tree([Entry(b"a", FILE, 0o644, 100, 0, H(BLOB))])  # says 100, holds 6
    top = encode_tree([Entry(b"0", DIR, 0o755, 0, 0, H(t))])
    return [(H(BLOB), BLOB), (H(t), t), (H(top), top)], H(top)


def _no_root_layer() -> tuple[list[tuple[bytes, bytes]], bytes]:
    t = encode_tree([Entry(b"a", FILE, 0o644, len(BLOB), 0, H(BLOB))])
    return [(H(BLOB), BLOB), (H(t), t)], H(t)


CASES = {"wrong_size": (_wrong_size, "says 100 bytes"),
         "no_root_layer": (_no_root_layer, "top tree holds 'a'")}


def _archive(path: Path, sid: str, objects: list[tuple[bytes, bytes]], root: bytes) -> None:
    with open(path, "wb") as out:
        w = ArchiveWriter(out, "blake3", {"created_ns": time.time_ns(), "since": None,
                                          "snapshots": [_record(sid, root)],
                                          "objects": len(objects)})
        for oid, data in objects:
            w.add(oid, len(data), RAW, len(data), iter([data]))
        w.close()


def _plant(home: Path, sid: str, objects: list[tuple[bytes, bytes]], root: bytes) -> None:
    """Put the snapshot straight into the store, past every check (as an older ctrlz's
    import did)."""
    (store,) = (home / "workspaces").iterdir()
    repo = Repository.open(store)
    try:
        with repo.lock, receiving(repo) as sink:
            for oid, data in objects:
                sink.add(oid, len(data), RAW, data)
            commit_received(repo, sink, [from_record(_record(sid, root))])
    finally:
        repo.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unrestorable_snapshot_in_an_archive_is_refused_by_import(tmp_path: Path,
                                                                     case: str) -> None:
    build, words = CASES[case]
    home = tmp_path / "home"
    ws = make_ws(tmp_path / "ws", {"a": "precious\n"}, home)
    ctrlz("snapshot", cwd=ws, home=home)
    arc = tmp_path / "bad.ctrlz"
    _archive(arc, "snap_crafted01", *build())
    r = ctrlz("import", str(arc), cwd=ws, home=home, ok=False)
    assert words in r.err and "nothing was imported" in r.err
    assert "snap_crafted01" not in ctrlz("list", cwd=ws, home=home).out
    ctrlz("verify", cwd=ws, home=home)
    r = ctrlz("import", str(arc), "--to", str(tmp_path / "dest"), cwd=tmp_path,
              home=tmp_path / "home-b", ok=False)
    assert words in r.err


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unrestorable_snapshot_is_reported_by_verify_and_refused_by_pull(
        tmp_path: Path, case: str) -> None:
    build, words = CASES[case]
    home = tmp_path / "home"
    ws = make_ws(tmp_path / "ws", {"a": "precious\n"}, home)
    ctrlz("snapshot", cwd=ws, home=home)
    _plant(home, "snap_crafted01", *build())
    r = ctrlz("verify", cwd=ws, home=home, ok=None)
    assert r.code != 0 and words in r.out + r.err
    r = ctrlz("restore", "snap_crafted01", "--to", str(tmp_path / "out"), cwd=ws, home=home,
              ok=None)
    assert r.code != 0 and "internal error" not in r.err
    ctrlz("remote", "add", "origin", f"file://{tmp_path}/rem", cwd=ws, home=home)
    ctrlz("push", cwd=ws, home=home)  # each object matches its id: push sends them
    r = ctrlz("clone", f"file://{tmp_path}/rem", str(tmp_path / "c"), "--snapshot",
              "snap_crafted01", cwd=tmp_path, home=tmp_path / "home-c", ok=False)
    assert words in r.err and "nothing was pulled" in r.err
