"""The agent hooks, run as the agents run them: a subprocess with the documented JSON on stdin.

Each scenario writes a new file, edits an existing one and runs `rm -rf src` the way the agent
would (hook first, then the change), and `ctrlz rewind` must bring the tree back byte for byte.
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

CTRLZ = str(Path(sys.executable).parent / "ctrlz")
INITIAL = {"src/app.py": "print('hello')\n", "src/lib/util.py": "X = 1\n",
           "README.md": "# demo\n"}


def hook(agent: str, payload: dict | str | bytes, cwd: Path, module: bool = False
         ) -> subprocess.CompletedProcess[bytes]:
    data = payload if isinstance(payload, bytes) else (
        payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
    cmd = [sys.executable, "-m", "ctrlz.hooks", agent] if module else [CTRLZ, "hook", agent]
    proc = subprocess.run(cmd, input=data, cwd=cwd, capture_output=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout == b"" and proc.stderr == b"", proc.stderr
    return proc


def ctrlz(*args: str, cwd: Path) -> str:
    proc = subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def contents(root: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = (p.read_bytes(), p.stat().st_mode & 0o777)
    return out


@pytest.fixture
def ws(ws_dir: Path) -> Path:
    for rel, text in INITIAL.items():
        (ws_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws_dir / rel).write_text(text)
    Workspace.init(ws_dir).close()
    return ws_dir


def claude(event: str, ws: Path, **fields: object) -> dict:
    return {"session_id": "c0ffee-session", "transcript_path": str(ws / ".t.jsonl"),
            "cwd": str(ws), "hook_event_name": event, "permission_mode": "default", **fields}


def run_claude_session(ws: Path, module: bool = False) -> None:
    h = lambda p: hook("claude", p, ws, module)  # noqa: E731
    h(claude("SessionStart", ws, source="startup"))
    h(claude("UserPromptSubmit", ws, prompt="add a module"))
    write = {"file_path": str(ws / "src" / "new.py"), "content": "NEW = True\n"}
    h(claude("PreToolUse", ws, tool_name="Write", tool_input=write, tool_use_id="toolu_01W"))
    (ws / "src" / "new.py").write_text("NEW = True\n")
    h(claude("PostToolUse", ws, tool_name="Write", tool_input=write, tool_use_id="toolu_01W",
             tool_response={"filePath": write["file_path"], "success": True}))
    edit = {"file_path": str(ws / "README.md"), "old_string": "# demo",
            "new_string": "# demo, edited", "replace_all": False}
    h(claude("PreToolUse", ws, tool_name="Edit", tool_input=edit, tool_use_id="toolu_02E"))
    (ws / "README.md").write_text("# demo, edited\n")
    h(claude("PostToolUse", ws, tool_name="Edit", tool_input=edit, tool_use_id="toolu_02E",
             tool_response={"filePath": edit["file_path"], "success": True}))
    h(claude("UserPromptSubmit", ws, prompt="now clean up"))
    bash = {"command": "rm -rf src", "description": "Remove src"}
    h(claude("PreToolUse", ws, tool_name="Bash", tool_input=bash, tool_use_id="toolu_03B"))
    subprocess.run(["rm", "-rf", "src"], cwd=ws, check=True)


def test_claude_write_edit_bash_then_rewind_brings_everything_back(ws: Path) -> None:
    before = contents(ws)
    run_claude_session(ws)
    assert not (ws / "src").exists()
    listing = json.loads(ctrlz("rewind", "--list", "--json", cwd=ws))["tool_calls"]
    assert [(i["tool"], i["tool_use_id"], i["turn"]) for i in listing] == [
        ("Write", "toolu_01W", 1), ("Edit", "toolu_02E", 1), ("Bash", "toolu_03B", 2)]
    assert listing[0]["captured_paths"] == ["src/new.py"]
    assert listing[2]["command"] == "rm -rf src"
    text = ctrlz("rewind", "--list", cwd=ws)
    assert "toolu_02E" in text and "rm -rf src" in text
    dry = json.loads(ctrlz("rewind", "toolu_01W", "--dry-run", "--json", cwd=ws))
    assert dry["dry_run"] and "README.md" in dry["changed_paths"]
    assert not (ws / "src").exists()  # the dry run changed nothing
    ctrlz("rewind", "toolu_01W", cwd=ws)
    assert contents(ws) == before
    ctrlz("undo", cwd=ws)  # the rewind itself can be taken back
    assert not (ws / "src").exists() and (ws / "README.md").read_text() == "# demo, edited\n"
    ctrlz("rewind", "toolu_02E", cwd=ws)  # the timeline survives a rewind and its undo
    assert (ws / "src" / "new.py").read_text() == "NEW = True\n"
    assert (ws / "README.md").read_text() == INITIAL["README.md"]
    ctrlz("rewind", "toolu_01W", cwd=ws)
    assert contents(ws) == before


def test_rewind_to_a_turn_number_and_to_the_bash_call(ws: Path) -> None:
    run_claude_session(ws, module=True)
    ctrlz("rewind", "2", cwd=ws)  # just before turn 2: the Bash call is undone
    assert (ws / "src" / "new.py").read_text() == "NEW = True\n"
    assert (ws / "README.md").read_text() == "# demo, edited\n"
    assert (ws / "src" / "app.py").read_text() == INITIAL["src/app.py"]
    ctrlz("rewind", "1", "--session", "c0ffee-session", cwd=ws)
    assert not (ws / "src" / "new.py").exists()
    assert (ws / "README.md").read_text() == INITIAL["README.md"]


def test_gemini_hooks_then_rewind(ws: Path) -> None:
    before = contents(ws)
    base = {"session_id": "gem-1", "transcript_path": "/tmp/x.json", "cwd": str(ws),
            "timestamp": "2026-11-21T10:00:00Z"}
    hook("gemini", base | {"hook_event_name": "SessionStart", "source": "startup"}, ws)
    hook("gemini", base | {"hook_event_name": "BeforeAgent", "prompt": "go"}, ws)
    write = {"file_path": str(ws / "src" / "new.py"), "content": "N = 1\n"}
    hook("gemini", base | {"hook_event_name": "BeforeTool", "tool_name": "write_file",
                           "tool_input": write}, ws)
    (ws / "src" / "new.py").write_text("N = 1\n")
    hook("gemini", base | {"hook_event_name": "AfterTool", "tool_name": "write_file",
                           "tool_input": write, "tool_response": {"llmContent": "ok",
                                                                  "returnDisplay": "ok"}}, ws)
    replace = {"file_path": str(ws / "README.md"), "instruction": "edit",
               "old_string": "# demo", "new_string": "# gem"}
    hook("gemini", base | {"hook_event_name": "BeforeTool", "tool_name": "replace",
                           "tool_input": replace}, ws)
    (ws / "README.md").write_text("# gem\n")
    hook("gemini", base | {"hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                           "tool_input": {"command": "rm -rf src", "dir_path": "."}}, ws)
    shutil.rmtree(ws / "src")
    listing = json.loads(ctrlz("rewind", "--list", "--json", cwd=ws))["tool_calls"]
    assert [i["tool"] for i in listing] == ["write_file", "replace", "run_shell_command"]
    ctrlz("rewind", listing[0]["tool_use_id"], cwd=ws)
    assert contents(ws) == before


def test_codex_hooks_then_rewind(ws: Path) -> None:
    before = contents(ws)
    base = {"session_id": "codex-1", "turn_id": "t1", "transcript_path": None, "cwd": str(ws),
            "model": "gpt-5-codex", "permission_mode": "default"}
    hook("codex", base | {"hook_event_name": "SessionStart", "source": "startup"}, ws)
    hook("codex", base | {"hook_event_name": "UserPromptSubmit", "prompt": "go"}, ws)
    patch = ("*** Begin Patch\n*** Add File: src/new.py\n+N = 1\n"
             "*** Update File: README.md\n@@\n-# demo\n+# codex\n*** End Patch\n")
    hook("codex", base | {"hook_event_name": "PreToolUse", "tool_name": "apply_patch",
                          "tool_input": {"command": patch}, "tool_use_id": "call_1"}, ws)
    (ws / "src" / "new.py").write_text("N = 1\n")
    (ws / "README.md").write_text("# codex\n")
    hook("codex", base | {"hook_event_name": "PreToolUse", "tool_name": "Bash",
                          "tool_input": {"command": "rm -rf src"}, "tool_use_id": "call_2"}, ws)
    shutil.rmtree(ws / "src")
    listing = json.loads(ctrlz("rewind", "--list", "--json", cwd=ws))["tool_calls"]
    assert listing[0]["captured_paths"] == ["README.md", "src/new.py"]
    ctrlz("rewind", "call_1", cwd=ws)
    assert contents(ws) == before


def test_garbage_and_no_workspace_exit_0_silently_and_are_recorded(ws: Path,
                                                                   tmp_path: Path) -> None:
    from ctrlz.hooks import recent_hook_errors

    hook("claude", b"\x00not json{", ws)
    hook("claude", "[1, 2]", ws)
    hook("nosuchagent", claude("UserPromptSubmit", ws), ws)
    outside = tmp_path / "outside"
    outside.mkdir()
    hook("claude", claude("UserPromptSubmit", outside), outside)
    hook("codex", {"hook_event_name": "PreToolUse", "cwd": str(ws), "tool_name": "Bash"}, ws)
    with Workspace.open(ws) as w:
        errors = recent_hook_errors(w)
    assert [e["agent"] for e in errors] == ["claude", "claude", "nosuchagent", "codex"]
    assert "not JSON" in errors[0]["error"]
    assert "not inside a protected workspace" in json.dumps(
        [json.loads(line) for line in
         (Path(os.environ["CTRLZ_HOME"]) / "hook-errors.jsonl").read_text().splitlines()])


def test_file_tool_outside_the_workspace_is_ignored(ws: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.txt"
    hook("claude", claude("PreToolUse", ws, tool_name="Write", tool_use_id="toolu_x",
                          tool_input={"file_path": str(other), "content": "x"}), ws)
    from ctrlz import toolcalls

    assert toolcalls.list_snapshots("c0ffee-session", workspace=ws) == []


def test_multiedit_notebookedit_and_a_later_edit_is_not_clobbered(ws: Path) -> None:
    from ctrlz import toolcalls

    nb = ws / "nb.ipynb"
    nb.write_text('{"cells": []}')
    multi = {"file_path": str(ws / "README.md"),
             "edits": [{"old_string": "# demo", "new_string": "# multi"}]}
    hook("claude", claude("PreToolUse", ws, tool_name="MultiEdit", tool_input=multi,
                          tool_use_id="toolu_M"), ws)
    (ws / "README.md").write_text("# multi\n")
    hook("claude", claude("PostToolUse", ws, tool_name="MultiEdit", tool_input=multi,
                          tool_use_id="toolu_M", tool_response={}), ws, module=True)
    cell = {"notebook_path": str(nb), "new_source": "print(1)", "cell_id": "c1"}
    hook("claude", claude("PreToolUse", ws, tool_name="NotebookEdit", tool_input=cell,
                          tool_use_id="toolu_N"), ws)
    nb.write_text('{"cells": [1]}')
    (ws / "README.md").write_text("# the user typed this later\n")
    out = toolcalls.fs_restore("c0ffee-session", "toolu_M", workspace=ws)
    assert out["restored_paths"] == [] and out["skipped_paths_with_reasons"][0]["path"] == \
        "README.md"
    assert (ws / "README.md").read_text() == "# the user typed this later\n"
    assert toolcalls.fs_restore("c0ffee-session", "toolu_N", workspace=ws)[
        "restored_paths"] == ["nb.ipynb"]
    assert nb.read_text() == '{"cells": []}'


def test_codex_patch_paths() -> None:
    from ctrlz.hooks.codex import patch_paths

    patch = ("*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n-x\n+y\n"
             "*** Delete File: c.py\n*** Add File: d/e.py\n+z\n*** End Patch")
    assert patch_paths(patch) == ["a.py", "b.py", "c.py", "d/e.py"]


def test_workspace_named_through_a_symlink(ws: Path, tmp_path: Path) -> None:
    from ctrlz import toolcalls

    link = tmp_path / "link"
    link.symlink_to(ws)
    hook("claude", claude("PreToolUse", ws, tool_name="Write", tool_use_id="toolu_L",
                          tool_input={"file_path": str(link / "README.md"), "content": "x"}), ws)
    [snap] = toolcalls.list_snapshots("c0ffee-session", workspace=ws)
    assert snap["captured_paths"] == ["README.md"]


def test_a_file_tool_hook_never_loads_the_engine_or_the_cli(ws: Path) -> None:
    """Every tool call pays the hook's start-up: a file-tool hook must stay on the light path
    (tool-call store only), never the scanner, the engine, the Workspace or click."""
    payload = claude("PreToolUse", ws, tool_name="Edit", tool_use_id="toolu_fast",
                     tool_input={"file_path": str(ws / "README.md")})
    code = ("import io, json, sys\nfrom ctrlz.hooks.runner import run\n"
            f"run('claude', io.BytesIO({json.dumps(payload).encode()!r}))\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(("
            "'ctrlz.engine', 'ctrlz.workspace', 'ctrlz.cli', 'ctrlz.state.scan', 'click')))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ws, capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == []
    from ctrlz import toolcalls

    [snap] = toolcalls.list_snapshots("c0ffee-session", workspace=ws)
    assert snap["snapshot_id"] == "toolu_fast"


def test_toolcalls_never_imports_a_face_at_runtime() -> None:
    import ast

    import ctrlz.toolcalls

    for path in Path(ctrlz.toolcalls.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only; TYPE_CHECKING blocks are skipped
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("workspace", "cli", "hooks")), path.name


def test_parallel_hooks_all_land(ws: Path) -> None:
    """Claude Code runs matching hooks in parallel; none may be lost or fail."""
    procs = []
    for i in range(8):
        (ws / f"p{i}.txt").write_text(f"v{i}")
        payload = claude("PreToolUse", ws, tool_name="Edit", tool_use_id=f"toolu_p{i}",
                         tool_input={"file_path": str(ws / f"p{i}.txt")})
        p = subprocess.Popen([sys.executable, "-m", "ctrlz.hooks", "claude"], cwd=ws,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        procs.append((p, json.dumps(payload).encode()))
    for p, data in procs:
        out, err = p.communicate(data, timeout=60)
        assert (p.returncode, out, err) == (0, b"", b"")
    from ctrlz import toolcalls
    from ctrlz.hooks import recent_hook_errors

    snaps = toolcalls.list_snapshots("c0ffee-session", workspace=ws)
    assert sorted(s["snapshot_id"] for s in snaps) == [f"toolu_p{i}" for i in range(8)]
    with Workspace.open(ws) as w:
        assert recent_hook_errors(w) == []


def test_a_rewind_past_a_shell_call_puts_back_ignored_files_later_file_tools_changed(
        ws: Path) -> None:
    """The shell call's snapshot does not hold `.env` (ignored), so it cannot say what `.env`
    was; the Edit after it captured it, and that pre-image goes back. A hand edit after the
    Edit is left alone and reported."""
    (ws / ".gitignore").write_text(".env\n*.local\n")
    (ws / ".env").write_text("KEY=original\n")
    (ws / "notes.local").write_text("mine\n")
    h = lambda p: hook("claude", p, ws)  # noqa: E731
    h(claude("UserPromptSubmit", ws, prompt="configure"))
    bash = {"command": "touch built.txt"}
    h(claude("PreToolUse", ws, tool_name="Bash", tool_input=bash, tool_use_id="toolu_1B"))
    (ws / "built.txt").write_text("built\n")
    for n, (rel, text) in enumerate([(".env", "KEY=agent\n"), ("new.local", "made\n"),
                                     ("notes.local", "agent\n")]):
        tool = "Write" if rel == "new.local" else "Edit"
        args = {"file_path": str(ws / rel), "content": text}
        h(claude("PreToolUse", ws, tool_name=tool, tool_input=args, tool_use_id=f"toolu_{n}F"))
        (ws / rel).write_text(text)
        h(claude("PostToolUse", ws, tool_name=tool, tool_input=args, tool_use_id=f"toolu_{n}F",
                 tool_response={"filePath": args["file_path"], "success": True}))
    (ws / "notes.local").write_text("my hand edit\n")

    out = json.loads(ctrlz("rewind", "toolu_1B", "--json", cwd=ws))
    assert (ws / ".env").read_text() == "KEY=original\n"
    assert not (ws / "new.local").exists() and not (ws / "built.txt").exists()
    assert (ws / "notes.local").read_text() == "my hand edit\n"
    assert [s["path"] for s in out["skipped"]] == ["notes.local"]
    ctrlz("undo", cwd=ws)
    assert (ws / ".env").read_text() == "KEY=agent\n"
    assert (ws / "new.local").read_text() == "made\n"
    assert (ws / "built.txt").read_text() == "built\n"


@pytest.mark.parametrize("tool", ["Edit", "Write"])
def test_a_hand_edit_after_a_denied_tool_call_is_left_alone_by_a_rewind(ws: Path,
                                                                        tool: str) -> None:
    """Claude Code runs PreToolUse before its permission prompt: a denied (or interrupted)
    call has a pre-image and no post-tool event. A file the user then wrote by hand was
    overwritten by `ctrlz rewind`, or deleted when the denied call was a Write of a new file,
    with exit 0 and nothing listed; now it is left alone and listed."""
    rel = "README.md" if tool == "Edit" else "design.md"
    h = lambda p: hook("claude", p, ws)  # noqa: E731
    h(claude("UserPromptSubmit", ws, prompt="go"))
    denied = {"file_path": str(ws / rel), "old_string": "#", "new_string": "##",
              "content": "agent draft\n"}
    h(claude("PreToolUse", ws, tool_name=tool, tool_input=denied, tool_use_id="toolu_no"))
    edit = {"file_path": str(ws / "src" / "app.py"), "old_string": "hello",
            "new_string": "bye"}
    h(claude("PreToolUse", ws, tool_name="Edit", tool_input=edit, tool_use_id="toolu_ok"))
    (ws / "src" / "app.py").write_text("print('bye')\n")
    h(claude("PostToolUse", ws, tool_name="Edit", tool_input=edit, tool_use_id="toolu_ok",
             tool_response={"filePath": edit["file_path"], "success": True}))
    (ws / rel).write_text("the user's own words\n")

    out = json.loads(ctrlz("rewind", "1", "--json", cwd=ws))
    assert (ws / rel).read_text() == "the user's own words\n"
    assert [s["path"] for s in out["skipped"]] == [rel]
    assert "no record says by whom" in out["skipped"][0]["reason"]
    assert (ws / "src" / "app.py").read_text() == INITIAL["src/app.py"]
    ctrlz("undo", cwd=ws)
    forced = json.loads(ctrlz("rewind", "1", "--force", "--json", cwd=ws))
    assert forced["skipped"] == []
    assert not (ws / rel).exists() if tool == "Write" else (
        (ws / rel).read_text() == INITIAL["README.md"])


def test_a_denied_tool_call_that_changed_nothing_is_rewound_quietly(ws: Path) -> None:
    h = lambda p: hook("claude", p, ws)  # noqa: E731
    h(claude("UserPromptSubmit", ws, prompt="go"))
    denied = {"file_path": str(ws / "README.md"), "old_string": "#", "new_string": "##"}
    h(claude("PreToolUse", ws, tool_name="Edit", tool_input=denied, tool_use_id="toolu_no"))
    out = json.loads(ctrlz("rewind", "1", "--json", cwd=ws))
    assert out["skipped"] == [] and (ws / "README.md").read_text() == INITIAL["README.md"]


def test_rewind_past_a_pruned_shell_snapshot_is_refused(ws: Path) -> None:
    run_claude_session(ws, module=True)
    listing = json.loads(ctrlz("rewind", "--list", "--json", cwd=ws))["tool_calls"]
    with Workspace.open(ws) as w:
        w.remove([listing[2]["workspace_snapshot"]])
    proc = subprocess.run([CTRLZ, "rewind", "toolu_01W"], cwd=ws, capture_output=True,
                          text=True)
    assert proc.returncode == 7 and "pruned" in proc.stderr
    assert not (ws / "src").exists()  # nothing was touched


def test_hook_errors_show_in_status(tmp_path: Path) -> None:
    """A failing hook stays silent for the agent, but `ctrlz status` reports it."""
    ws_root = tmp_path / "statusws"
    ws_root.mkdir()
    env = {**os.environ, "CTRLZ_HOME": str(tmp_path / "home")}
    ctrlz = str(Path(sys.executable).with_name("ctrlz"))
    subprocess.run([ctrlz, "init"], cwd=ws_root, env=env, check=True, capture_output=True)
    hook = subprocess.run([ctrlz, "hook", "claude"], cwd=ws_root, env=env,
                          input="{this is not json", capture_output=True, text=True)
    assert hook.returncode == 0 and hook.stdout == "" and hook.stderr == ""
    status = subprocess.run([ctrlz, "status"], cwd=ws_root, env=env, capture_output=True,
                            text=True)
    assert "agent hook error" in status.stdout + status.stderr


def test_a_file_named_through_a_link_is_captured_where_it_is(ws: Path) -> None:
    """The agent edits lib/f.txt where lib links to packages/lib, and alias.txt, a link to
    real.txt: the files written are packages/lib/f.txt and real.txt. The capture refuses a
    path through a link, so they went uncaptured, and the rewind called the calls undone."""
    (ws / "packages" / "lib").mkdir(parents=True)
    (ws / "packages" / "lib" / "f.txt").write_text("lib before\n")
    os.symlink("packages/lib", ws / "lib")
    (ws / "real.txt").write_text("real before\n")
    os.symlink("real.txt", ws / "alias.txt")
    before = contents(ws)
    h = lambda p: hook("claude", p, ws)  # noqa: E731
    h(claude("UserPromptSubmit", ws, prompt="edit through links"))
    for tool_id, name in (("toolu_L1", "lib/f.txt"), ("toolu_L2", "alias.txt")):
        edit = {"file_path": str(ws / name), "old_string": "before", "new_string": "after"}
        h(claude("PreToolUse", ws, tool_name="Edit", tool_input=edit, tool_use_id=tool_id))
        with open(ws / name, "w") as f:  # the tool writes through the link
            f.write("after\n")
        h(claude("PostToolUse", ws, tool_name="Edit", tool_input=edit, tool_use_id=tool_id,
                 tool_response={"filePath": edit["file_path"], "success": True}))
    listing = json.loads(ctrlz("rewind", "--list", "--json", cwd=ws))["tool_calls"]
    assert [i["captured_paths"] for i in listing] == [
        ["packages/lib/f.txt"], ["alias.txt", "real.txt"]]
    ctrlz("rewind", "toolu_L1", cwd=ws)
    assert contents(ws) == before
    assert os.readlink(ws / "alias.txt") == "real.txt" and os.readlink(ws / "lib") == "packages/lib"


@pytest.mark.parametrize("target", ["²", "#²", "nope"])
def test_a_rewind_to_no_call_and_no_turn_is_one_line(ws: Path, target: str) -> None:
    run_claude_session(ws)
    proc = subprocess.run([CTRLZ, "rewind", target], cwd=ws, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "neither a tool_use_id nor a turn" in proc.stderr
