"""Shell tool calls: a shell command may touch any path, so capture the whole workspace.

Before a Bash (or ``run_shell_command``) tool call, an incremental workspace snapshot of type
``tool`` is taken (the stat cache makes an unchanged tree cheap) and a ``bash`` entry pointing at
it is recorded in the session's timeline, so ``ctrlz rewind`` can undo what the command did.
The caller passes the open :class:`ctrlz.Workspace` (this layer does not open faces itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import records
from .api import _register
from .core import check_id, opened

if TYPE_CHECKING:
    from ..workspace import Workspace


def shell_call(session_id: str, scope_id: str, command: str, *, workspace: Workspace,
               agent: str | None = None, tool: str = "Bash") -> dict[str, Any]:
    """Snapshot the workspace (type ``tool``) and record the shell call ``scope_id``."""
    check_id("session_id", session_id)
    check_id("scope_id", scope_id)
    label = f"before {tool} {scope_id}: {' '.join(command.split())}"[:200]
    snap = workspace.snapshot(type="tool", label=label)
    with opened(workspace) as place, place.store.lock:
        with place.store.catalog.transaction():
            records.ensure_session(place.db, session_id, agent)
            records.clear_redo(place.db, session_id)
        _register(place, session_id, scope_id, lazy=False, agent=agent, tool=tool,
                  kind="bash", detail=command, ws_snapshot=snap.id)
    return {"snapshot_id": scope_id, "workspace_snapshot": snap.id}
