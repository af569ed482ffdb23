"""The gateway's checks and the runtime files' permissions, against the real service."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

from ctrlz.service.gateway import cookie_header
from tests.conftest import OtherUser

from .conftest import Service


def test_token_is_required(svc: Service) -> None:
    for path in ("/v1/service", "/v1/workspaces", "/status", "/", "/static/app.js",
                 "/v1/openapi.json"):
        r = svc.gw("GET", path, auth=False)
        assert r.status_code == 401, path
        if path != "/":
            assert r.json()["type"] == "error"
        wrong = svc.gw("GET", path, auth=False, headers={"Authorization": "Bearer " + "x" * 43})
        assert wrong.status_code == 401, path
    assert svc.gw("GET", "/v1/service", auth=False,
                  headers={"Authorization": f"Basic {svc.token}"}).status_code == 401
    assert svc.gw("GET", "/v1/service").status_code == 200
    page = svc.gw("GET", "/", auth=False, headers={"Accept": "text/html"})
    assert page.status_code == 401 and "ctrlz ui" in page.text


def test_foreign_host_is_refused(svc: Service) -> None:
    for host in ("evil.example", f"evil.example:{svc.port}", f"127.0.0.1.nip.io:{svc.port}",
                 "127.0.0.1", f"localhost:{svc.port + 1}"):
        r = svc.gw("GET", "/v1/service", headers={"Host": host})
        assert r.status_code == 400 and "Host" in r.json()["message"], host
    assert svc.gw("GET", "/v1/service", headers={"Host": f"localhost:{svc.port}"}).is_success


def test_cors_only_for_its_own_origin(svc: Service) -> None:
    own = svc.url
    r = svc.gw("GET", "/v1/service", headers={"Origin": own})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == own
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{svc.port + 1}",
                   f"https://127.0.0.1:{svc.port}"):
        r = svc.gw("GET", "/v1/service", headers={"Origin": origin})
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers, origin
        pre = svc.gw("OPTIONS", "/v1/workspaces", auth=False, headers={
            "Origin": origin, "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in pre.headers, origin


def test_body_limit(svc: Service) -> None:
    big = b"{" + b" " * (11 * 1024 * 1024) + b"}"
    r = svc.gw("POST", "/v1/workspaces", content=big,
               headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["type"] == "error"

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(11):
            yield b" " * (1024 * 1024)

    r = svc.gw("POST", "/v1/workspaces", content=chunks(),
               headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert svc.gw("GET", "/v1/service").status_code == 200  # and the gateway still answers


def test_login_cookie_and_csrf(svc: Service) -> None:
    _, ws = svc.workspace("csrf")
    login = svc.ok("POST", "/v1/ui/login")
    assert login["url"].startswith(svc.url + "/login?code=")
    first = svc.gw("GET", f"/login?code={login['code']}", auth=False)
    assert first.status_code == 303 and first.headers["location"] == "/"
    cookies = first.headers.get_list("set-cookie")
    session_cookie = next(c for c in cookies if c.startswith("ctrlz_session="))
    assert "HttpOnly" in session_cookie and "SameSite=strict" in session_cookie
    assert svc.gw("GET", f"/login?code={login['code']}", auth=False).status_code == 401  # once
    session = session_cookie.split(";")[0].split("=", 1)[1]
    csrf = next(c for c in cookies if c.startswith("ctrlz_csrf=")).split(";")[0].split("=", 1)[1]
    jar = {"Cookie": cookie_header(session, csrf)}
    assert svc.gw("GET", "/v1/workspaces", auth=False, headers=jar).status_code == 200
    page = svc.gw("GET", "/", auth=False, headers=jar)
    assert page.status_code == 200 and "app.js" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    post = f"/v1/workspaces/{ws}/snapshots"
    assert svc.gw("POST", post, auth=False, headers=jar, json={}).status_code == 403
    assert svc.gw("POST", post, auth=False, headers={**jar, "X-CSRF-Token": "wrong"},
                  json={}).status_code == 403
    assert svc.gw("POST", post, auth=False, headers={**jar, "X-CSRF-Token": csrf},
                  json={}).status_code == 201
    assert svc.gw("POST", post, json={}).status_code == 201  # a bearer token needs no CSRF
    assert svc.gw("GET", "/login?code=made-up", auth=False).status_code == 401
    assert svc.gw("POST", "/logout", auth=False, headers={**jar, "X-CSRF-Token": csrf}).is_success
    assert svc.gw("GET", "/v1/workspaces", auth=False, headers=jar).status_code == 401


def test_socket_only_routes(svc: Service) -> None:
    assert svc.gw("POST", "/v1/ui/login").status_code == 403
    assert svc.gw("POST", "/v1/service/stop").status_code == 403
    assert svc.ok("GET", "/v1/service")["pid"] == svc.proc.pid  # type: ignore[union-attr]


def test_status_is_served_and_cached(svc: Service) -> None:
    a = svc.gw("GET", "/status").json()
    b = svc.gw("GET", "/status").json()
    assert a["type"] == "status" and a["service"]["pid"] == svc.proc.pid  # type: ignore
    assert a == b  # the second within a second is the cached document


def test_permissions(svc: Service) -> None:
    run = svc.run_dir
    assert stat.S_IMODE(os.stat(run).st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(run / "service.sock").st_mode)
    assert stat.S_IMODE(os.stat(run / "service.sock").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(run / "gateway.token").st_mode) == 0o600
    for name in ("service.pid", "gateway.port", "gateway.token", "service.sock"):
        assert os.stat(run / name).st_uid == os.getuid()


CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except PermissionError:
    print("denied")
else:
    print("connected")
try:
    open(sys.argv[2]).read()
except PermissionError:
    print("denied")
else:
    print("read")
"""


def test_another_user_can_neither_connect_nor_read_the_token(other_user: OtherUser,
                                                             svc: Service) -> None:
    # the directories above the run dir must be passable for the test to mean anything: make
    # them so (the run dir itself stays 0700, its files 0600)
    for parent in [svc.runtime, *svc.runtime.parents]:
        if parent == parent.parent:
            break
        os.chmod(parent, os.stat(parent).st_mode | 0o011)
    nobody = 61_234  # no such user: a uid nothing on the machine owns
    sock, token = svc.run_dir / "service.sock", svc.run_dir / "gateway.token"
    r = subprocess.run(other_user.python_command("-c", CONNECT, str(sock), str(token),
                                                 uid=nobody),
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["denied", "denied"], (r.stdout, r.stderr)
    # and the same user (root here) can: the check is the permissions, not a broken socket
    r = subprocess.run([sys.executable, "-c", CONNECT, str(sock), str(token)],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["connected", "read"]


REQUEST = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/service HTTP/1.1\\r\\nHost: ctrlz\\r\\n" + sys.argv[2].encode()
          + b"\\r\\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
head, _, body = data.partition(b"\\r\\n\\r\\n")
print(json.dumps({"status": int(head.split()[1]), "body": json.loads(body)}))
"""


def test_peer_uid_is_checked_even_when_the_socket_is_open(other_user: OtherUser,
                                                          fresh_svc: Service) -> None:
    """Permissions keep other users off the socket (above); this shows the second guard, the
    kernel's word on who connected (SO_PEERCRED): with the permissions opened wide on purpose,
    another user reaches the socket, and is answered 403 for every request, and the
    connection closed, while the owner is served as before."""
    svc = fresh_svc.start()
    for parent in [svc.run_dir, *svc.run_dir.parents]:
        if parent == parent.parent:
            break
        os.chmod(parent, os.stat(parent).st_mode | 0o011)
    sock = svc.run_dir / "service.sock"
    os.chmod(sock, 0o666)  # what a careless chmod, or a wrong bind mount, would leave
    nobody = 61_235
    r = subprocess.run(other_user.python_command("-c", REQUEST, str(sock), "", uid=nobody),
                       capture_output=True, text=True, timeout=30)
    # it connected and was answered, then hung up on: a keep-alive request read to the end
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["status"] == 403
    assert answer["body"]["error"] == "PeerRefused" and answer["body"]["type"] == "error"
    assert f"user {nobody}" in answer["body"]["message"]
    r = subprocess.run([sys.executable, "-c", REQUEST, str(sock), "Connection: close\r\n"],
                       capture_output=True, text=True, timeout=30)
    mine = json.loads(r.stdout)
    assert mine["status"] == 200 and mine["body"]["pid"] == svc.proc.pid  # type: ignore
    assert "refused a connection to the socket from user 61235" in (
        svc.base / "service.log").read_text()


def _login(svc: Service) -> tuple[str, str]:
    """A browser's login: a one-time code from the socket, redeemed at /login."""
    code = svc.ok("POST", "/v1/ui/login")["code"]
    r = svc.gw("GET", f"/login?code={code}", auth=False)
    cookies = dict(c.split(";")[0].split("=", 1) for c in r.headers.get_list("set-cookie"))
    return cookies["ctrlz_session"], cookies["ctrlz_csrf"]


def test_browser_logins_survive_a_restart(fresh_svc: Service) -> None:
    svc = fresh_svc.start()
    _, ws = svc.workspace("kept")
    session, csrf = _login(svc)
    other, other_csrf = _login(svc)
    saved = svc.run_dir / "ui-sessions.json"
    assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600
    text = saved.read_text()
    assert session not in text and other not in text  # hashes only: nothing usable as a cookie
    jar = {"Cookie": cookie_header(session, csrf)}
    assert svc.gw("POST", "/logout", auth=False, headers={
        "Cookie": cookie_header(other, other_csrf), "X-CSRF-Token": other_csrf}).is_success
    svc.stop()
    svc.start()  # a new token, a new port: the login is still good, its CSRF token too
    assert svc.gw("GET", "/v1/workspaces", auth=False, headers=jar).status_code == 200
    assert svc.gw("POST", f"/v1/workspaces/{ws}/snapshots", auth=False, json={},
                  headers={**jar, "X-CSRF-Token": csrf}).status_code == 201
    assert svc.gw("POST", f"/v1/workspaces/{ws}/snapshots", auth=False, json={},
                  headers={**jar, "X-CSRF-Token": "wrong"}).status_code == 403
    # the one that logged out stays out, across the restart too
    assert svc.gw("GET", "/v1/workspaces", auth=False, headers={
        "Cookie": cookie_header(other, other_csrf)}).status_code == 401
    # an expired session is not brought back
    data = json.loads(saved.read_text())
    for entry in data["sessions"].values():
        entry["expires"] = 1.0
    saved.write_text(json.dumps(data))
    svc.stop()
    svc.start()
    assert svc.gw("GET", "/v1/workspaces", auth=False, headers=jar).status_code == 401
