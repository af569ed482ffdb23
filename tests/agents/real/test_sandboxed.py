"""Real agents under ``ctrlz run --sandbox``, offline against the fake model: the agent's own
state writes succeed, its hooks still capture from inside (through the workspace daemon), and
``ctrlz rewind`` and ``ctrlz undo`` work as without the sandbox.

As root and as uid 65534 (issue 42: "every case"), through the ``other_user`` fixture: that
user runs its own interpreter's ctrlz, with the native launcher and a native door built for
that interpreter beside it (as that user's own pip install would have them; the door is first
on PATH as ``ctrlz-hook`` for the agents' hooks), and the agents' npm installs
(``.cache/agents/<name>``) as they are when it can reach them, else a hard-linked copy it can
read (a checkout in a 0700 directory, as CI's).

The sandbox's area is under /var/tmp, not the temp dir: the temp dirs are writable by default,
and a store inside a writable tree would send ``auto`` to bwrap (Landlock cannot carve it out).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from ctrlz.sandbox.probe import support
from tests.conftest import NOBODY

from .conftest import CACHE, PACKAGES
from .fakemodel import AnthropicServer, GeminiServer, ResponsesServer, ToolCall
from .harness import (
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


@pytest.fixture(params=["root", "nobody"])
def confined(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    user = request.getfixturevalue("other_user") if request.param == "nobody" else None
    base = Path(tempfile.mkdtemp(prefix="ctrlz-real-sbx-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    (base / "tmp").mkdir()
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, base, ignore_errors=True)
        if user is not None:
            stack.enter_context(user.native_launcher())
            stack.enter_context(user.native_door())
        sb = make_sandbox(base, user)
        stack.callback(sb.ctrlz, "daemon", "stop", ok=False)
        stack.callback(sb.kill_leftovers)
        sb.env.update({"TMPDIR": str(base / "tmp"), "CTRLZ_DAEMON": "1"})
        yield sb


def agent(sb: Sandbox, agent_bin: Callable[[str], Path], name: str) -> str:
    """The agent's binary as the sandbox's user runs it (installed once by ``agent_bin``)."""
    binary = agent_bin(name)
    if sb.user is None:
        return str(binary)
    shared = PACKAGES[name].executable(sb.user.share(CACHE / name))
    check = subprocess.run(sb.user.command("test", "-x", str(shared), uid=NOBODY),
                           capture_output=True, timeout=60)
    if check.returncode != 0:
        pytest.skip(f"uid {NOBODY} cannot run {shared} (the copy of {binary})")
    return str(shared)


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_claude_under_the_sandbox_then_rewind(agent_bin, confined: Sandbox, mode: str) -> None:
    if getattr(INFO, f"{mode}_reason"):
        pytest.skip(getattr(INFO, f"{mode}_reason"))
    sb = confined
    claude = agent(sb, agent_bin, "claude")
    sb.ctrlz("install", "claude")
    path = str(sb.project / FILE)
    outside = sb.root / "outside.txt"
    script = [ToolCall("Write", {"file_path": path, "content": WRITTEN.decode()}),
              ToolCall("Edit", {"file_path": path, "old_string": OLD, "new_string": NEW}),
              ToolCall("Bash", {"command": f"{SHELL}; echo x > {outside} || true",
                                "description": "Delete the build directory"})]
    before = tree(sb.project)
    with AnthropicServer(script) as model:
        run = sb.run_agent([*sb.cli, "run", f"--sandbox={mode}", "--", claude, "-p",
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
    sb = confined
    codex = agent(sb, agent_bin, "codex")
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
        run = sb.run_agent([*sb.cli, "run", f"--sandbox={mode}", "--", codex, "exec",
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
    sb = confined
    gemini = agent(sb, agent_bin, "gemini")
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
        run = sb.run_agent([*sb.cli, "run", f"--sandbox={mode}", "--", gemini, "-p", PROMPT,
                            "--yolo", "-m", "gemini-2.5-flash"], {
            "GOOGLE_GEMINI_BASE_URL": model.url, "GEMINI_API_KEY": "fake-gemini-key",
            "GEMINI_CLI_NO_RELAUNCH": "true"})
    assert not outside.exists(), sb.report("a write outside the workspace went through", run,
                                           model)
    check_agent_ran(sb, run, model)
    check_rewinds(sb, "gemini", run, model, before, command)
