"""The two ASGI apps: the API (served on the socket) and the gateway around it (on TCP)."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import api_actions, api_read  # noqa: F401 - importing them declares their routes
from .context import ServiceState
from .events import stream
from .gateway import Gateway
from .openapi import document
from .routing import BodyTooLarge, json_response, problem, routes


def api_app(state: ServiceState) -> Starlette:
    """Every ``/v1/`` route; errors (unknown path, wrong method) answered as JSON."""
    doc = document(version("ctrlz"))

    async def openapi(request: Request) -> Response:
        return json_response(doc)

    async def events(request: Request) -> Response:
        return stream(state.events, request)

    async def login(request: Request) -> Response:
        from .runtime import gateway_url

        if state.port is None:
            return problem(503, "the gateway is not listening (the service runs with "
                                "--no-gateway)")
        code = state.logins.new_code()
        base = gateway_url() or f"http://127.0.0.1:{state.port}"
        from .context import LOGIN_CODE_SECONDS

        return json_response({"type": "login", "code": code, "url": f"{base}/login?code={code}",
                              "expires_in": LOGIN_CODE_SECONDS})

    async def stop(request: Request) -> Response:
        if state.stop is not None:
            state.stop()
        return json_response({"type": "service-stop", "pid": state.pid})

    async def http_error(request: Request, exc: Any) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", None) or "error"
        if status == 404:
            detail = f"no such API path: {request.method} {request.url.path} (see " \
                     "/v1/openapi.json)"
        elif status == 405:
            detail = f"{request.method} is not allowed on {request.url.path}"
        return problem(status, str(detail))

    async def too_large(request: Request, exc: Any) -> Response:
        response = problem(413, "the body is over the gateway's limit")
        response.headers["connection"] = "close"
        return response

    extra = [Route("/v1/openapi.json", openapi, methods=["GET"]),
             Route("/v1/events", events, methods=["GET"]),
             Route("/v1/ui/login", login, methods=["POST"]),
             Route("/v1/service/stop", stop, methods=["POST"])]
    return Starlette(routes=extra + routes(state),
                     exception_handlers={HTTPException: http_error, BodyTooLarge: too_large})


class RevalidatedFiles(StaticFiles):
    """The dashboard's files with ``Cache-Control: no-cache``, not the gateway's
    ``no-store``: the browser keeps them and asks each time whether they changed (an ETag,
    answered 304), so a reload neither fetches nor, for the 700 KB of ECharts, compiles them
    again, and an upgraded ctrlz is still seen at once."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["cache-control"] = "no-cache"
        return response


def web_app() -> Starlette:
    """The dashboard: ``/`` is its page, ``/static/`` its scripts, styles and vendored
    libraries (:mod:`ctrlz.web`)."""
    from ..web import STATIC

    async def index(request: Request) -> Response:
        return Response((STATIC / "index.html").read_bytes(), media_type="text/html")

    async def not_found(request: Request, exc: Any) -> Response:
        return problem(getattr(exc, "status_code", 404), "not found")

    return Starlette(routes=[Route("/", index, methods=["GET"]),
                             Mount("/static", RevalidatedFiles(directory=STATIC), name="static")],
                     exception_handlers={HTTPException: not_found})


def gateway_app(state: ServiceState, api: Starlette) -> Gateway:
    return Gateway(state, api, web_app())
