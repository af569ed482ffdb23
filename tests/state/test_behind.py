"""Small objects compressed behind the walk (ctrlz.state.store.behind): a snapshot that stores many
small files hands their compression to a helper thread. What it stores is what it would have
stored inline, appended in the order given; a batch that fails fails the snapshot; a kill
while batches are in flight leaves a store the next writer cleans up."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.state import failpoints
from ctrlz.state.fsio import pools
from ctrlz.state.store import behind
from ctrlz.state.store.groups import GROUP, pack_records
from ctrlz.state.store.packs import PACK_MAGIC, RECORD, RECORD_MAGIC
from ctrlz.state.store.repository import Repository
from tests.conftest import make_tree, tree_state
from tests.engine.test_crash import assert_store_sound, run_worker

MANY = 3 * behind.START_AFTER  # past the point where a writer starts handing over


def many_files(root: Path, n: int = MANY, seed: int = 7) -> None:
    """Text that compresses, random bytes that do not, tiny files stored raw, and twins."""
    rng = random.Random(seed)
    spec: dict[str, object] = {}
    for i in range(n):
        kind = i % 4
        if kind == 0:
            body: str | bytes = f"line {i} of a module\n" * rng.randint(5, 400)
        elif kind == 1:
            body = rng.randbytes(rng.randint(200, 70_000))
        elif kind == 2:
            body = f"tiny {i}\n"
        else:
            body = "the same twin in many places\n" * 50
        spec.setdefault(f"d{i % 17}", {})[f"f{i}.txt"] = body  # type: ignore[index]
    make_tree(root, spec)


def assert_sound_and_restorable(ws: Workspace, snapshot_id: str, expected: Path,
                                out: Path) -> None:
    """verify finds nothing wrong, no orphan either, and the snapshot restores to ``expected``."""
    report = ws.verify()
    assert report.ok and report.orphans == 0, report.errors
    ws.restore_to(snapshot_id, out)
    assert tree_state(out) == tree_state(expected)


def no_helpers_yet() -> None:
    """Forget the process's helper pool, so a test sees whether its own snapshot made one."""
    pools.forget("compress")


def test_a_snapshot_of_many_small_files_compresses_behind_and_restores_exactly(
        ws_dir: Path, tmp_path: Path) -> None:
    many_files(ws_dir)
    ws = Workspace.init(ws_dir, home=tmp_path / "home")
    no_helpers_yet()
    snap = ws.snapshot(label="many")
    assert "compress" in pools._pools  # the mechanism under test ran
    assert snap.files == MANY
    assert_sound_and_restorable(ws, snap.id, ws_dir, tmp_path / "out")
    ws.close()


def test_objects_are_stored_once_grouped_and_in_the_order_given(
        ws_dir: Path, tmp_path: Path) -> None:
    ws = Workspace.init(ws_dir, home=tmp_path / "home")
    store_path = ws.store_path
    ws.close()
    rng = random.Random(3)
    bodies = [(b"x%d " % i) * rng.randint(1, 3000) if i % 3 else rng.randbytes(900)
              for i in range(MANY)]
    with Repository.open(store_path) as repo, repo.lock:
        store = repo.objects
        writer = store.writer()
        for data in bodies + bodies[:40]:  # the first 40 given twice: stored once
            oid = store.digest(data)
            if not writer.contains(oid):
                writer.put_small(oid, data)
        with repo.catalog.transaction():
            writer.commit(repo.catalog)
        assert writer.added_objects == MANY
        rows = [repo.catalog.lookup(store.digest(d)) for d in bodies]
        assert all(r is not None and r[5] == GROUP for r in rows)
        (name,) = [n for n, _ in repo.catalog.packs().values()]
        data = (store_path / "packs" / name).read_bytes()
        found = list(pack_records(data, RECORD, RECORD_MAGIC, len(PACK_MAGIC)))
        assert [f[0] for f in found] == [store.digest(d) for d in bodies]  # in order, once
        assert [f[1:] for f in found] == [r[2:] for r in rows]  # the index, from the pack
        for body, row in zip(bodies, rows, strict=True):
            assert store.read(row[0]) == body  # type: ignore[index]


def test_a_batch_that_fails_to_compress_fails_the_snapshot_and_loses_nothing(
        ws_dir: Path, tmp_path: Path) -> None:
    make_tree(ws_dir, {"README": "first\n"})
    ws = Workspace.init(ws_dir, home=tmp_path / "home")
    ws.snapshot(label="base")
    base_state = tree_state(ws_dir)
    many_files(ws_dir / "new")
    failpoints.arm_error("compress-behind", errno.ENOMEM, after=1)
    try:
        with pytest.raises(OSError):
            ws.snapshot(label="fails")
    finally:
        failpoints.disarm_all()
    assert [s.label for s in ws.snapshots()] == ["base"]
    assert ws.verify().ok
    out = tmp_path / "base"
    ws.restore_to("base", out)
    assert tree_state(out) == base_state
    snap = ws.snapshot(label="again")  # the next writer sweeps what the failed one left
    assert_sound_and_restorable(ws, snap.id, ws_dir, tmp_path / "again")
    ws.close()


def test_after_a_failed_batch_the_writer_never_commits(ws_dir: Path, tmp_path: Path) -> None:
    """The failed batch's objects were promised (``contains`` said yes) and never appended:
    a caller that went on regardless must not get a commit that indexes a tree without them."""
    ws = Workspace.init(ws_dir, home=tmp_path / "home")
    store_path = ws.store_path
    ws.close()
    bodies = [(b"body %d " % i) * 400 for i in range(MANY)]  # several groups
    with Repository.open(store_path) as repo, repo.lock:
        writer = repo.objects.writer()
        failpoints.arm_error("compress-behind", errno.ENOMEM)
        try:
            try:
                for data in bodies:
                    writer.put_small(repo.objects.digest(data), data)
            except OSError:
                pass  # raised here, or else at the commit below
            with pytest.raises(OSError), repo.catalog.transaction():
                writer.commit(repo.catalog)
        finally:
            failpoints.disarm_all()
            writer.abort()
        assert all(repo.catalog.lookup(repo.objects.digest(d)) is None for d in bodies)


def test_an_append_that_fails_midway_poisons_the_queue() -> None:
    """A group whose append fails (a full disk) after others went in: its objects were
    promised and are not in the pack, so every later call raises too, as after a group that
    failed to compress."""
    appended: list[bytes] = []

    def append(oid: bytes, size: int, codec: int, stored: bytes) -> None:
        raise AssertionError("a group of one is not expected here")

    def append_group(oids: list[bytes], sizes: list[int], record: bytes) -> None:
        if len(appended) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        appended.append(oids[0])

    queue = behind.CompressBehind(append, append_group)
    with pytest.raises(OSError):  # at an add that collects, or else at the finish
        for i in range(5 * behind.BATCH_OBJECTS):  # five full groups
            queue.add(b"%032d" % i, b"object %d " % i * 2)
        queue.finish()
    assert len(appended) == 3
    with pytest.raises(OSError):
        queue.add(b"%032d" % 99999, b"one more")
    with pytest.raises(OSError):
        queue.finish()


def test_a_kill_while_batches_are_in_flight_leaves_a_sound_store(
        ws_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_tree(ws_dir, {"README": "first\n", "src": {"a.py": "print(1)\n"}})
    ws = Workspace.init(ws_dir, home=home)
    ws.snapshot(label="base")
    base_state = tree_state(ws_dir)
    ws.close()
    many_files(ws_dir / "new")
    proc = run_worker(home, ws_dir, "compress-behind", "snapshot")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ws = assert_store_sound(home, ws_dir, base_state, tmp_path)
    assert [s.label for s in ws.snapshots()] == ["base"]
    ws.snapshot(label="after")
    report = ws.verify()
    assert report.ok and report.orphans == 0, report.errors
    ws.close()


def test_a_few_new_files_never_wake_a_helper(tmp_path: Path) -> None:
    """The usual snapshot stores a handful of files: they are compressed inline."""
    script = (
        "import sys, threading\n"
        "from ctrlz import Workspace\n"
        "ws = Workspace.init(sys.argv[1], home=sys.argv[2])\n"
        "ws.snapshot(label='few')\n"
        "print(any(t.name.startswith('ctrlz-compress') for t in threading.enumerate()))\n")
    ws_dir = tmp_path / "ws"
    make_tree(ws_dir, {f"f{i}.txt": f"file {i}\n" * 100 for i in range(behind.START_AFTER - 10)})
    out = subprocess.run([sys.executable, "-c", script, str(ws_dir), str(tmp_path / "home")],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "CTRLZ_DAEMON": "0"}).stdout
    assert out.strip() == "False"


ENCODE_EACH = """
import random
from ctrlz.state.store.packs import encode_many, encode_small, zstd
rng = random.Random(11)
items = [b"", b"short", rng.randbytes(5000), b"text " * 2000, bytes(127), bytes(128)]
items += [(b"%d " % i) * rng.randint(1, 900) for i in range(200)]
assert encode_many(items) == [encode_small(d) for d in items]
assert encode_many([]) == [] and encode_many([b"x"]) == [(0, b"x")]
print(zstd().backend)
"""


@pytest.mark.parametrize("backend", ["cext", "cffi"])
def test_a_batch_is_encoded_exactly_as_one_object_at_a_time(backend: str) -> None:
    """With zstandard's C backend (one call for the batch) and its cffi backend (which has no
    batch call: one call each)."""
    proc = subprocess.run([sys.executable, "-c", ENCODE_EACH], capture_output=True, text=True,
                          env={**os.environ, "PYTHON_ZSTANDARD_IMPORT_POLICY": backend})
    if backend == "cffi" and "ImportError" in proc.stderr:
        pytest.skip(f"zstandard's cffi backend is not installed here: {proc.stderr[-200:]}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == backend
