"""The store's building blocks: trees, exclusion rules, objects, verify and gc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctrlz import CorruptObject, Workspace
from ctrlz.state.ignore.exclude import Matcher, Rules
from ctrlz.state.trees import DIR, FILE, Entry, decode_tree, encode_tree
from tests.conftest import make_tree


def test_tree_round_trip_with_odd_names() -> None:
    entries = sorted([Entry(b"a b", FILE, 0o644, 3, 7, b"\x01" * 32),
                      Entry(b"\xff\n", FILE, 0o755, 0, 0, b"\x02" * 32),
                      Entry(b"dir", DIR, 0o700, 0, 0, b"\x03" * 32)], key=lambda e: e.name)
    assert decode_tree(encode_tree(entries)) == entries


@pytest.mark.parametrize("name", [b"..", b".", b"a/b", b""])
def test_trees_with_traversal_names_are_corrupt(name: bytes) -> None:
    data = encode_tree([Entry(name, FILE, 0o644, 1, 1, b"\x00" * 32)])
    with pytest.raises(CorruptObject):
        decode_tree(data)


@pytest.mark.parametrize("body", [
    b"x 644 1 1 " + b"00" * 32 + b" a\0",  # unknown kind
    b"f 644 1 1 " + b"zz" * 32 + b" a\0",  # not hex
    b"f 644 1 1 " + b"0" * 63 + b" a\0",  # odd hex
    b"f 9 1 1 " + b"00" * 32 + b" a\0",  # not octal
    b"f 644 1 " + b"00" * 32 + b"\0",  # a field short
    b"f 644 1 1 " + b"00" * 32 + b" b\0f 644 1 1 " + b"00" * 32 + b" a\0",  # unsorted
    b"f 644 1 1 " + b"00" * 32 + b" a\0f 644 1 1 " + b"00" * 32 + b" a\0",  # twice
])
def test_malformed_tree_records_are_corrupt(body: bytes) -> None:
    with pytest.raises(CorruptObject):
        decode_tree(b"ctrlz-tree 1\n" + body)


def matcher(rules: Rules, files: dict[bytes, bytes]) -> Matcher:
    return Matcher(rules, files.get)


def test_gitignore_semantics() -> None:
    m = matcher(Rules(), {b".gitignore": b"*.log\n!keep.log\nbuild/\n/top.txt\n",
                          b"sub/.gitignore": b"local\n", b".git/info/exclude": b"secret\n"})
    assert m.covers(b"a.txt") and not m.covers(b"x.log") and m.covers(b"keep.log")
    assert not m.covers(b"build/x.o") and m.covers(b"buildx")
    assert not m.covers(b"top.txt") and m.covers(b"sub/top.txt")
    assert not m.covers(b"sub/local") and m.covers(b"local")
    assert not m.covers(b"secret") and not m.covers(b"sub/secret")
    assert m.covers(b".git/x.log")  # ignore files never apply inside .git


def test_patterns_globs_and_force_include() -> None:
    m = matcher(Rules(use_gitignore=False, exclude_patterns=("node_modules", "gen/out"),
                      exclude_globs=("*.pyc",), force_include=("keep.pyc",)), {})
    assert not m.covers(b"node_modules/x.js") and not m.covers(b"a/node_modules/y")
    assert m.covers(b"node_modules_x/y")
    assert not m.covers(b"gen/out/f") and m.covers(b"gen/other")
    assert not m.covers(b"m.pyc") and m.covers(b"keep.pyc")


def test_read_detects_corruption_and_verify_reports_it(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "hello world " * 100})
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    assert ws.verify().ok
    pack = next((ws.store_path / "packs").iterdir())
    data = bytearray(pack.read_bytes())
    data[-5] ^= 0xFF
    pack.write_bytes(bytes(data))
    report = ws.verify()
    assert not report.ok and report.errors


def test_gc_reclaims_unreachable_objects(ws_dir: Path) -> None:
    make_tree(ws_dir, {"keep.txt": "keep " * 100})
    ws = Workspace.init(ws_dir)
    first = ws.snapshot(label="keep")
    (ws_dir / "temp.bin").write_bytes(os.urandom(100_000))
    doomed = ws.snapshot(label="doomed")
    ws.remove([doomed.id])
    report = ws.gc()
    assert report.removed_objects >= 2 and report.removed_bytes >= 100_000
    assert ws.verify().ok
    assert ws.resolve(first.id).id == first.id
    (ws_dir / "temp.bin").unlink()
    assert ws.diff(first.id).changes == []


@pytest.mark.parametrize("stat_size", [0, 1, 999, 1000, 1001, 5000])
def test_a_small_read_returns_at_most_one_byte_past_the_stat(tmp_path: Path,
                                                             stat_size: int) -> None:
    """The scan's small-file read asks for the stat's size and one byte more: all of a file
    that kept its size, and exactly one extra byte of one that grew (the reader then sees
    the stat change and reads again), so it never needs the rest."""
    from ctrlz.state.scan.sinks import read_all

    body = os.urandom(1000)
    path = tmp_path / "f"
    path.write_bytes(body)
    fd = os.open(path, os.O_RDONLY)
    try:
        got = read_all(fd, stat_size)
    finally:
        os.close(fd)
    assert got == body[:stat_size + 1]
