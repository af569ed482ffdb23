"""Codex CLI, the real CLI from npm, against a fake OpenAI Responses API on loopback.

The fake model is a custom ``model_providers`` entry in ``$CODEX_HOME/config.toml`` with
``wire_api = "responses"``; the model slug must be one Codex knows (``gpt-5.5``), otherwise it
offers only a shell tool and no ``apply_patch``. Codex reads the project's ``.codex/`` only when
the project is trusted (``[projects."<abs>"] trust_level = "trusted"``, written here as a user
would); ``ctrlz install codex`` writes the per-hook ``trusted_hash`` entries itself, so
``codex exec`` runs the hooks without ``--dangerously-bypass-hook-trust``.

Codex's own exec policy refuses ``rm -rf`` ("rm -f style commands are not permitted") in every
mode, so the shell step here is ``rm -r build``: the same deletion.
"""

from __future__ import annotations

from .fakemodel import ResponsesServer, ToolCall
from .harness import FILE, PROMPT, WRITTEN, check_agent_ran, check_rewinds, tree

SHELL = "rm -r build"
ADD = f"*** Begin Patch\n*** Add File: {FILE}\n+{WRITTEN.decode()}*** End Patch\n"
UPDATE = (f"*** Begin Patch\n*** Update File: {FILE}\n@@\n-print('hello')\n+print('bye')\n"
          "*** End Patch\n")


def codex_config(url: str, project) -> str:  # noqa: ANN001
    return (f'model = "gpt-5.5"\nmodel_provider = "fake"\napproval_policy = "never"\n'
            f'sandbox_mode = "danger-full-access"\n\n'
            f'[model_providers.fake]\nname = "fake model"\nbase_url = "{url}/v1"\n'
            f'wire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n'
            f'[projects."{project}"]\ntrust_level = "trusted"\n')


def test_codex_patch_patch_rm_then_rewind_each_and_undo(agent_bin, sandbox) -> None:
    codex = agent_bin("codex")
    sb = sandbox
    script = [ToolCall("apply_patch", ADD), ToolCall("apply_patch", UPDATE),
              ToolCall("exec_command", {"cmd": SHELL, "workdir": str(sb.project)})]
    with ResponsesServer(script) as model:
        config = sb.home / ".codex" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(codex_config(model.url, sb.project))
        sb.ctrlz("install", "codex")  # adds the hooks' trusted_hash entries to that file
        before = tree(sb.project)
        run = sb.run_agent([str(codex), "exec", "--skip-git-repo-check",
                            "--dangerously-bypass-approvals-and-sandbox", PROMPT])
    check_agent_ran(sb, run, model)
    check_rewinds(sb, "codex", run, model, before, SHELL)
