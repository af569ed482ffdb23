"""The OpenCode plugin ``ctrlz install opencode`` writes, run under Node the way OpenCode (Bun)
calls a plugin: the exported plugin function with ``{directory}``, then its hooks with the
inputs and outputs ``@opencode-ai/plugin``'s ``Hooks`` type gives them. A subagent's child
session is filed under its parent; without ``ctrlz-hook`` on PATH the plugin warns once and
never throws (a throwing before-hook is how OpenCode blocks a tool)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz.installers.opencode import PLUGIN
from ctrlz.workspace import Workspace

BIN = Path(sys.executable).parent
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")

DRIVER = """
import { CtrlzPlugin } from "./ctrlz.mjs";
import { writeFileSync, rmSync } from "node:fs";
const dir = process.argv[2];
const hooks = await CtrlzPlugin({ directory: dir, worktree: dir });
await hooks.event({ event: { type: "session.created", properties: { info: { id: "ses_p" } } } });
await hooks.event({ event: { type: "session.created",
                             properties: { info: { id: "ses_c", parentID: "ses_p" } } } });
await hooks["chat.message"]({ sessionID: "ses_p", messageID: "msg_1" }, { message: {}, parts: [] });
const args = { filePath: dir + "/new.txt", content: "new\\n" };
await hooks["tool.execute.before"]({ tool: "write", sessionID: "ses_p", callID: "call_1" },
                                   { args });
writeFileSync(dir + "/new.txt", "new\\n");
await hooks["tool.execute.after"]({ tool: "write", sessionID: "ses_p", callID: "call_1", args },
                                  { title: "", output: "", metadata: {} });
await hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_c", callID: "call_2" },
                                   { args: { command: "rm -rf src" } });
rmSync(dir + "/src", { recursive: true });
console.log("done");
"""


def run_driver(tmp_path: Path, ws: Path, path: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "ctrlz.mjs").write_text(PLUGIN)
    (tmp_path / "driver.mjs").write_text(DRIVER)
    return subprocess.run([NODE, str(tmp_path / "driver.mjs"), str(ws)], capture_output=True,
                          text=True, timeout=120, env=os.environ | {"PATH": path})


def test_plugin_hands_tool_calls_to_ctrlz(ws_dir: Path, tmp_path: Path) -> None:
    (ws_dir / "src").mkdir()
    (ws_dir / "src" / "a.py").write_text("A = 1\n")
    Workspace.init(ws_dir).close()
    proc = run_driver(tmp_path, ws_dir, f"{BIN}:/usr/bin:/bin")
    assert proc.returncode == 0 and proc.stdout == "done\n", proc.stderr
    out = subprocess.run([str(BIN / "ctrlz"), "rewind", "--list", "--json"], cwd=ws_dir,
                         capture_output=True, text=True, timeout=60)
    calls = json.loads(out.stdout)["tool_calls"]
    assert [(c["session_id"], c["tool_use_id"], c["agent"], c["turn"]) for c in calls] == [
        ("ses_p", "call_1", "opencode", 1), ("ses_p", "call_2", "opencode", 1)]
    subprocess.run([str(BIN / "ctrlz"), "rewind", "call_1"], cwd=ws_dir, check=True,
                   capture_output=True, timeout=60)
    assert not (ws_dir / "new.txt").exists()
    assert (ws_dir / "src" / "a.py").read_text() == "A = 1\n"


def test_plugin_without_ctrlz_on_path_warns_once_and_lets_tools_run(ws_dir: Path,
                                                                   tmp_path: Path) -> None:
    (ws_dir / "src").mkdir()
    proc = run_driver(tmp_path, ws_dir, "/usr/bin:/bin")
    assert proc.returncode == 0 and proc.stdout == "done\n"
    assert proc.stderr.count("ctrlz-hook is not on PATH") == 1
