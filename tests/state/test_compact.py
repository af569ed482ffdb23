"""A large object whose reads the disk takes faster than zstd compresses them is stored as it
is, and ``ctrlz gc`` compresses it afterwards (:mod:`ctrlz.state.store.compact`): the same bytes
come back either way, an object is compressed once, and a kill -9 in the middle loses
nothing.

"The disk keeps up" is what a real writer thread says (:meth:`ObjectFile.keeping_up`): the
first read of a file is decided before any write is in flight, so it is always stored as it
is where the store's filesystem takes ``O_DIRECT`` (the tests skip elsewhere); a writer held
at a fault point stands for a slow disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctrlz import StoreFull, Workspace
from ctrlz.state import failpoints
from ctrlz.state.fsio import direct_io
from ctrlz.state.fsio.direct_io import STAGE, ObjectFile
from ctrlz.state.store.compact import candidates
from tests.conftest import mounted, tree_state

REPO = Path(__file__).resolve().parents[2]
CTRLZ = str(Path(sys.executable).parent / "ctrlz")


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    yield
    failpoints.disarm_all()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with ObjectFile(tmp_path / "probe") as probe:
        if not probe.direct:
            pytest.skip("the store's filesystem has no O_DIRECT: every read is compressed")
    (tmp_path / "probe").unlink()
    return tmp_path / "home"


def log_text(size: int, seed: int = 0) -> bytes:
    """Log-like lines (random.Random: the same bytes every run): zstd makes them about a
    third of their size."""
    import random

    rng = random.Random(seed)
    lines = []
    n = 0
    t = 1_700_000_000
    while n < size:
        t += rng.randrange(1, 5000)
        line = (f"{t},{rng.choice(['GET', 'POST', 'PUT'])},/api/v{rng.randrange(3)}/items/"
                f"{rng.randrange(100_000)},{rng.randrange(100, 600)},{rng.random():.6f}\n")
        lines.append(line)
        n += len(line)
    return "".join(lines).encode()[:size]


def loose_rows(ws: Workspace) -> list[tuple]:
    return [r for r in ws.repo.catalog.object_rows() if r[1] is None]


RAW_BLOCK = 128 << 10


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from([0, 1, RAW_BLOCK - 1, RAW_BLOCK, RAW_BLOCK + 1, 3 * RAW_BLOCK]),
    st.integers(min_value=0, max_value=5 * RAW_BLOCK)), min_size=1, max_size=4),
    st.booleans())
def test_a_stored_frame_is_read_by_every_zstd_reader(sizes: list[int],
                                                     mixed: bool) -> None:
    """The frames a snapshot writes by hand: libzstd decodes them, alone and between frames
    zstd made, through every reader ctrlz has, and says they have no content size."""
    import zstandard

    from ctrlz.state.store.packs import FrameDecoder, decode_frames, stored_frame

    pieces = [os.urandom(n // 2) + b"x" * (n - n // 2) for n in sizes]
    frames = []
    for i, piece in enumerate(pieces):
        if mixed and i % 2:
            frames.append(zstandard.ZstdCompressor(level=1).compress(piece))
        else:
            frame = stored_frame(piece)
            assert len(frame) <= len(piece) + 6 + 3 * max(1, -(-len(piece) // RAW_BLOCK))
            params = zstandard.get_frame_parameters(frame)
            assert params.content_size == zstandard.CONTENTSIZE_UNKNOWN
            assert not params.has_checksum
            frames.append(frame)
    stored, body = b"".join(frames), b"".join(pieces)
    assert decode_frames(stored, len(body)) == body
    reader = zstandard.ZstdDecompressor().stream_reader(stored, read_across_frames=True)
    assert reader.read() == body
    decoder = FrameDecoder()
    assert b"".join(decoder.decompress(stored[i:i + 70_000])
                    for i in range(0, len(stored), 70_000)) == body


def test_the_disk_keeping_up_is_told_by_the_stage_writer_in_flight(tmp_path: Path) -> None:
    release = tmp_path / "release"
    with ObjectFile(tmp_path / "obj") as out:
        if not out.direct:
            pytest.skip("this filesystem has no O_DIRECT")
        assert out.keeping_up()  # nothing written yet: the disk waits for us
        failpoints.arm_pause("direct-write", str(release))  # a disk that takes its time
        out.write(b"x" * STAGE)  # one whole stage: handed to a writer thread, held there
        held = Path(f"{release}.held")
        while not held.exists():
            os.sched_yield()
        assert not out.keeping_up()
        release.touch()
        out.sync()
        assert out.keeping_up()
    with ObjectFile(tmp_path / "buffered") as out:
        out._buffered()  # through the page cache a write tells nothing: always compress
        assert not out.keeping_up()


def test_a_large_file_stored_as_it_was_is_compressed_once_by_gc(ws_dir: Path,
                                                              home: Path) -> None:
    body = log_text(6 << 20)
    (ws_dir / "big.log").write_bytes(body)
    (ws_dir / "small.txt").write_text("small\n")
    ws = Workspace.init(ws_dir, home=home)
    ws.snapshot(label="base")
    [(oid, _pack, _off, stored, size, _codec)] = loose_rows(ws)
    assert size == len(body) and stored > 4 << 20  # its first read went in as it was
    assert [c[0] for c in candidates(ws.repo.objects)] == [oid]

    report = ws.gc()
    assert report.compressed_objects == 1
    [(_oid, _pack, _off, now, _size, _codec)] = loose_rows(ws)
    assert now < size // 2 and report.compressed_saved_bytes == stored - now
    assert os.path.getsize(ws.repo.objects.loose_name(oid)) == now
    assert candidates(ws.repo.objects) == []
    assert ws.gc().compressed_objects == 0  # once

    assert ws.verify().ok
    (ws_dir / "big.log").write_bytes(b"overwritten\n")
    ws.restore("base")
    assert (ws_dir / "big.log").read_bytes() == body


def test_over_store_cap_large_objects_are_compressed_before_a_snapshot_is_dropped(
        ws_dir: Path, home: Path) -> None:
    from ctrlz.engine import retention
    from ctrlz.state.store.usage import store_usage

    (ws_dir / "big.log").write_bytes(log_text(6 << 20, seed=4))
    ws = Workspace.init(ws_dir, home=home)
    ws.snapshot(label="base")
    (ws_dir / "small.txt").write_text("later\n")
    ws.snapshot(label="later")
    assert candidates(ws.repo.objects)
    policy = ws.policy._replace(store_cap=store_usage(ws.repo) - (1 << 20))
    plan = retention.enforce_byte_cap(ws.repo, policy)
    assert plan.drop == [] and [s.label for s in ws.snapshots()] == ["base", "later"]
    assert plan.gc is not None and plan.gc.compressed_objects == 1
    assert store_usage(ws.repo) <= policy.store_cap * retention.CAP_FLOOR


def test_gc_reports_the_compression_in_its_output_and_json(ws_dir: Path, home: Path) -> None:
    (ws_dir / "big.log").write_bytes(log_text(5 << 20, seed=1))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CTRLZ_")},
           "CTRLZ_HOME": str(home), "CTRLZ_DAEMON": "0",
           "XDG_CONFIG_HOME": str(home.parent / "config")}

    def ctrlz(*args: str) -> str:
        proc = subprocess.run([CTRLZ, *args], cwd=ws_dir, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    ctrlz("init")
    ctrlz("snapshot")
    out = ctrlz("gc")
    assert "compressed 1 large objects stored uncompressed" in out
    again = json.loads(ctrlz("gc", "--json"))
    assert again["compressed_objects"] == 0 and again["compressed_saved_bytes"] == 0


def test_a_slow_disk_gets_the_reads_compressed_as_they_are_written(
        ws_dir: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages of 6 MiB: the first two 4 MiB reads (stored as they are: nothing is in flight
    when they are decided) fill the first stage, whose writer is then held until the third
    read is decided; that one therefore finds the disk behind, and is compressed."""
    monkeypatch.setattr(direct_io, "STAGE", 6 << 20)
    body = log_text(12 << 20, seed=2)
    (ws_dir / "big.log").write_bytes(body)
    ws = Workspace.init(ws_dir, home=home)
    release = tmp_path / "release"

    def decided() -> None:  # the third read went in compressed: let the disk go on
        release.touch()

    failpoints.arm_pause("direct-write", str(release))
    failpoints.arm_call("large-read-decided", decided, after=2)
    ws.snapshot(label="base")
    [(_oid, _pack, _off, stored, size, _codec)] = loose_rows(ws)
    assert stored < size - (2 << 20)  # the third 4 MiB read went in compressed
    assert ws.verify().ok
    (ws_dir / "big.log").unlink()
    ws.restore("base")
    assert (ws_dir / "big.log").read_bytes() == body


@pytest.mark.parametrize("point", ["compact-before-rename", "direct-write"])
def test_a_gc_killed_while_it_compresses_loses_nothing(point: str, ws_dir: Path, home: Path,
                                                       tmp_path: Path) -> None:
    body = log_text(8 << 20, seed=3)  # compressed, still more than one 2 MiB stage
    (ws_dir / "big.log").write_bytes(body)
    ws = Workspace.init(ws_dir, home=home)
    ws.snapshot(label="base")
    base = tree_state(ws_dir)
    ws.close()
    code = ("import sys; from pathlib import Path; from ctrlz import Workspace; "
            "from ctrlz.state import failpoints; failpoints.arm(sys.argv[1]); "
            "Workspace.open(sys.argv[2], home=Path(sys.argv[3])).gc()")
    proc = subprocess.run([sys.executable, "-c", code, point, str(ws_dir), str(home)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr

    ws = Workspace.open(ws_dir, home=home)
    assert ws.verify().ok
    out = tmp_path / "out"
    ws.restore_to("base", out)
    assert tree_state(out) == base
    # the old file is still in place and still a candidate: the next gc does it again, and
    # the temp file the kill left is swept
    report = ws.gc()
    assert report.compressed_objects == 1
    final = ws.verify()
    assert final.ok and final.orphans == 0
    [(oid, _pack, _off, stored, _size, _codec)] = loose_rows(ws)
    assert os.path.getsize(ws.repo.objects.loose_name(oid)) == stored


def test_a_large_pre_image_is_compressed_whatever_the_pace_of_the_disk(ws_dir: Path,
                                                                       home: Path) -> None:
    # ``home`` only for its check that the filesystem takes O_DIRECT
    """No gc compresses the tool-call store's bodies later, and ``preimage_cap`` counts
    their stored bytes: a large pre-image is compressed as it is taken."""
    from ctrlz import toolcalls as tc

    body = log_text(6 << 20, seed=5)
    (ws_dir / "big.log").write_bytes(body)
    with Workspace.init(ws_dir) as ws:  # in the home the tool-call API finds (CTRLZ_HOME)
        store = ws.store_path
    tc.fs_snapshot("s1", "call-1", [str(ws_dir / "big.log")], workspace=ws_dir)
    loose = [p for p in (store / "toolcalls" / "objects").rglob("*") if p.is_file()]
    assert len(loose) == 1 and loose[0].stat().st_size < len(body) // 2
    (ws_dir / "big.log").write_bytes(b"the tool's edit\n")
    tc.fs_restore("s1", "call-1", workspace=ws_dir)
    assert (ws_dir / "big.log").read_bytes() == body


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    yield from mounted(tmp_path / "disk", "-t", "tmpfs", "-o", "size=24m", "tmpfs")


def test_a_gc_that_fills_the_disk_while_it_compresses_loses_nothing(ws_dir: Path,
                                                                    small_disk: Path) -> None:
    home = small_disk / "home"
    body = log_text(8 << 20, seed=6)
    (ws_dir / "big.log").write_bytes(body)
    ws = Workspace.init(ws_dir, home=home)
    with ObjectFile(small_disk / "probe") as probe:
        if not probe.direct:
            pytest.skip("this tmpfs takes no O_DIRECT (Linux before 6.6)")
    (small_disk / "probe").unlink()
    ws.snapshot(label="base")
    if not candidates(ws.repo.objects):
        pytest.skip("the snapshot compressed every read: nothing for gc to do")
    filler = small_disk / "filler"
    with open(filler, "wb") as f:  # all but a few KiB: the compressed copy cannot fit
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    with pytest.raises(StoreFull):
        ws.gc()
    assert ws.verify().ok
    # a gc that failed (not one that was killed) removed its temp file itself, so the
    # store does not say files were left behind (issue 41)
    assert not [p for p in (ws.store_path / "objects").iterdir() if p.name.startswith(".ctrlz")]
    assert not (ws.store_path / "writing").exists()
    assert not any("left files" in p for p in ws.status().problems)
    filler.unlink()
    assert ws.gc().compressed_objects == 1
    final = ws.verify()
    assert final.ok and final.orphans == 0
    (ws_dir / "big.log").write_bytes(b"x")
    ws.restore("base")
    assert (ws_dir / "big.log").read_bytes() == body
