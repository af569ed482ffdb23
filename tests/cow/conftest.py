"""Real copy-on-write filesystems for the tests: XFS (``reflink=1``) and btrfs images on loop
devices, made once per session, plus a tmpfs; each test works in a fresh directory on them.

Making them needs root, ``mkfs.xfs`` (xfsprogs) and ``mkfs.btrfs`` (btrfs-progs), and a kernel
that will mount a loop device; where any of that is missing the tests that need it are skipped
with the reason (``.ci/run`` installs both packages when it runs as root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import mounted

PACKAGES = {"mkfs.xfs": "xfsprogs", "mkfs.btrfs": "btrfs-progs"}
MKFS = {"xfs": ["mkfs.xfs", "-q", "-f", "-m", "reflink=1"], "btrfs": ["mkfs.btrfs", "-q", "-f"]}


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _mounted(base: Path, fstype: str) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip(f"{fstype} tests mount a loop image, which needs root")
    if fstype == "tmpfs":
        yield from mounted(base / fstype, "-t", "tmpfs", "-o", "size=256m", "tmpfs")
        return
    tool = MKFS[fstype][0]
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is missing: install {PACKAGES[tool]} to run the {fstype} tests")
    img = base / f"{fstype}.img"
    with open(img, "wb") as f:
        f.truncate(1 << 30)
    made = _run([*MKFS[fstype], str(img)])
    if made.returncode != 0:
        pytest.skip(f"{tool} failed: {made.stderr.strip()[:200]}")
    yield from mounted(base / fstype, "-o", "loop", str(img))


@pytest.fixture(scope="session")
def xfs_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from _mounted(tmp_path_factory.mktemp("xfs"), "xfs")


@pytest.fixture(scope="session")
def btrfs_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from _mounted(tmp_path_factory.mktemp("btrfs"), "btrfs")


@pytest.fixture(scope="session")
def tmpfs_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from _mounted(tmp_path_factory.mktemp("tmpfs"), "tmpfs")


def _area(mount: Path) -> Iterator[Path]:
    area = mount / f"t-{uuid.uuid4().hex[:8]}"
    area.mkdir()
    try:
        yield area
    finally:
        shutil.rmtree(area, ignore_errors=True)


@pytest.fixture
def xfs(xfs_mount: Path) -> Iterator[Path]:
    """A fresh directory on the XFS image."""
    yield from _area(xfs_mount)


@pytest.fixture
def btrfs(btrfs_mount: Path) -> Iterator[Path]:
    """A fresh directory on the btrfs image."""
    yield from _area(btrfs_mount)


@pytest.fixture(params=["xfs", "btrfs"])
def cow(request: pytest.FixtureRequest) -> Path:
    """A fresh directory on each copy-on-write filesystem in turn."""
    return request.getfixturevalue(request.param)


#: In portable mode (``CTRLZ_PLATFORM=portable``: no ``FICLONE``, no btrfs ioctls) these files
#: test the fast path itself (clones made, probed, sent, frozen). Its twin, copying the bytes,
#: is what every other test of the store does; test_cow_crash.py still runs its kills on XFS
#: and btrfs there, with copies.
FAST_PATH_ONLY = {"test_clones.py", "test_fallback.py", "test_btrfs_backend.py",
                  "test_transfer_clones.py", "test_toolcalls_cow.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from ctrlz import platform

    if platform.can_ficlone():
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="tests FICLONE or btrfs snapshots themselves, which "
                                   "portable mode turns off (the copying twin is tested "
                                   "everywhere else)")
    for item in items:
        if item.path.parent == here and (item.path.name in FAST_PATH_ONLY
                                         or "frozen" in item.name):
            item.add_marker(skip)


def subvolume(path: Path) -> Path:
    """Make ``path`` a btrfs subvolume (btrfs-progs)."""
    done = _run(["btrfs", "subvolume", "create", str(path)])
    if done.returncode != 0:
        pytest.skip(f"cannot create a btrfs subvolume: {done.stderr.strip()[:200]}")
    return path


def delete_subvolumes(*paths: Path) -> None:
    for p in paths:
        _run(["btrfs", "subvolume", "delete", str(p)])
