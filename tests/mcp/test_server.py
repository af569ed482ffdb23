"""``ctrlz mcp`` end to end: the SDK's ``Client`` over stdio against the installed console
script, in a real temporary workspace. One server serves most of the module (tests use
names and ids, not positions, so their order does not matter much); the pool-cap and
no-workspace cases start their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

CTRLZ = str(Path(sys.executable).parent / "ctrlz")
TOOLS = {"snapshots_create", "snapshots_list", "snapshots_changes", "snapshots_revert",
         "snapshots_delete", "snapshots_history", "snapshots_compact", "snapshots_diff",
         "snapshots_restore", "snapshots_rewind", "snapshots_undo", "snapshots_redo"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _env(base: Path, **extra: str) -> dict[str, str]:
    # the SDK starts the server with a minimal environment: PYTHONPATH is passed on so that
    # the server runs the ctrlz under test (a worktree's, when one is tested)
    passed = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
    return {"CTRLZ_HOME": str(base / "home"), "XDG_CONFIG_HOME": str(base / "xdg"),
            "XDG_DATA_HOME": str(base / "xdg-data"), **passed, **extra}


def _init(ws: Path, env: dict[str, str]) -> None:
    subprocess.run([CTRLZ, "init"], cwd=ws, env={**os.environ, **env}, check=True,
                   capture_output=True)


@asynccontextmanager
async def _server(ws: Path, env: dict[str, str]) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=CTRLZ, args=["mcp"], env=env, cwd=str(ws))
    async with Client(params) as client:
        yield client


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("mcp")
    ws = base / "ws"
    ws.mkdir()
    env = _env(base)
    _init(ws, env)
    return ws, env


@pytest.fixture(scope="module")
async def client(space: tuple[Path, dict[str, str]]) -> AsyncIterator[Client]:
    async with _server(*space) as c:
        yield c


@pytest.fixture
def ws(space: tuple[Path, dict[str, str]]) -> Path:
    return space[0]


async def ok(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    r = await client.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    assert r.structured_content is not None
    return r.structured_content


async def fails(client: Client, tool: str, **args: Any) -> str:
    r = await client.call_tool(tool, args)
    assert r.is_error, r
    assert r.structured_content is None
    return r.content[0].text


def text(r: Any) -> str:
    return r.content[0].text


# -- the tool list -------------------------------------------------------------------------------


async def test_tools_annotations_and_schemas(client: Client) -> None:
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == TOOLS
    for name in ("snapshots_list", "snapshots_changes", "snapshots_history", "snapshots_diff"):
        a = listed[name].annotations
        assert a.read_only_hint is True and a.destructive_hint is False, name
    for name in ("snapshots_revert", "snapshots_restore", "snapshots_delete",
                 "snapshots_compact", "snapshots_rewind", "snapshots_undo", "snapshots_redo"):
        a = listed[name].annotations
        assert a.read_only_hint is False and a.destructive_hint is True, name
    create = listed["snapshots_create"].annotations
    assert create.read_only_hint is False and create.destructive_hint is False
    for t in listed.values():
        assert t.output_schema is not None and t.output_schema["type"] == "object", t.name
    wire = (await client.list_tools()).tools[0].annotations.model_dump(by_alias=True)
    assert "readOnlyHint" in wire and "destructiveHint" in wire
    assert set(listed["snapshots_list"].input_schema["properties"]) == {
        "start_index", "max_length", "format", "include_changes"}
    assert set(listed["snapshots_revert"].input_schema["properties"]) == {"path", "checkpoint"}
    assert set(listed["snapshots_compact"].input_schema["properties"]) == {"checkpoints",
                                                                           "name"}
    assert set(listed["snapshots_rewind"].input_schema["properties"]) == {
        "target", "session_id", "dry_run", "force"}
    assert listed["snapshots_rewind"].input_schema["required"] == ["target"]
    # undo and redo take one optional argument: what becomes of .git (issue 41, section 6)
    assert set(listed["snapshots_undo"].input_schema.get("properties", {})) == {"git"}
    assert listed["snapshots_undo"].input_schema.get("required", []) == []


# -- create / list / changes -------------------------------------------------------------------


async def test_create_list_and_changes_by_content(client: Client, ws: Path) -> None:
    (ws / "same.txt").write_text("aaaa")
    (ws / "gone.txt").write_text("bye")
    made = await ok(client, "snapshots_create", name="base-naive_1")
    assert made["checkpoint"].startswith("snap_") and made["cp"] == "cp-0"
    assert made["name"] == "base-naive_1" and len(made["hash"]) >= 32
    assert isinstance(made["available"], int)

    listed = await ok(client, "snapshots_list", format="json")
    assert listed["snapshots"][0]["checkpoint"] == made["checkpoint"]
    assert {"auto_max", "manual_max", "manual_available"} <= set(listed)
    r = await client.call_tool("snapshots_list", {})
    assert text(r).startswith("Snapshots (")
    assert json.loads((await client.call_tool("snapshots_list", {"format": "json"}))
                      .content[0].text)["snapshots"]

    # same size, other bytes: Capsem (size-based) missed this
    (ws / "same.txt").write_text("bbbb")
    (ws / "gone.txt").unlink()
    (ws / "new.txt").write_text("hi")
    changes = await ok(client, "snapshots_changes", format="json")
    ops = {c["path"]: c["op"] for c in changes["changes"]}
    assert ops["same.txt"] == "modified"
    assert ops["gone.txt"] == "deleted" and ops["new.txt"] == "created"
    row = next(c for c in changes["changes"] if c["path"] == "same.txt")
    assert row["checkpoint"] == made["checkpoint"] and row["cp"] == "cp-0"
    assert row["checkpoint_name"] == "base-naive_1" and row["size"] == 4
    assert text(await client.call_tool("snapshots_changes", {})).startswith("Changed Files (")

    after = await ok(client, "snapshots_create", name="after-edit")
    listed = await ok(client, "snapshots_list", format="json", include_changes=True)
    top = listed["snapshots"][0]
    assert top["checkpoint"] == after["checkpoint"]
    assert top["changes_summary"] == {"created": 1, "edited": 1, "deleted": 1, "total": 3}
    assert {c["path"]: c["op"] for c in top["changes"]} == {
        "same.txt": "modified", "gone.txt": "deleted", "new.txt": "new"}


# -- revert and paths ------------------------------------------------------------------------


async def test_revert_file_and_new_file_without_checkpoint(client: Client, ws: Path) -> None:
    (ws / "keep.txt").write_text("v1\n")
    snap = await ok(client, "snapshots_create", name="revert-base")
    (ws / "keep.txt").write_text("v2\n")
    r = await ok(client, "snapshots_revert", path="keep.txt", checkpoint="revert-base")
    assert r["reverted"] is True and r["action"] == "restored"
    assert r["checkpoint"] == snap["checkpoint"] and r["path"] == "keep.txt"
    assert r["safety_snapshot"] and "snapshots_restore" in r["undo"]
    assert (ws / "keep.txt").read_text() == "v1\n"

    # created after the newest snapshot: no checkpoint needed, it is deleted
    (ws / "brand-new.txt").write_text("x")
    r = await ok(client, "snapshots_revert", path="brand-new.txt")
    assert r["action"] == "deleted" and not (ws / "brand-new.txt").exists()

    r = await ok(client, "snapshots_revert", path="keep.txt")
    assert r["action"] == "unchanged"


async def test_paths_traversal_refused_dotdot_names_accepted(client: Client, ws: Path) -> None:
    for bad in ("../etc/passwd", "/etc/passwd", "sub/../../x"):
        msg = await fails(client, "snapshots_revert", path=bad)
        assert "outside the workspace" in msg and "\n" not in msg, msg
    msg = await fails(client, "snapshots_history", path="../etc/passwd")
    assert "outside the workspace" in msg
    assert "NUL" in await fails(client, "snapshots_revert", path="a\0b")
    assert "empty" in await fails(client, "snapshots_revert", path="")

    (ws / "a..b.txt").write_text("dots\n")
    await ok(client, "snapshots_create", name="dots")
    (ws / "a..b.txt").write_text("changed\n")
    r = await ok(client, "snapshots_revert", path="a..b.txt")
    assert r["action"] == "restored" and (ws / "a..b.txt").read_text() == "dots\n"
    h = await ok(client, "snapshots_history", path="a..b.txt")
    assert h["path"] == "a..b.txt" and h["versions"]


async def test_checkpoint_references(client: Client, ws: Path) -> None:
    (ws / "ref.txt").write_text("one")
    snap = await ok(client, "snapshots_create", name="ref-one")
    msg = await fails(client, "snapshots_revert", path="ref.txt", checkpoint="nope-nope")
    assert "no snapshot matches 'nope-nope'" in msg and "\n" not in msg
    assert "only" in await fails(client, "snapshots_delete", checkpoint="cp-9999")
    (ws / "ref.txt").write_text("two")
    r = await ok(client, "snapshots_revert", path="ref.txt", checkpoint="cp-0")
    assert r["checkpoint"] == snap["checkpoint"] and (ws / "ref.txt").read_text() == "one"
    prefix = snap["checkpoint"][5:12]
    d = await ok(client, "snapshots_diff", checkpoint=prefix, path="ref.txt")
    assert d["checkpoint"] == snap["checkpoint"]
    msg = await fails(client, "snapshots_create", name="cp-3")
    assert "reference" in msg


# -- names -------------------------------------------------------------------------------------

RULE = "a snapshot name is 1-64 characters, each a letter (A-Z, a-z), a digit, '_' or '-'"


@pytest.mark.parametrize("bad", ["", "x" * 65, "two words", "a/b", "../x", "naïve", "☃",
                                 " lead", "tab\there", "new\nline", "dot.name"])
async def test_invalid_names_are_tool_errors(client: Client, bad: str) -> None:
    for tool, args in (("snapshots_create", {"name": bad}),
                       ("snapshots_compact", {"checkpoints": ["cp-0"], "name": bad})):
        msg = await fails(client, tool, **args)
        assert msg.endswith(RULE) and "\n" not in msg, (tool, msg)


async def test_reserved_names_stay_refused(client: Client) -> None:
    for bad in ("latest", "HEAD", "cp-0", "snap_abc", "42"):
        assert "reads as a snapshot reference" in await fails(client, "snapshots_create",
                                                              name=bad)


async def test_longest_name_and_every_allowed_character(client: Client) -> None:
    longest = ("Az09_-" * 11)[:64]
    made = await ok(client, "snapshots_create", name=longest)
    assert made["name"] == longest
    listed = await ok(client, "snapshots_list", format="json")
    assert listed["snapshots"][0]["name"] == longest
    r = await ok(client, "snapshots_compact", checkpoints=[made["checkpoint"]], name="x" * 64)
    assert r["name"] == "x" * 64
    await ok(client, "snapshots_delete", checkpoint="x" * 64)  # the module shares one pool


# -- history / diff / pagination ---------------------------------------------------------------


async def test_history(client: Client, ws: Path) -> None:
    f = ws / "hist.txt"
    f.write_text("1")
    a = await ok(client, "snapshots_create", name="h1")
    b = await ok(client, "snapshots_create", name="h2")
    f.write_text("2")  # same size, new content
    c = await ok(client, "snapshots_create", name="h3")
    f.unlink()
    d = await ok(client, "snapshots_create", name="h4")
    h = await ok(client, "snapshots_history", path="hist.txt")
    assert h["exists_now"] is False and h["current_size"] is None
    status = {v["checkpoint"]: v["status"] for v in h["versions"]}
    assert [status[x["checkpoint"]] for x in (a, b, c, d)] == [
        "new", "unchanged", "modified", "deleted"]
    assert h["versions"][0]["checkpoint"] == d["checkpoint"]  # newest first


async def test_diff_and_character_safe_pagination(client: Client, ws: Path) -> None:
    f = ws / "café-😀.txt"
    f.write_text("é😀 old\n")
    snap = await ok(client, "snapshots_create", name="diff-base")
    f.write_text("é😀 new\n")
    d = await ok(client, "snapshots_diff", path="café-😀.txt", checkpoint="diff-base")
    assert d["files"] == [{"path": "café-😀.txt", "op": "modified", "kind": "file"}]
    full = d["diff"]
    assert "-é😀 old" in full and "+é😀 new" in full and d["next_start_index"] is None
    assert d["total_length"] == len(full) and d["checkpoint"] == snap["checkpoint"]

    # one character at a time, the pages put the diff back together exactly
    pieces, start = [], 0
    while start is not None:
        page = await ok(client, "snapshots_diff", path="café-😀.txt", checkpoint="diff-base",
                        start_index=start, max_length=7)
        assert len(page["diff"]) <= 7
        pieces.append(page["diff"])
        start = page["next_start_index"]
    assert "".join(pieces) == full
    r = await client.call_tool("snapshots_diff", {"path": "café-😀.txt",
                                                  "checkpoint": "diff-base",
                                                  "start_index": full.index("😀"),
                                                  "max_length": 1})
    assert r.structured_content["diff"] == "😀"
    assert "Use start_index=" in text(r)

    past = await ok(client, "snapshots_diff", checkpoint="diff-base", start_index=10**6)
    assert past["diff"] == "" and past["next_start_index"] is None

    lst = await ok(client, "snapshots_list", max_length=1)
    assert lst["end_index"] == 1 and lst["next_start_index"] == 1
    end = await ok(client, "snapshots_list", start_index=lst["total_length"])
    assert end["next_start_index"] is None
    r = await client.call_tool("snapshots_changes", {"start_index": 10**6})
    assert "past the end" in text(r)

    for bad in ({"start_index": -1}, {"max_length": 0}, {"format": "xml"}):
        await fails(client, "snapshots_list", **bad)


# -- compact / delete / restore ----------------------------------------------------------------


async def test_compact_keeps_deletions(client: Client, ws: Path) -> None:
    (ws / "cmp").mkdir()
    (ws / "cmp" / "f1").write_text("1")
    (ws / "cmp" / "f2").write_text("2")
    c1 = await ok(client, "snapshots_create", name="c1")
    (ws / "cmp" / "f2").unlink()
    c2 = await ok(client, "snapshots_create", name="c2")
    r = await ok(client, "snapshots_compact", checkpoints=["c1", c2["checkpoint"]],
                 name="merged")
    assert r["compacted"] is True and r["merged_count"] == 2
    assert r["deleted_checkpoints"] == [c1["checkpoint"]] and r["name"] == "merged"
    assert "no snapshot matches" in await fails(client, "snapshots_delete",
                                                checkpoint=c1["checkpoint"])
    (ws / "cmp" / "f1").write_text("changed")
    await ok(client, "snapshots_restore", checkpoint="merged", paths=["cmp"])
    assert (ws / "cmp" / "f1").read_text() == "1"
    assert not (ws / "cmp" / "f2").exists()  # Capsem's merge brought it back
    assert "no snapshot matches" in await fails(client, "snapshots_compact",
                                                checkpoints=["nope-nope"])
    await fails(client, "snapshots_compact", checkpoints=[])


async def test_delete(client: Client, ws: Path) -> None:
    d = await ok(client, "snapshots_create", name="to-delete")
    r = await ok(client, "snapshots_delete", checkpoint="to-delete")
    assert r == {**r, "deleted": True, "checkpoint": d["checkpoint"], "name": "to-delete"}
    await fails(client, "snapshots_delete", checkpoint=d["checkpoint"])


async def test_restore_dry_run_then_real_then_undo(client: Client, ws: Path) -> None:
    (ws / "r.txt").write_text("before")
    await ok(client, "snapshots_create", name="restore-me")
    (ws / "r.txt").write_text("after")
    (ws / "extra.txt").write_text("e")
    dry = await ok(client, "snapshots_restore", checkpoint="restore-me", dry_run=True)
    assert dry["restored"] is False and dry["dry_run"] is True
    assert {a["path"] for a in dry["actions"]} >= {"r.txt", "extra.txt"}
    assert (ws / "r.txt").read_text() == "after"
    real = await ok(client, "snapshots_restore", checkpoint="restore-me")
    assert real["restored"] is True and real["safety_snapshot"]
    assert real["counts"]["modified"] >= 1 and real["counts"]["deleted"] >= 1
    assert "snapshots_restore" in real["undo"] and "ctrlz undo" in real["undo"]
    assert (ws / "r.txt").read_text() == "before" and not (ws / "extra.txt").exists()
    msg = await fails(client, "snapshots_delete", checkpoint=real["safety_snapshot"])
    assert "undo" in msg
    back = await ok(client, "snapshots_restore", checkpoint=real["safety_snapshot"])
    assert back["restored"] and (ws / "r.txt").read_text() == "after"
    assert (ws / "extra.txt").exists()
    await fails(client, "snapshots_restore", checkpoint="restore-me", paths=["../x"])


# -- servers of their own ----------------------------------------------------------------------


async def test_full_manual_pool(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = _env(tmp_path, CTRLZ_MANUAL_MAX="1")
    _init(ws, env)
    (ws / "f").write_text("x")
    async with _server(ws, env) as client:
        first = await ok(client, "snapshots_create", name="only")
        assert first["available"] == 0
        msg = await fails(client, "snapshots_create", name="second")
        assert "manual pool is full" in msg and "snapshots_delete" in msg and "\n" not in msg
        await ok(client, "snapshots_delete", checkpoint="only")
        assert (await ok(client, "snapshots_create", name="second"))["available"] == 0


async def test_no_workspace_then_init(tmp_path: Path) -> None:
    ws = tmp_path / "plain"
    ws.mkdir()
    env = _env(tmp_path)
    async with _server(ws, env) as client:
        msg = await fails(client, "snapshots_list")
        assert "ctrlz init" in msg
        assert "ctrlz init" in await fails(client, "snapshots_create", name="x")
        _init(ws, env)  # the server picks the workspace up without a restart
        r = await client.call_tool("snapshots_changes", {})
        assert not r.is_error and text(r).startswith("No checkpoints available yet.")


async def test_a_server_started_in_a_subdirectory_takes_paths_from_the_workspace_root(
        tmp_path: Path) -> None:
    """Every tool's schema says paths are relative to the workspace root: a server whose cwd
    is ``ws/sub`` (an agent launched in one package of a monorepo) must revert ``ws/a.txt``
    for ``a.txt``, and never touch ``ws/sub/a.txt``."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    env = _env(tmp_path, CTRLZ_DAEMON="0")
    (ws / "a.txt").write_text("root a\n")
    _init(ws, env)
    async with _server(ws / "sub", env) as client:
        await ok(client, "snapshots_create", name="base")
        (ws / "a.txt").write_text("changed by the agent\n")
        (ws / "sub" / "a.txt").write_text("new work, never snapshotted\n")

        h = await ok(client, "snapshots_history", path="a.txt")
        assert h["path"] == "a.txt" and h["exists_now"] and h["versions"]
        data = (await client.call_tool("snapshots_diff", {"path": "a.txt"})).structured_content
        assert [f["path"] for f in data["files"]] == ["a.txt"]
        dry = await ok(client, "snapshots_restore", checkpoint="base", paths=["a.txt"],
                       dry_run=True)
        assert [a["path"] for a in dry["actions"]] == ["a.txt"]

        r = await ok(client, "snapshots_revert", path="a.txt", checkpoint="base")
        assert r["path"] == "a.txt" and r["action"] == "restored"
        assert (ws / "a.txt").read_text() == "root a\n"
        assert (ws / "sub" / "a.txt").read_text() == "new work, never snapshotted\n"
        msg = await fails(client, "snapshots_revert", path="../x")
        assert "../x is outside the workspace" in msg


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent)}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


async def test_restore_names_what_it_does_to_git_and_takes_a_choice(tmp_path: Path) -> None:
    """A restore over commits made since its checkpoint says so in ``git``, is refused until
    ``git`` chooses, and ``git="keep"`` leaves the history alone (issue 41, section 6)."""
    ws = tmp_path / "repo"
    ws.mkdir()
    env = _env(tmp_path)
    _git(ws, "init", "-q", "-b", "main")
    (ws / "a.txt").write_text("one\n")
    _git(ws, "add", "a.txt")
    _git(ws, "commit", "-qm", "one")
    first = _git(ws, "rev-parse", "HEAD")
    _init(ws, env)
    async with _server(ws, env) as client:
        await ok(client, "snapshots_create", name="A")
        (ws / "a.txt").write_text("two\n")
        _git(ws, "commit", "-qam", "two")
        second = _git(ws, "rev-parse", "HEAD")
        dry = await ok(client, "snapshots_restore", checkpoint="A", dry_run=True)
        [change] = dry["git"]
        assert change["unreachable_commits"] == 1 and change["at_risk"]
        assert f"branch main moves {second[:7]} → {first[:7]}" in change["summary"]
        msg = await fails(client, "snapshots_restore", checkpoint="A")
        assert "--git=keep" in msg and "1 commit made since becomes unreachable" in msg
        kept = await ok(client, "snapshots_restore", checkpoint="A", git="keep")
        assert [g["mode"] for g in kept["git"]] == ["keep"]
        assert (ws / "a.txt").read_text() == "one\n" and _git(ws, "rev-parse", "HEAD") == second
        await ok(client, "snapshots_undo")
        done = await ok(client, "snapshots_restore", checkpoint="A", git="restore")
        assert done["git"][0]["refs"] == [{"ref": "refs/heads/main", "before": second,
                                           "after": first}]
        assert _git(ws, "rev-parse", "HEAD") == first
        back = await ok(client, "snapshots_undo")
        assert back["git"][0]["unreachable_commits"] == 0
        assert _git(ws, "rev-parse", "HEAD") == second
