"""OpenCode, the real CLI from npm, against a fake OpenAI chat-completions API on loopback.

The fake model is a custom provider (``@ai-sdk/openai-compatible`` with ``options.baseURL``),
given in the user's config (``$XDG_CONFIG_HOME/opencode/opencode.json``) so that the project's
``opencode.json`` holds only what ``ctrlz install opencode`` writes. ctrlz's hooks are a JS
plugin in ``.opencode/plugins/``, loaded by OpenCode itself; ``opencode run`` is headless and the
config allows edits and shell commands without asking.

When a project has a ``.opencode/`` directory OpenCode installs ``@opencode-ai/plugin`` into it
from the npm registry in the background (gitignored there, so outside ctrlz's snapshots). With
the registry unreachable it still works, but waits about a minute for that install first.
"""

from __future__ import annotations

import json

from .fakemodel import ChatServer, ToolCall
from .harness import FILE, NEW, OLD, PROMPT, WRITTEN, check_agent_ran, check_rewinds, tree

SHELL = "rm -rf build"


def provider_config(url: str) -> dict:
    return {"$schema": "https://opencode.ai/config.json",
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake model",
                                  "options": {"baseURL": f"{url}/v1", "apiKey": "fake-key"},
                                  "models": {"fake-model": {"name": "Fake model",
                                                            "tool_call": True}}}},
            "model": "fake/fake-model", "small_model": "fake/fake-model",
            "permission": {"edit": "allow", "bash": "allow"},
            "autoupdate": False, "share": "disabled"}


def test_opencode_write_edit_rm_then_rewind_each_and_undo(agent_bin, sandbox) -> None:
    opencode = agent_bin("opencode")
    sb = sandbox
    sb.ctrlz("install", "opencode")
    path = str(sb.project / FILE)
    script = [ToolCall("write", {"filePath": path, "content": WRITTEN.decode()}),
              ToolCall("edit", {"filePath": path, "oldString": OLD, "newString": NEW}),
              ToolCall("bash", {"command": SHELL, "description": "Delete the build directory"})]
    before = tree(sb.project)
    with ChatServer(script) as model:
        config = sb.home / ".config" / "opencode" / "opencode.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps(provider_config(model.url), indent=2))
        run = sb.run_agent([str(opencode), "run", "-m", "fake/fake-model", PROMPT], {
            "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1"})
    check_agent_ran(sb, run, model)
    check_rewinds(sb, "opencode", run, model, before, SHELL)
