"""Factory Droid, the real binary from npm, against a fake Anthropic Messages API on loopback.

Droid takes "bring your own key" models from ``customModels`` in ``~/.factory/settings.json``:
an ``anthropic`` provider with a ``baseUrl`` sends the Messages API there, and ``droid exec -m
custom:<displayName>-<index>`` runs headless with no Factory login at all. ``--auto high`` lets
it write files and run the shell without asking. ``droid exec`` runs project hooks without a
trust step (only the interactive start asks to trust a folder), so ``ctrlz install droid`` is
all the setup ctrlz needs.

Droid's tools are not Claude's: ``Create`` (``file_path``, ``content``), ``Edit``
(``file_path``, ``old_str``, ``new_str``) and ``Execute`` (``command`` plus the risk fields its
schema asks for). Its hook payloads carry no tool-call id, so ctrlz pairs the pre and post
events by a hash of the tool and its input.

Droid reads a folder's hooks from ``hooks.json`` (events at its root) merged over the ``hooks``
of ``settings.json``, event by event; so when a project has a ``hooks.json`` (Droid's /hooks
writes one) ctrlz's hooks go there, and the test runs both ways. Droid validates hooks with
its own schema and ignores a file that fails it, so a run whose hooks fire is also that check.
"""

from __future__ import annotations

import json

import pytest

from .fakemodel import AnthropicServer, ToolCall
from .harness import FILE, NEW, OLD, PROMPT, WRITTEN, check_agent_ran, check_rewinds, tree

SHELL = "rm -rf build"


THEIR_HOOKS = {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}


@pytest.mark.parametrize("hooks_file", ["settings.json", "hooks.json"])
def test_droid_write_edit_rm_then_rewind_each_and_undo(agent_bin, sandbox,
                                                       hooks_file: str) -> None:
    droid = agent_bin("droid")
    sb = sandbox
    target = sb.project / ".factory" / hooks_file
    if hooks_file == "hooks.json":  # the user's own hooks.json, as Droid's /hooks writes it
        target.parent.mkdir()
        target.write_text(json.dumps(THEIR_HOOKS, indent=2))
    out = sb.ctrlz("install", "droid")
    assert "Droid asks" in out.stderr  # the interactive trust prompt is said, not bypassed
    doc = json.loads(target.read_text())
    hooks = doc if hooks_file == "hooks.json" else doc["hooks"]
    assert set(hooks) >= {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse"}
    path = str(sb.project / FILE)
    script = [ToolCall("Create", {"file_path": path, "content": WRITTEN.decode()}),
              ToolCall("Edit", {"file_path": path, "old_str": OLD, "new_str": NEW}),
              ToolCall("Execute", {"command": SHELL, "riskLevel": "medium",
                                   "riskLevelReason": "deletes the build output"})]
    before = tree(sb.project)
    with AnthropicServer(script) as model:
        user_settings = sb.home / ".factory" / "settings.json"
        user_settings.parent.mkdir(parents=True, exist_ok=True)
        user_settings.write_text(json.dumps({"customModels": [{
            "model": "claude-sonnet-4-5", "displayName": "Fake", "provider": "anthropic",
            "baseUrl": model.url, "apiKey": "sk-ant-fake-key"}]}))
        run = sb.run_agent([str(droid), "exec", "-m", "custom:Fake-0", "--auto", "high",
                            PROMPT])
    check_agent_ran(sb, run, model)
    check_rewinds(sb, "droid", run, model, before, SHELL)
