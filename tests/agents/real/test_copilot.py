"""GitHub Copilot CLI, the real CLI from npm, against a fake OpenAI chat-completions API.

Copilot CLI runs without GitHub: ``COPILOT_OFFLINE=true`` skips all network access (login,
telemetry, auto-update) and requires a local model provider, given as BYOK with
``COPILOT_PROVIDER_BASE_URL`` (wire API "completions", the default). In prompt mode (``-p``)
it loads the repository's hooks only in a trusted folder, so the test trusts the project in
``~/.copilot/config.json`` (``trustedFolders``, what the trust prompt records), as a user does;
``--allow-all-tools`` lets it use its tools without asking.
"""

from __future__ import annotations

import json
import subprocess
import time

from .fakemodel import ChatServer, ToolCall
from .harness import (
    CTRLZ_TIMEOUT,
    FILE,
    NEW,
    OLD,
    PROMPT,
    VENV_BIN,
    WRITTEN,
    check_agent_ran,
    check_rewinds,
    make_sandbox,
    tree,
)

SHELL = "rm -rf build"


def run_copilot(copilot, sb):  # noqa: ANN001, ANN201
    # Copilot runs its sessionStart and userPromptSubmitted hooks at the same time, on a store
    # whose tool-call catalog does not exist yet: both must get in (see
    # test_two_hooks_at_once_on_a_fresh_store)
    config = sb.home / ".copilot" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"trustedFolders": [str(sb.project)]}, indent=2))
    path = str(sb.project / FILE)
    script = [ToolCall("create", {"path": path, "file_text": WRITTEN.decode()}),
              ToolCall("edit", {"path": path, "old_str": OLD, "new_str": NEW}),
              ToolCall("bash", {"command": SHELL, "description": "Delete the build directory"})]
    before = tree(sb.project)
    with ChatServer(script) as model:
        run = sb.run_agent([str(copilot), "-p", PROMPT, "--allow-all-tools", "--no-auto-update"],
                           {"COPILOT_OFFLINE": "true",
                            "COPILOT_PROVIDER_BASE_URL": f"{model.url}/v1",
                            "COPILOT_PROVIDER_API_KEY": "fake-key", "COPILOT_MODEL": "gpt-4.1",
                            "COPILOT_AUTO_UPDATE": "false"})
    check_agent_ran(sb, run, model)
    return run, model, before


def test_copilot_create_edit_rm_then_rewind_each_and_undo(agent_bin, sandbox) -> None:
    copilot = agent_bin("copilot")
    sandbox.ctrlz("install", "copilot")
    run, model, before = run_copilot(copilot, sandbox)
    check_rewinds(sandbox, "copilot", run, model, before, SHELL)


def test_copilot_in_a_project_with_claude_hooks_too(agent_bin, sandbox) -> None:
    """A team using both agents: ``ctrlz install claude`` and ``ctrlz install copilot`` in one
    project. Copilot runs both sets of hooks; each tool call must still be recorded once, under
    Copilot, in turn 1, and rewind as in the test above."""
    copilot = agent_bin("copilot")
    sandbox.ctrlz("install", "claude")
    sandbox.ctrlz("install", "copilot")
    run, model, before = run_copilot(copilot, sandbox)
    check_rewinds(sandbox, None, run, model, before, SHELL)  # the files come back either way
    listing = sandbox.ctrlz_json("rewind", "--list")
    recorded = [(c["agent"], c["kind"], c["turn"]) for c in listing["tool_calls"]]
    assert recorded == [("copilot", "files", 1), ("copilot", "files", 1),
                        ("copilot", "bash", 1)], listing
    assert [s["agent"] for s in listing["sessions"]] == ["copilot"], listing["sessions"]


def test_two_hooks_at_once_on_a_fresh_store(tmp_path) -> None:  # noqa: ANN001
    """Copilot CLI starts its sessionStart and userPromptSubmitted hooks together (seen in the
    real runs above, where this failed about one run in six). Here the two hooks get exactly
    the payloads Copilot CLI 1.0.102 sends, at the same moment, on a fresh workspace; up to
    ten rounds, each on a new one. No hook may fail."""
    for attempt in range(10):
        sb = make_sandbox(tmp_path / f"round{attempt}")
        now = int(time.time() * 1000)
        common = {"sessionId": "8d1c6f0e-0000-4000-8000-000000000001", "cwd": str(sb.project)}
        payloads = {"sessionStart": common | {"timestamp": now, "source": "new",
                                               "initialPrompt": PROMPT},
                    "userPromptSubmitted": common | {"timestamp": now + 30, "prompt": PROMPT}}
        procs = [subprocess.Popen([str(VENV_BIN / "ctrlz-hook"), "copilot", event],
                                  cwd=sb.project, env=sb.env, stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for event in payloads]
        try:
            for proc, payload in zip(procs, payloads.values(), strict=True):
                proc.stdin.write(json.dumps(payload).encode())
                proc.stdin.close()
            for proc in procs:
                assert proc.wait(timeout=CTRLZ_TIMEOUT) == 0
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        errors = sb.hook_errors()
        assert not errors, f"round {attempt + 1}: {errors}"
