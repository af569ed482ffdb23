"""Large objects on the way in: a pull writes each loose object (4 MiB and up) to its temp
file on the download thread that checked it (``ObjectSink.write_loose``), and the main thread
only adopts it. What must hold as before: every object is checked against its id before it
is written, a damaged one stops the pull with nothing added and no file left in the store,
and the S3 client's cached botocore models give the same client as parsing them.
"""

from __future__ import annotations

import os
from pathlib import Path

from ctrlz import Workspace
from ctrlz.state.store.packs import RAW

from ..conftest import tree_state
from .conftest import S3, ctrlz, make_ws

MIB = 1 << 20


def _large(root: Path, home: Path) -> Path:
    files: dict[str, str | bytes] = {"small.txt": "small\n"}
    for i in range(5):
        size = 4 * MIB + i * 100_000
        files[f"big/{i}.bin"] = os.urandom(size) if i % 2 == 0 else \
            (b"%d,GET,/api,200\n" % i) * (size // 16)
    return make_ws(root, files, home)


def _store_files(home: Path) -> list[Path]:
    return [p for p in (home / "workspaces").rglob("objects/**/*") if p.is_file()]


def _pushed(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace of large files, snapshotted and pushed to the ``file://`` remote ``nas``."""
    home = tmp_path / "home"
    ws = _large(tmp_path / "ws", home)
    ctrlz("snapshot", cwd=ws, home=home)
    ctrlz("remote", "add", "nas", f"file://{tmp_path}/nas", cwd=ws, home=home)
    ctrlz("push", "nas", cwd=ws, home=home)
    return ws, home


def test_clone_of_large_files_round_trips(tmp_path: Path) -> None:
    ws, home = _pushed(tmp_path)
    other = tmp_path / "h2"
    ctrlz("clone", f"file://{tmp_path}/nas", str(tmp_path / "c"), cwd=tmp_path, home=other)
    assert tree_state(tmp_path / "c") == tree_state(ws)
    stored = _store_files(other)
    assert not [p for p in stored if p.name.startswith(".ctrlz-tmp")]
    clone = Workspace.open(tmp_path / "c", home=other)
    loose = [row for row in clone.repo.catalog.object_rows() if row[1] is None]
    clone.close()
    assert sum(1 for row in loose if row[5] == RAW) == 3  # the random ones, stored raw
    assert ctrlz("verify", "--json", cwd=tmp_path / "c", home=other).json()["ok"]


def test_a_damaged_large_object_adds_nothing(tmp_path: Path) -> None:
    ws, home = _pushed(tmp_path)
    packs = [p for p in (tmp_path / "nas" / "data").rglob("*") if p.is_file()]
    biggest = max(packs, key=lambda p: p.stat().st_size)
    good = biggest.read_bytes()
    body = bytearray(good)
    body[len(body) // 2] ^= 0xFF  # inside one of the large objects
    os.chmod(biggest, 0o600)
    biggest.write_bytes(bytes(body))
    other = tmp_path / "h2"
    r = ctrlz("clone", f"file://{tmp_path}/nas", str(tmp_path / "c"), cwd=tmp_path,
              home=other, ok=False)
    assert r.code == 8 and "does not match" in r.err, r.err
    # the objects checked and written before the damaged one arrived are gone too, and so is
    # the store the clone made: the same clone, run again once the remote is whole, works
    # (it used to fail: "a remote named 'origin' exists already")
    assert [p for p in _store_files(other) if p.stat().st_size > 0] == []
    assert not (tmp_path / "c").exists() and list((other / "workspaces").iterdir()) == []
    biggest.write_bytes(good)
    ctrlz("clone", f"file://{tmp_path}/nas", str(tmp_path / "c"), cwd=tmp_path, home=other)
    assert tree_state(tmp_path / "c") == tree_state(ws)


def test_cached_botocore_models_make_the_same_client(s3: S3, tmp_path: Path) -> None:
    from ctrlz.state.remote.s3 import S3Backend

    bucket = s3.bucket()
    cache = tmp_path / "models"
    first = S3Backend(bucket, "p", model_cache=str(cache))
    copies = sorted(cache.iterdir())
    assert copies  # the S3 model, its endpoint rules, endpoints.json…
    second = S3Backend(bucket, "p", model_cache=str(cache))  # read from the copies
    assert first.client.meta.service_model.operation_names == \
        second.client.meta.service_model.operation_names
    assert second.put_new("k", b"v") and not second.put_new("k", b"v")
    assert first.get("k")[0] == b"v"
    for p in copies:  # a damaged copy is parsed from the source again
        p.write_bytes(b"N")  # marshal for None: no model
    third = S3Backend(bucket, "p", model_cache=str(cache))
    assert third.get("k")[0] == b"v"
