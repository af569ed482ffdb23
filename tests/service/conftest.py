"""A real ctrlz service in a subprocess, with its own home, run directory and gateway port.

``Service`` starts ``python -m ctrlz.service`` exactly as ``ctrlz service start`` does, and
talks to it the way its clients do: HTTP over the Unix socket (httpx2's UDS transport), and
HTTP to the gateway on 127.0.0.1 with the token from ``gateway.token``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

CTRLZ = str(Path(sys.executable).parent / "ctrlz")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason="Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)")


class Service:
    def __init__(self, base: Path, extra_env: dict[str, str] | None = None,
                 home: Path | None = None) -> None:
        self.base = base
        self.home = home or base / "home"
        self.runtime = base / "xdg-run"
        self.runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.run_dir = self.runtime / "ctrlz"
        self.env = {k: v for k, v in os.environ.items()  # but the portable pass's switch
                    if not k.startswith("CTRLZ_") or k == "CTRLZ_PLATFORM"}
        self.env.update(CTRLZ_HOME=str(self.home), XDG_RUNTIME_DIR=str(self.runtime),
                        XDG_CONFIG_HOME=str(base / "config"), CTRLZ_GATEWAY_PORT="0",
                        CTRLZ_DAEMON="0", **(extra_env or {}))
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir_fd: int | None = None

    # -- life --------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0, env: dict[str, str] | None = None) -> Service:
        self.proc = subprocess.Popen([sys.executable, "-m", "ctrlz.service"],
                                     env={**self.env, **(env or {})},
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(self.base / "service.log", "ab"))  # noqa: SIM115
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.api("GET", "/v1/service").status_code == 200:
                    return self
            except httpx2.TransportError:
                pass
            if self.proc.poll() is not None:
                raise AssertionError(f"service exited {self.proc.returncode}: "
                                     + (self.base / "service.log").read_text()[-2000:])
            if time.monotonic() > deadline:
                raise AssertionError("service did not answer")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    # -- clients -----------------------------------------------------------------------------

    @property
    def socket(self) -> str:
        path = str(self.run_dir / "service.sock")
        if len(path) < 100:
            return path
        if self._dir_fd is None:
            self._dir_fd = os.open(self.run_dir, os.O_RDONLY | os.O_DIRECTORY)
        return f"/proc/self/fd/{self._dir_fd}/service.sock"

    def api(self, method: str, path: str, json: Any = None, timeout: float = 60.0,
            **kw: Any) -> httpx2.Response:
        with httpx2.Client(transport=httpx2.HTTPTransport(uds=self.socket),
                           base_url="http://ctrlz", timeout=timeout) as c:
            return c.request(method, path, json=json, **kw)

    def ok(self, method: str, path: str, json: Any = None, status: int | None = None) -> Any:
        r = self.api(method, path, json)
        assert r.status_code == (status or (201 if method == "POST" and path.endswith(
            ("/snapshots", "/v1/workspaces")) else 200)), (r.status_code, r.text)
        return r.json()

    @property
    def port(self) -> int:
        return int((self.run_dir / "gateway.port").read_text())

    @property
    def token(self) -> str:
        return (self.run_dir / "gateway.token").read_text().strip()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def gw(self, method: str, path: str, headers: dict[str, str] | None = None,
           auth: bool = True, **kw: Any) -> httpx2.Response:
        h = {"Authorization": f"Bearer {self.token}"} if auth else {}
        h.update(headers or {})
        with httpx2.Client(base_url=self.url, timeout=60.0) as c:
            return c.request(method, path, headers=h, **kw)

    def ctrlz(self, *args: str, cwd: Path | str = "/", ok: bool = True,
              input: str | None = None) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([CTRLZ, *args], cwd=cwd, env=self.env, capture_output=True,
                           text=True, timeout=120, input=input)
        assert "Traceback" not in r.stderr, r.stderr
        if ok:
            assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    def workspace(self, name: str, files: dict[str, str] | None = None,
                  register: bool = True) -> tuple[Path, str]:
        """A protected (and by default registered) workspace; (root, its id)."""
        root = self.base / name
        root.mkdir(parents=True, exist_ok=True)
        for rel, text in (files or {"README.md": "# hi\n", "src/app.py": "x = 1\n"}).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        if register:
            w = self.ok("POST", "/v1/workspaces", {"path": str(root)})
        else:
            self.ctrlz("init", str(root))
            w = next(x for x in self.ok("GET", "/v1/workspaces") if x["root"] == str(root))
        return root, w["id"]


def wait_for(predicate: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One service for a whole test module (starting one costs about a second)."""
    s = Service(tmp_path_factory.mktemp("svc")).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def fresh_svc(tmp_path: Path) -> Iterator[Service]:
    """A service of this test's own, for tests that kill or stop it."""
    s = Service(tmp_path / "s")
    try:
        yield s
    finally:
        with contextlib.suppress(Exception):
            s.stop()


#: ``make screenshots`` (``CTRLZ_SCREENSHOTS=1``): the dashboard tests also write the README's
#: pictures to docs/img; read at import, as the suite's autouse fixture clears CTRLZ_*
UPDATE_DOCS = bool(os.environ.get("CTRLZ_SCREENSHOTS"))
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
#: where the pictures' workspaces live, so they show a user's paths, not pytest's
SHOTS_HOME = Path("/home/dev")


@contextlib.contextmanager
def user_like_service(tmp: Path) -> Iterator[Service]:
    """A service (not started) whose HOME holds the stores as a user's would
    (``$HOME/.local/share/ctrlz``), workspaces to go under ``$HOME/projects/``. For the
    README's pictures HOME is a real ``/home/dev``, made for the test and removed after it
    (root only; it must not exist already); otherwise a directory of the test's own."""
    made = False
    if UPDATE_DOCS:
        if SHOTS_HOME.exists():
            pytest.fail(f"{SHOTS_HOME} exists: the screenshots make it and remove it after, "
                        "so they show a user's paths; move it aside first")
        try:
            SHOTS_HOME.mkdir(parents=True)
        except OSError as exc:
            pytest.skip(f"cannot make {SHOTS_HOME} for the screenshots ({exc}); run as root")
        base, made = SHOTS_HOME, True
    else:
        base = tmp / "home-dev"
    svc = Service(base, home=base / ".local" / "share" / "ctrlz",
                  extra_env={"HOME": str(base)})
    try:
        yield svc
    finally:
        with contextlib.suppress(Exception):
            svc.stop()
        if made:
            shutil.rmtree(base, ignore_errors=True)


def shoot(page: Any, tmp: Path, name: str) -> None:
    """A screenshot in the test's directory, and in docs/img with ``make screenshots``."""
    page.screenshot(path=str(tmp / f"{name}.png"))
    if UPDATE_DOCS:
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp / f"{name}.png", DOCS_IMG / f"{name}.png")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """A headless Chromium (Debian's, driven by Playwright) for a test module."""
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (pip install -e .[test])")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()
