"""Large objects are written past the page cache (:mod:`ctrlz.state.fsio.direct_io`): the same bytes
land on disk whichever way they go, and every way the direct path can be refused ends in
the page cache, never in a torn object or a lost error.

The stage is made small here (two pages) so that short inputs cross many stage boundaries.
The filesystems are real: the test's own directory (ext4 in CI: ``O_DIRECT``), a ramfs
(no ``O_DIRECT``) and a small ext4 image on a loop device that fills up."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctrlz import StoreError, StoreFull, Workspace
from ctrlz.state import failpoints
from ctrlz.state.fsio import direct_io
from ctrlz.state.fsio.direct_io import ObjectFile
from ctrlz.state.store.packs import LOOSE_MIN
from tests.conftest import is_root, mounted

SMALL_STAGE = 2 * 4096


@pytest.fixture(autouse=True)
def small_stage(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(direct_io, "STAGE", SMALL_STAGE)
    yield
    failpoints.disarm_all()


def write_pieces(path: Path, pieces: list[bytes]) -> ObjectFile:
    with ObjectFile(path) as out:
        total = 0
        for piece in pieces:
            out.write(piece)
            total += len(piece)
            assert out.tell() == total
        out.sync()
        assert out.tell() == total
    return out


def direct_supported(directory: Path) -> bool:
    probe = directory / "probe"
    with ObjectFile(probe) as out:
        supported = out.direct
    probe.unlink()
    return supported


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # the stage size only
@given(st.lists(st.binary(max_size=3 * SMALL_STAGE + 1), max_size=8))
def test_the_bytes_written_are_the_bytes_on_disk(tmp_path_factory: pytest.TempPathFactory,
                                                 pieces: list[bytes]) -> None:
    path = tmp_path_factory.mktemp("objects") / "object"
    write_pieces(path, pieces)
    assert path.read_bytes() == b"".join(pieces)


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, SMALL_STAGE - 1, SMALL_STAGE,
                                  SMALL_STAGE + 1, 5 * SMALL_STAGE + 17])
def test_every_boundary_round_trips(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    write_pieces(tmp_path / "object", [data])
    assert (tmp_path / "object").read_bytes() == data


@pytest.fixture
def ramfs(tmp_path: Path) -> Iterator[Path]:
    """A filesystem without ``O_DIRECT`` (as tmpfs was before Linux 6.6)."""
    yield from mounted(tmp_path / "ramfs", "-t", "ramfs", "ramfs")


def test_a_filesystem_without_o_direct_gets_the_page_cache(ramfs: Path) -> None:
    data = os.urandom(3 * SMALL_STAGE + 5)
    with ObjectFile(ramfs / "object") as out:
        assert not out.direct  # refused at open (EINVAL)
        out.write(data[:100])
        out.write(data[100:])
        out.sync()
    assert (ramfs / "object").read_bytes() == data


def test_a_write_refused_for_its_alignment_finishes_through_the_page_cache(
        tmp_path: Path) -> None:
    if not direct_supported(tmp_path):
        pytest.skip("this filesystem has no O_DIRECT")
    failpoints.arm_error("direct-write", errno.EINVAL, after=1)  # the second stage
    data = os.urandom(4 * SMALL_STAGE + 3)
    out = write_pieces(tmp_path / "object", [data])
    assert not out.direct
    assert (tmp_path / "object").read_bytes() == data


def test_a_disk_error_is_raised_and_the_large_object_is_not_kept(ws_dir: Path) -> None:
    """Any other error is the caller's: the snapshot fails whole, as a store error, and
    leaves no temp file."""
    ws = Workspace.init(ws_dir)
    if not direct_supported(ws.store_path):
        pytest.skip("this filesystem has no O_DIRECT")
    (ws_dir / "big.bin").write_bytes(os.urandom(LOOSE_MIN))
    failpoints.arm_error("direct-write", errno.EIO)
    with pytest.raises(StoreError, match="cannot write to the store.*Input/output error"):
        ws.snapshot()
    failpoints.disarm_all()
    assert ws.snapshots() == []
    assert not [p for p in ws.store_path.rglob("*") if ".tmp" in p.name or "large" in p.name]
    snap = ws.snapshot()
    assert ws.verify().ok and snap.files == 1


@pytest.fixture
def small_ext4(tmp_path: Path) -> Iterator[Path]:
    if not is_root() or shutil.which("mkfs.ext4") is None:
        pytest.skip("a small ext4 image needs root and mkfs.ext4 (e2fsprogs)")
    image, where = tmp_path / "ext4.img", tmp_path / "ext4"
    with open(image, "wb") as f:
        f.truncate(16 << 20)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {made.stderr.strip()[:200]}")
    yield from mounted(where, "-o", "loop", str(image))


def test_a_full_disk_under_o_direct_is_a_clear_error_and_loses_nothing(
        ws_dir: Path, small_ext4: Path) -> None:
    (ws_dir / "small.txt").write_text("small\n")
    ws = Workspace.init(ws_dir, home=small_ext4 / "home")
    assert direct_supported(ws.store_path)
    ws.snapshot(label="base")
    (ws_dir / "big.bin").write_bytes(os.urandom(24 << 20))  # more than the whole disk
    with pytest.raises(StoreFull, match="no space left"):
        ws.snapshot(label="too big")
    assert [s.label for s in ws.snapshots()] == ["base"]
    assert not [p for p in ws.store_path.rglob("*") if "large" in p.name]
    (ws_dir / "big.bin").write_bytes(os.urandom(5 << 20))  # fits: through O_DIRECT
    ws.snapshot(label="fits")
    assert ws.verify().ok and ws.verify().orphans == 0
    (ws_dir / "big.bin").unlink()
    ws.restore("fits")
    assert len((ws_dir / "big.bin").read_bytes()) == 5 << 20
