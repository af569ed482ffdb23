"""ACP's stdio framing: one JSON-RPC message per line (newline-delimited JSON), both ways.

:class:`Inbound` reads lines and says which are messages; :class:`Outbound` writes them, one
whole line at a time, because two tasks write to the client (the relay of the agent's messages
and ctrlz's own answers and notifications) and their lines must never interleave. A line is
kept as the bytes that came in, so a forwarded message reaches the other side exactly as it
was sent, whatever JSON dialect the sender writes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

log = logging.getLogger("ctrlz.acp")

#: the longest line accepted before it is read in pieces (the SDK's default, 50 MB)
LINE_LIMIT = 50 * 1024 * 1024


class Line:
    """One line read from a peer: its bytes, and the JSON object in it (None when it holds
    no JSON object, and then ``problem`` says what it holds instead)."""

    __slots__ = ("raw", "message", "problem")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw if raw.endswith(b"\n") else raw + b"\n"
        self.message: dict[str, Any] | None = None
        self.problem: str | None = None
        try:
            value = json.loads(raw)
        except ValueError as exc:
            self.problem = f"not JSON ({exc})"
            return
        except RecursionError:
            # a line nested thousands of levels deep: json's decoder gives up with a
            # RecursionError, which must be this line's problem, not the end of the session
            self.problem = "not JSON ctrlz can read (nested too deeply)"
            return
        if isinstance(value, dict):
            self.message = value
        else:
            self.problem = f"a JSON {type(value).__name__}, not a JSON-RPC message object"


class Inbound:
    """The lines a peer sends, until it closes its end."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def next(self) -> Line | None:
        """The next non-blank line, or None at end of stream."""
        while True:
            raw = await self._read_line()
            if not raw:
                return None
            if raw.strip():
                return Line(raw.strip())

    async def _read_line(self) -> bytes:
        chunks: list[bytes] = []
        try:
            while True:
                try:
                    chunks.append(await self._reader.readuntil(b"\n"))
                    return b"".join(chunks)
                except asyncio.LimitOverrunError as exc:
                    chunks.append(await self._reader.readexactly(exc.consumed))
        except asyncio.IncompleteReadError as exc:
            chunks.append(exc.partial)
            return b"".join(chunks)
        except (ConnectionError, OSError) as exc:
            log.debug("ctrlz acp: read failed: %s", exc)
            return b"".join(chunks)


def encode(message: dict[str, Any]) -> bytes:
    """A message as one line. Names that are not UTF-8 (surrogate escapes) go out as their
    bytes; text no encoding can carry (a lone surrogate such as ``\\ud800``, which a peer
    may send and ctrlz may quote back in an error) goes out as a ``\\uXXXX`` escape, so
    that every message ctrlz writes can be written."""
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        return data.encode("utf-8", "surrogateescape") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"


class Outbound:
    """Whole lines to a peer; after the peer is gone, writes are dropped (and ``closed``)."""

    def __init__(self, writer: asyncio.StreamWriter, name: str) -> None:
        self._writer = writer
        self._lock = asyncio.Lock()
        self.name = name
        self.closed = False

    async def send(self, message: dict[str, Any]) -> None:
        await self.write(encode(message))

    async def write(self, raw: bytes) -> None:
        async with self._lock:
            if self.closed:
                return
            try:
                self._writer.write(raw)
                await self._writer.drain()
            except (ConnectionError, OSError, RuntimeError) as exc:
                log.debug("ctrlz acp: the %s is gone: %s", self.name, exc)
                self.closed = True

    async def close(self) -> None:
        """End the stream (the peer reads end of file)."""
        async with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                if self._writer.can_write_eof():
                    self._writer.write_eof()
                self._writer.close()
            except (ConnectionError, OSError, RuntimeError):
                pass
