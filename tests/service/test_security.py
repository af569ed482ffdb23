"""The gateway's checks and the runtime files' permissions, against the real service."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest

from ctrlz.service.gateway import cookie_header

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


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to become a throw-away user")
def test_another_user_can_neither_connect_nor_read_the_token(svc: Service) -> None:
    # the directories above the run dir must be passable for the test to mean anything: make
    # them so (the run dir itself stays 0700, its files 0600)
    for parent in [svc.runtime, *svc.runtime.parents]:
        if parent == parent.parent:
            break
        os.chmod(parent, os.stat(parent).st_mode | 0o011)
    nobody = 61_234  # no such user: a uid nothing on the machine owns
    sock, token = svc.run_dir / "service.sock", svc.run_dir / "gateway.token"
    r = subprocess.run(["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
                        sys.executable, "-c", CONNECT, str(sock), str(token)],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["denied", "denied"], (r.stdout, r.stderr)
    # and the same user (root here) can: the check is the permissions, not a broken socket
    r = subprocess.run([sys.executable, "-c", CONNECT, str(sock), str(token)],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["connected", "read"]
