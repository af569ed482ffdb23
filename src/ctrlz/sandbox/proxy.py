"""The allow-list proxy of a sandboxed run (``--allow-host``): HTTP CONNECT and plain HTTP.

A sandboxed agent reaches the network only through this proxy: under bubblewrap its network
namespace holds nothing else, and under Landlock its TCP connections may only go to the proxy's
port while seccomp refuses UDP and raw sockets (see :mod:`ctrlz.sandbox.seccomp`). The proxy runs
in ``ctrlz run``'s own, unconfined process, on a thread with its own event loop, so the
synchronous session code starts and stops it like any other object.

For every request it decides, and records the decision through the ``record`` callback:

- the host and port must match an allow-list entry: ``host``, ``host:port``, ``*.domain`` (any
  subdomain, not the domain itself), an IPv4 literal or ``[IPv6]:port``; an entry without a port
  allows every port of that host. Names compare case-insensitively, without a trailing dot.
- the proxy resolves the name itself and connects to the address it checked (a second lookup by
  the client could answer differently). Answers that are not public (loopback, private,
  link-local, unspecified, multicast, reserved; an IPv4 address inside IPv6 counts as itself)
  are dropped unless the host matched an exact entry, never a wildcard: a wildcard trusts a
  domain's owner, and ``evil.example.com → 127.0.0.1`` is how DNS rebinding reaches a service
  on the user's machine. IPv4 and IPv6 answers get the same checks.
- a refusal is ``403 Forbidden`` with a plain-text body that names the host and the setting to
  change (``--allow-host HOST`` or ``allow_hosts`` in ``[sandbox]``).

Plain-HTTP requests with an absolute URI (``GET http://host/path``) are filtered like CONNECT
and forwarded in origin form with ``Connection: close``; whatever else the client sends on that
connection goes to the same checked upstream, never elsewhere. ``https://`` absolute URIs must
come through CONNECT (400).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import ipaddress
import logging
import re
import socket
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from ctrlz.errors import CtrlzError, UsageError

__all__ = ["AllowList", "ProxyHandle", "Resolver", "start_proxy", "validate_host"]

log = logging.getLogger(__name__)

#: a name resolver: (host, port) → the addresses it answers, as text; raises OSError on failure
Resolver = Callable[[str, int], Sequence[str]]

_HEAD_LIMIT = 64 * 1024
_HEAD_SECONDS = 120  # bounds, not expectations: a request head, a TCP connect per address
_CONNECT_SECONDS = 30
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)\Z")
_FORMS = "use HOST, HOST:PORT, *.DOMAIN[:PORT], an IPv4 address or [IPv6]:PORT"


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _hostname(text: str) -> str | None:
    """``text`` as a lower-case ASCII host name (IDNA for others), or None if it is none."""
    name = text.rstrip(".").lower()
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.match(label) for label in labels):
        return None
    return name


def _split(text: str) -> tuple[str, str | None]:
    """(host, port text or None) of ``host``, ``host:port``, ``[v6]``, ``[v6]:port``, ``v6``."""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return "", None
        return host, (rest[1:] if rest else None)
    if text.count(":") > 1:
        return text, None
    host, colon, port = text.partition(":")
    return host, (port if colon else None)


def validate_host(text: str) -> tuple[str, int | None]:
    """(host, port or None) of an ``--allow-host`` value, the host normalised (lower case,
    ``*.`` kept for a wildcard, an IPv6 address compressed); UsageError with one line that
    says what to write instead when it is malformed."""
    raw = text.strip()
    where = f"--allow-host {text!r}"
    if "://" in raw or "/" in raw:
        raise UsageError(f"{where}: give a host, not a URL ({_FORMS})")
    host, port_text = _split(raw)
    port: int | None = None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise UsageError(f"{where}: the port must be a number from 1 to 65535 ({_FORMS})")
        port = int(port_text)
    address = _ip(host)
    if address is not None:
        if address.version == 6 and port is not None and not raw.startswith("["):
            raise UsageError(f"{where}: put an IPv6 address in brackets ({_FORMS})")
        return str(address), port
    wildcard = host.startswith("*.")
    name = _hostname(host[2:] if wildcard else host)
    if name is None:
        raise UsageError(f"{where}: not a host name ({_FORMS}; for every host use --net on)")
    return ("*." + name if wildcard else name), port


@dataclass(frozen=True)
class _Rule:
    host: str  # without the "*." of a wildcard
    port: int | None
    wildcard: bool

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        return host.endswith("." + self.host) if self.wildcard else host == self.host

    def __str__(self) -> str:
        host = ("*." if self.wildcard else "") + (f"[{self.host}]" if ":" in self.host
                                                  else self.host)
        return host if self.port is None else f"{host}:{self.port}"


class AllowList:
    """The hosts a run may reach (``validate_host`` forms); :meth:`match` finds the entry."""

    def __init__(self, hosts: Iterable[str]) -> None:
        self.rules = []
        for text in hosts:
            host, port = validate_host(text)
            wildcard = host.startswith("*.")
            self.rules.append(_Rule(host[2:] if wildcard else host, port, wildcard))

    def match(self, host: str, port: int) -> _Rule | None:
        """The first exact entry that matches, else the first wildcard one, else None."""
        found = [rule for rule in self.rules if rule.matches(host, port)]
        return next((r for r in found if not r.wildcard), found[0] if found else None)


def _not_public(text: str) -> str | None:
    """Why address ``text`` is not a public one (loopback, private, ...), or None if it is."""
    address = _ip(text.split("%")[0])
    if address is None:
        return "not an address"
    if address.version == 6:
        inner = address.ipv4_mapped or address.sixtofour
        if inner is not None:
            return _not_public(str(inner))
    for kind in ("unspecified", "loopback", "link_local", "multicast", "private", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return None if address.is_global else "non-global"


def _system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _Refused(Exception):
    """A request answered with an error status instead of a connection."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        super().__init__(reason)
        self.status, self.reason, self.body = status, reason, body


_STATUS = {400: "Bad Request", 403: "Forbidden", 407: "Proxy Authentication Required",
           431: "Request Header Fields Too Large", 502: "Bad Gateway"}
_HOP_HEADERS = {"proxy-authorization", "proxy-connection", "connection", "keep-alive"}


def _setting(host: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return (f"To allow it, run again with --allow-host {shown} (or {shown}:PORT), or add "
            f"\"{shown}\" to allow_hosts in the [sandbox] section of the ctrlz config.")


class _Proxy:
    """The asyncio side: one task per client connection."""

    def __init__(self, allow: AllowList, record: Callable[[dict], None],
                 resolver: Resolver, token: str | None) -> None:
        self.allow, self.record, self.resolver, self.token = allow, record, resolver, token
        self.tasks: set[asyncio.Task] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # close() cuts the connection; asyncio would log a cancelled handler
        finally:
            if task is not None:
                self.tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:  # a client that never finishes its request head holds nothing for long
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_SECONDS)
        except TimeoutError:
            return
        except asyncio.LimitOverrunError:
            await _answer(writer, _Refused(431, "request head too large", "request head too "
                                           "large\n"))
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = [line for line in lines[1:] if line]
        if len(parts) != 3:
            await _answer(writer, _Refused(400, "malformed request line", "malformed "
                                           "request line\n"))
            return
        method, target, version = parts
        try:
            host, port, upstream_head = self._target(method, target, version, headers)
            if not self._authorized(headers):
                reason = "proxy authorization missing or wrong"
                self._record(method, host, port, False, reason, None)
                raise _Refused(407, reason, "this proxy needs the credentials ctrlz put in "
                               "HTTP(S)_PROXY\n")
            up_reader, up_writer = await self._open(method, host, port)
        except _Refused as refused:
            await _answer(writer, refused)
            return
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(upstream_head)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()

    def _target(self, method: str, target: str, version: str,
                headers: list[str]) -> tuple[str, int, bytes]:
        """(host, port, the head to send upstream) of a request, or _Refused(400)."""
        if method == "CONNECT":
            host, port_text = _split(target)
            if not port_text or not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise _Refused(400, "CONNECT needs host:port", "CONNECT needs host:port\n")
            return _normal_host(host), int(port_text), b""
        url = urlsplit(target)
        if url.scheme.lower() == "https":
            raise _Refused(400, "https through plain HTTP", "send https:// requests through "
                           "CONNECT\n")
        if url.scheme.lower() != "http" or not url.hostname:
            raise _Refused(400, "not a proxy request", "this is a proxy: send CONNECT host:port "
                           "or an absolute http:// URI\n")
        try:
            port = url.port or 80
        except ValueError:
            raise _Refused(400, "bad port", "bad port in the URI\n") from None
        origin = (url.path or "/") + (f"?{url.query}" if url.query else "")
        kept = [h for h in headers if h.split(":", 1)[0].strip().lower() not in _HOP_HEADERS]
        head = "\r\n".join([f"{method} {origin} {version}", *kept, "Connection: close", "", ""])
        return _normal_host(url.hostname), port, head.encode("latin-1")

    def _authorized(self, headers: list[str]) -> bool:
        if self.token is None:
            return True
        for line in headers:
            name, _, value = line.partition(":")
            if name.strip().lower() != "proxy-authorization":
                continue
            scheme, _, data = value.strip().partition(" ")
            if scheme.lower() != "basic":
                return False
            try:
                password = base64.b64decode(data.strip(), validate=True).decode().partition(":")[2]
            except (binascii.Error, UnicodeDecodeError):
                return False
            return hmac.compare_digest(password.encode(), self.token.encode())
        return False

    async def _open(self, method: str, host: str,
                    port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The checked upstream connection, or _Refused after recording why."""
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        rule = self.allow.match(host, port)
        if rule is None:
            reason = f"{shown} is not in the allow-list"
            self._record(method, host, port, False, reason, None)
            raise _Refused(403, reason, f"ctrlz sandbox: {reason} of this run.\n{_setting(host)}\n")
        if _ip(host) is not None:
            answers = [host]
        else:
            error = ""
            try:
                loop = asyncio.get_running_loop()
                answers = list(await loop.run_in_executor(None, self.resolver, host, port))
            except OSError as exc:
                answers, error = [], f": {exc.strerror or exc}"
            if not answers:
                reason = f"{host} does not resolve{error}"
                self._record(method, host, port, False, reason, None)
                raise _Refused(502, reason, f"ctrlz sandbox: {reason}\n")
        usable, dropped = [], []
        for address in answers:
            why = _not_public(address)
            (usable if why is None or not rule.wildcard else dropped).append((address, why))
        if not usable:
            what = ", ".join(f"{why} {address}" for address, why in dropped)
            reason = (f"{host} matched only the wildcard {rule} and resolves only to "
                      f"non-public addresses ({what})")
            self._record(method, host, port, False, reason, None)
            raise _Refused(403, reason, f"ctrlz sandbox: {reason}; a private or loopback "
                           f"answer is refused unless the host itself is allowed.\n"
                           f"{_setting(host)}\n")
        failures = []
        for address, _ in usable:
            try:
                stream = await asyncio.wait_for(
                    asyncio.open_connection(address.split("%")[0], port), _CONNECT_SECONDS)
            except TimeoutError:
                failures.append(f"{address}: no answer in {_CONNECT_SECONDS} s")
                continue
            except OSError as exc:
                failures.append(f"{address}: {exc.strerror or exc}")
                continue
            self._record(method, host, port, True, f"matches {rule}", address)
            return stream
        reason = f"matches {rule}, but no address answered ({'; '.join(failures)})"
        self._record(method, host, port, True, reason, None)
        raise _Refused(502, reason, f"ctrlz sandbox: {shown} {reason}\n")

    def _record(self, method: str, host: str, port: int, allowed: bool, reason: str,
                address: str | None) -> None:
        row = {"time": datetime.now(UTC).isoformat(timespec="milliseconds"), "host": host,
               "port": port, "method": method, "allowed": allowed, "reason": reason,
               "address": address}
        try:
            self.record(row)
        except Exception:  # a failing recorder must not take the agent's network down
            log.exception("recording a proxy decision failed: %r", row)


def _normal_host(host: str) -> str:
    address = _ip(host)
    if address is not None:
        return str(address)
    return _hostname(host) or host.lower()


async def _answer(writer: asyncio.StreamWriter, refused: _Refused) -> None:
    body = refused.body.encode()
    extra = ("Proxy-Authenticate: Basic realm=\"ctrlz\"\r\n" if refused.status == 407 else
             "X-Ctrlz-Sandbox: blocked-by-allowlist\r\n" if refused.status == 403 else "")
    writer.write((f"HTTP/1.1 {refused.status} {_STATUS[refused.status]}\r\n"
                  f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
                  f"{extra}Connection: close\r\n\r\n").encode() + body)
    await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of file, then pass the half-close on."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


class ProxyHandle:
    """A running proxy: ``host``/``port`` (TCP, on loopback), ``unix_path`` when asked for
    (what a bubblewrap network namespace reaches), :meth:`env` for the agent, :meth:`close`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread,
                 proxy: _Proxy, servers: list[asyncio.AbstractServer], host: str, port: int,
                 unix_path: str | None, token: str | None) -> None:
        self._loop, self._thread, self._proxy, self._servers = loop, thread, proxy, servers
        self.host, self.port, self.unix_path, self.token = host, port, unix_path, token
        self._closed = False

    @property
    def url(self) -> str:
        auth = f"ctrlz:{self.token}@" if self.token else ""
        return f"http://{auth}{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """The variables that send an agent's HTTP clients through this proxy. NO_PROXY is
        emptied (the user's own would survive otherwise): the proxy's port is the only one
        the sandbox lets a connection reach, so a host a client skipped the proxy for, an
        allowed one (nono#760) or a loopback one alike, would be refused by the kernel with a
        bare EACCES instead of being checked against the allow-list and explained by a 403."""
        url = self.url
        return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
                "ALL_PROXY": url, "all_proxy": url, "NO_PROXY": "", "no_proxy": "",
                "NODE_USE_ENV_PROXY": "1"}

    def close(self) -> None:
        """Stop listening, cut open connections, end the thread. Idempotent."""
        if self._closed:
            return
        self._closed = True

        async def shutdown() -> None:
            for server in self._servers:
                server.close()
            for task in list(self._proxy.tasks):
                task.cancel()
            await asyncio.gather(*self._proxy.tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)

    def __enter__(self) -> ProxyHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_proxy(allow_hosts: list[str], record: Callable[[dict], None],
                resolver: Resolver | None = None, *, listen: str = "127.0.0.1",
                unix_path: str | None = None, token: str | None = None) -> ProxyHandle:
    """Start the proxy on a thread of its own and return once it listens (on ``listen`` at a
    free port, and on ``unix_path`` if given). ``record`` gets one dict per decision (time,
    host, port, method, allowed, reason, address), called on the proxy's thread: it must be
    thread-safe, e.g. append to a list or a queue that the session writes to its DB.
    ``resolver`` replaces the system's getaddrinfo (tests). With ``token``, a client must send
    it as the password of Proxy-Authorization Basic (407 otherwise): other local users cannot
    use the proxy, the sandboxed agent finds it in :meth:`ProxyHandle.env`."""
    allow = AllowList(allow_hosts)
    proxy = _Proxy(allow, record, resolver or _system_resolver, token)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    started: dict[str, object] = {}

    async def begin() -> None:
        servers = [await asyncio.start_server(proxy.serve, listen, 0, limit=_HEAD_LIMIT)]
        if unix_path is not None:
            servers.append(await asyncio.start_unix_server(proxy.serve, unix_path,
                                                           limit=_HEAD_LIMIT))
        started["servers"] = servers

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(begin())
        except BaseException as exc:  # reported to start_proxy's caller below
            started["error"] = exc
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="ctrlz-sandbox-proxy", daemon=True)
    thread.start()
    if not ready.wait(timeout=60):
        raise CtrlzError("the sandbox proxy did not start within 60 s")
    if "error" in started:
        raise CtrlzError(f"the sandbox proxy cannot listen: {started['error']}")
    servers = started["servers"]
    assert isinstance(servers, list)
    port = servers[0].sockets[0].getsockname()[1]
    return ProxyHandle(loop, thread, proxy, servers, listen, port, unix_path, token)
