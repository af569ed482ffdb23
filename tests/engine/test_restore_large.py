"""Large files are restored by worker threads (``engine.restore.durable.LargeWrites``): several at
once,
each verified against its id and fsynced before the batch renames anything.

What must hold as before: the exact tree comes back; a damaged object stops the restore before
any file is replaced (its batch is renamed only once every worker is done), with no temp file
left in the workspace, no journal, and an undo entry with status ``failed``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.engine.restore import journal
from ctrlz.errors import CtrlzError
from tests.conftest import tree_state

MIB = 1 << 20


def _large_tree(root: Path) -> None:
    """Eight files of 4-6 MiB (loose objects: random ones stored raw, text ones compressed)
    and a few small ones, so that one batch mixes both paths."""
    (root / "big").mkdir(parents=True)
    for i in range(8):
        size = 4 * MIB + i * 300_000
        body = os.urandom(size) if i % 2 == 0 else (b"line %d of a log\n" % i) * (size // 16)
        (root / "big" / f"f{i}.bin").write_bytes(body)
    for i in range(5):
        (root / f"small{i}.txt").write_text(f"small {i}\n")


def _temps(root: Path) -> list[str]:
    return [str(p) for p in root.rglob(".ctrlz-tmp*")]


def test_large_files_come_back_exactly(ws_dir: Path) -> None:
    _large_tree(ws_dir)
    ws = Workspace.init(ws_dir)
    before = tree_state(ws_dir)
    ws.snapshot(label="base")
    for i in range(8):  # every large file changes, one is deleted, one appears
        p = ws_dir / "big" / f"f{i}.bin"
        p.write_bytes(p.read_bytes()[::-1])
    (ws_dir / "big" / "f3.bin").unlink()
    (ws_dir / "big" / "new.bin").write_bytes(os.urandom(5 * MIB))
    ws.restore("base")
    assert tree_state(ws_dir) == before
    assert _temps(ws_dir) == []
    ws.undo()  # and the safety snapshot's large files come back the same way
    assert (ws_dir / "big" / "new.bin").stat().st_size == 5 * MIB


def test_restore_into_a_new_directory_writes_every_large_file(ws_dir: Path,
                                                               tmp_path: Path) -> None:
    _large_tree(ws_dir)
    ws = Workspace.init(ws_dir)
    before = tree_state(ws_dir)
    ws.snapshot(label="base")
    ws.restore_to("base", tmp_path / "copy")
    assert tree_state(tmp_path / "copy") == before


def test_a_damaged_large_object_replaces_nothing(ws_dir: Path) -> None:
    _large_tree(ws_dir)
    ws = Workspace.init(ws_dir)
    ws.snapshot(label="base")
    for i in range(8):
        p = ws_dir / "big" / f"f{i}.bin"
        p.write_bytes(p.read_bytes()[::-1])
    edited = tree_state(ws_dir)
    # flip one byte in the middle of the stored copy of f0.bin (random: stored raw, so the
    # loose object file has exactly the file's size and the flip survives decoding)
    size = (ws_dir / "big" / "f0.bin").stat().st_size
    stored = [p for p in (ws.store_path / "objects").rglob("*")
              if p.is_file() and p.stat().st_size == size]
    assert stored, "the random large file is a loose, raw object"
    for p in stored:  # its base version and the edited one: both damaged
        os.chmod(p, 0o600)
        with open(p, "r+b") as f:
            f.seek(size // 2)
            b = f.read(1)
            f.seek(size // 2)
            f.write(bytes([b[0] ^ 0xFF]))
    with pytest.raises(CtrlzError):
        ws.restore("base")
    assert tree_state(ws_dir) == edited  # nothing was renamed over the edited files
    assert _temps(ws_dir) == []
    assert not journal.pending(ws.store_path)
    op = ws.oplog.next_undo()
    assert op is not None and op.status == "failed", op
