"""The gateway: the API and the dashboard on 127.0.0.1, for a browser.

The Unix socket is private by file permissions; a TCP port on loopback is open to every local
process and to any web page the user visits, so each request passes these checks, in order:

1. **Host** must be ``127.0.0.1:<port>`` or ``localhost:<port>`` (400 otherwise): a DNS-
   rebinding page reaches us under its own name, and is refused.
2. **Origin**, when sent, must be our own (403 otherwise, and never an
   ``Access-Control-Allow-Origin`` for anyone else): CORS is granted to our own origin only.
3. **Body** at most 10 MB (413), by ``Content-Length`` and by counting a chunked body.
4. **Credentials**: ``Authorization: Bearer <gateway.token>`` (compared in constant time), or
   the ``ctrlz_session`` cookie a one-time login code became (``GET /login?code=``; the code
   comes from ``ctrlz ui`` over the socket). The cookie is HttpOnly and SameSite=Strict, and
   outlives a restart of the service (its hash is kept in the run directory: see
   :class:`.context.Logins`). Without either: 401.
5. **CSRF**: a request that may change something (anything but GET, HEAD, OPTIONS) made with
   the cookie must carry ``X-CSRF-Token`` equal to the session's token (403 otherwise); the
   page reads that token from the non-HttpOnly ``ctrlz_csrf`` cookie, which other sites cannot.

Routes of its own: ``/login``, ``/logout``, ``/status`` (the service and its watchers, cached
for a second, for tray-style pollers), ``/`` and ``/static/…`` (the dashboard, :mod:`ctrlz.web`).
Everything under ``/v1/`` is the API, except the routes only a socket client may use
(``POST /v1/ui/login``, ``POST /v1/service/stop``).
"""

from __future__ import annotations

import hmac
import time
from http.cookies import SimpleCookie
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .context import SESSION_SECONDS, ServiceState
from .routing import BodyTooLarge, json_response, problem

MAX_BODY = 10 * 1024 * 1024
#: an over-long body up to this size is read and thrown away before the 413, so the client
#: (which is still sending) gets the answer rather than a broken pipe; beyond, we hang up
DRAIN_MAX = 4 * MAX_BODY
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
SOCKET_ONLY = ("/v1/ui/login", "/v1/service/stop")
SESSION_COOKIE = "ctrlz_session"
CSRF_COOKIE = "ctrlz_csrf"
CSRF_HEADER = "x-csrf-token"
STATUS_CACHE_S = 1.0
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self' "
                               "'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}

LOGGED_OUT = """<!doctype html><meta charset="utf-8"><title>ctrlz</title>
<body style="font:15px system-ui;margin:3em;max-width:40em">
<h1>ctrlz</h1><p>This dashboard needs a login. Run <code>ctrlz ui --open</code>
(or <code>ctrlz ui</code> and open the address it prints); each address works once.</p>"""


class Gateway:
    """ASGI app: the checks of the module docstring in front of ``api`` (everything
    under ``/v1/``) and ``web`` (the dashboard)."""

    def __init__(self, state: ServiceState, api: ASGIApp, web: ASGIApp) -> None:
        self.state = state
        self.api = api
        self.web = web
        self._status: tuple[float, bytes] | None = None

    # -- the checks --------------------------------------------------------------------------

    def origins(self) -> tuple[str, ...]:
        port = self.state.port
        return (f"http://127.0.0.1:{port}", f"http://localhost:{port}")

    def hosts(self) -> tuple[str, ...]:
        port = self.state.port
        return (f"127.0.0.1:{port}", f"localhost:{port}")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return
        if scope["type"] != "http":
            return
        request = Request(scope)
        headers = request.headers
        if headers.get("host", "") not in self.hosts():
            return await self._send(problem(400, "invalid Host header: this gateway answers "
                                            "to 127.0.0.1 and localhost only"), scope,
                                    receive, send)
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins():
            return await self._send(problem(403, f"cross-origin request from {origin} "
                                            "refused"), scope, receive, send)
        length = headers.get("content-length")
        numeric = length is not None and length.isascii() and length.isdigit()  # not "²"
        if length is not None and (not numeric or int(length) > MAX_BODY):
            if numeric and int(length) <= DRAIN_MAX:
                await _drain(receive)
            return await self._send(problem(413, f"the body is over {MAX_BODY} bytes"),
                                    scope, receive, send, close=True)
        extra = {"access-control-allow-origin": origin, "vary": "Origin",
                 "access-control-allow-credentials": "true"} if origin else {}
        if request.method == "OPTIONS":
            return await self._send(Response(status_code=204, headers={
                **extra, "access-control-allow-methods": "GET, POST, DELETE",
                "access-control-allow-headers": "authorization, content-type, "
                                                "x-csrf-token, last-event-id",
                "access-control-max-age": "600"}), scope, receive, send)
        path = scope["path"]
        if path == "/login":
            return await self._send(self._login(request), scope, receive, send)
        auth = self._authenticate(request)
        if auth is None:
            if path == "/" and "text/html" in headers.get("accept", ""):
                return await self._send(HTMLResponse(LOGGED_OUT, 401), scope, receive, send)
            return await self._send(problem(401, "authentication required: a bearer token "
                                            "(gateway.token) or a login from `ctrlz ui`"),
                                    scope, receive, send)
        if auth != "bearer" and request.method not in SAFE_METHODS:
            sent = headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), auth.encode()):
                return await self._send(problem(403, "missing or wrong X-CSRF-Token header"),
                                        scope, receive, send)
        if path == "/logout":
            return await self._send(self._logout(request), scope, receive, send)
        if path == "/status":
            return await self._send(await self._cached_status(), scope, receive, send)
        if path in SOCKET_ONLY:
            return await self._send(problem(403, f"{path} is available on the service's "
                                            "socket only"), scope, receive, send)
        app = self.api if path.startswith("/v1/") else self.web
        await self._forward(app, scope, receive, send, extra)

    def _authenticate(self, request: Request) -> str | None:
        """``"bearer"``, the session's CSRF token (cookie login), or None."""
        header = request.headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            given = header[7:].strip().encode()
            return "bearer" if hmac.compare_digest(given, self.state.token.encode()) else None
        cookie = request.cookies.get(SESSION_COOKIE)
        return self.state.logins.csrf_for(cookie) if cookie else None

    # -- login -------------------------------------------------------------------------------

    def _login(self, request: Request) -> Response:
        code = request.query_params.get("code", "")
        redeemed = self.state.logins.redeem(code) if code else None
        if redeemed is None:
            return HTMLResponse(LOGGED_OUT.replace("needs a login", "login address was "
                                                   "already used or has expired; it needs a "
                                                   "new login"), 401)
        session, csrf = redeemed
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(SESSION_COOKIE, session, max_age=SESSION_SECONDS, path="/",
                            httponly=True, samesite="strict")
        response.set_cookie(CSRF_COOKIE, csrf, max_age=SESSION_SECONDS, path="/",
                            httponly=False, samesite="strict")
        return response

    def _logout(self, request: Request) -> Response:
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie:
            self.state.logins.end(cookie)
        response = json_response({"type": "logout"})
        response.delete_cookie(SESSION_COOKIE, path="/")
        response.delete_cookie(CSRF_COOKIE, path="/")
        return response

    async def _cached_status(self) -> Response:
        now = time.monotonic()
        if self._status is None or now - self._status[0] > STATUS_CACHE_S:
            from starlette.concurrency import run_in_threadpool

            from ..session.registry import known
            from .routing import dumps

            def build() -> dict[str, Any]:
                sup = self.state.supervisor
                return {"type": "status", "service": self.state.info(),
                        "known_workspaces": [w.to_json() | {"watcher": sup.info(w.id) if sup
                                                      else None}
                                       for w in known(self.state.home)]}

            self._status = (now, dumps(await run_in_threadpool(build)))
        return Response(self._status[1], media_type="application/json")

    # -- sending -----------------------------------------------------------------------------

    async def _send(self, response: Response, scope: Scope, receive: Receive, send: Send,
                    close: bool = False) -> None:
        for k, v in SECURITY_HEADERS.items():
            response.headers.setdefault(k, v)
        if close:
            response.headers["connection"] = "close"
        await response(scope, receive, send)

    async def _forward(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send,
                       extra: dict[str, str]) -> None:
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > MAX_BODY:
                    raise BodyTooLarge
            return message

        async def decorated_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                for k, v in {**SECURITY_HEADERS, **extra}.items():
                    if k.encode() not in present:
                        headers.append((k.encode(), v.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await app(scope, limited_receive, decorated_send)
        except BodyTooLarge:
            if not started:
                await _drain(receive, received)
                await self._send(problem(413, f"the body is over {MAX_BODY} bytes"), scope,
                                 receive, send, close=True)


async def _drain(receive: Receive, already: int = 0) -> None:
    """Read and drop what is left of a request body, up to :data:`DRAIN_MAX` in all."""
    total = already
    while total <= DRAIN_MAX:
        message = await receive()
        if message["type"] != "http.request":
            return
        total += len(message.get("body", b""))
        if not message.get("more_body"):
            return


def cookie_header(session: str, csrf: str) -> str:
    """A ``Cookie`` header for tests and tools that log in without a browser."""
    c: SimpleCookie = SimpleCookie()
    c[SESSION_COOKIE], c[CSRF_COOKIE] = session, csrf
    return "; ".join(f"{k}={m.value}" for k, m in c.items())
