"""The scan's reader accepts a read only when it is one version of the file: the stat before
and after it agree, and it read as many bytes as that stat says. An entry whose size is not
its object's length cannot be restored: the check after the write fails."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import blake3
import pytest

from ctrlz.state.scan.model import KEY, OID, DirNode, ScanStats
from ctrlz.state.scan.reader import INLINE_FIRST, FileReader
from ctrlz.state.scan.sinks import HashSink
from ctrlz.state.trees import FILE
from ctrlz.types import Skipped


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


def _queue_all(tmp_path: Path, n: int, pool: ThreadPoolExecutor,
               inflight: list[int]) -> tuple[FileReader, list[list[object]], ScanStats]:
    """Queue ``n`` small files (every tenth one deleted before it is read) through a reader
    on ``pool``; records the bytes held in flight after each hand-over in ``inflight``."""
    stats = ScanStats(files=n)
    skipped: list[Skipped] = []
    sink = HashSink(lambda b: blake3.blake3(b).digest(), blake3.blake3)
    r = FileReader(sink, pool, stats, skipped)
    node = DirNode(b"", os.fsencode(tmp_path), None, None, None, 0o755)  # type: ignore[arg-type]
    entries = []
    for i in range(n):
        f = tmp_path / f"f{i}"
        data = f"file {i}\n".encode() * 50
        f.write_bytes(data)
        stats.bytes += len(data)
        entry: list[object] = [f"f{i}".encode(), FILE, 0o644, len(data), 0, None, None]
        entries.append(entry)
        if i % 10 == 9:
            f.unlink()
        r.queue(node, entry, os.fsencode(f), len(data))
        inflight.append(r._inflight_bytes)
    r.submit_batch()
    r.drain(block=True)
    return r, entries, stats


def test_past_the_first_small_files_reads_go_to_the_pool_and_every_one_is_recorded(
        tmp_path: Path) -> None:
    """A first snapshot's small files are read on the pool once the first INLINE_FIRST
    were read inline: each one still gets its own id and stat, and a file gone before
    its read is taken back out of the counts, as an inline read's is."""
    n = INLINE_FIRST + 300
    with ThreadPoolExecutor(4) as pool:
        _, entries, stats = _queue_all(tmp_path, n, pool, [])
    for i, entry in enumerate(entries):
        if i % 10 == 9:
            assert entry[OID] is None
        else:
            assert entry[OID] == blake3.blake3(f"file {i}\n".encode() * 50).digest()
            assert isinstance(entry[KEY], tuple)
    assert stats.files == n - n // 10 and stats.hashed == n - n // 10
    assert stats.bytes == sum(len(f"file {i}\n") * 50 for i in range(n) if i % 10 != 9)


def test_the_bytes_read_and_not_yet_handed_on_stay_under_their_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory stays flat however many files a snapshot reads: past MAX_INFLIGHT_BYTES held,
    the walk waits for the oldest batches (here a cap of two batches' worth)."""
    from ctrlz.state.scan import reader as reader_module

    cap = 2 * 64 * 500
    monkeypatch.setattr(reader_module, "MAX_INFLIGHT_BYTES", cap)
    inflight: list[int] = []
    with ThreadPoolExecutor(4) as pool:
        _queue_all(tmp_path, INLINE_FIRST + 2000, pool, inflight)
    assert max(inflight) <= cap
