"""What each agent needs registered, and in which settings file (per the agents' documentation).

| agent  | hooks (project / user)                          | MCP server (project / user)           |
|--------|-------------------------------------------------|---------------------------------------|
| claude | .claude/settings.json / ~/.claude/settings.json | .mcp.json / ~/.claude.json mcpServers |
| gemini | .gemini/settings.json / ~/.gemini/settings.json | same file, mcpServers                 |
| codex  | .codex/hooks.json / $CODEX_HOME/hooks.json      | .codex/config.toml / $CODEX_HOME/...  |

Commands are absolute paths (agents spawn hooks and servers from their own cwd with a minimal
PATH): the ``ctrlz`` script next to the running interpreter when it exists, else the one on PATH.
Hooks run ``<that interpreter> -m ctrlz.hooks AGENT``, which is ``ctrlz hook AGENT`` without the
CLI's start-up cost (click and every command module, ~50 ms): every tool call pays it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AGENT_NAMES = ("claude", "gemini", "codex")


def ctrlz_command() -> str:
    beside = Path(sys.executable).parent / "ctrlz"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("ctrlz") or "ctrlz"


@dataclass
class Target:
    """One settings file and what goes into it."""

    path: Path
    fmt: str  # json | toml
    hooks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    servers: dict[str, Any] = field(default_factory=dict)
    server_key: list[str] = field(default_factory=lambda: ["mcpServers"])


def hook_command(agent: str) -> str:
    return f"{shlex.quote(sys.executable)} -m ctrlz.hooks {agent}"


def _handler(agent: str, timeout: int, name: bool = False) -> dict[str, Any]:
    h: dict[str, Any] = {"type": "command", "command": hook_command(agent), "timeout": timeout}
    if name:
        h = {"name": "ctrlz", **h}
    return h


def _group(matcher: str | None, handler: dict[str, Any]) -> dict[str, Any]:
    return ({"matcher": matcher} if matcher is not None else {}) | {"hooks": [handler]}


def targets(agent: str, scope: str, project: Path, home: Path) -> list[Target]:
    """The settings files ``ctrlz install AGENT --SCOPE`` edits."""
    server = {"command": ctrlz_command(), "args": ["mcp"]}
    user = scope == "user"
    if agent == "claude":
        h = _handler("claude", 30)
        hooks = {"SessionStart": [_group(None, h)], "UserPromptSubmit": [_group(None, h)],
                 "PreToolUse": [_group("Write|Edit|MultiEdit|NotebookEdit|Bash", h)],
                 "PostToolUse": [_group("Write|Edit|MultiEdit|NotebookEdit", h)]}
        settings = (home / ".claude" if user else project / ".claude") / "settings.json"
        mcp = home / ".claude.json" if user else project / ".mcp.json"
        return [Target(settings, "json", hooks=hooks),
                Target(mcp, "json", servers={"ctrlz": {"type": "stdio", **server}})]
    if agent == "gemini":
        h = _handler("gemini", 30000, name=True)
        hooks = {"SessionStart": [_group("*", h)], "BeforeAgent": [_group("*", h)],
                 "BeforeTool": [_group("write_file|replace|run_shell_command", h)],
                 "AfterTool": [_group("write_file|replace", h)]}
        settings = (home / ".gemini" if user else project / ".gemini") / "settings.json"
        return [Target(settings, "json", hooks=hooks, servers={"ctrlz": server})]
    if agent == "codex":
        h = _handler("codex", 30)
        hooks = {"SessionStart": [_group(None, h)], "UserPromptSubmit": [_group(None, h)],
                 "PreToolUse": [_group("apply_patch|Bash", h)],
                 "PostToolUse": [_group("apply_patch", h)]}
        codex_home = Path(os.environ.get("CODEX_HOME") or home / ".codex")
        base = codex_home if user else project / ".codex"
        return [Target(base / "hooks.json", "json", hooks=hooks),
                Target(base / "config.toml", "toml", servers={"ctrlz": server})]
    raise ValueError(agent)
