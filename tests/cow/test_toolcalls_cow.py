"""Agent tool calls on a store that clones: a rewind past a shell call compares what the
shell call's workspace snapshot held (a clone, named by its blocks) with what the file tool
left (named by its hash) by content, so a large file the agent wrote comes back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz.workspace import Workspace
from tests.conftest import make_tree

CTRLZ = str(Path(sys.executable).parent / "ctrlz")


def hook(payload: dict, cwd: Path) -> None:  # type: ignore[type-arg]
    proc = subprocess.run([CTRLZ, "hook", "claude"], input=json.dumps(payload).encode(),
                          cwd=cwd, capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr


def claude(event: str, ws: Path, **fields: object) -> dict:  # type: ignore[type-arg]
    return {"session_id": "c10e-session", "transcript_path": str(ws / ".t.jsonl"),
            "cwd": str(ws), "hook_event_name": event, "permission_mode": "default", **fields}


def test_rewind_past_a_shell_call_brings_back_a_large_file(xfs: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setenv("CTRLZ_HOME", str(xfs / "home"))  # the store on XFS, beside the files
    ws = xfs / "ws"
    original = os.urandom(5 << 20)
    make_tree(ws, {"README.md": "# demo\n", "data.bin": original})
    Workspace.init(ws).close()
    hook(claude("SessionStart", ws, source="startup"), ws)
    hook(claude("UserPromptSubmit", ws, prompt="regenerate the data"), ws)
    write = {"file_path": str(ws / "data.bin"), "content": "(binary)"}
    hook(claude("PreToolUse", ws, tool_name="Write", tool_input=write, tool_use_id="toolu_1W"), ws)
    written = os.urandom(5 << 20)
    (ws / "data.bin").write_bytes(written)
    hook(claude("PostToolUse", ws, tool_name="Write", tool_input=write, tool_use_id="toolu_1W",
                tool_response={"filePath": write["file_path"], "success": True}), ws)
    bash = {"command": "rm data.bin", "description": "Remove it"}
    hook(claude("PreToolUse", ws, tool_name="Bash", tool_input=bash, tool_use_id="toolu_2B"), ws)
    (ws / "data.bin").unlink()
    with Workspace.open(ws) as w:  # the shell call's snapshot stored data.bin as a clone
        assert any(r[5] == 2 for r in w.repo.catalog.object_rows())
    proc = subprocess.run([CTRLZ, "rewind", "toolu_2B"], cwd=ws, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert (ws / "data.bin").read_bytes() == written
    proc = subprocess.run([CTRLZ, "rewind", "toolu_1W"], cwd=ws, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert (ws / "data.bin").read_bytes() == original
