"""Clones leave the machine: an archive, or a push to a remote, carries a clone as its seal and
its bytes; the receiving store (here on ext4, where nothing can be cloned) keeps it under the
same id, checks every read against the seal, and refuses bytes that do not match it."""

from __future__ import annotations

import os
from pathlib import Path

from ctrlz.state.fsio import cow as cowlib
from tests.remote.conftest import ctrlz

from .test_clones import BIG, clone_rows, setup


def test_an_archive_carries_clones_to_a_store_that_cannot_clone(cow: Path,
                                                                tmp_path: Path) -> None:
    ws, ws_dir = setup(cow)
    snap = ws.snapshot(label="one")
    assert clone_rows(ws)
    ws.close()
    home = cow / "home"
    arc = tmp_path / "app.ctrlz"
    ctrlz("export", snap.id, "-o", str(arc), cwd=ws_dir, home=home)
    dest = tmp_path / "copy"
    ctrlz("import", str(arc), "--to", str(dest), cwd=tmp_path, home=tmp_path / "home-b")
    assert (dest / "big.bin").read_bytes() == (ws_dir / "big.bin").read_bytes()
    ctrlz("verify", cwd=dest, home=tmp_path / "home-b")

    # the clone's bytes altered in the archive: refused, nothing imported
    data = bytearray(arc.read_bytes())
    big = (ws_dir / "big.bin").read_bytes()
    at = bytes(data).find(big[:64])
    assert at > 0
    data[at + BIG // 2] ^= 0xFF
    bad = tmp_path / "bad.ctrlz"
    bad.write_bytes(bytes(data))
    r = ctrlz("import", str(bad), "--to", str(tmp_path / "never"), cwd=tmp_path,
              home=tmp_path / "home-c", ok=False)
    assert "does not match" in r.err or "checksum" in r.err
    assert not (tmp_path / "never" / "big.bin").exists()


def test_push_and_clone_of_a_store_with_clones(cow: Path, tmp_path: Path) -> None:
    ws, ws_dir = setup(cow)
    ws.snapshot(label="one")
    big = next(iter(clone_rows(ws)))
    assert cowlib.is_clone_id(big)
    ws.close()
    home = cow / "home"
    remote = tmp_path / "remote"
    remote.mkdir()
    ctrlz("remote", "add", "origin", f"file://{remote}", cwd=ws_dir, home=home)
    ctrlz("push", cwd=ws_dir, home=home)
    dest = tmp_path / "clone"
    ctrlz("clone", f"file://{remote}", str(dest), cwd=tmp_path, home=tmp_path / "home-b")
    assert (dest / "big.bin").read_bytes() == (ws_dir / "big.bin").read_bytes()
    ctrlz("verify", cwd=dest, home=tmp_path / "home-b")
    assert os.path.getsize(dest / "data" / "log.csv") > 0
