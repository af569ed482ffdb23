"""Large files as copy-on-write clones, on real XFS and btrfs: stored without being read,
immune to later edits of the workspace, restored by cloning, verified, collected."""

from __future__ import annotations

import os
from pathlib import Path

import blake3
import pytest

from ctrlz import Workspace
from ctrlz.errors import CorruptObject
from ctrlz.state.fsio import cow as cowlib
from ctrlz.state.store import clones
from ctrlz.state.store.packs import CLONE
from tests.conftest import make_tree, tree_state

BIG = 6 << 20


def setup(area: Path) -> tuple[Workspace, Path]:
    ws_dir = area / "ws"
    make_tree(ws_dir, {"src": {"a.py": "print(1)\n", "b.py": "print(2)\n"},
                       "big.bin": os.urandom(BIG),
                       "data": {"log.csv": "1700000000,GET,/api,200\n" * 300_000}})
    return Workspace.init(ws_dir, home=area / "home"), ws_dir


def clone_rows(ws: Workspace) -> dict[bytes, int]:
    return {r[0]: r[4] for r in ws.repo.catalog.object_rows() if r[5] == CLONE}


def entry_oid(ws: Workspace, snap_id: str, rel: str) -> bytes:
    root = ws.repo.tree(ws.resolve(snap_id).root)
    oid = next(e.oid for e in root if e.name == b"0")
    parts = rel.encode().split(b"/")
    for i, name in enumerate(parts):
        e = next(e for e in ws.repo.tree(oid) if e.name == name)
        oid = e.oid
        if i == len(parts) - 1:
            return oid
    raise AssertionError(rel)


def file_map(path: Path) -> cowlib.BlockMap | None:
    fd = os.open(path, os.O_RDONLY)
    try:
        return cowlib.extent_map(fd, sync=True)
    finally:
        os.close(fd)


def test_a_snapshot_stores_large_files_as_clones(cow: Path, tmp_path: Path) -> None:
    ws, ws_dir = setup(cow)
    snap = ws.snapshot(label="one")
    stored = clone_rows(ws)
    big, log = entry_oid(ws, snap.id, "big.bin"), entry_oid(ws, snap.id, "data/log.csv")
    assert set(stored) == {big, log}  # small files went to packs, as before
    assert cowlib.is_clone_id(big) and ws.repo.objects.is_clone(big)
    objects = ws.repo.objects
    # the clone is the workspace file's own blocks: nothing was copied
    assert file_map(ws_dir / "big.bin") == cowlib.path_map(objects.loose_name(big))
    data = (ws_dir / "big.bin").read_bytes()
    # the whole read API works on a clone object
    assert objects.has(big)
    assert objects.read(big) == data
    assert b"".join(objects.iter_chunks(big)) == data
    out = tmp_path / "copy"
    with open(out, "wb") as f:
        assert objects.write_to(big, f.fileno()) == len(data)
    assert out.read_bytes() == data
    assert objects.content_id(big) == blake3.blake3(data).digest()
    assert cowlib.read_seal(objects.loose_name(big), "blake3") == blake3.blake3(data).digest()
    ws.close()


def test_edits_after_the_snapshot_never_reach_the_store(cow: Path) -> None:
    ws, ws_dir = setup(cow)
    before = tree_state(ws_dir)
    snap = ws.snapshot(label="one")
    original = (ws_dir / "big.bin").read_bytes()
    with open(ws_dir / "big.bin", "r+b") as f:  # in place: the blocks the clone shares
        f.seek(BIG // 2)
        f.write(b"\xff" * 8192)
        f.seek(0, os.SEEK_END)
        f.write(b"appended")
    with open(ws_dir / "data" / "log.csv", "r+b") as f:
        f.truncate(100)
    assert ws.repo.objects.read(entry_oid(ws, snap.id, "big.bin")) == original
    ws.restore(snap.id)
    assert tree_state(ws_dir) == before
    assert ws.verify().ok
    ws.close()


def test_a_touched_file_keeps_its_id_and_an_edit_is_seen(cow: Path) -> None:
    ws, ws_dir = setup(cow)
    one = ws.snapshot(label="one")
    os.utime(ws_dir / "big.bin", ns=(1, 1_600_000_000_000_000_000))
    assert [(c.path, c.change_type) for c in ws.diff(one.id).changes] == []
    two = ws.snapshot(label="touched")
    assert two.modified == 0 and clone_rows(ws).keys() == {
        entry_oid(ws, one.id, "big.bin"), entry_oid(ws, one.id, "data/log.csv")}
    assert entry_oid(ws, two.id, "big.bin") == entry_oid(ws, one.id, "big.bin")
    with open(ws_dir / "big.bin", "r+b") as f:  # same size, new bytes
        f.write(b"edited")
    assert [(c.path, c.change_type) for c in ws.diff(one.id).changes] == [
        (b"big.bin", "modified")]
    three = ws.snapshot(label="edited")
    assert three.modified == 1
    assert [c.path for c in ws.diff(two.id, three.id).changes] == [b"big.bin"]
    ws.close()


def test_restore_clones_back_and_verify_reads_nothing(cow: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ws, ws_dir = setup(cow)
    snap = ws.snapshot(label="one")
    original = (ws_dir / "big.bin").read_bytes()
    with open(ws_dir / "big.bin", "r+b") as f:
        f.seek(BIG // 3)
        f.write(b"changed" * 100)
    hashed: list[int] = []
    real_hash = clones._hash_fd

    def counting(hasher, fd):  # type: ignore[no-untyped-def]
        hashed.append(os.fstat(fd).st_size)
        return real_hash(hasher, fd)

    def no_copy(self, oid, fd):  # type: ignore[no-untyped-def]
        raise AssertionError("a clone object was copied, not cloned")

    monkeypatch.setattr(clones, "_hash_fd", counting)
    monkeypatch.setattr(type(ws.repo.objects), "write_to", no_copy)
    ws.restore(snap.id)  # capture (a clone), plan, apply (a clone), verify (block maps)
    assert hashed == []
    monkeypatch.undo()
    assert (ws_dir / "big.bin").read_bytes() == original
    oid = entry_oid(ws, snap.id, "big.bin")
    assert file_map(ws_dir / "big.bin") == cowlib.path_map(ws.repo.objects.loose_name(oid))
    # the edited version went into the safety snapshot as a clone of its own: undo brings it
    ws.undo()
    assert (ws_dir / "big.bin").read_bytes()[BIG // 3:BIG // 3 + 7] == b"changed"
    ws.close()


def test_gc_drops_dead_clones_and_verify_checks_seals(cow: Path) -> None:
    ws, ws_dir = setup(cow)
    one = ws.snapshot(label="one")
    (ws_dir / "big.bin").write_bytes(os.urandom(BIG))  # new blocks: a new clone
    two = ws.snapshot(label="two")
    old, new = entry_oid(ws, one.id, "big.bin"), entry_oid(ws, two.id, "big.bin")
    assert old != new and {old, new} <= clone_rows(ws).keys()
    ws.remove([one.id])
    ws.gc()
    assert old not in clone_rows(ws) and not os.path.exists(ws.repo.objects.loose_name(old))
    report = ws.verify()
    assert report.ok, report.errors
    path = ws.repo.objects.loose_name(new)
    assert cowlib.read_seal(path, "blake3") == blake3.blake3(
        (ws_dir / "big.bin").read_bytes()).digest()
    with open(path, "r+b") as f:  # a flipped byte in the store, after the seal
        f.seek(1000)
        f.write(b"\x00\x01")
    assert not ws.verify().ok
    with pytest.raises(CorruptObject):
        ws.repo.objects.read(new)
    ws.close()


def test_a_deleted_clones_name_is_never_given_out_again(cow: Path) -> None:
    """gc frees a clone's blocks, and a new file of the same size may get them: it used to
    get the deleted clone's name too, so importing an archive that holds the old bytes under
    that name kept the new ones ("already there"), and the old snapshot restored them."""
    ws, ws_dir = setup(cow)
    one = ws.snapshot(label="one")
    old = entry_oid(ws, one.id, "big.bin")
    blocks = file_map(ws.repo.objects.loose_name(old))
    assert blocks is not None and ws.repo.objects.clone_name(BIG, blocks) == old
    (ws_dir / "big.bin").unlink()
    ws.snapshot(label="two")
    ws.remove([one.id])
    ws.gc()
    assert old not in clone_rows(ws)
    # a new file on exactly those blocks
    assert ws.repo.objects.clone_name(BIG, blocks) not in (old, None)
    assert ws.repo.catalog.is_retired(old)
    ws.close()


def test_two_stores_never_name_a_clone_alike(cow: Path) -> None:
    """Two machines made from one image put a new file of the same size on the same blocks;
    unsalted, both stores named their different bytes alike, and a remote they share kept the
    first machine's bytes for the second's snapshot."""
    names = set()
    for i in (1, 2):
        make_tree(cow / f"ws{i}", {"a": "a"})
        ws = Workspace.init(cow / f"ws{i}", home=cow / f"home{i}")
        names.add(ws.repo.objects.clone_name(BIG, ((0, 4096, BIG),)))
        ws.close()
    assert len(names) == 2


def test_restore_to_another_filesystem_copies_and_seals(xfs: Path, tmp_path: Path) -> None:
    ws, ws_dir = setup(xfs)
    snap = ws.snapshot(label="one")
    before = tree_state(ws_dir)
    out = tmp_path / "out"  # not the store's filesystem: FICLONE says EXDEV
    ws.restore_to(snap.id, out)
    assert tree_state(out) == before
    oid = entry_oid(ws, snap.id, "big.bin")
    assert cowlib.read_seal(ws.repo.objects.loose_name(oid), "blake3") is not None
    ws.close()


def test_a_snapshot_manager_session_never_clones(xfs: Path) -> None:
    """Its API promises FileState.hash = SHA-256 of the bytes, and a Merkle root of them."""
    import hashlib

    from ctrlz import SnapshotManager

    make_tree(xfs / "ws", {"big.bin": os.urandom(BIG), "a.txt": "a\n"})
    mgr = SnapshotManager(str(xfs / "session"), [str(xfs / "ws")])
    manifest = mgr.create_baseline()
    state = manifest.files[str(xfs / "ws" / "big.bin")]
    assert state.hash.digest == hashlib.sha256((xfs / "ws" / "big.bin").read_bytes()).digest()
    assert not any(r[5] == CLONE for r in mgr.repo.catalog.object_rows())


def test_block_maps_of_a_fragmented_file(cow: Path) -> None:
    """More extents than one FIEMAP call returns; a clone maps alike until one side writes."""
    path = cow / "sparse.bin"
    with open(path, "wb") as f:
        for i in range(300):  # 300 written blocks with holes between them
            f.seek(i * 8192)
            f.write(b"x" * 4096)
    mine = file_map(path)
    assert mine is not None and len(mine) == 300  # more than one FIEMAP call returns
    copy = cow / "copy.bin"
    src, dst = os.open(path, os.O_RDONLY), os.open(copy, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        assert cowlib.clone(dst, src)
        assert cowlib.same_blocks(mine, cowlib.extent_map(dst, sync=True))
        os.pwrite(dst, b"y", 8192 * 150)
        assert not cowlib.same_blocks(mine, cowlib.extent_map(dst, sync=True))
    finally:
        os.close(src)
        os.close(dst)


def test_the_clone_probe_never_makes_the_objects_directory(cow: Path) -> None:
    """The probe clones two temp files in ``objects/``; it used to make the directory when
    it was missing. A directory made there is one no writer knows is new, so none fsyncs its
    parent, and a power cut could drop the entry of a directory whose objects a commit
    names. Asked before any large file was stored (by a diff, or by the scan deciding where
    to clone), the answer is "not yet"; the writer makes ``objects/`` itself, and clones."""
    ws_dir = cow / "ws"
    make_tree(ws_dir, {"a.txt": "a\n"})
    ws = Workspace.init(ws_dir, home=cow / "home")
    ws.snapshot(label="small files only")
    objects_dir = Path(ws.repo.objects.loose_dir)
    assert not objects_dir.exists()
    (ws_dir / "big.bin").write_bytes(os.urandom(BIG))
    assert [c.path for c in ws.diff().changes] == [b"big.bin"]  # known_clone asks the probe
    assert not objects_dir.exists()
    assert not (Path(ws.repo.path) / cowlib.PROBE).exists()  # "not yet" is not remembered
    snap = ws.snapshot(label="a large file")
    assert objects_dir.is_dir()
    assert entry_oid(ws, snap.id, "big.bin") in clone_rows(ws)
    assert (Path(ws.repo.path) / cowlib.PROBE).read_text().split()[0] == "1"
    assert ws.verify().ok
    ws.close()


def test_the_catalog_knows_the_clone_codec() -> None:
    """It remembers deleted clones' names by codec, and cannot import packs (which imports
    it) to learn the number."""
    from ctrlz.state.db import catalog

    assert catalog._CLONE == CLONE
