"""What keeps a file-tool hook cheap, checked structurally (never by timing).

An agent runs the hook in a new interpreter before every file edit, so its latency is mostly
imports. These tests pin the modules a PreToolUse Write must not load, the string-based helpers
it uses instead of their Path-based twins, and the hand-written value classes that replaced
dataclasses on that path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz import toolcalls as tc
from ctrlz.hooks.runner import HookContext
from ctrlz.toolcalls.images import Image
from ctrlz.toolcalls.records import EntryRow, SnapRow
from ctrlz.toolcalls.store import ToolcallStore, find_workspace, locate, store_path_for
from ctrlz.workspace import Workspace
from ctrlz.workspace import store_path_for as workspace_store_path_for

# heavy modules the hook used to load and must not any more
NOT_LOADED = ("dataclasses", "logging", "hashlib", "secrets", "threading", "ctrlz.types",
              "ctrlz.workspace", "ctrlz.engine", "ctrlz.state.scan", "click")

PROBE = """
import io, json, sys
from ctrlz.hooks.runner import run
run("claude", io.BytesIO(sys.argv[1].encode()))
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


@pytest.fixture
def ws(ws_dir: Path) -> Path:
    Workspace.init(ws_dir).close()
    (ws_dir / "src").mkdir()
    (ws_dir / "src" / "app.py").write_text("print('hello')\n" * 20)
    return ws_dir


def test_a_write_hook_loads_none_of_the_heavy_modules(ws: Path) -> None:
    payload = {"session_id": "s1", "cwd": str(ws), "hook_event_name": "PreToolUse",
               "tool_name": "Write", "tool_use_id": "toolu_1",
               "tool_input": {"file_path": str(ws / "src" / "app.py"), "content": "x"}}
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(payload),
                          json.dumps(NOT_LOADED)], capture_output=True, text=True, check=True,
                         cwd=ws, timeout=60)
    assert json.loads(out.stdout) == []
    # and it did its job: the pre-image is there
    snaps = tc.list_snapshots("s1", workspace=ws)
    assert [s["captured_paths"] for s in snaps] == [["src/app.py"]]


def test_once_the_store_exists_a_write_hook_loads_no_store_at_all(ws: Path) -> None:
    """The capture goes to the inbox (ctrlz.toolcalls.inbox): no SQLite, no object store,
    no hash function, no compressor in the hook; the next opener indexes it."""
    tc.start_session("s1", workspace=ws)  # the tool-call store exists from here on
    payload = {"session_id": "s1", "cwd": str(ws), "hook_event_name": "PreToolUse",
               "tool_name": "Write", "tool_use_id": "toolu_2",
               "tool_input": {"file_path": str(ws / "src" / "app.py"), "content": "x"}}
    store_modules = (*NOT_LOADED, "sqlite3", "_sqlite3", "blake3", "zstandard",
                     "ctrlz.state.store.objects", "ctrlz.state.db.catalog", "ctrlz.toolcalls.api",
                     "ctrlz.toolcalls.records", "collections.abc", "contextlib")
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(payload),
                          json.dumps(store_modules)], capture_output=True, text=True,
                         check=True, cwd=ws, timeout=60)
    assert json.loads(out.stdout) == []
    snaps = tc.list_snapshots("s1", workspace=ws)
    assert [s["captured_paths"] for s in snaps] == [["src/app.py"]]


def test_locate_is_find_workspace_on_strings(ws: Path) -> None:
    (ws / "deeper" / "still").mkdir(parents=True)
    root, store = locate(str(ws / "deeper" / "still"))
    assert isinstance(root, str) and isinstance(store, str)
    assert (Path(root), Path(store)) == find_workspace(ws / "deeper" / "still")
    home = Path(os.environ["CTRLZ_HOME"])
    assert Path(store) == store_path_for(ws, home) == workspace_store_path_for(ws, home)


@pytest.mark.parametrize("name", ["plain", "with space", "ünïcødé", "x" * 60, "a.b_c-d"])
def test_store_slug_matches_the_workspace_formula(tmp_path: Path, name: str) -> None:
    root = tmp_path / name
    root.mkdir()
    home = tmp_path / "home"
    assert store_path_for(root, home) == workspace_store_path_for(root, home)


def test_toolcall_store_accepts_strings_and_paths(ws: Path) -> None:
    _, store = locate(str(ws))
    with ToolcallStore(store) as a, ToolcallStore(Path(store)) as b:
        assert a.path == b.path == Path(store) / "toolcalls"
        assert a.objects.packs_dir == Path(store) / "toolcalls" / "packs"


def test_hook_context_gives_paths_and_strings() -> None:
    ctx = HookContext("claude", "/w", Path("/s"), "/w/sub")
    assert ctx.root == Path("/w") and ctx.store_path == Path("/s")
    assert (ctx.root_dir, ctx.store_dir) == ("/w", "/s")
    assert ctx == HookContext("claude", Path("/w"), "/s", "/w/sub")
    assert ctx != HookContext("gemini", "/w", "/s", "/w/sub")


def test_value_classes_compare_by_value() -> None:
    a = Image("file", b"\x01" * 32, 3, 0o644)
    assert a == Image("file", b"\x01" * 32, 3, 0o644)
    assert a != Image("file", b"\x01" * 32, 3, 0o600)
    assert hash(a) == hash(Image("file", b"\x01" * 32, 3, 0o644))
    assert a.key == ("file", b"\x01" * 32)
    with pytest.raises(AttributeError):
        a.kind = "absent"  # type: ignore[misc]
    row = SnapRow(1, "s", "t", 0, 5, "files", None, None, None, None, False, False, 0)
    assert row.paths == [] and row == SnapRow(1, "s", "t", 0, 5, "files", None, None, None,
                                              None, False, False, 0, [])
    assert "snapshot_id='t'" in repr(row)
    assert EntryRow(b"p", a, None) == EntryRow(b"p", a, None)
