"""Opening a protected workspace: its store's repository opens on first use, not before.

What must hold: opening reads nothing of the store (a daemon-served command never needs it);
the first use opens it once, whichever threads ask at the same moment; a damaged store is
still a clear error, at the first use instead of at the opening.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.errors import StoreError
from tests.conftest import make_tree


def test_opening_reads_nothing_of_the_store(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "a\n"})
    with Workspace.init(ws_dir) as ws:
        ws.snapshot(label="one")
    code = ("import sys\nfrom ctrlz import Workspace\n"
            "ws = Workspace.open('.')\n"
            "print('sqlite3' in sys.modules, ws.store_path.is_dir())\n"
            "print([s.label for s in ws.snapshots()], 'sqlite3' in sys.modules)\n"
            "ws.close()")
    run = subprocess.run([sys.executable, "-c", code], cwd=ws_dir, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["False True", "['one'] True"]


def test_threads_that_open_it_at_once_share_one_repository(ws_dir: Path) -> None:
    Workspace.init(ws_dir).close()
    ws = Workspace.open(ws_dir)
    got: list[object] = []
    start = threading.Barrier(8)

    def first_use() -> None:
        start.wait()
        got.append(ws.repo)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(r is got[0] for r in got)
    assert ws.snapshot().type == "manual"  # and it works
    ws.close()


def test_a_damaged_catalog_is_a_clear_error_at_first_use(ws_dir: Path) -> None:
    with Workspace.init(ws_dir) as ws:
        catalog = ws.store_path / "catalog.db"
    catalog.write_bytes(b"this is not a database" * 100)
    for name in ("catalog.db-wal", "catalog.db-shm"):
        (catalog.parent / name).unlink(missing_ok=True)
    ws = Workspace.open(ws_dir)
    with pytest.raises(StoreError, match="catalog"):
        ws.snapshots()
    ws.close()


def test_ctrlz_init_over_a_store_it_cannot_open_fails(ws_dir: Path) -> None:
    """``ctrlz init`` must not say "Already protecting" over a store a newer ctrlz wrote."""
    import sqlite3

    with Workspace.init(ws_dir) as ws:
        catalog = ws.store_path / "catalog.db"
    db = sqlite3.connect(catalog)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    ctrlz = str(Path(sys.executable).parent / "ctrlz")
    run = subprocess.run([ctrlz, "init"], cwd=ws_dir, capture_output=True, text=True)
    assert run.returncode != 0
    assert "written by a newer ctrlz" in run.stderr
    assert "Traceback" not in run.stderr and "Already protecting" not in run.stdout
