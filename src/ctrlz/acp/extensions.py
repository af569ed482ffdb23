"""What the proxy adds to ACP, after harn's surface: three session capabilities in the
``initialize`` response, and the three methods behind them, answered by ctrlz itself (never
forwarded to the agent).

- ``session/restore_tool_call`` ``{sessionId, toolCallId}``: the files that tool call wrote
  back to their pre-images (:func:`ctrlz.toolcalls.fs_restore`); a file edited since is left
  alone and reported. When something was put back, a ``session/update`` ``tool_call_update``
  with status ``restored`` and the paths under ``_meta`` goes to the client first.
- ``session/rollback`` ``{sessionId}``: the newest completed prompt turn not rolled back yet,
  shell commands included (:mod:`ctrlz.acp.turns`).
- ``session/redo`` ``{sessionId}``: the newest rollback, taken back.

Each name is also accepted with ACP's extension prefix (``_session/rollback``), which is what
the SDKs' ``ext_method`` sends. Bad input and refusals are JSON-RPC errors with one clear
message (:func:`ctrlz.acp.rpc.error_for`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import SnapshotNotFound
from . import rpc
from .capture import Worker
from .sessions import Session, Sessions
from .turns import StaleRedo, redo_rollback, rollback_turn

RESTORE_TOOL_CALL = "session/restore_tool_call"
ROLLBACK = "session/rollback"
REDO = "session/redo"
METHODS = (RESTORE_TOOL_CALL, ROLLBACK, REDO)

#: what ``initialize`` advertises under ``agentCapabilities.sessionCapabilities``
CAPABILITIES = {"rollback": {}, "redo": {}, "restoreToolCall": {}}

Notify = Callable[[dict[str, Any]], Awaitable[None]]


def method_of(name: str) -> str | None:
    """The ctrlz method a request names (with or without the ``_`` prefix), else None."""
    bare = name[1:] if name.startswith("_") else name
    return bare if bare in METHODS else None


def advertise(response: dict[str, Any]) -> dict[str, Any]:
    """The agent's ``initialize`` response with ctrlz's session capabilities added (the
    agent's own capabilities are kept). An error response is left as it is."""
    result = response.get("result")
    if not isinstance(result, dict):
        return response
    caps = result.get("agentCapabilities")
    if not isinstance(caps, dict):
        caps = result["agentCapabilities"] = {}
    session_caps = caps.get("sessionCapabilities")
    if not isinstance(session_caps, dict):
        session_caps = caps["sessionCapabilities"] = {}
    session_caps.update({k: dict(v) for k, v in CAPABILITIES.items()})
    return response


class Extensions:
    """Answers the ctrlz methods for the sessions the proxy knows."""

    def __init__(self, worker: Worker, sessions: Sessions, notify: Notify) -> None:
        self.worker = worker
        self.sessions = sessions
        self.notify = notify

    async def handle(self, method: str, params: Any) -> dict[str, Any]:
        if not isinstance(params, dict):
            raise rpc.MethodError(f"{method} takes an object of params with a sessionId")
        session = self._session(method, params)
        if method == RESTORE_TOOL_CALL:
            return await self.restore_tool_call(session, params)
        if session.running:
            raise rpc.MethodError(f"a prompt turn is running in session {session.session_id};"
                                  f" wait for its response (or send session/cancel) before "
                                  f"{method}")
        if method == ROLLBACK:
            return await self.rollback(session)
        return await self.redo(session)

    def _session(self, method: str, params: dict[str, Any]) -> Session:
        sid = params.get("sessionId")
        if not isinstance(sid, str) or not sid:
            raise rpc.MethodError(f"{method} needs a sessionId (a non-empty string)")
        session = self.sessions.get(sid)
        if session is None:
            raise rpc.MethodError(f"unknown session {sid}: this proxy has seen no session/new, "
                                  "session/load or session/resume for it")
        if session.workspace is None:
            raise rpc.MethodError(f"session {sid} is not recorded by ctrlz: {session.problem}",
                                  rpc.INTERNAL_ERROR)
        return session

    async def restore_tool_call(self, session: Session, params: dict[str, Any]
                                ) -> dict[str, Any]:
        from ..toolcalls.api import fs_restore

        call_id = params.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            raise rpc.MethodError("session/restore_tool_call needs a toolCallId (a non-empty "
                                  "string)")
        sid, ws = session.session_id, session.workspace
        scope = _files_scope(session, call_id)
        if session.scopes.get(scope) == "bash":
            raise rpc.MethodError(
                f"tool call {call_id} ran a terminal command, which may have changed any "
                "path; take its whole turn back with session/rollback (or `ctrlz rewind "
                f"{scope}` in a shell)")
        try:
            report = await self.worker.call(fs_restore, sid, scope, workspace=ws)
        except SnapshotNotFound:
            if call_id in session.tool_calls:  # the agent named it, but wrote nothing through us
                raise rpc.MethodError(
                    f"tool call {call_id} of session {sid} wrote no file through the client "
                    "(fs/write_text_file), so ctrlz holds no pre-image of its own: the agent "
                    "changed its files itself, if at all; session/rollback takes back its "
                    "whole turn from the workspace snapshot taken at session/prompt") from None
            raise rpc.MethodError(
                f"session {sid} has no recorded tool call {call_id}: ctrlz captures the files "
                "a tool call writes through fs/write_text_file and the workspace before "
                "terminal/create") from None
        root = ws.root_dir if ws is not None else ""
        restored = [os.path.join(root, p) for p in report["restored_paths"]]
        skipped = [{"path": os.path.join(root, s["path"]) if s["path"] else "",
                    "reason": s["reason"]} for s in report["skipped_paths_with_reasons"]]
        safety = report["safety_snapshot"]
        if not restored and not skipped:
            # the record is there because the agent asked the client to write a file, but it
            # holds no pre-image (capturing it failed): never an empty success
            raise rpc.MethodError(
                f"tool call {call_id} of session {sid} wrote through the client, but ctrlz "
                "holds no pre-image of what it wrote (capturing it failed; the proxy's stderr "
                "says why), so nothing was put back; session/rollback takes back its whole "
                "turn from the workspace snapshot taken at session/prompt", rpc.INTERNAL_ERROR)
        if restored:
            await self.notify(rpc.notification("session/update", {
                "sessionId": sid,
                "update": {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                           "status": "restored",
                           "_meta": {"harn": {"kind": "tool_call_restored",
                                              "restoredPaths": restored},
                                     "ctrlz": {"skippedPaths": skipped,
                                               "safetySnapshot": safety}}}}))
        return {"toolCallId": call_id, "restoredPaths": restored, "skippedPaths": skipped,
                "safetySnapshot": safety, "undo": "ctrlz undo" if safety else None}

    async def rollback(self, session: Session) -> dict[str, Any]:
        turn = session.last_completed()
        if turn is None:
            more = (" (the completed ones are rolled back already; session/redo brings the "
                    "newest back)" if session.rolled_back else "")
            raise rpc.MethodError(f"session {session.session_id} has no completed prompt "
                                  f"turn to roll back{more}")
        previous = next((key for _, key in reversed(session.rolled_back) if key), None)
        result, key = await self.worker.call(rollback_turn, session.workspace,
                                             session.session_id, turn, previous,
                                             session.turn_ends.get(turn))
        session.rolled_back.append((turn, key))
        return result

    async def redo(self, session: Session) -> dict[str, Any]:
        if not session.rolled_back:
            raise rpc.MethodError(f"nothing to redo in session {session.session_id}: no "
                                  "session/rollback since its last prompt turn")
        turn, key = session.rolled_back[-1]
        try:
            result = await self.worker.call(redo_rollback, session.workspace,
                                            session.session_id, turn, key)
        except StaleRedo:
            session.rolled_back.clear()
            raise
        session.rolled_back.pop()
        return result


def _files_scope(session: Session, call_id: str) -> str:
    """Where the files of tool call ``call_id`` were captured: its newest files scope (its own
    id; a derived one when that id holds a terminal's snapshot; ``<id>:turn-<n>`` when the
    agent reused the id in a later turn), else the id itself."""
    scopes = session.files_scopes.get(call_id)
    return scopes[-1] if scopes else call_id
