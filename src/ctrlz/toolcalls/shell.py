"""Shell tool calls: a shell command may touch any path, so capture the whole workspace.

Before a Bash (or ``run_shell_command``) tool call, an incremental workspace snapshot of type
``tool`` is taken and a ``bash`` entry pointing at it is recorded in the session's timeline, so
``ctrlz rewind`` can undo what the command did.

Who takes the snapshot: the workspace daemon when one answers (it watches the tree, so the
snapshot rescans only what changed; see :mod:`ctrlz.session.daemon.daemon`), otherwise this process,
with the stat cache, after which a daemon is started for the next call (unless the ``daemon``
setting is off). Both produce the same snapshot.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..session import daemon_client
from . import records
from .core import check_id, opened
from .register import register_rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def workspace_snapshot(workspace: Any, label: str, *, session_id: str | None = None) -> str:
    """A ``tool`` snapshot of the whole workspace, from the daemon or in-process; its id.
    ``workspace`` is a :class:`ctrlz.Workspace` or anything with ``root`` and ``store_path``."""
    store = Path(workspace.store_path)
    try:
        if os.environ.get("CTRLZ_HOOK_DAEMON_LATE"):  # the native door waited for it already
            raise daemon_client.DaemonUnavailable("the daemon did not answer the hook in time")
        reply = daemon_client.snapshot(store, type="tool", label=label, session_id=session_id,
                                       hook=True)
        return str(reply["snapshot"]["id"])
    except (daemon_client.DaemonUnavailable, KeyError, TypeError):
        pass
    from ..session.protected import ProtectedWorkspace

    ws = (workspace if isinstance(workspace, ProtectedWorkspace)
          else ProtectedWorkspace.located(workspace.root, workspace.store_path))
    asked, ws.use_daemon = ws.use_daemon, False  # it was asked above: not a second time
    try:
        snap = ws.snapshot(type="tool", label=label, session_id=session_id)
        daemon_client.autostart(ws.root, ws.store_path, ws.config["daemon"])
    finally:
        ws.use_daemon = asked
        if ws is not workspace:
            ws.close()
    return snap.id


def shell_call(session_id: str, scope_id: str, command: str, *, workspace: Any,
               agent: str | None = None, tool: str = "Bash",
               turn_key: str | None = None,
               take_snapshot: Callable[[str], str] | None = None) -> dict[str, Any]:
    """Snapshot the workspace (type ``tool``) and record the shell call ``scope_id``.
    ``take_snapshot(label)`` takes that snapshot and gives its id, when the caller is the
    workspace daemon itself (which must not ask itself over its socket); the snapshot comes
    first, so that a ``take_snapshot`` that raises leaves nothing recorded."""
    check_id("session_id", session_id)
    check_id("scope_id", scope_id)
    label = f"before {tool} {scope_id}: {' '.join(command.split())}"[:200]
    snap_id = (take_snapshot or (lambda text: workspace_snapshot(workspace, text)))(label)
    with opened(workspace) as place, place.store.lock, place.store.catalog.transaction():
        records.clear_redo(place.db, session_id)
        register_rows(place.db, session_id, scope_id, lazy=False, agent=agent, tool=tool,
                      kind="bash", detail=command, ws_snapshot=snap_id, turn_key=turn_key)
    return {"snapshot_id": scope_id, "workspace_snapshot": snap_id}
