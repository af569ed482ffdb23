"""Only the service's own user may use its Unix socket, checked by the kernel's word.

The socket is private by file permissions already (a 0700 directory, a 0600 socket), but
permissions are one ``chmod`` (or a too-open ``$XDG_RUNTIME_DIR``, or a bind mount) away from
letting another local user reach an API that rolls workspaces back without credentials. So each
connection's peer is also checked: ``SO_PEERCRED`` gives the uid of the process that connected,
as the kernel recorded it at ``connect()``, and one that is not the service's own gets
``403`` with a JSON error for every request on that connection, and the connection is closed.
Nothing of the request reaches a route.

The check sits in the HTTP protocol object uvicorn makes per connection (its ``http`` setting
takes a protocol class): that is the one place that sees both the connection's socket and the
application it will call. Where ``SO_PEERCRED`` does not exist (not Linux), the permissions are
the guard, as before.

A peer of the right uid may still be a sandboxed session's process (``ctrlz run --sandbox``):
Landlock does not stop a ``connect()`` to this socket. Such a peer is capture-only
(:mod:`ctrlz.session.daemon.confined`): it may take snapshots, and every other route answers ``403``
with ``error: CaptureOnly``. Only requests outside that allow-list look at ``/proc``, once per
connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from starlette.types import Receive, Scope, Send

from .routing import problem

log = logging.getLogger("ctrlz.service")


def peer_uid(sock: Any) -> int | None:
    """The uid of the process at the other end of Unix socket ``sock``; None where the system
    cannot say (not Linux, not a Unix socket)."""
    from ..session.daemon.confined import peer_credentials

    cred = peer_credentials(sock)
    return cred[1] if cred is not None else None


def refusal(uid: int) -> Any:
    """The ASGI app a foreign peer's connection gets instead of the API."""
    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        response = problem(403, f"this socket serves user {os.geteuid()} only; the "
                                f"connecting process runs as user {uid}", "PeerRefused")
        response.headers["connection"] = "close"
        await response(scope, receive, send)
    return refuse


def capture_only(app: Any, sock: Any, home: str) -> Any:
    """``app`` for one connection whose peer may be a sandboxed session's process: routes
    outside :data:`~ctrlz.session.daemon.confined.SERVICE_CAPTURES` are refused to such a peer."""
    from ..session.daemon import confined

    verdict: list[confined.Record | None] = []

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not confined.service_allows(scope["method"],
                                                                   scope["path"]):
            if not verdict:
                verdict.append(confined.confined_peer(sock, home))
            record = verdict[0]
            if record is not None:
                log.warning("refused %s %s from a process of sandboxed session %s",
                            scope["method"], scope["path"], record.session)
                what = f"{scope['method']} {scope['path']}"
                await problem(403, confined.refusal_text(what), "CaptureOnly")(
                    scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


def checked_protocol(home: str | None = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class, checking each connection's peer (module docstring);
    ``home``: the store home whose sandboxed runs' processes are capture-only."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class PeerChecked(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            sock = transport.get_extra_info("socket")
            uid = peer_uid(sock)
            if uid is not None and uid != os.geteuid():
                log.warning("refused a connection to the socket from user %d", uid)
                self.app = refusal(uid)
            elif home is not None:
                self.app = capture_only(self.app, sock, home)

    return PeerChecked
