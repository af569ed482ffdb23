"""The relay: an ACP client (an editor) on our stdin/stdout, an ACP agent as a subprocess.

Every message is forwarded as the bytes that came in, in order, each way, except:

- client requests for the ctrlz methods (:mod:`ctrlz.acp.extensions`), answered here;
- the agent's ``initialize`` response, which gains ctrlz's session capabilities;
- lines that hold no JSON object: the client gets a JSON-RPC error for its own (id ``null``,
  as JSON-RPC 2.0 asks); the agent's are dropped; both are logged on stderr.

On the way, :class:`~ctrlz.acp.capture.Recorder` records: the session on the response to
``session/new`` (and load, resume, fork), a turn on ``session/prompt``, a pre-image before
``fs/write_text_file`` reaches the client and the write's result when the client answers, a
workspace snapshot before ``terminal/create`` reaches the client, and a workspace snapshot at
each turn's start and end. The tool-call tracking reads ``session/update`` and
``session/request_permission``. Requests are matched to their responses by id, per direction.

The proxy lives as long as the agent: when the agent exits, requests it left unanswered get an
error, and the proxy exits with the agent's exit code (128+N for a signal N). When the client
closes stdin, the agent's stdin is closed, and it is given a few seconds to exit before it is
terminated. SIGTERM and SIGHUP are passed on to the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from typing import Any

from acp import spawn_stdio_transport, stdio_streams

from ..errors import UsageError
from . import rpc
from .capture import Recorder, Worker
from .extensions import Extensions, advertise, method_of
from .framing import LINE_LIMIT, Inbound, Line, Outbound
from .sessions import Session, Sessions

log = logging.getLogger("ctrlz.acp")

#: requests whose response names a session the client works in (with the cwd in the request)
SESSION_OPENERS = ("session/new", "session/load", "session/resume", "session/fork")
#: how long the agent has to exit after its stdin is closed, before SIGTERM (then SIGKILL)
GRACE_SECONDS = 5.0


@dataclass
class Pending:
    """A request forwarded one way, until its response comes back the other way."""

    id: Any
    method: str
    params: dict[str, Any]
    session: Session | None = None
    turn: int | None = None
    scope: str | None = None  # a captured write, recorded when the client answers


def _bug(what: str, exc: BaseException) -> None:
    log.error("ctrlz acp: internal error while relaying %s (forwarded as it was): %s: %s",
              what, type(exc).__name__, exc, exc_info=log.isEnabledFor(logging.DEBUG))


def _params(message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params")
    return params if isinstance(params, dict) else {}


class Relay:
    """Both directions of one proxied conversation."""

    def __init__(self, client_in: Inbound, client_out: Outbound, agent_in: Outbound,
                 agent_out: Inbound, agent: str, protect: bool) -> None:
        self.client_in, self.client_out = client_in, client_out
        self.agent_in, self.agent_out = agent_in, agent_out
        worker = Worker()
        self.sessions = Sessions()
        self.recorder = Recorder(worker, agent, protect)
        self.extensions = Extensions(worker, self.sessions, client_out.send)
        self.to_agent: dict[str, Pending] = {}  # the client's requests the agent owes
        self.to_client: dict[str, Pending] = {}  # the agent's requests the client owes

    # -- client -> agent -----------------------------------------------------------------------

    async def client_to_agent(self) -> None:
        while (line := await self.client_in.next()) is not None:
            try:
                await self.from_client(line)
            except Exception as exc:  # noqa: BLE001 - a bug here must not end the conversation
                msg = line.message
                if msg is not None and rpc.kind_of(msg) == rpc.REQUEST \
                        and method_of(msg["method"]) is not None:
                    # ctrlz's own methods never reach the agent, which does not know them:
                    # the client gets the error (Outbound.send can write any message)
                    await self.client_out.send(rpc.error_for(msg["id"], exc))
                    continue
                _bug("a client message", exc)
                await self.agent_in.write(line.raw)

    async def from_client(self, line: Line) -> None:
        msg = line.message
        if msg is None:
            log.warning("ctrlz acp: the client sent a line that is %s; answered with an error",
                        line.problem)
            code = rpc.PARSE_ERROR if line.problem and line.problem.startswith("not JSON") \
                else rpc.INVALID_REQUEST
            await self.client_out.send(rpc.error(None, code, f"ctrlz acp: the line is "
                                                 f"{line.problem}; it was not forwarded"))
            return
        kind = rpc.kind_of(msg)
        if kind == rpc.REQUEST:
            ours = method_of(msg["method"])
            if ours is not None:
                await self.answer(msg["id"], ours, msg.get("params"))
                return
            pending = Pending(msg["id"], msg["method"], _params(msg))
            if pending.method == "session/prompt":
                pending.session = self.sessions.get(pending.params.get("sessionId"))
                if pending.session is not None:
                    pending.turn = await self.recorder.begin_turn(pending.session)
                    pending.session.begin(pending.turn)
            self.to_agent[rpc.id_key(msg["id"])] = pending
        elif kind == rpc.RESPONSE:
            pending = self.to_client.pop(rpc.id_key(msg.get("id")), None)
            if pending is not None and pending.session is not None and pending.scope \
                    and "result" in msg:
                await self.recorder.after_write(pending.session, pending.scope)
        await self.agent_in.write(line.raw)

    async def answer(self, message_id: Any, method: str, params: Any) -> None:
        try:
            reply = rpc.result(message_id, await self.extensions.handle(method, params))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON-RPC error
            reply = rpc.error_for(message_id, exc)
        await self.client_out.send(reply)

    # -- agent -> client -----------------------------------------------------------------------

    async def agent_to_client(self) -> None:
        while (line := await self.agent_out.next()) is not None:
            try:
                await self.from_agent(line)
            except Exception as exc:  # noqa: BLE001 - a bug here must not end the conversation
                _bug("an agent message", exc)
                await self.client_out.write(line.raw)

    async def from_agent(self, line: Line) -> None:
        msg = line.message
        if msg is None:
            log.warning("ctrlz acp: dropped a line from the agent that is %s", line.problem)
            return
        kind = rpc.kind_of(msg)
        if kind == rpc.NOTIFICATION and msg["method"] == "session/update":
            session = self.sessions.get(_params(msg).get("sessionId"))
            if session is not None:
                session.observe(msg.get("params"))
        elif kind == rpc.REQUEST:
            await self.before_client_runs(msg)
        else:
            pending = self.to_agent.pop(rpc.id_key(msg.get("id")), None)
            if pending is not None:
                msg = await self.agent_answered(pending, msg)
                if msg is not None:
                    await self.client_out.send(msg)
                    return
        await self.client_out.write(line.raw)

    async def before_client_runs(self, msg: dict[str, Any]) -> None:
        """Capture what the client is about to change for the agent."""
        params = _params(msg)
        session = self.sessions.get(params.get("sessionId"))
        if session is None:
            return
        if msg["method"] == "session/request_permission":
            session.observe_permission(params)  # Gemini names a call only here, by default
        elif msg["method"] == "fs/write_text_file":
            scope = await self.recorder.before_write(session, params)
            if scope is not None:
                self.to_client[rpc.id_key(msg["id"])] = Pending(
                    msg["id"], msg["method"], params, session=session, scope=scope)
        elif msg["method"] == "terminal/create":
            await self.recorder.before_terminal(session, params)

    async def agent_answered(self, pending: Pending, msg: dict[str, Any]
                             ) -> dict[str, Any] | None:
        """Act on the agent's response to a client request; a changed response to send
        instead of the original, or None to forward it as it came."""
        if pending.method == "initialize":
            return advertise(msg)
        if pending.method in SESSION_OPENERS and isinstance(msg.get("result"), dict | None) \
                and "error" not in msg:
            result = msg.get("result") or {}
            sid = result.get("sessionId") or pending.params.get("sessionId")
            if isinstance(sid, str) and sid:
                session = await self.recorder.open_session(sid, pending.params.get("cwd"))
                self.sessions.add(session)
        elif pending.method == "session/prompt" and pending.session is not None:
            await self.recorder.end_turn(pending.session, pending.turn)
            pending.session.end(pending.turn)
        return None

    async def agent_gone(self, code: int | None) -> None:
        """Answer the requests the agent can no longer answer."""
        how = f"exited with code {code}" if code is not None else "closed its output"
        for pending in list(self.to_agent.values()):
            await self.client_out.send(rpc.error(
                pending.id, rpc.INTERNAL_ERROR, f"the agent {how} before answering "
                f"{pending.method}"))
        self.to_agent.clear()


async def serve(argv: list[str], *, agent: str = "acp", protect: bool = True) -> int:
    """Relay between our stdin/stdout and ``argv``; returns the exit code to exit with."""
    client_reader, client_writer = await stdio_streams(limit=LINE_LIMIT)
    started = False
    try:
        async with spawn_stdio_transport(argv[0], *argv[1:], env=dict(os.environ),
                                         stderr=None, limit=LINE_LIMIT,
                                         shutdown_timeout=GRACE_SECONDS) as (out, inp, process):
            started = True
            relay = Relay(Inbound(client_reader), Outbound(client_writer, "client"),
                          Outbound(inp, "agent"), Inbound(out), agent, protect)
            _pass_signals(process)
            await _run(relay, process)
    except OSError as exc:
        if started:
            raise
        raise UsageError(f"cannot start the agent {argv[0]}: {exc.strerror or exc}") from None
    code = process.returncode if process.returncode is not None else 1
    return 128 - code if code < 0 else code


async def _run(relay: Relay, process: asyncio.subprocess.Process) -> None:
    up = asyncio.create_task(relay.client_to_agent(), name="client->agent")
    down = asyncio.create_task(relay.agent_to_client(), name="agent->client")
    await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
    if not down.done():  # the client is gone: let the agent finish and exit
        await relay.agent_in.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(down), GRACE_SECONDS)
    up.cancel()
    down.cancel()
    await asyncio.gather(up, down, return_exceptions=True)
    if relay.to_agent:
        code = None
        with contextlib.suppress(asyncio.TimeoutError):
            code = await asyncio.wait_for(process.wait(), GRACE_SECONDS)
        await relay.agent_gone(code)


def _pass_signals(process: asyncio.subprocess.Process) -> None:
    """SIGTERM and SIGHUP go on to the agent (the proxy exits when it does). SIGINT is left to
    the terminal, which sends it to the agent's process group too."""
    loop = asyncio.get_running_loop()

    def forward(sig: int) -> None:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, forward, sig)
    loop.add_signal_handler(signal.SIGINT, lambda: None)
