"""Large objects stored cut into chunks (``state/chunking.py``, ``state/store/cut_objects.py``).

What must hold: a stream cut piece by piece gets exactly the chunks of the whole; a store whose
workspace has a remote stores a big file one zstd frame per chunk with a table that fits it,
and every reader (whole, streamed, restored, exported and imported) still gets the file back
byte for byte; each chunk read alone is checked against its id; a table that does not fit its
object is ignored, never trusted.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctrlz import CorruptObject, Workspace
from ctrlz.state.chunking import CHUNK_FROM, Cutter, cut, decode_table, encode_table
from ctrlz.state.store.packs import RAW, ZSTD
from tests.conftest import make_tree

MIB = 1 << 20
SMALL = (64, 256, 1024)  # min, average and max chunk sizes small enough for hypothesis


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(0, 20_000),
       feeds=st.lists(st.integers(1, 5000), min_size=1, max_size=40))
def test_a_stream_cut_in_pieces_gets_the_chunks_of_the_whole(seed: int, size: int,
                                                             feeds: list[int]) -> None:
    rng = random.Random(seed)
    # runs of repeated bytes beside random ones: both the hash cut and the max-size cut happen
    data = b"".join(rng.randbytes(rng.randrange(1, 900)) if rng.random() < 0.7
                    else bytes([rng.randrange(256)]) * rng.randrange(1, 3000)
                    for _ in range(size // 400 + 1))[:size]
    whole = [bytes(memoryview(data)[o:o + n]) for o, n in cut(data, SMALL)]
    cutter, got, at = Cutter(SMALL), [], 0
    for n in feeds * (size // max(sum(feeds), 1) + 1):
        if at >= len(data):
            break
        got += [bytes(c) for c in cutter.feed(data[at:at + n])]
        at += n
    got += [bytes(c) for c in cutter.finish()]
    assert got == whole
    assert b"".join(got) == data


def test_a_table_that_does_not_fit_its_object_is_ignored() -> None:
    table = encode_table([(b"\1" * 32, 3 * MIB, MIB), (b"\2" * 32, MIB, 100)])
    assert decode_table(table, 4 * MIB, MIB + 100, raw_stored=False) == [
        (b"\1" * 32, 3 * MIB, 0, MIB), (b"\2" * 32, MIB, MIB, 100)]
    assert decode_table(table, 4 * MIB + 1, MIB + 100, raw_stored=False) is None  # size
    assert decode_table(table, 4 * MIB, MIB + 101, raw_stored=False) is None  # stored length
    assert decode_table(table, 4 * MIB, MIB + 100, raw_stored=True) is None  # raw: equal
    assert decode_table(table[:-1], 4 * MIB, MIB + 100, raw_stored=False) is None
    huge = encode_table([(b"\1" * 32, 5 * MIB, 5 * MIB)])  # past the largest chunk
    assert decode_table(huge, 5 * MIB, 5 * MIB, raw_stored=True) is None


def _log(seed: int, size: int) -> bytes:
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += b"%d GET /api/%d %d\n" % (rng.getrandbits(40), rng.getrandbits(12),
                                         rng.getrandbits(9))
    return bytes(out[:size])


@pytest.fixture
def cut_ws(ws_dir: Path) -> Workspace:
    ws = Workspace.init(ws_dir)
    ws.repo.objects.want_cuts()
    return ws


def _oid(ws: Workspace, name: str) -> bytes:
    entry = ws.entry_at(ws.snapshots()[-1].id, name)
    assert entry is not None
    return entry.oid


def test_a_store_with_a_remote_stores_big_files_cut_and_reads_them_back(
        cut_ws: Workspace, tmp_path: Path) -> None:
    ws = cut_ws
    text, noise = _log(1, 12 * MIB), os.urandom(9 * MIB)
    make_tree(ws.root, {"big.log": text, "blob.bin": noise, "mid.bin": os.urandom(5 * MIB)})
    ws.snapshot()
    objects = ws.repo.objects
    for name, body, codec in (("big.log", text, ZSTD), ("blob.bin", noise, RAW)):
        oid = _oid(ws, name)
        assert objects.catalog.lookup(oid)[5] == codec
        cuts = objects.cuts(oid)
        assert cuts is not None and len(cuts) > 3
        assert [c[1] for c in cuts] == [n for _, n in cut(body)]
        assert objects.read(oid) == body
        assert b"".join(objects.iter_chunks(oid)) == body
        reader = objects.cut_reader(oid, cuts)
        try:
            assert b"".join(reader.read(c) for c in cuts) == body
        finally:
            reader.close()
    assert objects.cuts(_oid(ws, "mid.bin")) is None  # below CHUNK_FROM: stored whole
    assert 5 * MIB < CHUNK_FROM
    # a restore of the cut files writes them back
    (ws.root / "big.log").write_bytes(b"gone")
    (ws.root / "blob.bin").unlink()
    ws.rollback(ws.snapshots()[-1].id)
    assert (ws.root / "big.log").read_bytes() == text
    assert (ws.root / "blob.bin").read_bytes() == noise
    assert ws.verify().ok


def test_a_damaged_chunk_is_named_and_the_object_is_corrupt(cut_ws: Workspace) -> None:
    ws = cut_ws
    make_tree(ws.root, {"big.log": _log(2, 10 * MIB)})
    ws.snapshot()
    objects = ws.repo.objects
    oid = _oid(ws, "big.log")
    cuts = objects.cuts(oid)
    assert cuts is not None
    path = objects.loose_path(oid)
    body = bytearray(path.read_bytes())
    _, _, offset, stored = cuts[2]
    body[offset + stored // 2] ^= 0xFF
    os.chmod(path, 0o600)
    path.write_bytes(bytes(body))
    reader = objects.cut_reader(oid, cuts)
    try:
        assert reader.read(cuts[0])  # the others are still fine
        with pytest.raises(CorruptObject, match=f"chunk {cuts[2][0].hex()[:16]}"):
            reader.read(cuts[2])
    finally:
        reader.close()
    with pytest.raises(CorruptObject):
        objects.read(oid)
    assert not ws.verify().ok


def test_a_store_without_a_remote_stores_big_files_whole_in_frames(ws_dir: Path) -> None:
    """No cut table, but still one zstd frame per 4 MiB read: every reader gets it whole."""
    import zstandard

    from ctrlz.state.interchange.transfer import decode_stored

    ws = Workspace.init(ws_dir)
    body = _log(3, 9 * MIB)
    make_tree(ws.root, {"big.log": body})
    ws.snapshot()
    objects = ws.repo.objects
    oid = _oid(ws, "big.log")
    assert objects.cuts(oid) is None
    stored = objects.loose_path(oid).read_bytes()
    frame = zstandard.ZstdDecompressor().decompressobj()
    first = frame.decompress(stored)  # one frame only: it stops at the frame's end
    assert len(first) == 4 * MIB < len(body) and frame.unused_data  # several frames
    assert objects.read(oid) == body
    assert b"".join(objects.iter_chunks(oid)) == body
    assert decode_stored(oid, len(body), ZSTD, stored) == body
    (ws.root / "big.log").write_bytes(b"gone")
    ws.rollback(ws.snapshots()[-1].id)
    assert (ws.root / "big.log").read_bytes() == body


def test_gc_drops_a_cut_table_with_its_object(cut_ws: Workspace) -> None:
    ws = cut_ws
    make_tree(ws.root, {"big.log": _log(4, 9 * MIB)})
    snap = ws.snapshot()
    oid = _oid(ws, "big.log")
    (ws.root / "big.log").unlink()
    ws.snapshot()
    ws.remove([snap.id])
    ws.gc()
    assert ws.repo.objects.catalog.lookup(oid) is None
    assert ws.repo.objects.catalog.cuts(oid) is None


def test_stored_bytes_of_a_cut_object_decode_whole_and_in_pieces(cut_ws: Workspace) -> None:
    """Archives and pulls pass stored bytes along as they are: one frame per chunk must decode
    whole (``decode_stored``) and as a stream in pieces of any size (``FrameDecoder``)."""
    from ctrlz.state.interchange.transfer import decode_stored
    from ctrlz.state.store.packs import FrameDecoder

    ws = cut_ws
    body = _log(6, 9 * MIB)
    make_tree(ws.root, {"big.log": body})
    ws.snapshot()
    oid = _oid(ws, "big.log")
    stored = ws.repo.objects.loose_path(oid).read_bytes()
    assert len(ws.repo.objects.cuts(oid) or []) > 3
    assert decode_stored(oid, len(body), ZSTD, stored) == body
    dec = FrameDecoder()
    pieces = [dec.decompress(stored[i:i + 100_003]) for i in range(0, len(stored), 100_003)]
    assert b"".join(pieces) == body
    with pytest.raises(CorruptObject):  # one frame short
        decode_stored(oid, len(body), ZSTD, stored[:-(len(stored) // 20)])
