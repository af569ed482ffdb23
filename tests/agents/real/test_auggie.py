"""Augment Auggie, the real CLI from npm, against a fake Augment service on loopback.

Auggie does not call a model provider itself: every turn is a ``chat-stream`` request to the
Augment service named by its session's ``tenantURL``. ``AUGMENT_SESSION_AUTH`` gives it a
session (any token) whose tenant is the fake (:class:`~.fakemodel.AugmentServer`), and
``--print`` runs it headless; its file and process tools run without asking there. Auggie
runs hooks only when the service's ``get-models`` answer turns the ``enable_hooks`` feature flag
on, as the real service does for accounts that have hooks; the fake turns it on.

Auggie's tools: ``save-file`` (``path``, ``file_content``), ``str-replace-editor``
(``command``, ``path``, ``str_replace_entries``) and ``launch-process`` (``command``,
``wait``, ``max_wait_seconds``, ``cwd``); paths are relative to the workspace root. Its hook
payloads carry ``conversation_id`` and ``workspace_roots`` and no tool-call id.
"""

from __future__ import annotations

import json

from .fakemodel import AugmentServer, ToolCall
from .harness import FILE, NEW, OLD, PROMPT, WRITTEN, check_agent_ran, check_rewinds, tree

SHELL = "rm -rf build"


def test_auggie_write_edit_rm_then_rewind_each_and_undo(agent_bin, sandbox) -> None:
    auggie = agent_bin("auggie")
    sb = sandbox
    sb.ctrlz("install", "auggie")
    assert (sb.project / ".augment" / "settings.local.json").is_file()
    script = [ToolCall("save-file", {"path": FILE, "file_content": WRITTEN.decode()}),
              ToolCall("str-replace-editor", {
                  "command": "str_replace", "path": FILE, "str_replace_entries": [
                      {"old_str": OLD, "new_str": NEW, "old_str_start_line_number": 1,
                       "old_str_end_line_number": 1}]}),
              ToolCall("launch-process", {"command": SHELL, "wait": True,
                                          "max_wait_seconds": 60, "cwd": str(sb.project)})]
    before = tree(sb.project)
    with AugmentServer(script) as model:
        session = {"accessToken": "fake-token", "tenantURL": model.url + "/",
                   "scopes": ["email"]}
        run = sb.run_agent([str(auggie), "--print", PROMPT, "--max-turns", "10"], {
            "AUGMENT_SESSION_AUTH": json.dumps(session), "AUGMENT_DISABLE_AUTO_UPDATE": "1"})
    check_agent_ran(sb, run, model)
    check_rewinds(sb, "auggie", run, model, before, SHELL)
