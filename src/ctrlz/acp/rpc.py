"""JSON-RPC 2.0 as the proxy sees it: what kind a message is, how to answer one, and the one
mapping from ctrlz's errors to JSON-RPC error objects.

The proxy forwards messages it does not own untouched, so nothing here validates a whole
message: it only tells requests, notifications and responses apart (by ``method`` and ``id``)
and builds the few messages the proxy writes itself. Error objects are the SDK's
(:class:`acp.RequestError`), so their shape is the one every ACP peer expects.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from acp import RequestError

from ..errors import CtrlzError, SnapshotNotFound, UsageError

log = logging.getLogger("ctrlz.acp")

REQUEST = "request"
NOTIFICATION = "notification"
RESPONSE = "response"

#: JSON-RPC's codes, and ACP's for an unknown resource
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def kind_of(message: dict[str, Any]) -> str:
    """``request`` (method and id), ``notification`` (method, no id) or ``response``."""
    if isinstance(message.get("method"), str):
        return REQUEST if "id" in message else NOTIFICATION
    return RESPONSE


def id_key(message_id: Any) -> str:
    """A dict key for a JSON-RPC id: ``1`` and ``"1"`` are different requests."""
    return json.dumps(message_id, sort_keys=True)


def result(message_id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message_id, "result": value}


def error(message_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    obj = RequestError(code, message, data).to_error_obj()
    if data is None:
        obj.pop("data")
    return {"jsonrpc": "2.0", "id": message_id, "error": obj}


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


class MethodError(Exception):
    """A ctrlz method refused its input; becomes a JSON-RPC error with this message."""

    def __init__(self, message: str, code: int = INVALID_PARAMS) -> None:
        super().__init__(message)
        self.code = code


def error_for(message_id: Any, exc: BaseException) -> dict[str, Any]:
    """The JSON-RPC error answering a ctrlz method that raised ``exc`` (the face's only
    mapping). Bad input (a :class:`MethodError`, a :class:`~ctrlz.errors.UsageError`, an
    unknown tool call) is ``-32602`` *invalid params*; any other ctrlz error (a restore that
    failed, a locked or full store) is ``-32603`` *internal error*, with the same one-line
    message the CLI prints. Anything else is a bug: ``-32603`` too, named as one, and logged."""
    if isinstance(exc, MethodError):
        return error(message_id, exc.code, str(exc))
    if isinstance(exc, (UsageError, SnapshotNotFound)):
        return error(message_id, INVALID_PARAMS, " ".join(str(exc).split()))
    if isinstance(exc, CtrlzError):
        return error(message_id, INTERNAL_ERROR, " ".join(str(exc).split()))
    log.error("ctrlz acp: internal error: %s: %s", type(exc).__name__, exc,
              exc_info=log.isEnabledFor(logging.DEBUG))
    return error(message_id, INTERNAL_ERROR, f"ctrlz internal error: {type(exc).__name__}: "
                 f"{exc}. This is a bug in ctrlz; rerun with --log-level DEBUG for the "
                 "traceback and report it.")
