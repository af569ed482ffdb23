"""Gemini CLI, the real CLI from npm, against a fake Gemini API on loopback.

``GOOGLE_GEMINI_BASE_URL`` points it at the fake model, which serves
``models/<m>:streamGenerateContent?alt=sse``. The user settings must select the
``gemini-api-key`` auth type (the base URL alone selects another one, which ``-p`` rejects with
"Invalid auth method selected.", exit 41). Gemini runs project hooks only in a trusted folder,
so the test trusts the project in ``~/.gemini/trustedFolders.json``, as a user does (ctrlz's
installer deliberately does not); ``--skip-trust`` would run the tools but skip the hooks.
"""

from __future__ import annotations

import json

from .fakemodel import GeminiServer, ToolCall
from .harness import FILE, NEW, OLD, PROMPT, WRITTEN, check_agent_ran, check_rewinds, tree

SHELL = "rm -rf build"


def trust_and_auth(home, project) -> None:  # noqa: ANN001
    gemini_dir = home / ".gemini"
    gemini_dir.mkdir(parents=True, exist_ok=True)
    (gemini_dir / "settings.json").write_text(json.dumps(
        {"security": {"auth": {"selectedType": "gemini-api-key"}}}, indent=2))
    (gemini_dir / "trustedFolders.json").write_text(json.dumps(
        {str(project): "TRUST_FOLDER"}, indent=2))


def test_gemini_write_edit_rm_then_rewind_each_and_undo(agent_bin, sandbox) -> None:
    gemini = agent_bin("gemini")
    sb = sandbox
    trust_and_auth(sb.home, sb.project)
    sb.ctrlz("install", "gemini")
    path = str(sb.project / FILE)
    script = [ToolCall("write_file", {"file_path": path, "content": WRITTEN.decode()}),
              ToolCall("replace", {"file_path": path, "old_string": OLD, "new_string": NEW,
                                   "instruction": "Change the greeting."}),
              ToolCall("run_shell_command", {"command": SHELL,
                                             "description": "Delete the build directory"})]
    before = tree(sb.project)
    with GeminiServer(script) as model:
        run = sb.run_agent([str(gemini), "-p", PROMPT, "--yolo", "-m", "gemini-2.5-flash"], {
            "GOOGLE_GEMINI_BASE_URL": model.url, "GEMINI_API_KEY": "fake-gemini-key",
            "GEMINI_CLI_NO_RELAUNCH": "true"})
    check_agent_ran(sb, run, model)
    check_rewinds(sb, "gemini", run, model, before, SHELL)
