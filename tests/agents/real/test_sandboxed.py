"""Real agents under ``ctrlz run --sandbox``, offline against the fake model: the agent's own
state writes succeed, its hooks still capture from inside (through the workspace daemon), and
``ctrlz rewind`` and ``ctrlz undo`` work as without the sandbox.

The sandbox's area is under /var/tmp, not the temp dir: the temp dirs are writable by default,
and a store inside a writable tree would send ``auto`` to bwrap (Landlock cannot carve it out).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.sandbox.probe import support

from .fakemodel import AnthropicServer, GeminiServer, ResponsesServer, ToolCall
from .harness import (
    CTRLZ,
    FILE,
    NEW,
    OLD,
    PROMPT,
    WRITTEN,
    Sandbox,
    check_agent_ran,
    check_rewinds,
    make_sandbox,
    tree,
)
from .test_codex import ADD, UPDATE, codex_config
from .test_gemini import trust_and_auth

SHELL = "rm -rf build"
INFO = support()


@pytest.fixture
def confined() -> Iterator[Sandbox]:
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    base = Path(tempfile.mkdtemp(prefix="ctrlz-real-sbx-", dir="/var/tmp"))
    sb = make_sandbox(base)
    (base / "tmp").mkdir()
    sb.env.update({"TMPDIR": str(base / "tmp"), "CTRLZ_DAEMON": "1"})
    try:
        yield sb
    finally:
        sb.kill_leftovers()
        sb.ctrlz("daemon", "stop", ok=False)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_claude_under_the_sandbox_then_rewind(agent_bin, confined: Sandbox, mode: str) -> None:
    if getattr(INFO, f"{mode}_reason"):
        pytest.skip(getattr(INFO, f"{mode}_reason"))
    claude = agent_bin("claude")
    sb = confined
    sb.ctrlz("install", "claude")
    path = str(sb.project / FILE)
    outside = sb.root / "outside.txt"
    script = [ToolCall("Write", {"file_path": path, "content": WRITTEN.decode()}),
              ToolCall("Edit", {"file_path": path, "old_string": OLD, "new_string": NEW}),
              ToolCall("Bash", {"command": f"{SHELL}; echo x > {outside} || true",
                                "description": "Delete the build directory"})]
    before = tree(sb.project)
    with AnthropicServer(script) as model:
        run = sb.run_agent([CTRLZ, "run", f"--sandbox={mode}", "--", str(claude), "-p",
                            PROMPT, "--dangerously-skip-permissions"], {
            "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-ant-fake-key",
            "IS_SANDBOX": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    assert not outside.exists(), sb.report("a write outside the workspace went through", run,
                                           model)
    assert (sb.home / ".claude").is_dir()  # its own state was written
    check_agent_ran(sb, run, model)
    check_rewinds(sb, "claude", run, model, before, f"{SHELL}; echo x > {outside} || true")
    assert os.path.isdir(sb.project)


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_codex_under_the_sandbox_then_rewind(agent_bin, confined: Sandbox, mode: str) -> None:
    if getattr(INFO, f"{mode}_reason"):
        pytest.skip(getattr(INFO, f"{mode}_reason"))
    codex = agent_bin("codex")
    sb = confined
    shell = "rm -r build"  # Codex's exec policy refuses rm -rf (test_codex.py)
    outside = sb.root / "outside.txt"
    command = f"{shell} && (echo x > {outside} || true)"
    script = [ToolCall("apply_patch", ADD), ToolCall("apply_patch", UPDATE),
              ToolCall("exec_command", {"cmd": command, "workdir": str(sb.project)})]
    with ResponsesServer(script) as model:
        config = sb.home / ".codex" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(codex_config(model.url, sb.project))
        sb.ctrlz("install", "codex")
        before = tree(sb.project)
        run = sb.run_agent([CTRLZ, "run", f"--sandbox={mode}", "--", str(codex), "exec",
                            "--skip-git-repo-check",
                            "--dangerously-bypass-approvals-and-sandbox", PROMPT])
    assert not outside.exists(), sb.report("a write outside the workspace went through", run,
                                           model)
    check_agent_ran(sb, run, model)
    check_rewinds(sb, "codex", run, model, before, command)


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_gemini_under_the_sandbox_then_rewind(agent_bin, confined: Sandbox, mode: str) -> None:
    if getattr(INFO, f"{mode}_reason"):
        pytest.skip(getattr(INFO, f"{mode}_reason"))
    gemini = agent_bin("gemini")
    sb = confined
    trust_and_auth(sb.home, sb.project)
    sb.ctrlz("install", "gemini")
    path = str(sb.project / FILE)
    outside = sb.root / "outside.txt"
    command = f"{SHELL}; echo x > {outside} || true"
    script = [ToolCall("write_file", {"file_path": path, "content": WRITTEN.decode()}),
              ToolCall("replace", {"file_path": path, "old_string": OLD, "new_string": NEW,
                                   "instruction": "Change the greeting."}),
              ToolCall("run_shell_command", {"command": command,
                                             "description": "Delete the build directory"})]
    before = tree(sb.project)
    with GeminiServer(script) as model:
        run = sb.run_agent([CTRLZ, "run", f"--sandbox={mode}", "--", str(gemini), "-p", PROMPT,
                            "--yolo", "-m", "gemini-2.5-flash"], {
            "GOOGLE_GEMINI_BASE_URL": model.url, "GEMINI_API_KEY": "fake-gemini-key",
            "GEMINI_CLI_NO_RELAUNCH": "true"})
    assert not outside.exists(), sb.report("a write outside the workspace went through", run,
                                           model)
    check_agent_ran(sb, run, model)
    check_rewinds(sb, "gemini", run, model, before, command)
