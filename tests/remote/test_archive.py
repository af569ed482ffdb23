"""Archives: round trips, pipes, incremental archives, and damage refused with nothing imported."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from ..conftest import tree_state
from .conftest import CTRLZ, ctrlz, make_ws

FILES = {"a.txt": "alpha\n", "src/app.py": "print('hi')\n" * 50, "big.bin": os.urandom(300_000),
         "huge.bin": b"z" * (5 << 20)}


def _two_snapshots(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home-a"
    ws = make_ws(tmp_path / "a", FILES, home)
    ctrlz("snapshot", "-m", "one", cwd=ws, home=home)
    (ws / "a.txt").write_text("alpha two\n")
    (ws / "new.txt").write_text("new\n")
    ctrlz("snapshot", "-m", "two", cwd=ws, home=home)
    return ws, home


def _ids(ws: Path, home: Path) -> list[str]:
    return [s["id"] for s in ctrlz("list", "--json", cwd=ws, home=home).json()]


def test_round_trip_through_a_file_and_import_to(tmp_path: Path) -> None:
    ws, home = _two_snapshots(tmp_path)
    arc = tmp_path / "app.ctrlz"
    out = ctrlz("export", "one", "two", "-o", str(arc), "--json", cwd=ws, home=home).json()
    assert out["objects"] > 0 and arc.stat().st_size == out["bytes"]
    dest = tmp_path / "restored"
    r = ctrlz("import", str(arc), "--to", str(dest), "--json", cwd=tmp_path,
              home=tmp_path / "home-b").json()
    assert len(r["imported"]) == 2
    assert tree_state(dest) == tree_state(ws)
    assert sorted(_ids(dest, tmp_path / "home-b")) == sorted(_ids(ws, home))
    ctrlz("verify", cwd=dest, home=tmp_path / "home-b")
    # importing again adds nothing
    again = ctrlz("import", str(arc), "--json", cwd=dest, home=tmp_path / "home-b").json()
    assert again["imported"] == [] and len(again["already_present"]) == 2


def test_pipe_and_incremental_archive(tmp_path: Path) -> None:
    ws, home = _two_snapshots(tmp_path)
    full = subprocess.run([CTRLZ, "export", "one", "-o", "-"], cwd=ws, capture_output=True,
                          env={**os.environ, "CTRLZ_HOME": str(home)}, check=True).stdout
    delta = subprocess.run([CTRLZ, "export", "two", "--since", "one", "-o", "-"], cwd=ws,
                           capture_output=True, env={**os.environ, "CTRLZ_HOME": str(home)},
                           check=True).stdout
    assert len(delta) < len(full) / 4  # the big files are in `one` already
    other, home_b = tmp_path / "b", tmp_path / "home-b"
    make_ws(other, {}, home_b)
    # the delta alone lacks the objects of `one`: refused, nothing imported
    r = ctrlz("import", "-", cwd=other, home=home_b, stdin=delta, ok=False)
    assert "incremental since snap_" in r.err and "nothing was imported" in r.err
    assert _ids(other, home_b) == []
    ctrlz("import", "-", cwd=other, home=home_b, stdin=full)
    ctrlz("import", "-", cwd=other, home=home_b, stdin=delta)
    assert sorted(_ids(other, home_b)) == sorted(_ids(ws, home))
    ctrlz("rollback", "two", cwd=other, home=home_b)
    assert tree_state(other) == tree_state(ws)


def test_truncated_and_tampered_archives_import_nothing(tmp_path: Path) -> None:
    ws, home = _two_snapshots(tmp_path)
    arc = tmp_path / "app.ctrlz"
    ctrlz("export", "one", "two", "-o", str(arc), cwd=ws, home=home)
    data = arc.read_bytes()
    other, home_b = tmp_path / "b", tmp_path / "home-b"
    make_ws(other, {"keep.txt": "mine\n"}, home_b)
    ctrlz("snapshot", cwd=other, home=home_b)
    before = _ids(other, home_b)
    cases = {
        "truncated": data[: len(data) // 2],
        "no end record": data[:-40],
        "flipped byte": data[:5000] + bytes([data[5000] ^ 1]) + data[5001:],
        "flipped last byte": data[:-1] + bytes([data[-1] ^ 1]),
        "trailing junk": data + b"x",
        "not an archive": b"hello world" * 10,
        "empty": b"",
    }
    for what, body in cases.items():
        bad = tmp_path / "bad.ctrlz"
        bad.write_bytes(body)
        r = ctrlz("import", str(bad), cwd=other, home=home_b, ok=False)
        assert r.code == 8, (what, r.err)
        assert _ids(other, home_b) == before, what
    v = ctrlz("verify", "--json", cwd=other, home=home_b).json()
    assert v["ok"] and v["orphans"] == 0  # what the failed imports staged is gone


def test_kill_during_import_leaves_a_valid_store(tmp_path: Path) -> None:
    ws, home = _two_snapshots(tmp_path)
    arc = tmp_path / "app.ctrlz"
    ctrlz("export", "one", "two", "-o", str(arc), cwd=ws, home=home)
    data = arc.read_bytes()
    other, home_b = tmp_path / "b", tmp_path / "home-b"
    make_ws(other, {"keep.txt": "mine\n"}, home_b)
    ctrlz("snapshot", cwd=other, home=home_b)
    store = next((home_b / "workspaces").iterdir())
    def files() -> set[Path]:
        return {p for d in ("packs", "objects") for p in (store / d).rglob("*") if p.is_file()}

    packs = files()
    proc = subprocess.Popen([CTRLZ, "import", "-"], cwd=other, stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            env={**os.environ, "CTRLZ_HOME": str(home_b)})
    assert proc.stdin is not None
    proc.stdin.write(data[: len(data) * 3 // 4])  # most of it, then the import waits for more
    proc.stdin.flush()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and files() == packs:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert files() - packs  # it had staged objects
    v = ctrlz("verify", "--json", cwd=other, home=home_b).json()
    assert v["ok"] and len(_ids(other, home_b)) == 1
    ctrlz("snapshot", cwd=other, home=home_b)  # the next writer removes what the import left
    v = ctrlz("verify", "--json", cwd=other, home=home_b).json()
    assert v["ok"] and v["orphans"] == 0
    ctrlz("import", str(arc), cwd=other, home=home_b)
    assert len(_ids(other, home_b)) == 4
