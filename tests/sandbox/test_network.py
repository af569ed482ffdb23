"""The network side of a sandboxed run: the allow-list proxy and the seccomp socket filter.

Everything stays on 127.0.0.1 (and ::1 only as a resolver's answer that is refused before any
connection): a local HTTP server, the proxy with a test resolver that maps ``allowed.test``
and ``denied.test`` to it, and child processes that install a seccomp filter on themselves and
then try a TCP connect, a UDP sendto and io_uring_setup, as root and as uid 65534.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.errors import UsageError
from ctrlz.sandbox import proxy as proxy_module
from ctrlz.sandbox import seccomp
from ctrlz.sandbox.proxy import ProxyHandle, start_proxy, validate_host
from tests.conftest import OtherUser

LOOPBACK = "127.0.0.1"


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = f"hello {self.path} host={self.headers.get('Host')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[int]:
    """A local HTTP server on 127.0.0.1; its port."""
    server = http.server.ThreadingHTTPServer((LOOPBACK, 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


#: the test resolver: every name ends on this machine, or is refused before a connection
ANSWERS = {"allowed.test": ["127.0.0.1"], "denied.test": ["127.0.0.1"],
           "a.wild.test": ["127.0.0.1"], "b.wild.test": ["::1"],
           "c.wild.test": ["::ffff:127.0.0.1"], "d.wild.test": ["0.0.0.0"],
           "e.wild.test": ["::"]}


def resolve(host: str, port: int) -> list[str]:
    if host not in ANSWERS:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return ANSWERS[host]


@pytest.fixture
def decisions() -> list[dict]:
    return []


@pytest.fixture
def proxy(decisions: list[dict]) -> Iterator[ProxyHandle]:
    """The proxy, allowing ``allowed.test`` itself (so its loopback answer is allowed) and
    ``*.wild.test`` (whose loopback answers are not)."""
    with start_proxy(["allowed.test", "*.wild.test"], decisions.append, resolve) as handle:
        yield handle


def via_connect(proxy: ProxyHandle, host: str, port: int,
                headers: dict[str, str] | None = None) -> tuple[int, str]:
    """GET / from host:port through a CONNECT tunnel: (status, body). A refused tunnel
    raises OSError from http.client, so the proxy's answer is read by hand then."""
    with socket.create_connection((proxy.host, proxy.port), timeout=30) as sock:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n{extra}\r\n"
                     .encode())
        reply = sock.makefile("rb")
        status_line = reply.readline().decode()
        status = int(status_line.split()[1])
        length = 0
        while (line := reply.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if status != 200:
            return status, reply.read(length).decode()
        sock.sendall(f"GET /tunnel HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
                     .encode())
        response = http.client.HTTPResponse(_Replay(reply))
        response.begin()
        return response.status, response.read().decode()


class _Replay:
    """What http.client.HTTPResponse needs of a socket: the file already being read."""

    def __init__(self, file: object) -> None:
        self.file = file

    def makefile(self, *args: object, **kwargs: object) -> object:
        return self.file


def via_plain_http(proxy: ProxyHandle, host: str, port: int) -> tuple[int, str]:
    connection = http.client.HTTPConnection(proxy.host, proxy.port, timeout=30)
    try:
        connection.request("GET", f"http://{host}:{port}/plain?x=1")
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


VIAS = [pytest.param(via_connect, id="connect"), pytest.param(via_plain_http, id="plain-http")]


@pytest.mark.parametrize("via", VIAS)
def test_an_allowed_host_gets_200(via, proxy: ProxyHandle, web: int,
                                  decisions: list[dict]) -> None:
    status, body = via(proxy, "allowed.test", web)
    assert status == 200
    assert f"host=allowed.test:{web}" in body
    path = "/tunnel" if via is via_connect else "/plain?x=1"  # origin form upstream
    assert body.startswith(f"hello {path} ")
    assert [(d["host"], d["port"], d["allowed"], d["address"]) for d in decisions] == [
        ("allowed.test", web, True, LOOPBACK)]
    assert decisions[0]["method"] == ("CONNECT" if via is via_connect else "GET")


@pytest.mark.parametrize("via", VIAS)
def test_another_host_gets_403_naming_the_host_and_the_setting(via, proxy: ProxyHandle,
                                                              web: int,
                                                              decisions: list[dict]) -> None:
    status, body = via(proxy, "denied.test", web)
    assert status == 403
    assert f"denied.test:{web} is not in the allow-list" in body
    assert "--allow-host denied.test" in body and "allow_hosts in the [sandbox]" in body
    assert [(d["host"], d["allowed"]) for d in decisions] == [("denied.test", False)]


@pytest.mark.parametrize("host", ["a.wild.test", "b.wild.test", "c.wild.test", "d.wild.test",
                                  "e.wild.test"])
def test_a_wildcard_never_reaches_a_loopback_or_unspecified_answer(
        host: str, proxy: ProxyHandle, web: int, decisions: list[dict]) -> None:
    """``*.wild.test`` matches, but its names answer 127.0.0.1, ::1, ::ffff:127.0.0.1, 0.0.0.0
    or :: (IPv4 and IPv6 alike): refused, because only an exact entry trusts such an answer
    (allowed.test, in the test above, is one and gets through)."""
    status, body = via_connect(proxy, host, web)
    assert status == 403
    assert "non-public" in body and f"--allow-host {host}" in body
    assert len(decisions) == 1 and not decisions[0]["allowed"]
    assert decisions[0]["address"] is None
    assert ANSWERS[host][0] in decisions[0]["reason"]


def test_each_decision_is_recorded(proxy: ProxyHandle, web: int,
                                   decisions: list[dict]) -> None:
    assert via_plain_http(proxy, "allowed.test", web)[0] == 200
    assert via_connect(proxy, "denied.test", web)[0] == 403
    assert via_connect(proxy, "a.wild.test", web)[0] == 403
    assert via_connect(proxy, "nowhere.wild.test", web)[0] == 502
    assert [(d["method"], d["host"], d["port"], d["allowed"]) for d in decisions] == [
        ("GET", "allowed.test", web, True), ("CONNECT", "denied.test", web, False),
        ("CONNECT", "a.wild.test", web, False), ("CONNECT", "nowhere.wild.test", web, False)]
    for row in decisions:
        assert set(row) == {"time", "host", "port", "method", "allowed", "reason", "address"}
        assert row["time"].endswith("+00:00") and row["reason"]
    assert "does not resolve" in decisions[3]["reason"]


def test_a_port_in_the_entry_allows_that_port_only(web: int) -> None:
    rows: list[dict] = []
    with start_proxy([f"allowed.test:{web}"], rows.append, resolve) as handle:
        assert via_connect(handle, "allowed.test", web)[0] == 200
        status, body = via_connect(handle, "allowed.test", web + 1 if web < 65535 else web - 1)
    assert status == 403 and "--allow-host allowed.test" in body


def test_an_ip_literal_is_matched_as_itself(web: int) -> None:
    rows: list[dict] = []
    with start_proxy([LOOPBACK], rows.append, resolve) as handle:
        assert via_connect(handle, LOOPBACK, web)[0] == 200
        assert via_connect(handle, "allowed.test", web)[0] == 403  # a name for it is not it
    assert [r["allowed"] for r in rows] == [True, False]


def test_with_a_token_the_proxy_wants_it(web: int) -> None:
    rows: list[dict] = []
    with start_proxy(["allowed.test"], rows.append, resolve, token="s3cret") as handle:
        assert via_connect(handle, "allowed.test", web)[0] == 407
        wrong = base64.b64encode(b"ctrlz:guess").decode()
        assert via_connect(handle, "allowed.test", web,
                           {"Proxy-Authorization": f"Basic {wrong}"})[0] == 407
        right = base64.b64encode(b"ctrlz:s3cret").decode()
        assert via_connect(handle, "allowed.test", web,
                           {"Proxy-Authorization": f"Basic {right}"})[0] == 200
        assert "ctrlz:s3cret@" in handle.env()["HTTPS_PROXY"]
    assert [r["allowed"] for r in rows] == [False, False, True]


@pytest.mark.parametrize("text, expected", [
    ("example.com", ("example.com", None)), ("Example.COM.:8443", ("example.com", 8443)),
    ("*.github.com", ("*.github.com", None)), ("10.0.0.1:80", ("10.0.0.1", 80)),
    ("[::1]:8080", ("::1", 8080)), ("0:0::1", ("::1", None)), ("::1:80", ("::1:80", None)),
    ("bücher.de", ("xn--bcher-kva.de", None)),
])
def test_validate_host_accepts(text: str, expected: tuple[str, int | None]) -> None:
    assert validate_host(text) == expected


@pytest.mark.parametrize("text", ["", "https://example.com", "example.com/path", "host:0",
                                  "host:99999", "host:http", "bad host", "-x.com", "*",
                                  "*.", "1::2::3", "[::1", "[::1]x", "a..b"])
def test_validate_host_refuses_with_one_line(text: str) -> None:
    with pytest.raises(UsageError) as info:
        validate_host(text)
    message = str(info.value)
    assert "\n" not in message and "--allow-host" in message


@pytest.mark.parametrize("address, kind", [
    ("10.1.2.3", "private"), ("192.168.0.1", "private"), ("169.254.1.1", "link-local"),
    ("fe80::1", "link-local"), ("fd00::1", "private"), ("::ffff:10.0.0.1", "private"),
    ("127.0.0.2", "loopback"), ("0.0.0.0", "unspecified"), ("224.0.0.1", "multicast"),
    ("100.64.0.1", "non-global"), ("8.8.8.8", None), ("2001:4860:4860::8888", None),
])
def test_which_answers_count_as_not_public(address: str, kind: str | None) -> None:
    """Checked without a connection: these addresses are never dialled by a test."""
    assert proxy_module._not_public(address) == kind


# -- seccomp, in child processes -----------------------------------------------------------

#: installs the filter of mode argv[1] on itself, then tries each way out and prints, as
#: JSON, "ok" or the errno name of each attempt
PROBE = r"""
import ctypes, errno, json, socket, sys
from ctrlz.sandbox import seccomp

def io_uring():
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(425, 1, params)
    if fd < 0:
        return errno.errorcode[ctypes.get_errno()]
    import os
    os.close(fd)
    return "ok"

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc))

def tcp():
    with socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=30):
        pass

def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"x", ("127.0.0.1", int(sys.argv[3])))

def unix():
    a, b = socket.socketpair()
    a.close(), b.close()

before = io_uring()
seccomp.install(sys.argv[1])
print(json.dumps({"io_uring_before": before, "io_uring": io_uring(), "tcp": attempt(tcp),
                  "udp": attempt(udp), "unix": attempt(unix)}))
"""

EXPECTED = {
    "on": {"tcp": "ok", "udp": "ok"},
    "off": {"tcp": "EPERM", "udp": "EPERM"},
    "proxy": {"tcp": "ok", "udp": "EPERM"},
}


@pytest.fixture
def listeners() -> Iterator[tuple[int, int]]:
    """A TCP listener and a UDP socket on 127.0.0.1 for the children to reach."""
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind((LOOPBACK, 0))
        tcp.listen(8)
        udp.bind((LOOPBACK, 0))
        yield tcp.getsockname()[1], udp.getsockname()[1]


@pytest.fixture(params=["root", "nobody"])
def python_as(request: pytest.FixtureRequest) -> list[str]:
    """How to start this checkout's Python as root, or as uid 65534 (through other_user)."""
    if request.param == "root":
        return [sys.executable]
    user: OtherUser = request.getfixturevalue("other_user")
    return user.python_command()


@pytest.mark.parametrize("mode", ["on", "off", "proxy"])
def test_the_seccomp_filter_refuses_what_the_mode_refuses(mode: str, python_as: list[str],
                                                          listeners: tuple[int, int]) -> None:
    """--net off: a direct TCP connect and a UDP sendto fail with EPERM; the proxy mode keeps
    TCP (for the proxy) and refuses UDP; io_uring fails in every mode; AF_UNIX always works."""
    proc = subprocess.run([*python_as, "-c", PROBE, mode, *map(str, listeners)], cwd="/",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    if result["io_uring_before"] == "EPERM":
        pytest.skip("io_uring is already refused on this machine; the filter's part is unseen")
    assert result == {"io_uring_before": result["io_uring_before"], "io_uring": "EPERM",
                      "unix": "ok", **EXPECTED[mode]}


FETCH = r"""
import http.client, sys
from ctrlz.sandbox import seccomp
seccomp.install("proxy")
connection = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
connection.set_tunnel("allowed.test", int(sys.argv[2]))
connection.request("GET", "/from-child")
response = connection.getresponse()
print(response.status, response.read().decode())
"""


def test_under_the_proxy_filter_the_way_out_is_the_proxy(python_as: list[str],
                                                         proxy: ProxyHandle, web: int,
                                                         decisions: list[dict]) -> None:
    proc = subprocess.run([*python_as, "-c", FETCH, str(proxy.port), str(web)], cwd="/",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("200 hello /from-child")
    assert [(d["host"], d["allowed"]) for d in decisions] == [("allowed.test", True)]


def test_the_deny_wrapper_simulates_missing_kernel_features() -> None:
    """``python -m ctrlz.sandbox.seccomp --deny landlock:ENOSYS -- CMD``: what the core's
    fallback tests run CMD under."""
    probe = ("import ctypes, errno; libc = ctypes.CDLL(None, use_errno=True); "
             "r = libc.syscall(444, None, 0, 1); "
             "print(r, errno.errorcode.get(ctypes.get_errno()))")
    wrapped = [sys.executable, "-m", "ctrlz.sandbox.seccomp", "--deny", "landlock:ENOSYS",
               "--", sys.executable, "-c", probe]
    proc = subprocess.run(wrapped, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout.strip()) == (0, "-1 ENOSYS"), proc.stderr
    # user namespaces refused, other namespaces still possible (as root)
    userns = ("import ctypes, errno; libc = ctypes.CDLL(None, use_errno=True); "
              "print(libc.unshare(0x10000000), errno.errorcode.get(ctypes.get_errno()))")
    proc = subprocess.run([sys.executable, "-m", "ctrlz.sandbox.seccomp", "--deny", "userns",
                           "--", sys.executable, "-c", userns],
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout.strip()) == (0, "-1 EPERM"), proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--deny", "nosuchcall", "--", "true"], "unknown system call 'nosuchcall'"),
    (["--deny", "socket:EWHAT", "--", "true"], "unknown errno"),
    (["--mode", "sideways", "--", "true"], "unknown network mode"),
    (["--mode", "off"], "usage:"),
])
def test_the_wrapper_refuses_bad_input_with_one_line(args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "ctrlz.sandbox.seccomp", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1


def test_the_filter_checks_the_architecture_first() -> None:
    """The first instructions load seccomp_data.arch and compare it with this machine's audit
    arch; on a machine without a known table nothing is built."""
    code = seccomp.build_filter("off")
    first = [code[i:i + 8] for i in range(0, 16, 8)]
    import struct
    assert struct.unpack("=HBBI", first[0]) == (0x20, 0, 0, 4)  # ld [arch]
    op, _, _, k = struct.unpack("=HBBI", first[1])
    assert op == 0x15 and k in (0xC000003E, 0xC00000B7)


def test_an_unknown_machine_gets_no_filter() -> None:
    """In a child (a wrong answer would filter the test process itself): on a machine whose
    table is unknown, install() raises and the process keeps its network."""
    code = ("import os, socket; real = os.uname()\n"
            "os.uname = lambda: os.uname_result((*real[:4], 'riscv64'))\n"
            "from ctrlz.sandbox import seccomp\n"
            "try:\n    seccomp.install('off')\n"
            "except seccomp.SeccompError as exc:\n    print(exc)\n"
            "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "riscv64" in proc.stdout and "refusing to install" in proc.stdout


#: Landlock (ABI >= 4, network only: the proxy's port) plus the seccomp "proxy" filter, as the
#: launcher sets them up for --allow-host; then the proxy, a direct connection and UDP
CONFINED = r"""
import errno, http.client, json, socket, sys
from ctrlz.sandbox import landlock, seccomp
proxy_port, web_port, udp_port = map(int, sys.argv[1:4])
ruleset = landlock.Ruleset(net=True, scopes=False, fs=False)
ruleset.allow_connect(proxy_port)
ruleset.restrict_self()
seccomp.install("proxy")

def attempt(action):
    try:
        return action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc))

def through_proxy():
    connection = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=30)
    connection.set_tunnel("allowed.test", web_port)
    connection.request("GET", "/confined")
    return connection.getresponse().status

def direct():
    socket.create_connection(("127.0.0.1", web_port), timeout=30).close()
    return "ok"

def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"x", ("127.0.0.1", udp_port))
    return "ok"

def fast_open():  # TCP Fast Open connects in sendto, without connect()
    with socket.socket() as sock:
        sock.sendto(b"GET / HTTP/1.0\r\n\r\n", socket.MSG_FASTOPEN, ("127.0.0.1", web_port))
    return "ok"

print(json.dumps({"proxy": attempt(through_proxy), "direct": attempt(direct),
                  "udp": attempt(udp), "fast_open": attempt(fast_open)}))
"""


def test_with_landlock_only_the_proxy_port_is_reachable(python_as: list[str],
                                                        proxy: ProxyHandle, web: int,
                                                        listeners: tuple[int, int],
                                                        decisions: list[dict]) -> None:
    """--allow-host under Landlock: the allowed host answers through the proxy, a direct TCP
    connection to the same server is refused by Landlock (EACCES), UDP by seccomp (EPERM), and
    so is a TCP Fast Open sendto, which Landlock's port rule let through on Linux 6.18."""
    from ctrlz.sandbox import landlock

    if landlock.abi() < 4:
        pytest.skip(f"Landlock ABI {landlock.abi()} has no TCP rules (4 needed)")
    proc = subprocess.run([*python_as, "-c", CONFINED, str(proxy.port), str(web),
                           str(listeners[1])], cwd="/", capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"proxy": 200, "direct": "EACCES", "udp": "EPERM",
                                       "fast_open": "EPERM"}
    assert [(d["host"], d["allowed"]) for d in decisions] == [("allowed.test", True)]


AGENT = r"""
import errno, json, socket, sys, urllib.error, urllib.request
port = int(sys.argv[1])
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # HTTP_PROXY from ctrlz
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
def direct():
    try:
        socket.create_connection(("127.0.0.1", port), timeout=30).close()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc))
print(json.dumps({"allowed": fetch(f"http://127.0.0.1:{port}/run"),
                  "refused": fetch(f"http://localhost:{port}/run"), "direct": direct()}))
"""


def test_ctrlz_run_with_allow_host(tmp_path: Path, web: int) -> None:
    """The whole way: ``ctrlz run --sandbox --allow-host 127.0.0.1:PORT`` gives the agent the
    proxy's variables; the allowed address answers 200, ``localhost`` (another name, though
    for the same server) 403 with the setting to change, a direct connection is refused, and
    the refusal is in ``ctrlz session show --json``."""
    from ctrlz.sandbox import landlock

    if landlock.abi() < 4:
        pytest.skip(f"Landlock ABI {landlock.abi()} has no TCP rules (4 needed)")
    ctrlz = str(Path(sys.executable).with_name("ctrlz"))
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run([ctrlz, "init"], cwd=ws, check=True, capture_output=True, timeout=120)
    run = subprocess.run([ctrlz, "run", "--sandbox", "--allow-host", f"127.0.0.1:{web}", "--",
                          sys.executable, "-c", AGENT, str(web)], cwd=ws, capture_output=True,
                         text=True, timeout=300)
    if run.returncode == 2 and not run.stdout:
        pytest.skip(f"no sandbox here: {run.stderr.strip()[-300:]}")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["allowed"][0] == 200 and result["allowed"][1].startswith("hello /run ")
    assert result["refused"][0] == 403 and "--allow-host localhost" in result["refused"][1]
    assert result["direct"] == "EACCES"
    show = subprocess.run([ctrlz, "session", "show", "--json"], cwd=ws, capture_output=True,
                          text=True, timeout=120)
    assert show.returncode == 0, show.stderr
    net = [d for d in json.loads(show.stdout)["denials"] if d["kind"] == "net"]
    assert len(net) == 1 and f"localhost:{web}" in json.dumps(net[0])


@pytest.mark.parametrize("request_line, status", [
    ("GET https://allowed.test/ HTTP/1.1", 400),  # https belongs in CONNECT
    ("GET / HTTP/1.1", 400),  # not a proxy request
    ("CONNECT allowed.test HTTP/1.1", 400),  # no port
    ("NONSENSE", 400),
])
def test_what_is_no_proxy_request_gets_400(request_line: str, status: int,
                                           proxy: ProxyHandle, decisions: list[dict]) -> None:
    with socket.create_connection((proxy.host, proxy.port), timeout=30) as sock:
        sock.sendall(f"{request_line}\r\nHost: allowed.test\r\n\r\n".encode())
        reply = sock.makefile("rb").read()
    assert reply.startswith(f"HTTP/1.1 {status} ".encode())
    assert decisions == []  # nothing was decided about a host
