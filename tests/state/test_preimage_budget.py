"""Agent pre-images have their own budget and never push out workspace snapshots.

``store_cap`` counts the workspace store's own files (catalog, packs, objects, stat cache), not
``<store>/toolcalls/``; the pre-images there are bounded by ``preimage_cap`` over every session
(plus each session's ``byte_cap``), which the capturing hook enforces itself, reading the value
``ctrlz`` wrote into the tool-call catalog. Real files, real stores, real hook processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz import toolcalls as tc
from ctrlz.errors import ConfigError
from ctrlz.session.config import DEFAULTS, Config, load_config
from ctrlz.state.store.usage import disk_usage
from ctrlz.toolcalls import records
from ctrlz.toolcalls.store import ToolcallStore, sync_preimage_cap

REPO = Path(__file__).resolve().parents[2]
KIB = 1 << 10


def tree_bytes(path: Path) -> int:
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(path) for f in fs)


def body_bytes(store: Path) -> int:
    """What the pre-image bodies take on disk (packs and large objects)."""
    return tree_bytes(store / "toolcalls" / "packs") + tree_bytes(store / "toolcalls" / "objects")


def capture(ws: Path, session: str, call: str, size: int) -> None:
    """One file tool call: the file as it was before the tool ran is captured, then the tool
    deletes it (so workspace snapshots never see it)."""
    path = ws / "scratch" / f"{session}-{call}.bin"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(os.urandom(size))  # incompressible, never deduplicated
    tc.fs_snapshot(session, call, [str(path)], workspace=ws)
    path.unlink()


def store_of(ws: Path) -> Path:
    with Workspace.open(ws) as w:
        return w.store_path


def ids(ws: Path, session: str) -> list[str]:
    return [s["snapshot_id"] for s in tc.list_snapshots(session, workspace=ws)]


@pytest.fixture
def ws(ws_dir: Path) -> Path:
    (ws_dir / "README.md").write_text("# project\n")
    Workspace.init(ws_dir).close()
    return ws_dir


def test_a_preimage_flood_never_drops_manual_or_pinned_snapshots(ws: Path) -> None:
    with Workspace.open(ws) as w:
        manual = []
        for i in range(4):
            (ws / f"work{i}.bin").write_bytes(os.urandom(40 * KIB))
            manual.append(w.snapshot(label=f"manual {i}", pinned=i == 0).id)
        store = w.store_path
        own = disk_usage(store)
    config = load_config(ws)
    config.set("store_cap", own + 200 * KIB, "test")  # room for the workspace, not for a flood
    config.set("preimage_cap", "1MiB", "test")
    with Workspace.open(ws, config=config) as w:
        sync_preimage_cap(store, w.config["preimage_cap"])  # what `ctrlz` does for the hooks
        for n in range(24):
            capture(ws, f"agent-{n % 3}", f"call-{n}", 100 * KIB)  # 2.4 MB of pre-images
        assert tree_bytes(store) > 4 * w.config["store_cap"] // 3
        (ws / "README.md").write_text("# project, edited\n")
        newest = w.snapshot(label="after the agents").id  # applies the pools and store_cap
        plan = w.prune()  # and once more, with gc
        assert plan.drop == []
        assert [s.id for s in w.snapshots()] == [*manual, newest]
        assert w.store_disk_bytes() <= w.config["store_cap"]
        assert w.status().store_bytes == disk_usage(store)

    cap = 1 << 20
    with ToolcallStore(store) as t:
        assert t.preimage_cap == cap
        assert records.total_bytes(t.db) <= cap
    # each body costs one 53-byte record header and each pack an 8-byte magic on top
    assert body_bytes(store) <= cap + 24 * 64
    assert body_bytes(store) >= cap - 100 * KIB  # it is a budget, not a purge
    kept = sum(len(ids(ws, f"agent-{k}")) for k in range(3))
    assert kept == 10  # the ten newest of 24 fit in 1 MiB; the oldest went first
    assert ids(ws, "agent-2")[-1] == "call-23"


def test_the_budget_spans_sessions_oldest_first_and_spares_the_current_call(ws: Path) -> None:
    with ToolcallStore(store_of(ws)) as t:
        assert t.set_preimage_cap(300 * KIB)
    for i in range(3):
        capture(ws, "old", f"o{i}", 100 * KIB)
    capture(ws, "new", "n0", 100 * KIB)
    assert ids(ws, "old") == ["o1", "o2"]  # another session's newer call evicted o0
    assert ids(ws, "new") == ["n0"]
    capture(ws, "new", "huge", 500 * KIB)  # bigger than the budget: kept, all else goes
    assert ids(ws, "old") == [] and ids(ws, "new") == ["huge"]
    # the per-session byte cap still applies inside the store-wide one
    tc.configure_byte_cap("small", 150 * KIB, workspace=ws)
    capture(ws, "small", "s0", 100 * KIB)
    capture(ws, "small", "s1", 100 * KIB)
    assert ids(ws, "small") == ["s1"]


def test_a_body_shared_with_a_newer_call_is_kept_and_its_pack_mates_reclaimed(ws: Path) -> None:
    """One tool call captured two files; a later one captured the first again unchanged. When
    the first call is dropped its pack holds one live and one dead body: compaction rewrites
    it, so only the live one stays on disk."""
    shared = ws / "shared.txt"
    alone = ws / "alone.bin"
    body = os.urandom(4 * KIB)
    shared.write_bytes(body)
    alone.write_bytes(os.urandom(300 * KIB))
    tc.fs_snapshot("s", "first", [str(shared), str(alone)], workspace=ws)
    tc.fs_snapshot("s", "second", [str(shared)], workspace=ws)
    store = store_of(ws)
    assert body_bytes(store) > 300 * KIB
    tc.drop_snapshot("s", "first", workspace=ws)
    assert body_bytes(store) < 8 * KIB
    with ToolcallStore(store) as t:  # the live body moved to a new pack, intact
        assert t.objects.read(t.objects.digest(body)) == body
        assert len(t.catalog.packs()) == 1


HOOK = """
import io, json, sys
from ctrlz.hooks.runner import run
run("claude", io.BytesIO(sys.argv[1].encode()))
print(json.dumps(sorted(m for m in ("ctrlz.session.config", "ctrlz.engine", "ctrlz.workspace")
                        if m in sys.modules)))
"""


def test_the_hook_enforces_the_budget_without_loading_the_configuration(ws: Path) -> None:
    store = store_of(ws)
    assert sync_preimage_cap(store, 250 * KIB)
    assert not sync_preimage_cap(store, 250 * KIB)  # unchanged: nothing written
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for i in range(4):
        target = ws / f"edit{i}.bin"
        target.write_bytes(os.urandom(100 * KIB))
        payload = {"session_id": "claude-1", "cwd": str(ws), "hook_event_name": "PreToolUse",
                   "tool_name": "Write", "tool_use_id": f"toolu_{i}",
                   "tool_input": {"file_path": str(target), "content": "x"}}
        out = subprocess.run([sys.executable, "-c", HOOK, json.dumps(payload)], cwd=ws, env=env,
                             capture_output=True, text=True, check=True, timeout=60)
        assert json.loads(out.stdout) == []
        target.write_text("x")
    assert ids(ws, "claude-1") == ["toolu_2", "toolu_3"]
    assert body_bytes(store) <= 250 * KIB


def test_preimage_cap_is_a_size_setting_with_the_stores_default(ws: Path) -> None:
    assert DEFAULTS["preimage_cap"] == records.DEFAULT_PREIMAGE_CAP
    config = Config()
    config.set("preimage_cap", "512MiB", "test")
    assert config["preimage_cap"] == 512 << 20
    assert load_config(ws, env={"CTRLZ_PREIMAGE_CAP": "2GiB"})["preimage_cap"] == 2 << 30
    with pytest.raises(ConfigError, match="preimage_cap"):
        config.set("preimage_cap", "lots", "test")
    store = store_of(ws)
    # nothing to write while the value is the default and no agent has captured anything
    assert not sync_preimage_cap(store, records.DEFAULT_PREIMAGE_CAP)
    assert not (store / "toolcalls").exists()
    with ToolcallStore(store) as t:
        assert t.preimage_cap == records.DEFAULT_PREIMAGE_CAP


def test_a_rewind_past_an_evicted_capture_refuses_and_changes_nothing(ws: Path) -> None:
    """It used to undo the calls whose captures were left, leave the evicted one's file as
    the agent made it, and report success."""
    from ctrlz.errors import UsageError
    from ctrlz.toolcalls.restore.rewinds import rewind

    with ToolcallStore(store_of(ws)) as t:
        assert t.set_preimage_cap(300 * KIB)
    (ws / "big.bin").write_bytes(os.urandom(200 * KIB))
    orig = os.urandom(200 * KIB)
    (ws / "a.txt").write_bytes(orig)
    with Workspace.open(ws) as w:
        for call, path, data in [("t1", ws / "big.bin", b"AGENT"), ("t2", ws / "a.txt", b"ok")]:
            tc.begin_turn("s", workspace=w)
            with tc.tool_call("s", call, workspace=w):
                tc.write_file(path, data)
        assert ids(ws, "s") == ["t2"]  # t1's 200 KiB capture went for t2's
        before = {p.name: p.read_bytes() for p in ws.iterdir() if p.is_file()}
        for target in ("1", "t1"):
            with pytest.raises(UsageError, match="evicted by the pre-image budget"):
                rewind(w, target, session_id="s")
        with pytest.raises(UsageError, match="evicted by the pre-image budget"):
            tc.rollback("s", 1, workspace=w)  # a turn rollback too
        assert {p.name: p.read_bytes() for p in ws.iterdir() if p.is_file()} == before
        rewind(w, "2", session_id="s")  # what is held whole still rewinds
        assert (ws / "a.txt").read_bytes() == orig


def test_a_store_made_before_evictions_were_kept_gets_their_table(ws: Path) -> None:
    """Every capture that evicts writes to ``tc_evicted``: a store from before it must get
    the table when it is opened, or its hooks' captures would fail."""
    import sqlite3

    capture(ws, "s", "c0", 1000)
    db = sqlite3.connect(store_of(ws) / "toolcalls" / "catalog.db")
    db.execute("DROP TABLE tc_evicted")
    db.commit()
    db.close()
    with ToolcallStore(store_of(ws)) as t:
        assert t.set_preimage_cap(300 * KIB)
    for i in range(4):
        capture(ws, "s", f"c{i + 1}", 100 * KIB)
    assert ids(ws, "s") == ["c2", "c3", "c4"]
