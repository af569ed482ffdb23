"""Large objects in content-defined chunks on a remote (``state/remote/chunks.py``).

What must hold: a small edit of a big file uploads about one chunk, not the file; a clone, a
pull, ``restore --to`` and ``verify --remote`` put every chunked file back byte for byte; a
damaged chunk stops a pull with nothing added and is named by verify; gc keeps every chunk a
snapshot still needs; and a push that reuses a chunked file whose chunks gc condemned sends the
chunks again (the pusher's half of the gc rule, applied to chunks).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from ctrlz.errors import CorruptObject
from ctrlz.state.remote.chunks import CHUNK_FROM, CHUNKED, cut, decode_list, encode_list

from ..conftest import tree_state
from .conftest import S3, ctrlz, make_ws

MIB = 1 << 20


def _body(seed: int, size: int) -> bytes:
    """Bytes that compress somewhat and never repeat at chunk scale (a log-like file)."""
    rng = random.Random(seed)
    words = [b"GET", b"POST", b"/api/v1/items", b"/login", b"200", b"404", b"ok", b"slow"]
    out = bytearray()
    while len(out) < size:
        out += b"%d %s %s %d\n" % (rng.getrandbits(40), rng.choice(words), rng.choice(words),
                                   rng.getrandbits(16))
    return bytes(out[:size])


def _edit(path: Path, at: int, text: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(text)


def _ws(tmp_path: Path, url: str, home: Path) -> Path:
    ws = make_ws(tmp_path / "ws", {"big.log": _body(1, 12 * MIB), "small.txt": "x\n",
                                   "data/blob.bin": os.urandom(9 * MIB)}, home)
    ctrlz("remote", "add", "origin", url, cwd=ws, home=home)
    ctrlz("snapshot", "-m", "base", cwd=ws, home=home)
    return ws


def _push(ws: Path, home: Path) -> dict:
    return ctrlz("push", "--json", cwd=ws, home=home).json()


def test_the_chunk_list_format_round_trips_and_refuses_damage() -> None:
    data = _body(2, 10 * MIB)
    pieces = list(cut(data))
    assert sum(n for _, n in pieces) == len(data) and len(pieces) > 4
    chunks = [(bytes([i]) * 32, n) for i, (_, n) in enumerate(pieces)]
    raw = encode_list(len(data), chunks)
    assert decode_list(b"\0" * 32, len(data), raw) == chunks
    for bad in (raw[:-1], raw[:8] + b"\0" * 8 + raw[16:], raw + b"\0" * 36):
        with pytest.raises(CorruptObject):
            decode_list(b"\0" * 32, len(data), bad)
    with pytest.raises(CorruptObject):
        decode_list(b"\0" * 32, len(data) + 1, raw)  # the lengths must add up to the size


def test_a_small_edit_of_a_big_file_uploads_about_one_chunk(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = _ws(tmp_path, f"file://{tmp_path}/nas", home)
    first = _push(ws, home)
    assert first["bytes_uploaded"] > 9 * MIB
    _edit(ws / "big.log", 6 * MIB, b"EDITED" * 10)
    _edit(ws / "data/blob.bin", 100, b"\xff" * 64)
    ctrlz("snapshot", "-m", "edit", cwd=ws, home=home)
    second = _push(ws, home)
    # two files of 21 MiB changed: a chunk or two each (chunks are 0.5-4 MiB), and two lists
    assert second["bytes_uploaded"] < 6 * MIB, second
    assert second["objects_reused"] > 5
    # the remote index names both big files as chunk lists
    index = _index_codecs(tmp_path / "nas")
    assert sum(1 for c in index.values() if c == CHUNKED) == 4


def test_files_stored_before_the_remote_was_added_are_cut_the_same_at_push(
        tmp_path: Path) -> None:
    """Two ways to the same chunks: a file stored before ``remote add`` has no cut table and
    is read and cut whole by the push; its next version, stored after, is cut as the snapshot
    stores it, and the push names the chunks from its table. The second push reusing the
    first one's chunks shows that both cut the file alike."""
    home = tmp_path / "home"
    ws = make_ws(tmp_path / "ws", {"big.log": _body(5, 12 * MIB)}, home)
    ctrlz("snapshot", "-m", "before the remote", cwd=ws, home=home)
    ctrlz("remote", "add", "origin", f"file://{tmp_path}/nas", cwd=ws, home=home)
    first = _push(ws, home)
    assert first["bytes_uploaded"] > 4 * MIB  # compressed text, cut whole at push
    _edit(ws / "big.log", 7 * MIB, b"EDITED" * 10)
    ctrlz("snapshot", "-m", "after", cwd=ws, home=home)
    second = _push(ws, home)
    assert second["bytes_uploaded"] < 2 * MIB, second
    assert second["objects_reused"] > 5
    clone = tmp_path / "clone"
    ctrlz("clone", f"file://{tmp_path}/nas", str(clone), cwd=tmp_path, home=tmp_path / "b")
    assert (clone / "big.log").read_bytes() == (ws / "big.log").read_bytes()
    ctrlz("rollback", "before the remote", cwd=clone, home=tmp_path / "b")
    assert (clone / "big.log").read_bytes() == _body(5, 12 * MIB)
    report = ctrlz("verify", "--remote", "origin", "--json", cwd=clone,
                   home=tmp_path / "b").json()
    assert report["ok"], report


def test_an_archive_carries_files_stored_cut(tmp_path: Path) -> None:
    """A cut file is stored one zstd frame per chunk; an archive copies stored bytes as they
    are, so its import must decode across frames."""
    home = tmp_path / "home"
    ws = _ws(tmp_path, f"file://{tmp_path}/nas", home)
    arc = tmp_path / "a.ctrlz"
    ctrlz("export", "latest", "-o", str(arc), cwd=ws, home=home)
    dest = tmp_path / "dest"
    ctrlz("import", str(arc), "--to", str(dest), cwd=tmp_path, home=tmp_path / "b")
    assert tree_state(dest) == tree_state(ws)


def _index_codecs(nas: Path) -> dict[bytes, int]:
    """oid -> codec over every index file of an unencrypted ``file://`` remote."""
    return {oid: codec for objs in _packs(nas).values() for oid, codec in objs.items()}


def test_clone_pull_and_verify_put_chunked_files_back(tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    ws = _ws(tmp_path, f"file://{tmp_path}/nas", home)
    _push(ws, home)
    _edit(ws / "big.log", 3 * MIB, b"second version")
    ctrlz("snapshot", "-m", "edit", cwd=ws, home=home)
    _push(ws, home)
    clone = tmp_path / "clone"
    ctrlz("clone", f"file://{tmp_path}/nas", str(clone), cwd=tmp_path, home=other)
    assert tree_state(clone) == tree_state(ws)
    assert not [p for p in (other / "workspaces").rglob("*") if p.name.startswith(".ctrlz-tmp")]
    ctrlz("rollback", "base", cwd=clone, home=other)  # the older version, offline
    assert (clone / "big.log").read_bytes() == _body(1, 12 * MIB)
    assert ctrlz("verify", "--json", cwd=clone, home=other).json()["ok"]
    report = ctrlz("verify", "--remote", "origin", "--json", cwd=clone, home=other).json()
    assert report["ok"], report
    # a pull into the first machine after the clone's push brings its snapshot
    ctrlz("snapshot", "-m", "from the clone", cwd=clone, home=other)
    _push(clone, other)
    pulled = ctrlz("pull", "--json", cwd=ws, home=home).json()
    assert len(pulled["pulled"]) >= 1
    # a snapshot only the remote holds, restored elsewhere: fetches its chunks, and no more
    _edit(ws / "data/blob.bin", 5 * MIB, b"third")
    snap = ctrlz("snapshot", "--json", cwd=ws, home=home).json()["id"]
    _push(ws, home)
    out = tmp_path / "out"
    ctrlz("restore", snap, "--to", str(out), cwd=clone, home=other)
    assert tree_state(out) == tree_state(ws)


def test_a_damaged_chunk_stops_the_pull_and_verify_names_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = _ws(tmp_path, f"file://{tmp_path}/nas", home)
    _push(ws, home)
    packs = [p for p in (tmp_path / "nas" / "data").rglob("*") if p.is_file()]
    biggest = max(packs, key=lambda p: p.stat().st_size)
    body = bytearray(biggest.read_bytes())
    body[len(body) // 3] ^= 0xFF
    os.chmod(biggest, 0o600)
    biggest.write_bytes(bytes(body))
    other = tmp_path / "other"
    err = ctrlz("clone", f"file://{tmp_path}/nas", str(tmp_path / "c"), cwd=tmp_path,
                home=other, ok=False).err
    assert "damaged" in err or "does not match" in err
    leftovers = [p for p in (other / "workspaces").rglob("objects/**/*") if p.is_file()] \
        if (other / "workspaces").exists() else []
    assert not leftovers
    report = ctrlz("verify", "--remote", "origin", "--json", cwd=ws, home=home, ok=None).json()
    assert not report["ok"] and any(biggest.name in e for e in report["errors"]), report


def test_gc_keeps_the_chunks_a_snapshot_still_needs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"CTRLZ_REMOTE_GRACE": "1"}
    ws = make_ws(tmp_path / "ws", {"big.log": _body(3, 10 * MIB)}, home)
    ctrlz("remote", "add", "origin", f"file://{tmp_path}/nas", cwd=ws, home=home, env=env)
    base = ctrlz("snapshot", "-m", "base", cwd=ws, home=home).out.split()[0]
    _push(ws, home)
    _edit(ws / "big.log", 5 * MIB, b"later")
    ctrlz("snapshot", "-m", "later", cwd=ws, home=home)
    _push(ws, home)
    ctrlz("remote", "forget", "origin", base, cwd=ws, home=home)
    for _ in range(3):  # condemn, wait out the grace period, delete
        ctrlz("gc", "--remote", "origin", cwd=ws, home=home)
        time.sleep(2.2)
    report = ctrlz("verify", "--remote", "origin", "--json", cwd=ws, home=home).json()
    assert report["ok"], report
    clone = tmp_path / "clone"
    ctrlz("clone", f"file://{tmp_path}/nas", str(clone), cwd=tmp_path, home=tmp_path / "h2")
    assert (clone / "big.log").read_bytes() == (ws / "big.log").read_bytes()


def test_a_push_reusing_a_file_whose_chunks_gc_condemned_sends_them_again(
        tmp_path: Path) -> None:
    """The trap of the gc rule: the pack holding a file's chunk list stays (live for other
    objects) while a pack of its chunks is condemned. A push that names the file again relies
    on its chunks too, so it must send those chunks again instead of relying on a pack that
    gc deletes a grace period later."""
    home = tmp_path / "home"
    nas = tmp_path / "nas"
    ws = make_ws(tmp_path / "ws", {"big.log": _body(4, 40 * MIB), "keep.txt": "k\n"}, home)
    ctrlz("remote", "add", "origin", f"file://{nas}", cwd=ws, home=home)
    ctrlz("snapshot", "-m", "one", cwd=ws, home=home)
    _push(ws, home)
    packs = _packs(nas)
    lists = [name for name, objs in packs.items() if CHUNKED in objs.values()]
    only_chunks = [name for name, objs in packs.items()
                   if name not in lists and objs and len(objs) > 3]
    assert len(lists) == 1 and only_chunks, packs  # 40 MiB of chunks fill more than a pack
    condemned = set(only_chunks)
    _write_gc_state(nas, {name: time.time() for name in condemned})
    (ws / "keep.txt").write_text("changed\n")  # a new snapshot naming big.log again
    ctrlz("snapshot", "-m", "two", cwd=ws, home=home)
    report = _push(ws, home)
    assert report["objects_uploaded"] > 3, report
    after = _packs(nas)
    outside = {o for name, objs in after.items() if name not in condemned for o in objs}
    condemned_chunks = {o for name in condemned for o in packs[name]}
    assert condemned_chunks <= outside  # every chunk of theirs is in a pack gc keeps


def _packs(nas: Path) -> dict[str, dict[bytes, int]]:
    """pack name -> {oid: codec} from every index file of an unencrypted ``file://``
    remote."""
    import struct

    import zstandard

    out = {}
    for f in (nas / "index").iterdir():
        data = zstandard.ZstdDecompressor().decompressobj().decompress(f.read_bytes())
        count = struct.unpack_from(">I", data, 8 + 32 + 1)[0]
        objs = {}
        for i in range(count):
            oid, _off, _ln, _size, codec = struct.unpack_from(">32sQQQB", data, 45 + i * 57)
            objs[oid] = codec
        out[f.name] = objs
    return out


def _write_gc_state(nas: Path, condemned: dict[str, float]) -> None:
    """Condemn packs by hand, as a gc that found them garbage would have."""
    import zstandard

    doc = {"format": "ctrlz-gc 1", "generation": 0, "condemned": condemned, "superseded": {}}
    (nas / "gc").mkdir(exist_ok=True)
    (nas / "gc" / "state").write_bytes(zstandard.ZstdCompressor(level=3).compress(
        json.dumps(doc, sort_keys=True).encode()))


def test_chunked_files_round_trip_through_s3_with_encryption(s3: S3, tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    ws = make_ws(tmp_path / "ws", {"big.log": _body(5, CHUNK_FROM + 3 * MIB)}, home)
    url = f"s3://{s3.bucket()}/enc"
    ctrlz("remote", "add", "origin", url, "--encrypt", "--key-file", str(key), cwd=ws,
          home=home)
    ctrlz("snapshot", cwd=ws, home=home)
    _push(ws, home)
    _edit(ws / "big.log", MIB, b"v2")
    ctrlz("snapshot", cwd=ws, home=home)
    assert _push(ws, home)["bytes_uploaded"] < 5 * MIB
    clone = tmp_path / "clone"
    ctrlz("clone", url, str(clone), "--encrypt", "--key-file", str(key), cwd=tmp_path,
          home=other)
    assert (clone / "big.log").read_bytes() == (ws / "big.log").read_bytes()
    assert ctrlz("verify", "--remote", "origin", "--json", cwd=clone,
                 home=other).json()["ok"]
