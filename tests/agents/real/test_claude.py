"""Claude Code, the real CLI from npm, against a fake Anthropic Messages API on loopback.

``ANTHROPIC_BASE_URL`` points Claude Code at the fake model; ``-p`` runs it headless and
``--dangerously-skip-permissions`` lets it use its tools without asking (as root that flag also
needs ``IS_SANDBOX=1``). Project hooks in ``.claude/settings*.json`` run in ``-p`` mode without
any trust step, so ``ctrlz install claude`` is all the setup ctrlz needs.
"""

from __future__ import annotations

from .fakemodel import AnthropicServer, ToolCall
from .harness import FILE, NEW, OLD, PROMPT, WRITTEN, check_agent_ran, check_rewinds, tree

SHELL = "rm -rf build"


def test_claude_write_edit_rm_then_rewind_each_and_undo(agent_bin, sandbox) -> None:
    claude = agent_bin("claude")
    sb = sandbox
    sb.ctrlz("install", "claude")
    path = str(sb.project / FILE)
    script = [ToolCall("Write", {"file_path": path, "content": WRITTEN.decode()}),
              ToolCall("Edit", {"file_path": path, "old_string": OLD, "new_string": NEW}),
              ToolCall("Bash", {"command": SHELL, "description": "Delete the build directory"})]
    before = tree(sb.project)
    with AnthropicServer(script) as model:
        run = sb.run_agent([str(claude), "-p", PROMPT, "--dangerously-skip-permissions"], {
            "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-ant-fake-key",
            "IS_SANDBOX": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    check_agent_ran(sb, run, model)
    check_rewinds(sb, "claude", run, model, before, SHELL)
