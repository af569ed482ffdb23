"""``engine.restore.durable.let_go``: the inode a restore replaced or removed, unlinked at once, and
in the workspace daemon freed only once its answer is sent."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.engine.restore import durable


@pytest.fixture
def holding() -> Iterator[None]:
    durable.hold_released()
    yield
    durable.hold_released(False)


def _released(d: Path, name: str, data: bytes = b"x" * 100) -> None:
    (d / name).write_bytes(data)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        durable.let_go(fd, name.encode(), os.lstat(d / name))
    finally:
        os.close(fd)


def _held_inodes() -> list[str]:
    """This process's open files whose last name is gone."""
    fds = Path("/proc/self/fd")
    out = []
    for f in fds.iterdir():
        try:
            target = os.readlink(f)
        except OSError:
            continue
        if target.endswith(" (deleted)"):
            out.append(target)
    return out


def test_without_holding_the_inode_goes_with_its_name(tmp_path: Path) -> None:
    _released(tmp_path, "a")
    assert not (tmp_path / "a").exists()
    assert not [t for t in _held_inodes() if str(tmp_path) in t]


def test_holding_keeps_the_inode_until_close_released(tmp_path: Path, holding: None) -> None:
    _released(tmp_path, "a")
    _released(tmp_path, "b")
    assert os.listdir(tmp_path) == []  # the names are gone at once
    assert len([t for t in _held_inodes() if str(tmp_path) in t]) == 2
    durable.close_released()
    assert not [t for t in _held_inodes() if str(tmp_path) in t]


def test_only_regular_files_are_held(tmp_path: Path, holding: None) -> None:
    os.mkfifo(tmp_path / "fifo")  # opening it would block
    os.symlink("nowhere", tmp_path / "link")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in (b"fifo", b"link"):
            durable.let_go(fd, name, os.lstat(os.path.join(tmp_path, os.fsdecode(name))))
    finally:
        os.close(fd)
    assert os.listdir(tmp_path) == [] and not [t for t in _held_inodes()
                                               if str(tmp_path) in t]


def test_past_the_caps_inodes_are_freed_at_once(tmp_path: Path, holding: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(durable, "HELD_MAX", 2)
    for name in ("a", "b", "c"):
        _released(tmp_path, name)
    assert len([t for t in _held_inodes() if str(tmp_path) in t]) == 2
    durable.close_released()
    monkeypatch.setattr(durable, "HELD_BYTES_MAX", 150)
    _released(tmp_path, "d", b"x" * 100)
    _released(tmp_path, "e", b"x" * 100)  # 200 bytes would be over: freed at once
    assert len([t for t in _held_inodes() if str(tmp_path) in t]) == 1
    assert os.listdir(tmp_path) == []


def test_an_unlink_that_fails_holds_nothing(tmp_path: Path, holding: None) -> None:
    (tmp_path / "a").write_bytes(b"x")
    st = os.lstat(tmp_path / "a")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        (tmp_path / "a").unlink()  # gone before let_go: it cannot be opened or unlinked
        with pytest.raises(FileNotFoundError):
            durable.let_go(fd, b"a", st)
    finally:
        os.close(fd)
    assert not [t for t in _held_inodes() if str(tmp_path) in t]


def test_under_a_low_open_file_limit_few_are_held(tmp_path: Path) -> None:
    """The restore needs descriptors of its own: with ``ulimit -n 64``, 8 at most."""
    import subprocess
    import sys

    code = ("import resource\nfrom ctrlz.engine.restore import durable\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
            "durable.hold_released()\nprint(durable._held_max)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "8"
