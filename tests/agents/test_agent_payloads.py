"""Each agent's own hook payloads, fed to `ctrlz-hook` as the agent runs it (a subprocess, JSON
on stdin, cwd wherever the agent is), then `ctrlz rewind` and `ctrlz undo`.

The payloads follow each agent's published shape: Cursor's (``conversation_id``,
``workspace_roots`` and no ``cwd``, a ``tool_use_id`` holding a newline), Copilot CLI's two
dialects (camelCase with ``toolArgs`` as a JSON string; the Claude-compatible one it sends to
``.claude/settings*.json`` hooks, with ``tool_input.path`` and no ``tool_use_id``), the
OpenCode plugin's (``@opencode-ai/plugin`` ``tool.execute.before`` input and output), and
Claude Code's and Codex's turn ids. The real agents run in tests/agents/real.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz.workspace import Workspace

BIN = Path(sys.executable).parent
INITIAL = {"src/app.py": "print('hello')\n", "README.md": "# demo\n"}


def hook(agent: str, payload: dict, *extra: str, cwd: str = "/") -> None:
    proc = subprocess.run([str(BIN / "ctrlz-hook"), agent, *extra],
                          input=json.dumps(payload).encode(), cwd=cwd, capture_output=True,
                          timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def ctrlz(*args: str, cwd: Path) -> str:
    proc = subprocess.run([str(BIN / "ctrlz"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def contents(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def hook_errors() -> list[dict]:
    found = []
    for path in Path(os.environ["CTRLZ_HOME"]).rglob("hook-errors.jsonl"):
        found += [json.loads(line) for line in path.read_text().splitlines()]
    return found


@pytest.fixture
def ws(ws_dir: Path) -> Path:
    for rel, text in INITIAL.items():
        (ws_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws_dir / rel).write_text(text)
    Workspace.init(ws_dir).close()
    return ws_dir


def listing(ws: Path) -> list[dict]:
    return json.loads(ctrlz("rewind", "--list", "--json", cwd=ws))["tool_calls"]


def check_rewind_and_undo(ws: Path, before: dict[str, bytes], first_id: str) -> None:
    after = contents(ws)
    ctrlz("rewind", first_id, cwd=ws)
    assert contents(ws) == before
    ctrlz("undo", cwd=ws)
    assert contents(ws) == after


def test_cursor_payloads(ws: Path) -> None:
    before = contents(ws)
    base = {"conversation_id": "conv-1", "generation_id": "gen-1", "model": "auto",
            "cursor_version": "2.3.0", "workspace_roots": [str(ws)], "user_email": None,
            "transcript_path": None}
    hook("cursor", base | {"hook_event_name": "sessionStart", "session_id": "conv-1"})
    # -p mode: no beforeSubmitPrompt; the generation id still makes the turn
    write = {"file_path": str(ws / "src" / "new.py"), "contents": "N = 1\n"}
    hook("cursor", base | {"hook_event_name": "preToolUse", "tool_name": "Write",
                           "tool_input": write, "tool_use_id": "call_a\nctc_1"})
    (ws / "src" / "new.py").write_text("N = 1\n")
    hook("cursor", base | {"hook_event_name": "postToolUse", "tool_name": "Write",
                           "tool_input": write, "tool_use_id": "call_a\nctc_1"})
    edit = {"path": str(ws / "README.md"), "old_string": "# demo", "new_string": "# cur"}
    hook("cursor", base | {"hook_event_name": "preToolUse", "tool_name": "StrReplace",
                           "tool_input": edit, "tool_use_id": "call_b\nctc_2"})
    (ws / "README.md").write_text("# cur\n")
    hook("cursor", base | {"hook_event_name": "preToolUse", "tool_name": "Shell",
                           "generation_id": "gen-2", "tool_use_id": "call_c\nctc_3",
                           "tool_input": {"command": "rm -rf src", "cwd": str(ws)}})
    shutil.rmtree(ws / "src")
    calls = listing(ws)
    assert [(c["agent"], c["tool"], c["tool_use_id"], c["turn"]) for c in calls] == [
        ("cursor", "Write", "call_a-ctc_1", 1), ("cursor", "StrReplace", "call_b-ctc_2", 1),
        ("cursor", "Shell", "call_c-ctc_3", 2)]
    assert "cursor" in ctrlz("rewind", "--list", cwd=ws)
    check_rewind_and_undo(ws, before, "call_a-ctc_1")
    assert hook_errors() == []


def test_copilot_native_dialect(ws: Path) -> None:
    before = contents(ws)
    base = {"sessionId": "cop-1", "cwd": str(ws)}
    hook("copilot", base | {"timestamp": 1763900000000, "source": "new"}, "sessionStart")
    hook("copilot", base | {"timestamp": 1763900000100, "prompt": "go"}, "userPromptSubmitted")
    create = {"path": str(ws / "src" / "new.py"), "file_text": "N = 1\n"}
    pre = base | {"timestamp": 1763900000200, "toolName": "create",
                  "toolArgs": json.dumps(create)}
    hook("copilot", pre, "preToolUse")
    (ws / "src" / "new.py").write_text("N = 1\n")
    hook("copilot", pre | {"toolResult": {"resultType": "success"}}, "postToolUse")
    edit = {"path": str(ws / "README.md"), "old_str": "# demo", "new_str": "# cop"}
    hook("copilot", base | {"timestamp": 1763900000300, "toolName": "edit",
                            "toolArgs": json.dumps(edit)}, "preToolUse")
    (ws / "README.md").write_text("# cop\n")
    hook("copilot", base | {"timestamp": 1763900000400, "toolName": "bash",
                            "toolArgs": json.dumps({"command": "rm -rf src"})}, "preToolUse")
    shutil.rmtree(ws / "src")
    calls = listing(ws)
    assert [(c["agent"], c["tool"], c["kind"]) for c in calls] == [
        ("copilot", "create", "files"), ("copilot", "edit", "files"),
        ("copilot", "bash", "bash")]
    assert calls[0]["captured_paths"] == ["src/new.py"]
    check_rewind_and_undo(ws, before, calls[0]["tool_use_id"])
    assert hook_errors() == []


def test_copilot_through_the_claude_hook_is_recorded_as_copilot_once(ws: Path) -> None:
    """Copilot CLI runs `.claude/settings.local.json` hooks too, in its Claude-compatible
    dialect: Claude's tool names, ``tool_input.path``, no tool id. With its own hooks also
    installed, the same call arrives twice; it is recorded once, under copilot."""
    write = {"path": str(ws / "notes.md"), "file_text": "hi\n"}
    claude_dialect = {"hook_event_name": "PreToolUse", "session_id": "cop-2", "cwd": str(ws),
                      "timestamp": "2026-11-23T10:00:00.500Z", "tool_name": "Write",
                      "tool_input": write}
    native = {"sessionId": "cop-2", "cwd": str(ws), "timestamp": 1795428000500,
              "toolName": "create", "toolArgs": json.dumps(write)}
    hook("claude", claude_dialect)
    hook("copilot", native, "preToolUse")
    (ws / "notes.md").write_text("hi\n")
    calls = listing(ws)
    assert len(calls) == 1 and calls[0]["agent"] == "copilot"
    assert calls[0]["captured_paths"] == ["notes.md"]
    ctrlz("rewind", calls[0]["tool_use_id"], cwd=ws)
    assert not (ws / "notes.md").exists()


def test_cursor_through_the_claude_hook_is_recorded_as_cursor(ws: Path) -> None:
    payload = {"hook_event_name": "PreToolUse", "conversation_id": "conv-9",
               "generation_id": "g1", "workspace_roots": [str(ws)], "tool_name": "Write",
               "tool_use_id": "call_z\nctc_9",
               "tool_input": {"file_path": str(ws / "x.txt"), "contents": "x"}}
    hook("claude", payload)
    calls = listing(ws)
    assert [(c["agent"], c["tool_use_id"]) for c in calls] == [("cursor", "call_z-ctc_9")]


def test_opencode_plugin_payloads(ws: Path) -> None:
    before = contents(ws)
    base = {"cwd": str(ws), "session_id": "ses_1"}
    hook("opencode", base | {"hook_event_name": "session.created"})
    hook("opencode", base | {"hook_event_name": "chat.message", "message_id": "msg_1"})
    write = {"filePath": str(ws / "src" / "new.py"), "content": "N = 1\n"}
    hook("opencode", base | {"hook_event_name": "tool.execute.before", "tool_name": "write",
                             "tool_use_id": "call_w", "tool_input": write})
    (ws / "src" / "new.py").write_text("N = 1\n")
    hook("opencode", base | {"hook_event_name": "tool.execute.after", "tool_name": "write",
                             "tool_use_id": "call_w", "tool_input": write})
    patch = "*** Begin Patch\n*** Update File: README.md\n@@\n-# demo\n+# oc\n*** End Patch"
    hook("opencode", base | {"hook_event_name": "tool.execute.before",
                             "tool_name": "apply_patch", "tool_use_id": "call_p",
                             "tool_input": {"patchText": patch}})
    (ws / "README.md").write_text("# oc\n")
    hook("opencode", base | {"hook_event_name": "tool.execute.before", "tool_name": "bash",
                             "tool_use_id": "call_b", "tool_input": {"command": "rm -rf src"}})
    shutil.rmtree(ws / "src")
    calls = listing(ws)
    assert [(c["agent"], c["tool_use_id"]) for c in calls] == [
        ("opencode", "call_w"), ("opencode", "call_p"), ("opencode", "call_b")]
    assert calls[1]["captured_paths"] == ["README.md"]
    check_rewind_and_undo(ws, before, "call_w")


def test_claude_powershell_failure_event_and_prompt_ids(ws: Path) -> None:
    base = {"session_id": "cl-1", "transcript_path": "/t.jsonl", "cwd": str(ws),
            "permission_mode": "default"}
    write = {"file_path": str(ws / "a.txt"), "content": "a"}
    hook("claude", base | {"hook_event_name": "PreToolUse", "prompt_id": "p1",
                           "tool_name": "Write", "tool_use_id": "t1", "tool_input": write})
    hook("claude", base | {"hook_event_name": "PostToolUseFailure", "prompt_id": "p1",
                           "tool_name": "Write", "tool_use_id": "t1", "tool_input": write,
                           "error": "disk full"})
    hook("claude", base | {"hook_event_name": "PreToolUse", "prompt_id": "p2",
                           "tool_name": "PowerShell", "tool_use_id": "t2",
                           "tool_input": {"command": "Remove-Item -Recurse src"}})
    shutil.rmtree(ws / "src")
    calls = listing(ws)
    assert [(c["tool"], c["kind"], c["turn"]) for c in calls] == [
        ("Write", "files", 1), ("PowerShell", "bash", 2)]
    ctrlz("rewind", "2", cwd=ws)
    assert (ws / "src" / "app.py").read_text() == INITIAL["src/app.py"]


def test_codex_turn_ids_make_turns_without_a_prompt_event(ws: Path) -> None:
    base = {"session_id": "cx-1", "transcript_path": None, "cwd": str(ws), "model": "gpt-5.5",
            "permission_mode": "default"}
    hook("codex", base | {"hook_event_name": "UserPromptSubmit", "turn_id": "t-1",
                          "prompt": "go"})
    for turn, call in (("t-1", "c1"), ("t-1", "c2"), ("t-2", "c3")):
        hook("codex", base | {"hook_event_name": "PreToolUse", "turn_id": turn,
                              "tool_name": "Bash", "tool_use_id": call,
                              "tool_input": {"command": "true"}})
    assert [c["turn"] for c in listing(ws)] == [1, 1, 2]


def test_rewind_to_a_later_turn_then_an_earlier_one(ws: Path) -> None:
    """`rewind 2` then `rewind 1`: the second finds the files where the first put them (a
    state the calls themselves went through, not a later edit) and takes them on back."""
    base = {"session_id": "cl-2", "transcript_path": "/t.jsonl", "cwd": str(ws)}
    readme = str(ws / "README.md")
    for turn, text in ((1, "# one\n"), (2, "# two\n")):
        hook("claude", base | {"hook_event_name": "UserPromptSubmit", "prompt": "edit"})
        edit = {"file_path": readme, "old_string": "x", "new_string": "y"}
        hook("claude", base | {"hook_event_name": "PreToolUse", "tool_name": "Edit",
                               "tool_use_id": f"e{turn}", "tool_input": edit})
        Path(readme).write_text(text)
        hook("claude", base | {"hook_event_name": "PostToolUse", "tool_name": "Edit",
                               "tool_use_id": f"e{turn}", "tool_input": edit})
    ctrlz("rewind", "2", cwd=ws)
    assert Path(readme).read_text() == "# one\n"
    out = json.loads(ctrlz("rewind", "1", "--json", cwd=ws))
    assert out["skipped"] == [] and Path(readme).read_text() == INITIAL["README.md"]
    ctrlz("undo", cwd=ws)
    assert Path(readme).read_text() == "# one\n"
    Path(readme).write_text("# mine\n")  # a real later edit is still left alone
    out = json.loads(ctrlz("rewind", "1", "--json", cwd=ws))
    assert [s["path"] for s in out["skipped"]] == ["README.md"]
    assert Path(readme).read_text() == "# mine\n"
