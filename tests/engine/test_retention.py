"""Pools and retention planning (pure functions over snapshot records) and the undo log."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    snaps = [snap(0, "pre-run"), snap(1), snap(2), snap(3)]
    assert ids(plan_pools(snaps, Policy(max_count=2))) == ["snap_0001", "snap_0002"]
    assert ids(plan_pools(snaps, Policy(max_count=2, delete_initial=True))) == \
        ["snap_0000", "snap_0001"]


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
    from ctrlz.engine.snapshot import take_snapshot

    for i, type in enumerate(["pre-run", "auto", "manual", "auto", "tool", "auto", "tool",
                              "manual", "auto"]):
        (tmp_path / "ws" / "f").write_text(str(i))
        take_snapshot(ws.repo, ws.roots, [ws.config.rules], type=type)  # no pools applied
    full = plan_pools(ws.snapshots(), policy, {"x"})
    fast = plan_pools_for(ws.repo, policy, {"x"})
    assert ids(fast) == ids(full) and fast.kept == full.kept


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
