"""How an API route is declared, called and answered.

A route is a plain function of a :class:`Call` declared with :func:`endpoint`; the declaration
(method, path, parameters, body schema) is also what :mod:`.openapi` documents, so the document
cannot drift from the routes. :func:`routes` turns them into Starlette routes: the body is
parsed, the function runs in a worker thread (the library is synchronous and takes file
locks), and the result is sent as JSON. Every error is JSON too (:func:`error_response`), with
the CLI's one-line message and exit code, and an HTTP status chosen by the error's class.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import errors
from .opening import open_known

if TYPE_CHECKING:

    from ..session.registry import KnownWorkspace
    from ..workspace import Workspace
    from .context import ServiceState

MAX_JSON_BODY = 1 << 20  # an API body is a few fields; the gateway's 10 MB cap is the outer one


class BodyTooLarge(Exception):
    """Raised by the gateway's body counter while a route reads its body: answered 413."""


@dataclass(frozen=True)
class Param:
    name: str
    where: str  # "path" or "query"
    description: str
    required: bool = False
    repeat: bool = False
    type: str = "string"


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    summary: str
    handler: Callable[[Call], Any]
    params: tuple[Param, ...] = ()
    body: dict[str, Any] | None = None  # JSON schema
    status: int = 200
    changes: bool = False  # changes the workspace: one at a time per workspace
    returns: str = ""  # what the answer is, in words (and which CLI --json it matches)
    tags: tuple[str, ...] = field(default_factory=tuple)


ENDPOINTS: list[Endpoint] = []

WS = Param("ws", "path", "Workspace id (its store's directory name, from GET /v1/workspaces).",
           required=True)


def endpoint(method: str, path: str, summary: str, *, params: tuple[Param, ...] = (),
             body: dict[str, Any] | None = None, status: int = 200, changes: bool = False,
             returns: str = "", tag: str = "") -> Callable[[Callable[[Call], Any]],
                                                          Callable[[Call], Any]]:
    """Declare a route (see the module docstring)."""
    def register(handler: Callable[[Call], Any]) -> Callable[[Call], Any]:
        declared = (WS, *params) if "{ws}" in path else params
        ENDPOINTS.append(Endpoint(method, path, summary, handler, declared, body, status,
                                  changes, returns, (tag,) if tag else ()))
        return handler
    return register


class Call:
    """One request as a route function sees it: arguments, the workspace, the service."""

    def __init__(self, request: Request, body: dict[str, Any], state: ServiceState) -> None:
        self.request = request
        self.body = body
        self.state = state
        self._stack = ExitStack()
        self._known: KnownWorkspace | None = None

    # -- arguments ---------------------------------------------------------------------------

    def path_param(self, name: str) -> str:
        return str(self.request.path_params[name])

    def arg(self, name: str, default: str | None = None) -> str | None:
        """A body field, else a query parameter (strings only; None when absent)."""
        if name in self.body and self.body[name] is not None:
            value = self.body[name]
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise errors.UsageError(f"{name} must be a string")
            return str(value)
        return self.request.query_params.get(name, default)

    def args(self, name: str) -> list[str]:
        """A list: a body array, or a repeated query parameter."""
        if name in self.body and self.body[name] is not None:
            value = self.body[name]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise errors.UsageError(f"{name} must be a list of strings")
            return list(value)
        return self.request.query_params.getlist(name)

    def flag(self, name: str) -> bool:
        if name in self.body:
            value = self.body[name]
            if not isinstance(value, bool):
                raise errors.UsageError(f"{name} must be true or false")
            return value
        raw = self.request.query_params.get(name)
        return raw is not None and raw.lower() in ("1", "true", "yes", "on", "")

    def number(self, name: str) -> int | None:
        raw = self.body.get(name) if name in self.body else self.request.query_params.get(name)
        if raw is None:
            return None
        # a JSON integer, or a query parameter of ASCII digits: int() would also take 1.9
        # (as 1, silently), true, "1_0" and " 7 "
        if isinstance(raw, int) and not isinstance(raw, bool):
            value = raw
        elif isinstance(raw, str) and raw.isascii() and raw.isdigit():
            value = int(raw)
        else:
            raise errors.UsageError(f"{name} must be a whole number >= 0")
        if value < 0:
            raise errors.UsageError(f"{name} must be a whole number >= 0")
        return value

    # -- the workspace ------------------------------------------------------------------------

    def known(self) -> KnownWorkspace:
        if self._known is None:
            from ..session.registry import find

            self._known = find(self.path_param("ws"), self.state.home)
        return self._known

    def workspace(self) -> Workspace:
        """The workspace of ``{ws}``, opened for this call and closed after it."""
        return self._stack.enter_context(open_known(self.known(), self.state.home))

    def path(self, value: str) -> str:
        """An API path argument checked (no ``..``, not absolute) and made absolute, so the
        library's own inside-the-workspace check sees exactly it, whatever our cwd."""
        from ..paths import plain_relative

        rel = plain_relative(value)
        return os.fsdecode(os.path.join(os.fsencode(self.known().root), rel))

    def close(self) -> None:
        self._stack.close()


# -- answering ----------------------------------------------------------------------------------


def dumps(data: Any) -> bytes:
    """JSON bytes; names that are not UTF-8 (kept as surrogate escapes) go out as ``\\udcXX``."""
    try:
        return json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, ensure_ascii=True).encode("ascii")


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None
                  ) -> Response:
    return Response(dumps(data), status_code=status, media_type="application/json",
                    headers=headers)


#: HTTP status per error class, most specific first (the CLI's exit code goes in the body)
STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (errors.RestoreIncomplete, 409),
    (errors.AmbiguousSnapshot, 409),
    (errors.SnapshotNotFound, 404),
    (errors.WorkspaceError, 404),
    (errors.UsageError, 400),
    (errors.LimitExceeded, 409),
    (errors.StoreLocked, 423),
    (errors.StoreFull, 507),
    (errors.StoreError, 500),
    (errors.RestoreError, 500),
)


def error_body(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) for an exception: ``{"type": "error", "error": <class>,
    "message": <one line>, "exit_code": <the CLI's>}``."""
    import sqlite3

    if isinstance(exc, errors.CtrlzError):
        status = next((code for cls, code in STATUS if isinstance(exc, cls)), 500)
        body = {"type": "error", "error": type(exc).__name__,
                "message": " ".join(str(exc).split()), "exit_code": exc.exit_code,
                "status": status}
        partial = getattr(exc, "result", None)
        if partial is not None and hasattr(partial, "to_json"):
            body["result"] = partial.to_json()
        return status, body
    if isinstance(exc, sqlite3.DatabaseError):
        return 500, {"type": "error", "error": "StoreError", "exit_code": 6, "status": 500,
                     "message": f"the store's catalog is unreadable: {exc}"}
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return 500, {"type": "error", "error": "OSError", "exit_code": 1, "status": 500,
                     "message": f"{exc.strerror or exc}{where}"}
    return 500, {"type": "error", "error": "InternalError", "exit_code": 70, "status": 500,
                 "message": f"internal error: {type(exc).__name__}: {exc}; this is a bug in "
                            "ctrlz (the service log has the traceback)"}


def error_response(exc: BaseException) -> Response:
    status, body = error_body(exc)
    if status >= 500 and body["error"] == "InternalError":
        import logging

        logging.getLogger("ctrlz.service").error("request failed", exc_info=exc)
    return json_response(body, status)


def problem(status: int, message: str, error: str = "HTTPError") -> Response:
    """An error the HTTP layer itself answers (bad JSON, 401, 413, unknown path)."""
    return json_response({"type": "error", "error": error, "message": message,
                          "exit_code": 2 if status < 500 else 1, "status": status}, status)


async def read_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    if len(raw) > MAX_JSON_BODY:
        raise errors.UsageError(f"the JSON body is over {MAX_JSON_BODY} bytes")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise errors.UsageError(f"the body is not valid JSON: {exc}") from None
    except RecursionError:  # json's decoder gives up on thousands of nested levels
        raise errors.UsageError("the body is JSON nested too deeply; an API body is one "
                                "object of a few fields") from None
    if not isinstance(data, dict):
        raise errors.UsageError("the body must be a JSON object")
    return data


def _run(ep: Endpoint, call: Call) -> Any:
    try:
        return ep.handler(call)
    finally:
        call.close()


async def _call(ep: Endpoint, request: Request, body: dict[str, Any], state: ServiceState
                ) -> Any:
    """Run a route in a worker thread. A change first waits for its workspace's turn on the
    event loop (:meth:`ServiceState.workspace_lock`), holding no worker while it waits: a
    workspace whose store another process holds delays only its own changes (each of them,
    in its turn, gets 423 when the store lock does not come within its timeout)."""
    call = Call(request, body, state)
    if not ep.changes:
        return await run_in_threadpool(_run, ep, call)
    try:
        ws_id = (await run_in_threadpool(call.known)).id
    except BaseException:
        call.close()
        raise
    async with state.workspace_lock(ws_id):
        result = await run_in_threadpool(_run, ep, call)
    state.changed(ws_id)
    return result


def routes(state: ServiceState) -> list[Route]:
    """Starlette routes for every declared endpoint."""
    out = []
    for ep in ENDPOINTS:
        async def handle(request: Request, ep: Endpoint = ep) -> Response:
            try:
                body = await read_body(request) if request.method != "GET" else {}
                result = await _call(ep, request, body, state)
            except BodyTooLarge:
                raise  # the app answers 413 (see app.py)
            except Exception as exc:  # every error is answered as JSON  # noqa: BLE001
                return error_response(exc)
            if isinstance(result, Response):
                return result
            return json_response(result, ep.status)
        out.append(Route(ep.path, handle, methods=[ep.method], name=ep.handler.__name__))
    return out
