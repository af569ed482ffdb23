"""The scan's reader accepts a read only when it is one version of the file: the stat before
and after it agree, and it read as many bytes as that stat says. An entry whose size is not
its object's length cannot be restored: the check after the write fails."""

from __future__ import annotations

import os
from pathlib import Path

import blake3

from ctrlz.state.scan.reader import FileReader
from ctrlz.state.scan.sinks import HashSink


def reader() -> FileReader:
    sink = HashSink(lambda b: blake3.blake3(b).digest(), blake3.blake3)
    return FileReader(sink, pool=None, stats=None, skipped=[])  # type: ignore[arg-type]


def test_a_file_read_whole_is_accepted_with_its_stat(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_bytes(b"hello\n" * 100)
    status, oid, _, after = reader().read(os.fsencode(f), f.stat().st_size)
    assert status == "ok"
    assert oid == blake3.blake3(b"hello\n" * 100).digest() and after.st_size == 600


def test_bytes_that_are_not_as_long_as_the_stat_says_are_never_accepted() -> None:
    """A file of /proc says size 0 and holds bytes: both stats agree, and the old check took
    the one byte read as the content of an empty file. The same mismatch, for an instant,
    comes from a truncate and rewrite whose new size is visible before its new times."""
    path = f"/proc/{os.getpid()}/status".encode()
    status, reason, _, _ = reader().read(path, 0)
    assert status == "skip"
    assert reason.startswith("read 1 bytes where its size says 0")
