"""What each agent needs registered, and in which of its files (per the agents' own sources and
documentation, late 2026; see docs/agents.md for the table and how each was checked).

Two rules hold for every agent:

- **Nothing machine-specific in a file a team commits.** Hooks run ``ctrlz-hook AGENT`` and
  MCP servers ``ctrlz mcp``, both looked up on PATH, through :func:`hook_command`'s guard: where
  ``ctrlz-hook`` is missing (a teammate without ctrlz, a deleted venv) the hook says so on stderr
  and exits 0. That matters beyond Claude Code: Copilot CLI runs the hooks in
  ``.claude/settings*.json`` too, and denies every tool call whose pre-tool hook fails.
- **Project installs go into the agent's local, uncommitted settings where it has them**
  (Claude Code: ``.claude/settings.local.json`` and the local-scope MCP entry in
  ``~/.claude.json``; Copilot CLI: ``.github/copilot/settings.local.json``). Gemini CLI, Codex,
  Cursor and OpenCode have no local project file: their project files get the same portable
  commands, and ``ctrlz install`` says that the file is usually committed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..platform import xdg_base

#: The ``ctrlz-hook`` console script: the hook runner without the CLI's start-up cost.
HOOK_SCRIPT = "ctrlz-hook"
MCP_SERVER = {"command": "ctrlz", "args": ["mcp"]}


def hook_command(agent: str, *extra: str) -> str:
    """The shell command every installed hook runs: ``ctrlz-hook`` from PATH, or a one-line
    warning and exit 0 where it is missing, so a hook can never fail (or, under Copilot CLI,
    deny) a tool call."""
    args = " ".join((agent, *extra))
    return (f"if command -v {HOOK_SCRIPT} >/dev/null 2>&1; then exec {HOOK_SCRIPT} {args}; "
            f"else echo 'ctrlz: {HOOK_SCRIPT} is not on PATH; this session is not protected' "
            f">&2; fi")


@dataclass
class Target:
    """One file and what goes into it.

    ``fmt`` is json (JSON or JSON-with-comments, edited in place), toml (text blocks appended)
    or file (a whole file ctrlz owns). ``hooks`` maps an event to the entries appended to its
    list under ``hooks_key``; ``top`` holds top-level members set only when absent (a format
    version); ``servers`` go under ``server_key``. ``trust_for`` (Codex) names the hooks.json
    whose hooks this config.toml trusts. ``committed`` marks a project file teams usually
    commit."""

    path: Path
    fmt: str = "json"
    hooks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    hooks_key: list[str] = field(default_factory=lambda: ["hooks"])
    top: dict[str, Any] = field(default_factory=dict)
    servers: dict[str, Any] = field(default_factory=dict)
    server_key: list[str] = field(default_factory=lambda: ["mcpServers"])
    content: str | None = None
    trust_for: Path | None = None
    committed: bool = False


@dataclass(frozen=True)
class Agent:
    """An agent ctrlz installs into: its files per scope, and how to find it."""

    name: str
    title: str
    targets: Callable[[str, Path, Path], list[Target]]
    binaries: tuple[str, ...]
    project_marks: tuple[str, ...]
    home_marks: tuple[str, ...]


def _claude_group(matcher: str | None, cmd: str) -> dict[str, Any]:
    handler = {"type": "command", "command": cmd, "timeout": 30}  # seconds
    return ({"matcher": matcher} if matcher else {}) | {"hooks": [handler]}


CLAUDE_FILE_TOOLS = "Write|Edit|MultiEdit|NotebookEdit"


def claude(scope: str, project: Path, home: Path) -> list[Target]:
    cmd = hook_command("claude")
    hooks = {"SessionStart": [_claude_group(None, cmd)],
             "UserPromptSubmit": [_claude_group(None, cmd)],
             "PreToolUse": [_claude_group(f"{CLAUDE_FILE_TOOLS}|Bash|PowerShell", cmd)],
             "PostToolUse": [_claude_group(CLAUDE_FILE_TOOLS, cmd)],
             "PostToolUseFailure": [_claude_group(CLAUDE_FILE_TOOLS, cmd)]}
    server = {"ctrlz": {"type": "stdio", **MCP_SERVER}}
    if scope == "user":
        return [Target(home / ".claude" / "settings.json", hooks=hooks),
                Target(home / ".claude.json", servers=server)]
    return [Target(project / ".claude" / "settings.local.json", hooks=hooks),
            # `claude mcp add`'s default "local" scope: this project, this user, not committed
            Target(home / ".claude.json", servers=server,
                   server_key=["projects", str(project), "mcpServers"])]


def gemini(scope: str, project: Path, home: Path) -> list[Target]:
    cmd = hook_command("gemini")

    def group(matcher: str) -> dict[str, Any]:
        # Gemini: timeout in ms; tool matchers are unanchored regexes (anchor them, or every
        # MCP tool with "replace" in its name would start a hook); lifecycle ones are exact
        return {"matcher": matcher, "hooks": [{"name": "ctrlz", "type": "command",
                                               "command": cmd, "timeout": 30000}]}

    hooks = {"SessionStart": [group("*")], "BeforeAgent": [group("*")],
             "BeforeTool": [group("^(write_file|replace|run_shell_command)$")],
             "AfterTool": [group("^(write_file|replace)$")]}
    base = home if scope == "user" else project
    return [Target(base / ".gemini" / "settings.json", hooks=hooks,
                   servers={"ctrlz": dict(MCP_SERVER)}, committed=scope != "user")]


CODEX_EVENTS = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit",
                "PreToolUse": "pre_tool_use", "PostToolUse": "post_tool_use"}


def codex_home(home: Path) -> Path:
    return Path(os.environ.get("CODEX_HOME") or home / ".codex")


def codex(scope: str, project: Path, home: Path) -> list[Target]:
    cmd = hook_command("codex")
    hooks = {"SessionStart": [_claude_group(None, cmd)],
             "UserPromptSubmit": [_claude_group(None, cmd)],
             "PreToolUse": [_claude_group("apply_patch|Bash", cmd)],
             "PostToolUse": [_claude_group("apply_patch", cmd)]}
    user_dir = codex_home(home)
    if scope == "user":
        hooks_json = user_dir / "hooks.json"
        return [Target(hooks_json, hooks=hooks),
                Target(user_dir / "config.toml", "toml", servers={"ctrlz": dict(MCP_SERVER)},
                       trust_for=hooks_json)]
    hooks_json = project / ".codex" / "hooks.json"
    return [Target(hooks_json, hooks=hooks, committed=True),
            Target(project / ".codex" / "config.toml", "toml",
                   servers={"ctrlz": dict(MCP_SERVER)}, committed=True),
            # hook trust is per user: Codex reads it from the user's config only
            Target(user_dir / "config.toml", "toml", trust_for=hooks_json)]


CURSOR_FILE_TOOLS = "Write|StrReplace|Delete|EditNotebook"


def cursor(scope: str, project: Path, home: Path) -> list[Target]:
    cmd = hook_command("cursor")
    hooks = {"sessionStart": [{"command": cmd}], "beforeSubmitPrompt": [{"command": cmd}],
             "preToolUse": [{"command": cmd, "matcher": f"{CURSOR_FILE_TOOLS}|Shell"}],
             "postToolUse": [{"command": cmd, "matcher": CURSOR_FILE_TOOLS}],
             "postToolUseFailure": [{"command": cmd, "matcher": CURSOR_FILE_TOOLS}]}
    base = (home if scope == "user" else project) / ".cursor"
    return [Target(base / "hooks.json", hooks=hooks, top={"version": 1},
                   committed=scope != "user"),
            Target(base / "mcp.json", servers={"ctrlz": dict(MCP_SERVER)},
                   committed=scope != "user")]


COPILOT_FILE_TOOLS = "create|edit|str_replace_editor|apply_patch"


def copilot(scope: str, project: Path, home: Path) -> list[Target]:
    def entry(event: str, matcher: str | None = None) -> dict[str, Any]:
        # the camelCase dialect sends no event name: the command carries it
        e = {"type": "command", "bash": hook_command("copilot", event), "timeoutSec": 30}
        return e | ({"matcher": matcher} if matcher else {})

    hooks = {"sessionStart": [entry("sessionStart")],
             "userPromptSubmitted": [entry("userPromptSubmitted")],
             "preToolUse": [entry("preToolUse", f"{COPILOT_FILE_TOOLS}|bash|powershell")],
             "postToolUse": [entry("postToolUse", COPILOT_FILE_TOOLS)],
             "postToolUseFailure": [entry("postToolUseFailure", COPILOT_FILE_TOOLS)]}
    copilot_home = Path(os.environ.get("COPILOT_HOME") or home / ".copilot")
    if scope == "user":
        return [Target(copilot_home / "hooks" / "ctrlz.json", hooks=hooks, top={"version": 1}),
                Target(copilot_home / "mcp-config.json",
                       servers={"ctrlz": {"type": "local", **MCP_SERVER, "tools": ["*"]}})]
    return [Target(project / ".github" / "copilot" / "settings.local.json", hooks=hooks)]


def _opencode_config(base: Path) -> Path:
    jsonc = base / "opencode.jsonc"
    return jsonc if jsonc.exists() and not (base / "opencode.json").exists() else (
        base / "opencode.json")


def opencode(scope: str, project: Path, home: Path) -> list[Target]:
    from .opencode import PLUGIN

    server = {"ctrlz": {"type": "local", "command": [MCP_SERVER["command"],
                                                     *MCP_SERVER["args"]], "enabled": True}}
    if scope == "user":
        config = Path(str(xdg_base("config", home=os.fspath(home)))) / "opencode"
        return [Target(config / "plugins" / "ctrlz.js", "file", content=PLUGIN),
                Target(_opencode_config(config), servers=server, server_key=["mcp"])]
    return [Target(project / ".opencode" / "plugins" / "ctrlz.js", "file", content=PLUGIN,
                   committed=True),
            Target(_opencode_config(project), servers=server, server_key=["mcp"],
                   committed=True)]


DROID_FILE_TOOLS = "Create|Edit|MultiEdit|ApplyPatch"


def droid_dir(scope: str, project: Path, home: Path) -> Path:
    """Droid's folder: ``<project>/.factory``, or ``~/.factory`` (Droid puts it under
    ``$FACTORY_HOME_OVERRIDE`` instead of the home directory when that is set)."""
    if scope == "user":
        return Path(os.environ.get("FACTORY_HOME_OVERRIDE") or home) / ".factory"
    return project / ".factory"


def _droid_hooks_file(base: Path) -> tuple[Path, list[str]]:
    """Where Droid reads this folder's hooks from, and the key they sit under.

    Droid 0.225 merges ``hooks.json`` (events at its root; what its own /hooks writes) over the
    ``hooks`` of ``settings.json``, event by event, and reads the older ``hooks/hooks.json``
    only while ``hooks.json`` is missing. So a PreToolUse list in ``hooks.json`` hides one in
    ``settings.json``: ours go into the file Droid is reading, and a ``hooks.json`` is never
    created (it would hide the user's own settings.json hooks). ``settings.local.json`` is no
    choice: Droid takes only general settings from it, never hooks."""
    for hooks_json in (base / "hooks.json", base / "hooks" / "hooks.json"):
        if hooks_json.exists():
            return hooks_json, []
    return base / "settings.json", ["hooks"]


def droid(scope: str, project: Path, home: Path) -> list[Target]:
    cmd = hook_command("droid")
    # timeouts in seconds; a matcher is the exact tool name or else an unanchored regex, so
    # it is anchored. Script (JavaScript that drives other tools) is snapshotted like a shell.
    hooks = {"SessionStart": [_claude_group(None, cmd)],
             "UserPromptSubmit": [_claude_group(None, cmd)],
             "PreToolUse": [_claude_group(f"^({DROID_FILE_TOOLS}|Execute|Script)$", cmd)],
             "PostToolUse": [_claude_group(f"^({DROID_FILE_TOOLS})$", cmd)]}
    base = droid_dir(scope, project, home)
    path, key = _droid_hooks_file(base)
    shared = scope != "user"
    return [Target(path, hooks=hooks, hooks_key=key, committed=shared),
            Target(base / "mcp.json", servers={"ctrlz": {"type": "stdio", **MCP_SERVER}},
                   committed=shared)]


AUGGIE_FILE_TOOLS = "save-file|str-replace-editor|remove-files|apply_patch|write|edit"
AUGGIE_SHELL_TOOLS = "launch-process|write-process|bash"


def auggie(scope: str, project: Path, home: Path) -> list[Target]:
    cmd = hook_command("auggie")

    def group(matcher: str | None) -> dict[str, Any]:
        # Auggie: timeout in ms; tool matchers are unanchored regexes (anchored here); its
        # lifecycle events take no matcher at all
        handler = {"type": "command", "command": cmd, "timeout": 30000}
        return ({"matcher": matcher} if matcher else {}) | {"hooks": [handler]}

    # Stop bounds the turns: Auggie runs PromptSubmit alongside the model request, so only Stop
    # tells a turn's first tool call from the last one of the turn before (hooks/auggie.py)
    hooks = {"SessionStart": [group(None)], "PromptSubmit": [group(None)],
             "PreToolUse": [group(f"^({AUGGIE_FILE_TOOLS}|{AUGGIE_SHELL_TOOLS})$")],
             "PostToolUse": [group(f"^({AUGGIE_FILE_TOOLS})$")], "Stop": [group(None)]}
    server = {"ctrlz": {"type": "stdio", **MCP_SERVER}}
    if scope == "user":
        return [Target(home / ".augment" / "settings.json", hooks=hooks, servers=server)]
    # the local file: Auggie's own `--local` writes go there and it git-ignores it
    return [Target(project / ".augment" / "settings.local.json", hooks=hooks, servers=server)]


AGENTS: dict[str, Agent] = {a.name: a for a in (
    Agent("claude", "Claude Code", claude, ("claude",), (".claude",), (".claude",)),
    Agent("gemini", "Gemini CLI", gemini, ("gemini",), (".gemini",), (".gemini",)),
    Agent("codex", "Codex CLI", codex, ("codex",), (".codex",), (".codex",)),
    Agent("cursor", "Cursor", cursor, ("cursor-agent", "cursor"), (".cursor",), (".cursor",)),
    Agent("copilot", "GitHub Copilot CLI", copilot, ("copilot",),
          (".github/copilot", ".github/hooks"), (".copilot",)),
    Agent("opencode", "OpenCode", opencode, ("opencode",),
          (".opencode", "opencode.json", "opencode.jsonc"), (".config/opencode",)),
    Agent("droid", "Factory Droid", droid, ("droid",), (".factory",), (".factory",)),
    Agent("auggie", "Augment Auggie", auggie, ("auggie",), (".augment",), (".augment",)),
)}
AGENT_NAMES = tuple(AGENTS)


def targets(agent: str, scope: str, project: Path, home: Path) -> list[Target]:
    """The files ``ctrlz install AGENT`` edits in that scope."""
    return AGENTS[agent].targets(scope, project, home)
