"""Hardening of the object store: bounded pack descriptors, durable new directories.

Every check runs ctrlz for real: hundreds of real packs read by a child process whose file
descriptor limit is 64, and the system calls of a real snapshot recorded by ``strace``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz.session.config import Config
from ctrlz.state.store.objects import LOOSE_MIN, MAX_PACK_FDS
from tests.conftest import tree_state

REPO = Path(__file__).resolve().parents[2]
PACKS = 300


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _roomy_config() -> Config:
    """Pools big enough that none of the test's snapshots is dropped."""
    config = Config()
    config.set("manual_max", 10_000, "test")
    config.set("max_count", 10_000, "test")
    return config


READ_UNDER_LIMIT = """
import json, os, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
from ctrlz import Workspace
root, home, dest = sys.argv[1:4]
ws = Workspace.open(root, home=Path(home))
objects = ws.repo.objects
count = 0
for oid, *_ in ws.repo.catalog.object_rows():
    objects.read(oid)  # verified against its id
    count += 1
newest = ws.snapshots()[-1]
ws.restore_to(newest.id, dest)
print(json.dumps({"objects": count, "cached_fds": len(objects._pack_fds),
                  "packs": len(ws.repo.catalog.packs())}))
"""


def test_hundreds_of_packs_read_under_ulimit_64(tmp_path: Path, ctrlz_home: Path) -> None:
    """One pack per snapshot, 300 of them: a reader with 64 descriptors reads every object and
    restores the newest snapshot, because it keeps at most MAX_PACK_FDS packs open."""
    root = tmp_path / "ws"
    root.mkdir()
    with Workspace.init(root, home=ctrlz_home, config=_roomy_config()) as ws:
        for i in range(PACKS):
            (root / f"f{i:03d}.txt").write_text(f"file number {i}\n" * (i % 7 + 1))
            ws.snapshot(label=f"s{i}")
        assert len(list((ws.store_path / "packs").iterdir())) >= PACKS
    dest = tmp_path / "restored"
    out = subprocess.run([sys.executable, "-c", READ_UNDER_LIMIT, str(root), str(ctrlz_home),
                          str(dest)], env=_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["packs"] >= PACKS
    assert result["objects"] >= 3 * PACKS  # a blob and two trees per snapshot
    assert result["cached_fds"] <= MAX_PACK_FDS
    assert tree_state(dest) == tree_state(root)


def test_fd_cache_is_least_recently_used(tmp_path: Path, ctrlz_home: Path) -> None:
    """A pack read again stays open while older ones are closed, and close() closes all."""
    root = tmp_path / "ws"
    root.mkdir()
    with Workspace.init(root, home=ctrlz_home, config=_roomy_config()) as ws:
        blobs = []
        for i in range(MAX_PACK_FDS + 4):
            (root / f"f{i}.txt").write_text(f"content {i}\n")
            ws.snapshot()
            entry = ws.entry_at(ws.snapshots()[-1].id, f"f{i}.txt")
            assert entry is not None
            blobs.append(entry.oid)
        objects = ws.repo.objects
        objects.close()
        first = blobs[0]
        for oid in blobs:
            objects.read(oid)
            objects._groups.clear()  # past the groups a reader keeps decoded: a real read
            objects.read(first)  # keep the first pack the most recently used
        cached = objects._pack_fds
        assert len(cached) == MAX_PACK_FDS
        assert ws.repo.catalog.lookup(first)[1] in cached._slots
        fds = [slot[0] for slot in cached._slots.values()]
        objects.close()
        assert len(cached) == 0
        for fd in fds:
            with pytest.raises(OSError):
                os.fstat(fd)


# -- durability of new directories ------------------------------------------------------------

BIG_SNAPSHOT = """
import os, sys
from pathlib import Path
from ctrlz import Workspace
root, home, name = sys.argv[1:4]
Path(root, name).write_bytes(os.urandom(int(sys.argv[4])))
ws = Workspace.open(root, home=Path(home))
ws.snapshot()
"""

_OPEN = re.compile(r'^(\d+)\s+openat\(AT_FDCWD, "([^"]+)", [^)]*O_DIRECTORY[^)]*\) = (\d+)')
_FSYNC = re.compile(r"^(\d+)\s+fsync\((\d+)\)\s+= 0")


def _fsynced_dirs(trace: str) -> set[str]:
    """Directories fsynced in an ``strace -f -e openat,fsync`` log (threads share fds)."""
    names: dict[int, str] = {}
    synced: set[str] = set()
    for line in trace.splitlines():
        if m := _OPEN.match(line):
            names[int(m.group(3))] = os.path.normpath(m.group(2))
        elif (m := _FSYNC.match(line)) and int(m.group(2)) in names:
            synced.add(names[int(m.group(2))])
    return synced


def _traced_snapshot(tmp_path: Path, root: Path, home: Path, name: str, size: int) -> set[str]:
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    log = tmp_path / f"trace-{name}.txt"
    out = subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,fsync", "-o", str(log),
                          sys.executable, "-c", BIG_SNAPSHOT, str(root), str(home), name,
                          str(size)], env=_env(), capture_output=True, text=True, timeout=300)
    if out.returncode != 0 and "ptrace" in out.stderr:
        pytest.skip(f"strace cannot trace here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    return _fsynced_dirs(log.read_text())


def test_new_store_directories_have_their_parents_fsynced(tmp_path: Path,
                                                          ctrlz_home: Path) -> None:
    """The first large object creates objects/ and objects/xx/, the first pack packs/: their
    parents' entries are fsynced at commit. A later snapshot that creates neither does not
    fsync the store directory again (only new directories cost an fsync)."""
    root = tmp_path / "ws"
    root.mkdir()
    with Workspace.init(root, home=ctrlz_home) as ws:
        store = os.path.normpath(ws.store_path)
    first = _traced_snapshot(tmp_path, root, ctrlz_home, "big1.bin", LOOSE_MIN + 1)
    fanout = [d for d in os.listdir(os.path.join(store, "objects")) if len(d) == 2]
    assert len(fanout) == 1
    assert os.path.join(store, "objects", fanout[0]) in first  # the renamed object's entry
    assert os.path.join(store, "objects") in first  # the new objects/xx/ entry
    assert os.path.join(store, "packs") in first  # the new pack's entry
    assert store in first  # the new packs/ and objects/ entries

    second = _traced_snapshot(tmp_path, root, ctrlz_home, "small.txt", 10)
    assert os.path.join(store, "packs") in second
    assert store not in second
    assert os.path.join(store, "objects") not in second


def test_a_new_store_fsyncs_the_directories_it_made(tmp_path: Path) -> None:
    """``Workspace.init`` makes the home, ``workspaces/`` and the store directory; each new
    entry, and the catalog's inside the store, is fsynced."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    root = tmp_path / "ws"
    root.mkdir()
    home = tmp_path / "fresh-home"
    log = tmp_path / "trace.txt"
    code = ("import sys; from pathlib import Path; from ctrlz import Workspace; "
            "Workspace.init(sys.argv[1], home=Path(sys.argv[2])).close()")
    out = subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,fsync", "-o", str(log),
                          sys.executable, "-c", code, str(root), str(home)], env=_env(),
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0 and "ptrace" in out.stderr:
        pytest.skip(f"strace cannot trace here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    synced = _fsynced_dirs(log.read_text())
    store = next((home / "workspaces").iterdir())
    assert {str(tmp_path), str(home), str(home / "workspaces"), str(store)} <= synced
