"""What an agent may delete through MCP (issue 40 §4): the real ``ctrlz mcp`` over stdio, with
the Claude Code hooks run as Claude runs them (a subprocess, the documented JSON on stdin).

An agent may delete or compact only the snapshots it took itself and automatic ones that no
restore path needs. The snapshot a shell call's rewind starts from, a person's manual
snapshot and one the undo stack needs are refused, by name and with the reason, and
``ctrlz rewind`` still brings back what the agent's ``rm`` removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp import Client

from .test_server import _init, _server, fails, ok

pytestmark = pytest.mark.anyio

CTRLZ = str(Path(sys.executable).parent / "ctrlz")
SESSION = "d00d-session"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def env() -> dict[str, str]:
    """The test's own store home and config (set by the conftest), for the server too, and
    PYTHONPATH, so that the server runs the ctrlz under test (a worktree's, when one is)."""
    keys = ("CTRLZ_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "CTRLZ_DAEMON", "PYTHONPATH")
    return {k: os.environ[k] for k in keys if k in os.environ}


def ctrlz(*args: str, cwd: Path) -> str:
    proc = subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def hook(ws: Path, event: str, **fields: object) -> None:
    payload = {"session_id": SESSION, "transcript_path": str(ws / ".t.jsonl"), "cwd": str(ws),
               "hook_event_name": event, "permission_mode": "default", **fields}
    proc = subprocess.run([CTRLZ, "hook", "claude"], input=json.dumps(payload).encode(),
                          cwd=ws, capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr


def agent_runs_rm(ws: Path) -> str:
    """Bash ``rm important.txt`` as Claude Code runs it, hooks first; the id of the workspace
    snapshot taken before it, as ``ctrlz rewind --list --json`` lists it."""
    hook(ws, "SessionStart", source="startup")
    hook(ws, "UserPromptSubmit", prompt="tidy up")
    bash = {"command": "rm important.txt", "description": "Remove a file"}
    hook(ws, "PreToolUse", tool_name="Bash", tool_input=bash, tool_use_id="toolu_rm")
    (ws / "important.txt").unlink()
    hook(ws, "PostToolUse", tool_name="Bash", tool_input=bash, tool_use_id="toolu_rm",
         tool_response={"stdout": "", "stderr": "", "interrupted": False})
    calls = json.loads(ctrlz("rewind", "--list", "--json", cwd=ws))["tool_calls"]
    (call,) = [c for c in calls if c["tool_use_id"] == "toolu_rm"]
    assert call["workspace_snapshot"].startswith("snap_")
    return str(call["workspace_snapshot"])


@pytest.fixture
def ws(ws_dir: Path, env: dict[str, str]) -> Path:
    (ws_dir / "important.txt").write_text("the only copy\n")
    _init(ws_dir, env)
    ctrlz("snapshot", "-m", "base", cwd=ws_dir)
    return ws_dir


@pytest.fixture
async def client(ws: Path, env: dict[str, str]) -> AsyncIterator[Client]:
    async with _server(ws, env) as c:
        yield c


async def test_an_agent_cannot_delete_the_snapshots_its_rewind_needs(client: Client,
                                                                      ws: Path) -> None:
    before_rm = agent_runs_rm(ws)
    msg = await fails(client, "snapshots_delete", checkpoint=before_rm)
    assert before_rm in msg and "toolu_rm" in msg and "ctrlz rewind" in msg, msg
    assert "\n" not in msg
    msg = await fails(client, "snapshots_delete", checkpoint="base")
    assert "base" in msg and "manual snapshot a person took" in msg, msg
    # nor fold them away: the kept one is renamed and made the agent's, the others removed
    mine = await ok(client, "snapshots_create", name="mine")
    for pair in (["base", "mine"], [before_rm, "mine"], ["mine", before_rm]):
        msg = await fails(client, "snapshots_compact", checkpoints=pair, name="folded")
        assert "an agent may delete or compact only" in msg, msg
    assert await fails(client, "snapshots_compact", checkpoints=["base"], name="renamed")
    for kind, why in (("pre-run", "before `ctrlz run`"), ("tool", "shell command")):
        snap = json.loads(ctrlz("snapshot", "--type", kind, "--json", cwd=ws))["id"]
        msg = await fails(client, "snapshots_delete", checkpoint=snap)
        assert snap in msg and why in msg, msg
    listed = ctrlz("list", "--json", cwd=ws)
    assert before_rm in listed and '"base"' in listed and mine["checkpoint"] in listed
    assert not (ws / "important.txt").exists()
    ctrlz("rewind", "toolu_rm", cwd=ws)
    assert (ws / "important.txt").read_text() == "the only copy\n"


async def test_an_agent_still_deletes_and_compacts_its_own_and_automatic_snapshots(
        client: Client, ws: Path) -> None:
    (ws / "a.txt").write_text("a")
    idle = json.loads(ctrlz("snapshot", "--type", "idle", "--json", cwd=ws))["id"]
    await ok(client, "snapshots_delete", checkpoint=idle)
    auto = json.loads(ctrlz("snapshot", "--type", "auto", "--json", cwd=ws))["id"]
    first = await ok(client, "snapshots_create", name="first")
    (ws / "a.txt").write_text("b")
    second = await ok(client, "snapshots_create", name="second")
    done = await ok(client, "snapshots_compact", checkpoints=[auto, "first", "second"],
                    name="folded")
    assert set(done["deleted_checkpoints"]) == {auto, first["checkpoint"]}
    # its result is the agent's too: it may fold or delete it again
    await ok(client, "snapshots_delete", checkpoint="folded")
    assert second["checkpoint"] not in ctrlz("list", "--json", cwd=ws)


async def test_what_undo_needs_and_a_pinned_snapshot_are_refused_by_name(
        client: Client, ws: Path) -> None:
    (ws / "a.txt").write_text("a")
    made = await ok(client, "snapshots_create", name="pin-me")
    ctrlz("pin", "pin-me", cwd=ws)
    msg = await fails(client, "snapshots_delete", checkpoint="pin-me")
    assert made["checkpoint"] in msg and "pinned" in msg
    (ws / "a.txt").write_text("changed")
    done = await ok(client, "snapshots_restore", checkpoint="base")
    msg = await fails(client, "snapshots_delete", checkpoint=done["safety_snapshot"])
    assert done["safety_snapshot"] in msg and "ctrlz undo" in msg
    ctrlz("undo", cwd=ws)
    assert (ws / "a.txt").read_text() == "changed"


async def test_the_tools_tell_the_agent_the_rule(client: Client) -> None:
    """An agent reads the rule before it calls, not only in a refusal."""
    listed = {t.name: t.description or "" for t in (await client.list_tools()).tools}
    assert "you took" in listed["snapshots_delete"] and "manual" in listed["snapshots_delete"]
    assert "snapshots_delete may delete" in listed["snapshots_compact"]


def test_every_snapshot_type_has_a_rule() -> None:
    """A type is either automatic (an agent may delete it) or named with why it is the
    person's; a new type is the person's until it is put in one of the two."""
    from ctrlz.session.policy import AUTOMATIC, PERSONS
    from ctrlz.types import SNAPSHOT_TYPES

    assert set(SNAPSHOT_TYPES) == AUTOMATIC | set(PERSONS)
    assert not AUTOMATIC & set(PERSONS)
