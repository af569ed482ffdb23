"""The catalog (``state/db/catalog.py``): one SQLite database per store, real files.

A few focused tests of its public functions: the schema and its version, transactions and
their end hooks, object and pack rows, snapshot rows in their one order, numbers never reused,
the retired clone ids, the record of drops.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.errors import StoreError
from ctrlz.state.db.catalog import BUSY_MS, WAL_KEEP, Catalog
from ctrlz.state.db.migrations import MIGRATIONS
from ctrlz.state.store.packs import CLONE, RAW, ZSTD
from ctrlz.types import Skipped, Snapshot


def snap(sid: str, created_ns: int, number: int | None = None, typ: str = "manual",
         **more: object) -> Snapshot:
    return Snapshot(id=sid, number=number, parent=None, type=typ, label=None, pinned=False,
                    created_ns=created_ns, root=b"\x01" * 32, files=1, dirs=1, symlinks=0,
                    bytes=10, added_bytes=10, size_delta=10, **more)  # type: ignore[arg-type]


@pytest.fixture
def cat(tmp_path: Path) -> Iterator[Catalog]:
    c = Catalog(tmp_path / "catalog.db")
    yield c
    c.close()


def test_a_new_catalog_is_at_the_newest_schema_in_wal_mode(cat: Catalog) -> None:
    assert cat.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert cat.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_catalog_of_a_newer_ctrlz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    Catalog(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(StoreError, match="written by a newer ctrlz"):
        Catalog(path)


def test_a_snapshot_row_round_trips_and_is_seen_by_another_connection(cat: Catalog,
                                                                      tmp_path: Path) -> None:
    s = snap("snap_a", 5, number=0, rules={"use_gitignore": True},
             skipped=(Skipped(b"big\xff", "too large"),), roots=("/w",))
    with cat.transaction():
        cat.add_snapshot(s)
    assert cat.snapshot("snap_a") == s
    other = Catalog(tmp_path / "catalog.db", readonly=True)
    try:
        assert other.snapshot("snap_a") == s
    finally:
        other.close()


def test_a_failed_transaction_leaves_nothing_and_tells_its_end_hooks(cat: Catalog) -> None:
    ends: list[bool] = []
    with pytest.raises(RuntimeError), cat.transaction():
        cat.on_end(ends.append)
        cat.add_snapshot(snap("snap_a", 1))
        raise RuntimeError("stop")
    assert cat.snapshot("snap_a") is None and ends == [False]
    with cat.transaction():
        cat.on_end(ends.append)
        cat.add_snapshot(snap("snap_b", 2))
    assert ends == [False, True]


def test_snapshots_have_one_order_latest_oldest_and_pages_agree(cat: Catalog) -> None:
    with cat.transaction():
        for i, ns in enumerate([30, 10, 20, 20]):  # two alike: the row order breaks the tie
            cat.add_snapshot(snap(f"snap_{i}", ns, typ="auto" if i % 2 else "manual"))
    order = [s.id for s in cat.snapshots()]
    assert order == ["snap_1", "snap_2", "snap_3", "snap_0"]
    assert [r[0] for r in cat.summaries()] == order
    assert cat.latest().id == "snap_0"  # type: ignore[union-attr]
    assert [s.id for s in cat.snapshots(["auto"])] == ["snap_1", "snap_3"]
    assert cat.type_counts() == {"auto": 2, "manual": 2}
    assert [s.id for s in cat.oldest(1, but=["manual"])] == ["snap_1"]
    assert [s.id for s in cat.oldest(1, types=["manual"], but=["manual"])] == [
        "snap_1", "snap_2", "snap_0"]
    first = cat.snapshots_before(2)
    assert [s.id for s in first] == ["snap_0", "snap_3"]  # type: ignore[union-attr]
    rest = cat.snapshots_before(2, before="snap_3")
    assert [s.id for s in rest] == ["snap_2", "snap_1"]  # type: ignore[union-attr]
    assert cat.snapshots_before(2, before="snap_gone") is None


def test_numbers_are_never_given_out_twice(cat: Catalog) -> None:
    assert cat.next_number() == 0
    with cat.transaction():
        cat.add_snapshot(snap("snap_a", 1, number=0))
        cat.add_snapshot(snap("snap_b", 2, number=1))
    with cat.transaction():
        cat.delete_snapshot("snap_b")
    assert cat.next_number() == 2


def test_update_snapshot_changes_only_what_may_change(cat: Catalog) -> None:
    with cat.transaction():
        cat.add_snapshot(snap("snap_a", 1))
        cat.update_snapshot("snap_a", pinned=True, label="keep")
    s = cat.snapshot("snap_a")
    assert s is not None and s.pinned and s.label == "keep"
    with pytest.raises(ValueError, match="root"):
        cat.update_snapshot("snap_a", root=b"")


def test_object_rows_counts_and_a_deleted_clone_is_retired(cat: Catalog) -> None:
    small, loose, clone = b"\x01" * 32, b"\x02" * 32, b"\x03" * 32
    with cat.transaction():
        pack = cat.add_pack("pack-1", 100)
        cat.add_objects([(loose, None, 0, 40, 50, ZSTD), (small, pack, 0, 7, 7, RAW),
                         (clone, None, 0, 1000, 1000, CLONE)])
        cat.add_objects([(small, pack, 50, 9, 9, RAW)])  # already there: the first row stays
        cat.add_cuts([(loose, b"table")])
    assert cat.lookup(small) == (small, pack, 0, 7, 7, RAW)
    assert cat.object_count() == 3 and cat.all_oids() == {small, loose, clone}
    assert cat.holds_more_objects_than(2) and not cat.holds_more_objects_than(3)
    assert cat.stored_bytes() == (1057, 1047)
    assert cat.packed_bytes() == 100 + 40 + 1000
    assert cat.cuts(loose) == b"table"
    with cat.transaction():
        cat.delete_objects([loose, clone])
    assert cat.lookup(loose) is None and cat.cuts(loose) is None
    assert cat.is_retired(clone) and not cat.is_retired(loose)


def test_drops_keep_the_newest_first(cat: Catalog) -> None:
    with cat.transaction():
        cat.record_drops([("snap_a", "auto", None, "ring full")], now_ns=10)
        cat.record_drops([("snap_b", "auto", "x", "byte cap")], now_ns=20)
    assert [d["id"] for d in cat.drops()] == ["snap_b", "snap_a"]
    assert [d["id"] for d in cat.drops(since_ns=15)] == ["snap_b"]


def test_meta_values_persist(cat: Catalog, tmp_path: Path) -> None:
    with cat.transaction():
        cat.set_meta("k", "v")
    cat.close()
    again = Catalog(tmp_path / "catalog.db")
    try:
        assert again.get_meta("k") == "v" and again.get_meta("missing") is None
    finally:
        again.close()


def _wal_bytes(cat: Catalog) -> int:
    return os.stat(f"{cat.path}-wal").st_size


def _fill_log(cat: Catalog, rows: int) -> None:
    with cat.transaction():
        pack = cat.add_pack(f"pack-{rows}", 1)
        cat.add_objects([(os.urandom(32), pack, i, 1, 1, RAW) for i in range(rows)])


def test_trim_wal_cuts_a_long_log_and_leaves_a_short_one(cat: Catalog, tmp_path: Path) -> None:
    cat.trim_wal()  # creating the schema logged more than WAL_KEEP
    assert _wal_bytes(cat) == 0
    _fill_log(cat, 10)
    short = _wal_bytes(cat)
    assert 0 < short <= WAL_KEEP
    cat.trim_wal()
    assert _wal_bytes(cat) == short  # not worth a checkpoint's fsync yet
    _fill_log(cat, 5000)
    assert _wal_bytes(cat) > WAL_KEEP
    cat.trim_wal()
    assert _wal_bytes(cat) == 0
    # what the log held is in the catalog: a fresh connection sees every row
    other = sqlite3.connect(tmp_path / "catalog.db")
    try:
        assert other.execute("SELECT count(*) FROM objects").fetchone()[0] == 5010
    finally:
        other.close()
    assert cat.db.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_MS


def test_trim_wal_waits_for_no_reader_and_keeps_the_log_it_cannot_cut(
        cat: Catalog, tmp_path: Path) -> None:
    _fill_log(cat, 5000)
    reader = sqlite3.connect(tmp_path / "catalog.db", isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM objects").fetchone()[0] == 5000
        cat.trim_wal()  # busy: returns at once, nothing lost, no error
        assert _wal_bytes(cat) > WAL_KEEP
        assert cat.db.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_MS
        reader.execute("COMMIT")
    finally:
        reader.close()
    cat.trim_wal()
    assert _wal_bytes(cat) == 0 and cat.object_count() == 5000
