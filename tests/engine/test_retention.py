"""Pools and retention planning (pure functions over snapshot records) and the undo log."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctrlz import LimitExceeded, Snapshot, Workspace
from ctrlz.engine.retention import Policy, check_manual_cap, plan_pools, plan_prune


def snap(i: int, type: str = "manual", pinned: bool = False) -> Snapshot:
    return Snapshot(id=f"snap_{i:04d}", number=i, parent=None, type=type, label=None,
                    pinned=pinned, created_ns=i * 10**9, root=b"\0" * 32, files=0, dirs=0,
                    symlinks=0, bytes=0, added_bytes=0, size_delta=0)


def ids(plan) -> list[str]:  # noqa: ANN001
    return [s.id for s in plan.drop]


def test_auto_ring_drops_the_oldest_unpinned_autos() -> None:
    snaps = [snap(0, "auto", pinned=True), snap(1, "auto"), snap(2, "manual"), snap(3, "auto"),
             snap(4, "auto")]
    assert ids(plan_pools(snaps, Policy(auto_max=2))) == ["snap_0001", "snap_0003"]


def test_safety_and_tool_rings_and_protection() -> None:
    snaps = [snap(i, "safety") for i in range(4)] + [snap(4 + i, "tool") for i in range(3)]
    plan = plan_pools(snaps, Policy(safety_max=2, tool_max=1), protected={"snap_0000"})
    assert ids(plan) == ["snap_0001", "snap_0002", "snap_0004", "snap_0005"]


def test_pre_run_kept_unless_delete_initial() -> None:
    snaps = [snap(0, "pre-run"), snap(1, "auto"), snap(2, "tool"), snap(3, "auto")]
    assert ids(plan_pools(snaps, Policy(max_count=2))) == ["snap_0001", "snap_0002"]
    assert ids(plan_pools(snaps, Policy(max_count=2, delete_initial=True))) == \
        ["snap_0000", "snap_0001"]


def test_max_count_never_drops_a_manual_snapshot() -> None:
    """The manual pool's promise: under ``manual_max``, nothing the user took is taken back,
    not even to bring the total under ``max_count`` (an independent check found 103 manual
    snapshots gone after one auto snapshot)."""
    snaps = [snap(0), snap(1, "auto"), snap(2), snap(3, "tool"), snap(4), snap(5, "auto")]
    plan = plan_pools(snaps, Policy(max_count=2))
    assert ids(plan) == ["snap_0001", "snap_0003"] and plan.kept == 4


def test_manual_cap_error_names_rm_and_prune() -> None:
    check_manual_cap(1, Policy(manual_max=2))
    with pytest.raises(LimitExceeded, match=r"ctrlz rm.*ctrlz prune"):
        check_manual_cap(2, Policy(manual_max=2))


@pytest.mark.parametrize("policy", [
    Policy(auto_max=2), Policy(auto_max=2, tool_max=1), Policy(max_count=3),
    Policy(auto_max=1, max_count=4, delete_initial=True), Policy()])
def test_pools_planned_from_counts_match_the_full_plan(tmp_path: Path,
                                                       policy: Policy) -> None:
    """The snapshot path plans pools from per-type counts and reads only the over-full
    pools; the result is the full plan's."""
    from ctrlz.engine.retention import plan_pools_for

    (tmp_path / "ws").mkdir()
    ws = Workspace.init(tmp_path / "ws", home=tmp_path / "home")
    from ctrlz.engine.snapshot import take_snapshot, writing

    for i, type in enumerate(["pre-run", "auto", "manual", "auto", "tool", "auto", "tool",
                              "manual", "auto"]):
        (tmp_path / "ws" / "f").write_text(str(i))
        with writing(ws.repo):  # no pools applied
            take_snapshot(ws.repo, ws.roots, [ws.config.rules], type=type)
    full = plan_pools(ws.snapshots(), policy, {"x"})
    fast = plan_pools_for(ws.repo, policy, {"x"})
    assert ids(fast) == ids(full) and fast.kept == full.kept


@pytest.fixture(scope="module")
def long_history(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """70 snapshots of every type, in a mixed order, a few pinned, no pool applied yet."""
    import random

    from ctrlz.engine.snapshot import take_snapshot, writing

    base = tmp_path_factory.mktemp("history")
    (base / "ws").mkdir()
    ws = Workspace.init(base / "ws", home=base / "home")
    rng = random.Random(12)
    for i in range(70):
        (base / "ws" / "f").write_text(str(i))
        type = rng.choice(["auto", "auto", "manual", "tool", "safety", "pre-run"])
        with writing(ws.repo):
            snap = take_snapshot(ws.repo, ws.roots, [ws.config.rules], type=type).snapshot
        if i < 20 and rng.random() < 0.4:  # pinned ones among the oldest: the cap skips them
            with ws.repo.catalog.transaction():
                ws.repo.catalog.update_snapshot(snap.id, pinned=1)
    return ws


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_count=st.integers(1, 80), auto_max=st.integers(1, 40), tool_max=st.integers(1, 40),
       safety_max=st.integers(1, 40), delete_initial=st.booleans(),
       protect=st.sets(st.integers(0, 69), max_size=12), protect_oldest=st.integers(0, 60))
def test_pools_planned_over_max_count_read_a_page_and_match_the_full_plan(
        long_history: Workspace, max_count: int, auto_max: int, tool_max: int,
        safety_max: int, delete_initial: bool, protect: set[int],
        protect_oldest: int) -> None:
    """Over ``max_count``, the pools read the oldest snapshots a page at a time (a store at
    its cap pays for a few, not for its whole history); whatever the caps, the pinned and
    protected ones, the plan is the one the whole list gives. (Protecting a run of the
    oldest makes the first page too short, so that the next one is read.)"""
    from ctrlz.engine.retention import plan_pools_for

    policy = Policy(auto_max=auto_max, manual_max=1000, safety_max=safety_max,
                    tool_max=tool_max, max_count=max_count, delete_initial=delete_initial)
    snaps = long_history.snapshots()
    protected = {snaps[i].id for i in protect | set(range(protect_oldest))}
    full = plan_pools(snaps, policy, protected)
    fast = plan_pools_for(long_history.repo, policy, protected)
    assert ids(fast) == ids(full) and fast.kept == full.kept


@pytest.mark.parametrize(("protect_oldest", "pages"), [(0, [18]), (40, [18, 72])])
def test_a_store_at_its_cap_reads_a_page_not_its_history(
        long_history: Workspace, protect_oldest: int, pages: list[int]) -> None:
    """One snapshot over ``max_count``: the pools read the oldest 18 snapshots, and a
    longer page only when none of those may go."""
    from ctrlz.engine.retention import plan_pools_for

    policy = Policy(auto_max=100, manual_max=100, safety_max=100, tool_max=100, max_count=69)
    snaps = long_history.snapshots()
    protected = {s.id for s in snaps[:protect_oldest]}
    read: list[int] = []
    catalog = long_history.repo.catalog
    oldest = catalog.oldest
    catalog.oldest = lambda limit, types=(), but=(): read.append(limit) or oldest(limit, types, but)
    try:
        plan = plan_pools_for(long_history.repo, policy, protected)
    finally:
        del catalog.oldest
    assert read == pages and ids(plan) == ids(plan_pools(snaps, policy, protected))
    assert len(plan.drop) == 1 and plan.kept == 69


def test_prune_keep_and_older_than_must_agree() -> None:
    snaps = [snap(i) for i in range(5)]
    assert ids(plan_prune(snaps, Policy(), keep=2)) == ["snap_0000", "snap_0001", "snap_0002"]
    now = 5 * 10**9
    assert ids(plan_prune(snaps, Policy(), older_than_ns=2 * 10**9, now_ns=now)) == \
        ["snap_0000", "snap_0001", "snap_0002"]
    assert ids(plan_prune(snaps, Policy(), keep=4, older_than_ns=2 * 10**9, now_ns=now)) == \
        ["snap_0000"]
    snaps[0] = snap(0, pinned=True)
    assert ids(plan_prune(snaps, Policy(), keep=1))[0] == "snap_0001"


def test_undo_redo_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTRLZ_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    root = tmp_path / "w"
    root.mkdir()
    f = root / "f.txt"
    f.write_text("1")
    with Workspace.init(root) as ws:
        ws.snapshot(label="one")
        f.write_text("2")
        ws.snapshot(label="two")
        f.write_text("3")
        ws.rollback("one")
        ws.rollback("two")
        assert f.read_text() == "2"
        ws.undo()
        assert f.read_text() == "1"
        ws.undo()
        assert f.read_text() == "3"
        ws.redo()
        assert f.read_text() == "1"
        ws.rollback("two")  # clears the redo part
        assert ws.oplog.next_redo() is None
        assert [o.undone for o in ws.oplog.operations()] == [False, False]


def test_what_dropping_the_oldest_frees_is_weighed_exactly(tmp_path: Path) -> None:
    """The byte cap weighs, before dropping anything, what dropping the oldest ``j``
    droppable snapshots frees; a collection after dropping them removes exactly that."""
    import os

    from ctrlz.engine.gc import collect_garbage
    from ctrlz.engine.retention import PrunePlan, freed_by_dropping

    root = tmp_path / "ws"
    root.mkdir()
    (root / "shared.bin").write_bytes(os.urandom(50_000))  # every snapshot keeps this
    ws = Workspace.init(root, home=tmp_path / "home")
    for i in range(5):
        (root / f"own{i}.bin").write_bytes(os.urandom(20_000 * (i + 1)))
        if i:
            (root / f"own{i - 1}.bin").unlink()  # each snapshot holds one of its own
        ws.snapshot(type="auto" if i % 2 else "manual")
    ws.set_pinned(ws.snapshots()[1].id, True)  # a pinned one is never weighed
    weighed = freed_by_dropping(ws.repo, ws.policy)
    assert [s.number for s, _ in weighed] == [0, 2, 3]  # oldest first; not pinned, not newest
    collect_garbage(ws.repo)
    first_two = PrunePlan()
    for s, _ in weighed[:2]:
        first_two.add(s, "test")
    first_two.execute(ws.repo)
    assert first_two.gc is not None and first_two.gc.removed_bytes == weighed[1][1] > 0


def test_over_store_cap_the_store_is_brought_under_its_floor_in_one_pass(
        tmp_path: Path) -> None:
    """Over ``store_cap``, the fewest oldest snapshots that bring the store under 90% of the
    cap go together, with one collection (not one per snapshot), and the store then has a
    tenth of its cap as room before the next pass."""
    import os

    from ctrlz.engine import retention
    from ctrlz.state.store.usage import store_usage

    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace.init(root, home=tmp_path / "home")
    for _ in range(8):
        (root / "data.bin").write_bytes(os.urandom(100_000))
        ws.snapshot()
    used = store_usage(ws.repo)
    collections = []
    original = retention.collect_garbage

    def counting(repo, **how):  # noqa: ANN001, ANN003, ANN202
        collections.append(1)
        return original(repo, **how)

    retention.collect_garbage = counting
    try:
        policy = ws.policy._replace(store_cap=used - 250_000)
        plan = retention.enforce_byte_cap(ws.repo, policy)
    finally:
        retention.collect_garbage = original
    assert store_usage(ws.repo) <= int(policy.store_cap * retention.CAP_FLOOR)
    assert 3 <= len(plan.drop) < 8 and [s.number for s in plan.drop] == list(
        range(len(plan.drop)))  # the oldest
    assert len(collections) == 2  # one before weighing, one after the drop: not one per drop


def test_at_store_cap_deep_undo_history_goes_before_a_newer_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store at its byte cap drops the oldest snapshots whatever their type, sparing only
    what the next undo and redo need: it once kept the safety snapshots of every earlier
    rollback (the undo stack named them all) and dropped the snapshot taken a moment before,
    so that rolling back to it then failed with "no snapshot matches"."""
    import os

    from ctrlz import RestoreError
    from ctrlz.state.store.usage import store_usage

    root = tmp_path / "ws"
    root.mkdir()
    data = root / "data.bin"
    ws = Workspace.init(root, home=tmp_path / "home")
    for _ in range(4):  # the benchmark's round: snapshot, change, snapshot, roll back
        data.write_bytes(os.urandom(200_000))
        base = ws.snapshot()
        data.write_bytes(os.urandom(200_000))
        ws.snapshot()
        ws.rollback(base.id)
    assert len(ws.oplog.referenced()) == 4
    monkeypatch.setenv("CTRLZ_STORE_CAP", str(store_usage(ws.repo) // 2))
    ws.close()
    ws = Workspace.open(root, home=tmp_path / "home")
    data.write_bytes(os.urandom(200_000))
    base, base_bytes = ws.snapshot(), data.read_bytes()  # its pools run at the cap
    data.write_bytes(newest_bytes := os.urandom(200_000))
    ws.snapshot()
    kept = {s.id for s in ws.snapshots()}
    assert base.id in kept  # the one the next rollback wants
    assert ws.oplog.needed_next() <= kept  # the next undo's safety snapshot
    assert not ws.oplog.referenced() <= kept  # deeper history went, oldest first
    assert store_usage(ws.repo) <= ws.policy.store_cap
    status = ws.status()  # what went, and why, is on record
    assert status.dropped and not {d["id"] for d in status.dropped} & kept
    assert all("store_cap" in d["reason"] for d in status.dropped)
    assert any(p.startswith(f"store_cap dropped {len(status.dropped)} snapshot(s)")
               for p in status.problems), status.problems
    ws.rollback(base.id)
    assert data.read_bytes() == base_bytes
    ws.undo()  # the newest rollback's undo still works
    assert data.read_bytes() == newest_bytes
    for _ in range(5):  # and deeper undos say why they cannot
        try:
            ws.undo()
        except RestoreError as exc:
            assert "its safety snapshot is gone" in str(exc)
            break
    else:
        raise AssertionError("every undo worked: nothing was dropped")
    ws.close()
