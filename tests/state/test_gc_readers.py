"""Readers that live long (the daemon, the MCP server) while other processes rm, gc and write.

The reader here is a :class:`Repository` held open in the test process; the writers are real
``ctrlz`` processes. Pack ids must never be reused (a reader's cached "pack N is this file" would
otherwise hand it another pack's bytes), a read racing a gc must look again rather than fail,
and ``verify`` must not count a concurrent snapshot's unfinished pack as an orphan.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.engine.verify import verify_store
from ctrlz.state.db.catalog import Catalog
from ctrlz.state.db.migrations import MIGRATIONS
from ctrlz.state.store.repository import Repository
from ctrlz.state.trees import FILE, decode_tree
from ctrlz.toolcalls.store import ToolcallStore

REPO = Path(__file__).resolve().parents[2]
CTRLZ = str(Path(sys.executable).parent / "ctrlz")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def ctrlz(*args: str, cwd: Path) -> str:
    out = subprocess.run([CTRLZ, *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def snapshot(root: Path, label: str) -> str:
    return json.loads(ctrlz("snapshot", "-m", label, "--json", cwd=root))["id"]


def read_file(repo: Repository, snap_id: str, name: bytes) -> bytes:
    """A file of a snapshot, read through ``repo`` without its tree cache."""
    snap = repo.catalog.snapshot(snap_id)
    assert snap is not None
    tree = decode_tree(repo.objects.read(snap.root))
    top = decode_tree(repo.objects.read(tree[0].oid))
    entry = next(e for e in top if e.name == name)
    assert entry.kind == FILE
    return repo.objects.read(entry.oid)


@pytest.fixture
def ws(ws_dir: Path, ctrlz_home: Path) -> Path:
    Workspace.init(ws_dir, home=ctrlz_home).close()
    return ws_dir


def store_of(root: Path, home: Path) -> Path:
    with Workspace.open(root, home=home) as w:
        return w.store_path


def test_reader_with_cached_packs_reads_right_bytes_after_rm_gc_and_snapshot(
        ws: Path, ctrlz_home: Path) -> None:
    """The reader caches descriptors of both packs; another process removes the newest
    snapshot, collects its (newest) pack and writes a new one. Before pack ids were
    AUTOINCREMENT the new pack took the dead pack's id, and the reader read the new pack's
    offsets out of the dead pack's still-open file."""
    (ws / "a.txt").write_text("first\n" * 50)
    first = snapshot(ws, "one")
    (ws / "b.txt").write_text("doomed " * 300)
    doomed = snapshot(ws, "two")
    reader = Repository.open(store_of(ws, ctrlz_home))
    try:
        assert read_file(reader, first, b"a.txt") == b"first\n" * 50
        assert read_file(reader, doomed, b"b.txt") == b"doomed " * 300
        assert len(reader.objects._pack_fds) == 2
        ids_before = set(reader.catalog.packs())

        ctrlz("rm", doomed, cwd=ws)
        ctrlz("gc", cwd=ws)
        (ws / "b.txt").unlink()
        (ws / "c.txt").write_text("brand new content\n" * 40)
        latest = snapshot(ws, "three")

        new_ids = set(reader.catalog.packs()) - ids_before
        assert new_ids and min(new_ids) > max(ids_before)
        assert read_file(reader, latest, b"c.txt") == b"brand new content\n" * 40
        assert read_file(reader, latest, b"a.txt") == b"first\n" * 50
    finally:
        reader.close()


def test_reader_follows_objects_that_gc_moved_to_a_new_pack(ws: Path,
                                                            ctrlz_home: Path) -> None:
    """A pack with live and dead objects is rewritten by gc: the reader, which had it open,
    finds the live object in the new pack, and the old file is gone."""
    (ws / "keep.txt").write_text("keep me\n" * 30)
    (ws / "drop.txt").write_text("drop me\n" * 30)
    both = snapshot(ws, "both")
    (ws / "drop.txt").unlink()
    only_keep = snapshot(ws, "keep")
    reader = Repository.open(store_of(ws, ctrlz_home))
    try:
        assert read_file(reader, both, b"keep.txt") == b"keep me\n" * 30
        old_pack = reader.catalog.lookup(reader.objects.digest(b"keep me\n" * 30))
        assert old_pack is not None
        ctrlz("rm", both, cwd=ws)
        ctrlz("gc", cwd=ws)
        moved = reader.catalog.lookup(reader.objects.digest(b"keep me\n" * 30))
        assert moved is not None and moved[1] != old_pack[1]
        assert read_file(reader, only_keep, b"keep.txt") == b"keep me\n" * 30
    finally:
        reader.close()


def test_pack_ids_are_never_reused(ws: Path, ctrlz_home: Path) -> None:
    seen: set[int] = set()
    store = store_of(ws, ctrlz_home)
    for round_ in range(3):
        (ws / "f.txt").write_text(f"round {round_}\n" * 20)
        snap = snapshot(ws, f"r{round_}")
        with Repository.open(store) as repo:
            ids = set(repo.catalog.packs())
        assert max(ids) > max(seen, default=0)
        seen |= ids
        ctrlz("rm", snap, cwd=ws)  # the newest pack dies with its snapshot
        ctrlz("gc", cwd=ws)


def _v2_catalog(path: Path, pack_ids: list[int]) -> None:
    """A catalog as ctrlz wrote it before pack ids were AUTOINCREMENT (schema 2)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    for migration in MIGRATIONS[:2]:
        migration(db)
    for i in pack_ids:
        db.execute("INSERT INTO packs (id, name, size) VALUES (?, ?, ?)", (i, f"p{i}", i))
        db.execute("INSERT INTO objects VALUES (?, ?, 8, 1, 1, 0)", (bytes([i]) * 32, i))
    db.execute("PRAGMA user_version = 2")
    db.execute("COMMIT")
    db.close()


def test_migration_keeps_pack_ids_and_continues_above_them(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    _v2_catalog(path, [1, 2, 7])
    catalog = Catalog(path)
    try:
        assert catalog.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert catalog.packs() == {1: ("p1", 1), 2: ("p2", 2), 7: ("p7", 7)}
        assert catalog.lookup(bytes([7]) * 32) == (bytes([7]) * 32, 7, 8, 1, 1, 0)
        with catalog.transaction():
            catalog.delete_pack(7)
            assert catalog.add_pack("new", 1) == 8
        with catalog.transaction():
            catalog.delete_pack(8)
        with catalog.transaction():
            assert catalog.add_pack("newer", 1) == 9
        sql = catalog.db.execute("SELECT sql FROM sqlite_master WHERE name = 'packs'").fetchone()
        assert "AUTOINCREMENT" in sql[0]
        assert catalog.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        catalog.close()


def test_the_toolcall_store_gets_the_migration_too(ws: Path, ctrlz_home: Path) -> None:
    with ToolcallStore(store_of(ws, ctrlz_home)) as tc:
        sql = tc.db.execute("SELECT sql FROM sqlite_master WHERE name = 'packs'").fetchone()
        assert "AUTOINCREMENT" in sql[0]


CHURN = """
import os, sys
from pathlib import Path
from ctrlz import Workspace
from ctrlz.session.config import Config
root, home, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = Config()
config.set("manual_max", 10_000, "test")
config.set("max_count", 10_000, "test")
ws = Workspace.open(root, home=Path(home), config=config)
for i in range(rounds):
    Path(root, "keep.txt").write_text(f"keep {i}\\n" * 100)
    Path(root, "churn.txt").write_bytes(os.urandom(3000))
    both = ws.snapshot(label=f"both-{i}")          # keep_i and churn_i share a pack
    Path(root, "churn.txt").unlink()
    ws.snapshot(label=f"keep-{i}")                 # keeps keep_i alive
    ws.remove([both.id])
    ws.gc()                                        # moves keep_i to a new pack
    Path(root, "churn.txt").write_bytes(b"")
"""


def test_reads_never_fail_while_another_process_repacks(ws: Path, ctrlz_home: Path) -> None:
    """A reader reading the newest kept file in a loop while another process keeps moving
    such files between packs: every read returns the right bytes. (A read that looked the
    object up just before a gc committed finds the old pack deleted and looks again.)"""
    (ws / "keep.txt").write_text("keep start\n")
    snapshot(ws, "keep-start")
    store = store_of(ws, ctrlz_home)
    rounds = 60
    writer = subprocess.Popen([sys.executable, "-c", CHURN, str(ws), str(ctrlz_home),
                               str(rounds)], env=_env(), stderr=subprocess.PIPE, text=True)
    reads = 0
    reader = Repository.open(store)
    try:
        while True:
            done = writer.poll() is not None
            snaps = [s for s in reader.catalog.snapshots() if (s.label or "").startswith("keep-")]
            newest = snaps[-1]
            # as a reader of many packs would after its descriptor cache turned over: the
            # next read opens the pack named by a fresh lookup, which gc may delete meanwhile
            reader.objects.close()
            data = read_file(reader, newest.id, b"keep.txt")
            index = newest.label.removeprefix("keep-")
            assert data == (b"keep start\n" if index == "start"
                            else f"keep {index}\n".encode() * 100)
            reads += 1
            if done:
                break
    finally:
        reader.close()
        _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    assert reads > 0


HOLD_A_PACK = """
import sys
from pathlib import Path
from ctrlz.state.store.repository import Repository
repo = Repository.open(Path(sys.argv[1]))
with repo.lock:
    writer = repo.objects.writer()
    writer.put(b"an object being written by a snapshot in progress " * 50)
    writer._flush(writer._open_pack())  # its bytes are in packs/, not yet indexed
    print("writing", flush=True)
    sys.stdin.readline()
    with repo.catalog.transaction():
        writer.commit(repo.catalog)
print("done", flush=True)
"""


def test_verify_does_not_call_a_concurrent_writers_pack_an_orphan(ws: Path,
                                                                  ctrlz_home: Path) -> None:
    (ws / "a.txt").write_text("hello\n")
    snapshot(ws, "base")
    store = store_of(ws, ctrlz_home)
    child = subprocess.Popen([sys.executable, "-c", HOLD_A_PACK, str(store)], env=_env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "writing"
        with Repository.open(store) as repo:
            report = verify_store(repo)
            assert report.ok
            assert report.orphans is None
            assert report.orphans_note and "another ctrlz process" in report.orphans_note
            data = report.to_json()
            assert data["orphans"] is None and data["orphans_note"] == report.orphans_note
            assert not repo.lock.held  # verify gave nothing back it did not take
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
    finally:
        child.communicate(timeout=60)
    assert child.returncode == 0
    with Repository.open(store) as repo:
        report = verify_store(repo)
        assert report.ok and report.orphans == 0 and report.orphans_note is None
        assert "orphans_note" not in report.to_json()


def test_verify_counts_real_orphans_when_nobody_writes(ws: Path, ctrlz_home: Path) -> None:
    (ws / "a.txt").write_text("hello\n")
    snapshot(ws, "base")
    store = store_of(ws, ctrlz_home)
    (store / "packs" / "pack-0000000000000000.pack").write_bytes(b"CTZPACK1 left by a crash")
    with Repository.open(store) as repo:
        report = verify_store(repo)
        assert report.ok and report.orphans == 1
        with repo.lock:  # held by the caller itself: still counted (no one else can write)
            assert verify_store(repo).orphans == 1
            assert repo.lock.held
        assert not repo.lock.held

