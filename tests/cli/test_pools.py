"""Pools and retention through the CLI: manual cap, auto ring, prune, gc, verify."""

from __future__ import annotations

from pathlib import Path

from .conftest import run


def test_manual_cap_is_a_clear_error_and_overwrites_nothing(ws: Path) -> None:
    env = {"CTRLZ_MANUAL_MAX": "2"}
    a = run("snapshot", "-m", "a", "--json", cwd=ws, env=env).json()
    b = run("snapshot", "-m", "b", "--json", cwd=ws, env=env).json()
    r = run("snapshot", "-m", "c", cwd=ws, env=env, ok=False)
    assert r.code == 5 and "ctrlz rm" in r.err and "ctrlz prune" in r.err
    assert "manual_max=2" in r.err and len(r.err.strip().splitlines()) == 1
    ids = [s["id"] for s in run("list", "--json", cwd=ws).json()]
    assert ids == [b["id"], a["id"]]
    run("rm", "a", cwd=ws)
    run("snapshot", "-m", "c", cwd=ws, env=env)


def test_auto_snapshots_are_a_ring(ws: Path) -> None:
    env = {"CTRLZ_AUTO_MAX": "3"}
    ids = []
    for i in range(5):
        (ws / "README.md").write_text(f"v{i}\n")
        ids.append(run("snapshot", "--type", "auto", "--json", cwd=ws, env=env).json()["id"])
    listed = [s["id"] for s in run("list", "--json", cwd=ws).json()]
    assert listed == ids[:1:-1]  # the three newest; the oldest autos went first


def test_pinned_and_pre_run_survive_the_ring(ws: Path) -> None:
    env = {"CTRLZ_AUTO_MAX": "1"}
    pinned = run("snapshot", "--type", "auto", "--pin", "--json", cwd=ws, env=env).json()
    pre = run("snapshot", "--type", "pre-run", "--json", cwd=ws, env=env).json()
    for _ in range(3):
        last = run("snapshot", "--type", "auto", "--json", cwd=ws, env=env).json()
    listed = {s["id"] for s in run("list", "--json", cwd=ws).json()}
    assert listed == {pinned["id"], pre["id"], last["id"]}


def test_store_cap_drops_oldest_unpinned(ws: Path) -> None:
    big = ws / "big.bin"
    ids = []
    for i in range(3):
        big.write_bytes(bytes([i]) * 20000 + __import__("os").urandom(200_000))
        ids.append(run("snapshot", "--json", cwd=ws).json()["id"])
    used = run("status", "--json", cwd=ws).json()["store_bytes"]
    env = {"CTRLZ_STORE_CAP": str(used - 150_000)}
    big.write_bytes(b"small")
    run("snapshot", cwd=ws, env=env)
    listed = [s["id"] for s in run("list", "--json", cwd=ws).json()]
    assert ids[0] not in listed and len(listed) < 4
    assert run("status", "--json", cwd=ws, env=env).json()["store_bytes"] <= used - 150_000


def test_prune_keep_dry_run_then_for_real(ws: Path) -> None:
    ids = []
    for i in range(4):
        (ws / "README.md").write_text(f"v{i}\n")
        ids.append(run("snapshot", "--json", cwd=ws).json()["id"])
    run("pin", ids[0], cwd=ws)
    r = run("prune", "--keep", "2", "--dry-run", cwd=ws)
    assert "would drop" in r.out and ids[1] in r.out and ids[0] not in r.out
    assert len(run("list", "--json", cwd=ws).json()) == 4
    data = run("prune", "--keep", "2", "--json", cwd=ws).json()
    assert [d["id"] for d in data["dropped"]] == [ids[1]] and data["gc"] is not None
    assert [s["id"] for s in run("list", "--json", cwd=ws).json()] == ids[:1:-1] + [ids[0]]
    status = run("status", "--json", cwd=ws).json()  # a drop stays on record
    assert [(d["id"], d["reason"]) for d in status["dropped"]] == [
        (ids[1], "not among the newest 2")]
    assert f"Dropped:   1 snapshot(s) in the last day by retention; the newest {ids[1]}" \
        in run("status", cwd=ws).out


def test_prune_older_than(ws: Path) -> None:
    run("snapshot", cwd=ws)
    run("snapshot", cwd=ws)
    assert run("prune", "--older-than", "7d", "--json", cwd=ws).json()["dropped"] == []
    r = run("prune", "--older-than", "soon", cwd=ws, ok=False)
    assert r.code == 2 and "duration" in r.err


def test_gc_reclaims_and_verify_passes(ws: Path) -> None:
    (ws / "big.bin").write_bytes(b"z" * 100_000)
    run("snapshot", "-m", "big", cwd=ws)
    (ws / "big.bin").unlink()
    run("snapshot", cwd=ws)
    run("rm", "big", cwd=ws)
    r = run("gc", "--json", cwd=ws).json()
    assert r["removed_objects"] >= 1
    v = run("verify", cwd=ws)
    assert v.out.strip().endswith("ok")
    assert run("verify", "--json", cwd=ws).json()["ok"] is True
