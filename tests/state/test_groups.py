"""Grouped small objects (ctrlz.state.store.groups): small objects compressed together as one zstd
frame per group, each still read by its id alone; a read of one reads its group and nothing
else; stores written before groups stay readable (and gc regroups them); an older ctrlz
refuses a store that may hold groups; a kill while groups are written leaves a sound store."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.errors import CorruptObject, StoreError
from ctrlz.state.db import catalog as catalog_module
from ctrlz.state.db.catalog import Catalog
from ctrlz.state.store.groups import (
    GROUP,
    GROUP_BYTES,
    GROUP_ENTRY,
    GROUP_HEAD,
    GROUP_MAGIC,
    STORED_MAGIC,
    decode_group,
    encode_group,
    pack_records,
    shares,
)
from ctrlz.state.store.packs import PACK_MAGIC, RECORD, RECORD_MAGIC, ZSTD, encode_small
from ctrlz.state.store.repository import Repository
from ctrlz.state.store.sweep import sweep
from tests.conftest import make_tree, tree_state
from tests.engine.test_crash import assert_store_sound, run_worker


def bodies(n: int, seed: int = 5) -> list[bytes]:
    """Text that shares words across objects (what groups gain on), random bytes, tiny ones."""
    rng = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"return", b"function", b"const"]
    out = []
    for i in range(n):
        if i % 5 == 0:
            out.append(rng.randbytes(rng.randint(100, 5000)))
        elif i % 7 == 0:
            out.append(b"tiny %d" % i)
        else:
            out.append(b" ".join(rng.choice(words) for _ in range(rng.randint(20, 3000))))
    return out


def new_store(tmp_path: Path) -> Repository:
    return Repository.create(tmp_path / "store", ["/nowhere"])


def put_all(repo: Repository, items: list[bytes]) -> list[bytes]:
    with repo.lock:
        writer = repo.objects.writer()
        oids = [writer.put(d) for d in items]
        with repo.catalog.transaction():
            writer.commit(repo.catalog)
    return oids


def pack_bytes(repo: Repository) -> bytes:
    (name,) = [n for n, _ in repo.catalog.packs().values()]
    return (repo.path / "packs" / name).read_bytes()


def recorded_preads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (offset, length) of every ``os.pread`` from now on (until ``monkeypatch.undo``)."""
    reads: list[tuple[int, int]] = []
    real_pread = os.pread

    def pread(fd: int, length: int, offset: int) -> bytes:
        reads.append((offset, length))
        return real_pread(fd, length, offset)

    monkeypatch.setattr(os, "pread", pread)
    return reads


def test_grouped_objects_round_trip_and_the_pack_alone_rebuilds_the_index(
        tmp_path: Path) -> None:
    items = bodies(2000)
    with new_store(tmp_path) as repo:
        oids = put_all(repo, items + items[:50])  # given twice: stored once
        rows = repo.catalog.object_rows()
        assert len(rows) == len(set(oids)) == len(set(items))
        assert {r[5] for r in rows} == {GROUP}
        assert len({r[2] for r in rows}) >= 2  # several groups
        # the catalog's stored bytes add up to the pack's (shares of each group)
        assert sum(r[3] for r in rows) == len(pack_bytes(repo)) - len(PACK_MAGIC)
        rebuilt = sorted(pack_records(pack_bytes(repo), RECORD, RECORD_MAGIC, len(PACK_MAGIC)))
        assert rebuilt == sorted((r[0], r[2], r[3], r[4], r[5]) for r in rows)
    with Repository.open(tmp_path / "store") as repo:  # a fresh reader, in any order
        order = list(range(len(items)))
        random.Random(1).shuffle(order)
        for i in order:
            assert repo.objects.read(oids[i]) == items[i]


def test_a_group_zstd_cannot_shrink_is_stored_as_it_is_and_read_back() -> None:
    """Bytes zstd saves under 5% of (random ones) are stored raw, under a magic of their own,
    and read back without zstd; its index still rebuilds the catalog's rows."""
    rng = random.Random(7)
    items = [rng.randbytes(300), rng.randbytes(40), b""]
    oids = [bytes([i]) * 32 for i in range(3)]
    record = encode_group(oids, items)
    assert record[:4] == STORED_MAGIC
    group = decode_group(record)
    assert [group.member(o) for o in oids] == items
    assert decode_group(record, upto=oids[0]).member(oids[0]) == items[0]
    rows = list(pack_records(record, RECORD, RECORD_MAGIC, 0))
    assert [(oid, size, codec) for oid, _, _, size, codec in rows] == [
        (o, len(d), GROUP) for o, d in zip(oids, items, strict=True)]
    assert encode_group(oids, [b"same " * 100] * 3)[:4] == GROUP_MAGIC
    with pytest.raises(CorruptObject):
        decode_group(record[:-3])


def test_a_group_record_decodes_to_its_members() -> None:
    items = [b"one " * 50, b"", b"two " * 900, bytes(range(256))]
    oids = [bytes([i]) * 32 for i in range(4)]
    record = encode_group(oids, items)
    group = decode_group(record)
    assert [group.member(o) for o in oids] == items
    assert group.member(b"x" * 32) is None
    assert sum(shares(len(record), [len(d) for d in items])) == len(record)
    with pytest.raises(CorruptObject):
        decode_group(record[:-3])  # a torn frame is reported, never misread


def test_reading_one_object_reads_only_its_group(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    items = bodies(3000, seed=9)
    with new_store(tmp_path) as repo:
        oids = put_all(repo, items)
    with Repository.open(tmp_path / "store") as repo:
        data = pack_bytes(repo)
        groups = {}  # group offset -> its record's length
        for _, offset, _, _, codec in pack_records(data, RECORD, RECORD_MAGIC, len(PACK_MAGIC)):
            assert codec == GROUP
            count = GROUP_HEAD.unpack_from(data, offset)[1]
            groups[offset] = (GROUP_HEAD.size + count * GROUP_ENTRY.size
                              + GROUP_HEAD.unpack_from(data, offset)[2])
        assert len(groups) >= 3
        reads = recorded_preads(monkeypatch)
        def group_of(i: int) -> int:
            return repo.catalog.lookup(oids[i])[2]  # type: ignore[index]

        target = len(items) // 2  # the last member of a group in the middle of the pack
        while group_of(target + 1) == group_of(target):
            target += 1
        assert repo.objects.read(oids[target]) == items[target]
        start = group_of(target)
        assert start in groups
        assert reads and all(start <= off and off + ln <= start + groups[start]
                             for off, ln in reads)
        assert sum(ln for _, ln in reads) <= groups[start] + GROUP_HEAD.size
        assert groups[start] < GROUP_BYTES  # the bound: one group's bytes
        reads.clear()  # a neighbour before it in the group: decoded already, nothing read
        assert group_of(target - 1) == start
        assert repo.objects.read(oids[target - 1]) == items[target - 1]
        assert reads == []


def old_store(tmp_path: Path, items: list[bytes]) -> tuple[Path, list[bytes]]:
    """A store as ctrlz wrote it before groups: catalog schema 6, one record per object."""
    with new_store(tmp_path) as repo, repo.lock:
        writer = repo.objects.writer()
        oids = []
        for d in items:
            oid = repo.objects.digest(d)
            writer.put_encoded(oid, len(d), *encode_small(d))
            oids.append(oid)
        with repo.catalog.transaction():
            writer.commit(repo.catalog)
        path = repo.path
    db = sqlite3.connect(path / "catalog.db")
    db.execute("DELETE FROM meta WHERE key = 'packs'")
    db.execute("DROP INDEX objects_loose")
    db.execute("CREATE INDEX objects_pack ON objects(pack)")
    db.execute("PRAGMA user_version = 6")
    db.commit()
    db.close()
    return path, oids


def test_a_store_written_before_groups_is_read_and_gc_regroups_it(tmp_path: Path) -> None:
    items = bodies(600, seed=3)
    path, oids = old_store(tmp_path, items)
    with Repository.open(path, readonly=True) as repo:  # read as it is, schema 6
        assert repo.catalog.db.execute("PRAGMA user_version").fetchone()[0] == 6
        assert {r[5] for r in repo.catalog.object_rows()} <= {0, ZSTD}
        assert [repo.objects.read(o) for o in oids] == items
    with Repository.open(path) as repo:  # a writer's open brings it to schema 7
        assert repo.catalog.db.execute("PRAGMA user_version").fetchone()[0] == 7
        assert [repo.objects.read(o) for o in oids] == items
        with repo.lock:
            assert sweep(repo.objects, set(oids)).repacked_packs == 0  # nothing dead
            done = sweep(repo.objects, set(oids), regroup=True)  # what `ctrlz gc` asks
        assert done.repacked_packs == 1 and done.removed_objects == 0
        rows = repo.catalog.object_rows()
        assert {r[5] for r in rows} == {GROUP} and len(rows) == len(items)
        assert [repo.objects.read(o) for o in oids] == items
        with repo.lock:  # grouped now: not rewritten again
            assert sweep(repo.objects, set(oids), regroup=True).repacked_packs == 0
            sweep(repo.objects, set(oids[1:]))  # one dead object: its pack is rewritten
        assert [repo.objects.read(o) for o in oids[1:]] == items[1:]
        assert len(repo.catalog.object_rows()) == len(items) - 1


def test_an_older_ctrlz_refuses_a_store_that_may_hold_groups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with new_store(tmp_path) as repo:
        put_all(repo, bodies(300))
    # the check an older ctrlz runs as it opens a store to write or read objects (its
    # read-only opens read snapshot rows and meta, never objects): it knows six migrations
    monkeypatch.setattr(catalog_module, "MIGRATIONS", catalog_module.MIGRATIONS[:6])
    with pytest.raises(StoreError, match=r"written by a newer ctrlz \(schema 7\); "
                                         "upgrade ctrlz") as info:
        Catalog(tmp_path / "store" / "catalog.db")
    assert "\n" not in str(info.value)
    with pytest.raises(StoreError, match="newer ctrlz"):  # this code's read-only opens too
        Catalog(tmp_path / "store" / "catalog.db", readonly=True)


def test_a_damaged_group_is_reported_not_misread(tmp_path: Path) -> None:
    items = bodies(400, seed=11)
    with new_store(tmp_path) as repo:
        oids = put_all(repo, items)
        (name,) = [n for n, _ in repo.catalog.packs().values()]
        pack = repo.path / "packs" / name
        data = bytearray(pack.read_bytes())
        data[len(data) - 40] ^= 0xFF  # a flipped bit in the last group's frame
        pack.write_bytes(bytes(data))
    with Repository.open(tmp_path / "store") as repo, pytest.raises(CorruptObject):
        repo.objects.read(oids[-1])


def test_a_kill_while_a_group_is_appended_leaves_a_sound_store(
        ws_dir: Path, tmp_path: Path) -> None:
    """The crash harness of tests/engine/test_crash.py: killed at the first group's append
    (its bytes on their way to the pack, nothing indexed), the store stays sound, the last
    snapshot restores, and the next writer sweeps the torn pack."""
    home = tmp_path / "home"
    make_tree(ws_dir, {"README": "first\n"})
    ws = Workspace.init(ws_dir, home=home)
    ws.snapshot(label="base")
    base_state = tree_state(ws_dir)
    ws.close()
    spec = {f"d{i % 9}": {} for i in range(9)}
    for i, body in enumerate(bodies(1500, seed=2)):
        spec[f"d{i % 9}"][f"f{i}.txt"] = body  # type: ignore[index]
    make_tree(ws_dir / "new", spec)
    proc = run_worker(home, ws_dir, "pack-append", "snapshot")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ws = assert_store_sound(home, ws_dir, base_state, tmp_path)
    assert [s.label for s in ws.snapshots()] == ["base"]
    snap = ws.snapshot(label="after")
    report = ws.verify()
    assert report.ok and report.orphans == 0, report.errors
    out = tmp_path / "out"
    ws.restore_to(snap.id, out)
    assert tree_state(out) == tree_state(ws_dir)
    ws.close()


@pytest.mark.parametrize("sizes", [[1_000_000, 1, 1, 1], [0, 0, 0], [5], [0, 7, 0, 3000],
                                   [1] * 500])
def test_shares_add_up_to_the_record_and_are_never_zero(sizes: list[int]) -> None:
    length = GROUP_HEAD.size + len(sizes) * GROUP_ENTRY.size + 3
    got = shares(length, sizes)
    assert sum(got) == length and min(got) >= 1


def test_reading_many_members_reads_and_checks_each_group_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A push reads every member of a snapshot, in the order of its trees: read_members takes
    them a group at a time, so each group's bytes are read once however they are asked for,
    and a member its group does not give (damaged) comes back as None, for a single read to
    report."""
    items = bodies(3000, seed=13)
    with new_store(tmp_path) as repo:
        oids = put_all(repo, items)
    with Repository.open(tmp_path / "store") as repo:
        size = len(pack_bytes(repo))
        rows = [repo.catalog.lookup(o) for o in oids]
        random.Random(3).shuffle(rows)
        groups = {r[2] for r in rows}  # type: ignore[index]
        assert len(groups) >= 3
        reads = recorded_preads(monkeypatch)
        got = dict(repo.objects.read_members(rows))  # type: ignore[arg-type]
        assert got == dict(zip(oids, items, strict=True))
        assert len(reads) == 2 * len(groups)  # a head and a record each
        assert sum(ln for _, ln in reads) <= size + len(groups) * GROUP_HEAD.size
        monkeypatch.undo()
        name = next(n for n, _ in repo.catalog.packs().values())
        pack = repo.path / "packs" / name
        data = bytearray(pack.read_bytes())
        data[len(data) - 40] ^= 0xFF  # a flipped bit in the last group's frame
        pack.write_bytes(bytes(data))
        repo.objects.close()
        last = max(groups)
        got = dict(repo.objects.read_members(rows))  # type: ignore[arg-type]
        assert {o for o, d in got.items() if d is None} == {
            r[0] for r in rows if r[2] == last}  # type: ignore[index]
        from ctrlz.state.interchange.transfer import members_checked

        with pytest.raises(CorruptObject, match="so it was not sent"):
            dict(members_checked(repo.objects, rows))  # type: ignore[arg-type]
