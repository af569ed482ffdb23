"""``snapshots_rewind``, ``snapshots_undo`` and ``snapshots_redo`` end to end: an agent session
recorded with the tool-call API in this process, then the real ``ctrlz mcp`` over stdio
rewinding it and taking the rewind back. Each test has a workspace and server of its own, so
the undo stack holds only what the test did."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ctrlz import Workspace
from ctrlz import toolcalls as tc
from mcp import Client

from .test_server import _init, _server, fails, ok

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def env() -> dict[str, str]:
    """The test's own store home and config (set by the conftest), for the server too."""
    keys = ("CTRLZ_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "CTRLZ_DAEMON")
    return {k: os.environ[k] for k in keys}


@pytest.fixture
def ws(ws_dir: Path, env: dict[str, str]) -> Path:
    _init(ws_dir, env)
    return ws_dir


@pytest.fixture
async def client(ws: Path, env: dict[str, str]) -> AsyncIterator[Client]:
    async with _server(ws, env) as c:
        yield c


def agent_writes(ws: Path, sid: str, tool_use_id: str, name: str, content: str) -> None:
    with tc.tool_call(sid, tool_use_id, workspace=ws):
        tc.write_file(ws / name, content)
    tc.finish_tool_call(sid, tool_use_id, workspace=ws)


async def test_rewind_dry_run_then_real_then_undo_and_redo(client: Client, ws: Path) -> None:
    (ws / "keep.txt").write_text("mine")
    tc.begin_turn("s1", workspace=ws)
    agent_writes(ws, "s1", "toolu_1", "a.txt", "agent")

    dry = await ok(client, "snapshots_rewind", target="toolu_1", dry_run=True)
    assert dry["dry_run"] is True and dry["rewound"] is False
    assert dry["session_id"] == "s1" and dry["target"] == "toolu_1"
    assert dry["tool_calls"] == ["toolu_1"] and dry["changed_paths"] == ["a.txt"]
    assert dry["safety_snapshot"] is None and dry["undo"] is None
    assert (ws / "a.txt").read_text() == "agent"

    real = await ok(client, "snapshots_rewind", target="toolu_1", session_id="s1")
    assert real["rewound"] is True and real["dry_run"] is False
    assert real["changed_paths"] == ["a.txt"] and real["changed_total"] == 1
    assert real["safety_snapshot"].startswith("snap_") and "snapshots_undo" in real["undo"]
    assert not (ws / "a.txt").exists() and (ws / "keep.txt").read_text() == "mine"

    undone = await ok(client, "snapshots_undo")
    assert undone["action"] == "undo"
    assert undone["operation"]["kind"] == "rewind"
    assert undone["checkpoint"] == real["safety_snapshot"]
    assert {a["path"] for a in undone["actions"]} == {"a.txt"}
    assert undone["counts"]["created"] == 1 and "snapshots_redo" in undone["next"]
    assert (ws / "a.txt").read_text() == "agent"

    msg = await fails(client, "snapshots_undo")
    assert "nothing to undo" in msg and "\n" not in msg

    redone = await ok(client, "snapshots_redo")
    assert redone["action"] == "redo" and redone["operation"]["kind"] == "rewind"
    assert not (ws / "a.txt").exists()
    assert "nothing to redo" in await fails(client, "snapshots_redo")


async def test_rewind_to_a_turn_restores_an_overwritten_file(client: Client, ws: Path) -> None:
    (ws / "a.txt").write_text("original")
    tc.begin_turn("s2", workspace=ws)
    agent_writes(ws, "s2", "toolu_a", "a.txt", "turn one")
    tc.begin_turn("s2", workspace=ws)
    agent_writes(ws, "s2", "toolu_b", "a.txt", "turn two")
    agent_writes(ws, "s2", "toolu_c", "b.txt", "new in turn two")

    r = await ok(client, "snapshots_rewind", target="2")
    assert r["tool_calls"] == ["toolu_b", "toolu_c"]
    assert sorted(r["changed_paths"]) == ["a.txt", "b.txt"]
    assert (ws / "a.txt").read_text() == "turn one" and not (ws / "b.txt").exists()

    await ok(client, "snapshots_undo")
    assert (ws / "a.txt").read_text() == "turn two"
    assert (ws / "b.txt").read_text() == "new in turn two"


async def test_rewind_leaves_a_later_hand_edit_unless_forced(client: Client,
                                                             ws: Path) -> None:
    tc.begin_turn("s3", workspace=ws)
    (ws / "a.txt").write_text("v1")
    agent_writes(ws, "s3", "toolu_1", "a.txt", "agent")
    (ws / "a.txt").write_text("edited by hand")
    r = await ok(client, "snapshots_rewind", target="toolu_1")
    assert [k["path"] for k in r["skipped"]] == ["a.txt"]
    assert (ws / "a.txt").read_text() == "edited by hand"
    r = await ok(client, "snapshots_rewind", target="toolu_1", force=True)
    assert r["changed_paths"] == ["a.txt"] and (ws / "a.txt").read_text() == "v1"


async def test_rewind_leaves_another_session_later_work(client: Client, ws: Path) -> None:
    """Two agent sessions in one workspace (issue 41, 3): a rewind of s5 past its shell call
    left s6's file deleted, and a rewind of s5's Write put back what s6 had edited since;
    both are s6's work, left alone and listed with s6 named, unless force."""
    (ws / "notes.md").write_text("v0")
    tc.begin_turn("s5", workspace=ws)
    tc.begin_turn("s6", workspace=ws)
    agent_writes(ws, "s5", "toolu_1", "notes.md", "by s5")
    with Workspace.open(ws) as opened:
        tc.shell_call("s5", "toolu_2", "rm -rf build", workspace=opened)
    agent_writes(ws, "s6", "toolu_x", "c.txt", "by s6")
    agent_writes(ws, "s6", "toolu_y", "notes.md", "by s5, then s6")

    dry = await ok(client, "snapshots_rewind", target="toolu_1", session_id="s5", dry_run=True)
    assert {k["path"]: (k["session_id"], k["tool_use_id"]) for k in dry["skipped"]} == {
        "c.txt": ("s6", "toolu_x"), "notes.md": ("s6", "toolu_y")}
    assert all("session s6's work" in k["reason"] for k in dry["skipped"])
    real = await ok(client, "snapshots_rewind", target="toolu_1", session_id="s5")
    assert sorted(k["path"] for k in real["skipped"]) == ["c.txt", "notes.md"]
    assert (ws / "c.txt").read_text() == "by s6"
    assert (ws / "notes.md").read_text() == "by s5, then s6"
    await ok(client, "snapshots_undo")
    forced = await ok(client, "snapshots_rewind", target="toolu_1", session_id="s5",
                      force=True)
    assert forced["skipped"] == []
    assert not (ws / "c.txt").exists() and (ws / "notes.md").read_text() == "v0"


async def test_rewind_errors(client: Client, ws: Path) -> None:
    msg = await fails(client, "snapshots_rewind", target="toolu_1")
    assert "no agent session" in msg and "\n" not in msg
    assert "nothing to undo" in await fails(client, "snapshots_undo")
    tc.begin_turn("s4", workspace=ws)
    agent_writes(ws, "s4", "toolu_1", "a.txt", "agent")
    msg = await fails(client, "snapshots_rewind", target="toolu_nope")
    assert "neither a tool_use_id nor a turn number" in msg
    assert "empty" in await fails(client, "snapshots_rewind", target=" ")
    await fails(client, "snapshots_rewind", target="toolu_1", session_id="no-such-session")
    assert (ws / "a.txt").read_text() == "agent"
