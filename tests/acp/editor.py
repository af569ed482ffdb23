"""The client side of the proxy's tests: an "editor" on the ACP SDK's client side that spawns
``ctrlz acp -- python scripted_agent.py`` and does what an editor does for real, in a real
workspace: it writes the files the agent asks it to write and runs its terminal commands.

The SDK's client router (``build_client_router``) dispatches the agent's requests to
:class:`RealClient`; requests are sent on the SDK's ``Connection`` by method name, so ctrlz's
methods go out under harn's names (``session/rollback``), which the SDK's ``ext_method`` would
prefix with ``_``. Every message that arrives is kept raw in :attr:`Editor.wire`: the SDK's
schema has no ``restored`` tool-call status and would read it as None.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp.client.router import build_client_router
from acp.connection import Connection, StreamDirection, StreamEvent
from acp.schema import AllowedOutcome, KillTerminalResponse

from acp import (
    Client,
    CreateTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestError,
    RequestPermissionResponse,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
    spawn_stdio_connection,
)

CTRLZ = str(Path(sys.executable).parent / "ctrlz")
AGENT = str(Path(__file__).with_name("scripted_agent.py"))


class RealClient(Client):
    """Writes files and runs commands on the real filesystem, as an editor would."""

    def __init__(self) -> None:
        self.terminals: dict[str, asyncio.subprocess.Process] = {}
        self.outputs: dict[str, bytes] = {}
        #: called before each write is done (a test may act while a prompt runs)
        self.before_write: Callable[[str], Awaitable[None]] | None = None
        #: where a terminal runs when the agent names no cwd: the session's
        self.cwd: str | None = None

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any,
                                 **kwargs: Any) -> RequestPermissionResponse:
        return RequestPermissionResponse(outcome=AllowedOutcome(
            option_id=options[0].option_id, outcome="selected"))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def write_text_file(self, content: str, path: str, session_id: str,
                              **kwargs: Any) -> WriteTextFileResponse:
        if self.before_write is not None:
            await self.before_write(path)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
        return WriteTextFileResponse()

    async def read_text_file(self, path: str, session_id: str, limit: int | None = None,
                             line: int | None = None, **kwargs: Any) -> ReadTextFileResponse:
        try:
            return ReadTextFileResponse(content=Path(path).read_text())
        except FileNotFoundError:
            # an editor opens a new, empty buffer for a path with no file. Agents read before
            # they create a file, and Gemini CLI 0.61 cannot read an error answer here (the JS
            # SDK rejects with a plain object, which it takes for "[object Object]"): its
            # write_file fails with "Error checking existing file: Resource not found"
            return ReadTextFileResponse(content="")

    async def create_terminal(self, command: str, session_id: str, args: list[str] | None = None,
                              cwd: str | None = None, env: Any = None,
                              output_byte_limit: int | None = None,
                              **kwargs: Any) -> CreateTerminalResponse:
        where = cwd or self.cwd
        if where is None:  # never run an agent's command wherever the test happens to be
            raise RequestError.invalid_params({"cwd": "no cwd, and no session cwd known"})
        # a command with no args may be a shell line (claude-code-acp sends "rm -rf build"),
        # which an editor runs in a shell, as Zed does
        argv = [command, *args] if args else ["sh", "-c", command]
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=where, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = proc
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(self, session_id: str, terminal_id: str,
                              **kwargs: Any) -> TerminalOutputResponse:
        return TerminalOutputResponse(output=self.outputs.get(terminal_id, b"").decode(),
                                      truncated=False)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str,
                                     **kwargs: Any) -> WaitForTerminalExitResponse:
        proc = self.terminals[terminal_id]
        out, _ = await proc.communicate()
        self.outputs[terminal_id] = out
        return WaitForTerminalExitResponse(exit_code=proc.returncode)

    async def release_terminal(self, session_id: str, terminal_id: str,
                               **kwargs: Any) -> ReleaseTerminalResponse:
        return ReleaseTerminalResponse()

    async def kill_terminal(self, session_id: str, terminal_id: str,
                            **kwargs: Any) -> KillTerminalResponse:
        self.terminals[terminal_id].kill()
        return KillTerminalResponse()


def proxy_env(**extra: str) -> dict[str, str]:
    """The test's isolated store (CTRLZ_HOME and XDG dirs from the autouse fixture), no
    daemon; the SDK adds PATH, HOME and the like."""
    env = {k: v for k, v in os.environ.items() if k.startswith(("CTRLZ_", "XDG_"))}
    return {**env, "CTRLZ_DAEMON": "0", **extra}


class Editor:
    """One connection to a running proxy."""

    def __init__(self, conn: Connection, process: asyncio.subprocess.Process,
                 client: RealClient, wire: list[dict[str, Any]]) -> None:
        self.conn = conn
        self.process = process
        self.client = client
        self.wire = wire

    async def call(self, method: str, params: Any) -> Any:
        return await self.conn.send_request(method, params)

    async def initialize(self) -> dict[str, Any]:
        return await self.call("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True},
                                   "terminal": True}})

    async def new_session(self, cwd: Path) -> str:
        return (await self.call("session/new", {"cwd": str(cwd), "mcpServers": []}))["sessionId"]

    async def prompt(self, session_id: str, text: str = "do the usual") -> dict[str, Any]:
        return await self.call("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": text}]})

    def updates(self, status: str | None = None) -> list[dict[str, Any]]:
        """The ``session/update`` params received (with that tool-call status)."""
        out = [m["params"] for m in self.wire if m.get("method") == "session/update"]
        return [u for u in out if status is None or u["update"].get("status") == status]


@asynccontextmanager
async def editor(cwd: Path, *proxy_args: str, agent: list[str] | None = None,
                 stderr: Path | None = None) -> AsyncIterator[Editor]:
    """Spawn ``ctrlz acp [proxy_args] -- <agent>`` in ``cwd`` and connect to it."""
    client = RealClient()
    client.cwd = str(cwd)
    wire: list[dict[str, Any]] = []

    def keep(event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            wire.append(event.message)

    argv = [*proxy_args, "--", *(agent or [sys.executable, AGENT])]
    err = open(stderr or os.devnull, "ab")  # noqa: SIM115 - closed below
    try:
        async with spawn_stdio_connection(build_client_router(client), CTRLZ, "acp", *argv,
                                          env=proxy_env(), cwd=cwd, observers=[keep],
                                          stderr=err.fileno()) as (conn, process):
            yield Editor(conn, process, client, wire)
    finally:
        err.close()
