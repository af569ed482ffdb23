"""Per-tool-call snapshots, turns and rewind for agent sessions (see docs/agents.md).

Pre-images of the paths one agent tool call is about to change are captured into the workspace's
store (``<store>/toolcalls/``, see :mod:`ctrlz.toolcalls.store`), keyed by the agent's session id
and tool-call id. This package is the library; ``ctrlz.hooks`` and the CLI are faces over it.

Submodules load lazily, so a hook that only needs ``fs_snapshot`` never imports the engine.
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The turn key of an agent that sends no turn id and bounds its turns by a Stop event (see
# ``register.enter_turn``). Here, not in ``api``, so a hook names it without importing the library.
UNTIL_STOP = "ctrlz:until-stop"
# The turn keys ``ctrlz acp`` begins its turns with (this prefix and a random part), at the
# client's session/prompt. The agent's own prompt hook for that prompt (Gemini's BeforeAgent,
# when its hooks are installed too) joins that turn instead of opening a second one.
ACP_TURN = "ctrlz:acp-prompt:"

_EXPORTS = {
    "begin_turn": "api", "configure_byte_cap": "api", "delete_file": "api", "end_turn": "api",
    "drop_session": "api", "drop_snapshot": "api", "finish_tool_call": "api",
    "fs_restore": "api", "fs_snapshot": "api",
    "list_snapshots": "api", "start_session": "api", "tool_call": "api", "write_file": "api",
    "shell_call": "shell", "redo": "restore.turns", "rollback": "restore.turns",
    "RewindResult": "restore.rewinds", "agent_sessions": "restore.rewinds",
    "latest_session": "restore.rewinds",
    "rewind": "restore.rewinds", "timeline": "restore.rewinds",
    "DEFAULT_BYTE_CAP": "records",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ctrlz.toolcalls' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
