"""``ctrlz run --sandbox`` for real: real Landlock, real bubblewrap, real processes, as root
and as uid 65534 (through the ``other_user`` fixture).

Everything a test touches lives in a directory under /var/tmp that the test user owns, so a
refused write is the sandbox's doing, never a file mode's; it is not under /tmp, because the
temp dirs are writable by default. CTRLZ_HOME is there too, outside every writable path, so
that Landlock can express the policy (a store inside a writable tree needs bwrap, which
``test_a_store_inside_a_writable_tree_takes_bwrap`` checks).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ctrlz.sandbox.probe import support
from tests.conftest import NOBODY, OtherUser, is_root

INFO = support()
CTRLZ = [sys.executable, "-P", "-c", "import sys; del sys.argv[0]; from ctrlz.cli import main; "
         "sys.exit(main())", "ctrlz"]


def need(mode: str) -> None:
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    if mode == "landlock" and INFO.landlock_reason:
        pytest.skip(INFO.landlock_reason)
    if mode == "bwrap" and INFO.bwrap_reason:
        pytest.skip(INFO.bwrap_reason)


@dataclass
class Area:
    """A workspace, an outside directory, a fake HOME with secrets and a store home, all
    owned by ``uid``; :meth:`ctrlz` runs the CLI there as that user."""

    base: Path
    uid: int
    user: OtherUser | None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def ws(self) -> Path:
        return self.base / "ws"

    @property
    def out(self) -> Path:
        return self.base / "out"

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def store_home(self) -> Path:
        return self.base / "ctrlz-home"

    def store(self) -> Path:
        return next((self.store_home / "workspaces").iterdir())

    def command(self, *args: str) -> list[str]:
        if self.user is None:
            return [*CTRLZ, *args]
        return self.user.ctrlz_command(*args, uid=self.uid)

    def ctrlz(self, *args: str, input: str | None = None, timeout: float = 120,
              **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*args), cwd=self.ws, env=self.env, input=input,
                              capture_output=True, text=True, timeout=timeout, **kw)


def make_area(uid: int, user: OtherUser | None) -> Area:
    base = Path(tempfile.mkdtemp(prefix="ctrlz-sbx-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    area = Area(base, uid, user)
    for d in (area.ws, area.out / "victim", area.home / ".ssh", area.home / ".aws"):
        d.mkdir(parents=True)
    (area.ws / "a.txt").write_text("a\n")
    (area.out / "keep.txt").write_text("keep\n")
    (area.out / "victim" / "v.txt").write_text("v\n")
    (area.home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (area.home / ".aws" / "credentials").write_text("aws secret\n")
    (area.home / ".bashrc").write_text("# rc\n")
    for dirpath, dirs, files in os.walk(base):
        for name in [*dirs, *files, ""]:
            os.chown(os.path.join(dirpath, name), uid, uid)
    area.env = {"PATH": os.environ["PATH"], "HOME": str(area.home),
                "CTRLZ_HOME": str(area.store_home), "LANG": "C.UTF-8",
                "XDG_CONFIG_HOME": str(area.home / ".config"),
                "XDG_DATA_HOME": str(area.home / ".local/share"),
                "XDG_RUNTIME_DIR": str(area.base / "run")}
    (area.base / "run").mkdir(mode=0o700)
    os.chown(area.base / "run", uid, uid)
    init = area.ctrlz("init")
    assert init.returncode == 0, init.stderr
    return area


@pytest.fixture(params=["root", "nobody"])
def area(request: pytest.FixtureRequest) -> Iterator[Area]:
    if request.param == "root":
        if not is_root():
            pytest.skip("the root cases need root")
        made = make_area(0, None)
    else:
        user: OtherUser = request.getfixturevalue("other_user")
        made = make_area(NOBODY, user)
    try:
        yield made
    finally:
        subprocess.run(made.command("daemon", "stop"), cwd=made.ws, env=made.env,
                       capture_output=True, timeout=60)
        shutil.rmtree(made.base, ignore_errors=True)


SCRIPT = r"""
say() { echo "$1: $2"; }
echo in > in.txt && say write-inside ok || say write-inside refused
echo x 2>/dev/null > "$OUT/new.txt" && say write-outside ok || say write-outside refused
cp in.txt moved.txt; mv moved.txt "$OUT/" 2>/dev/null && say mv-out ok || say mv-out refused
rm -rf "$OUT/victim" 2>/dev/null
[ -e "$OUT/victim/v.txt" ] && say rm-rf-outside refused || say rm-rf-outside ok
ln in.txt "$OUT/hard" 2>/dev/null && say ln-out ok || say ln-out refused
ln -s "$PWD/in.txt" "$OUT/soft" 2>/dev/null && say symlink-out ok || say symlink-out refused
cat "$HOME/.ssh/id_ed25519" 2>/dev/null && say ssh-key read || say ssh-key refused
cat "$HOME/.aws/credentials" 2>/dev/null && say aws read || say aws refused
cat "$HOME/.bashrc" >/dev/null 2>&1 && say bashrc read || say bashrc refused
head -c 15 "$STORE/catalog.db" 2>/dev/null | grep -q SQLite && say store-read ok \
  || say store-read refused
touch "$STORE/planted" 2>/dev/null && say store-write ok || say store-write refused
rm -rf "$STORE" 2>/dev/null && say store-rm ok || say store-rm refused
ls "$STORE" 2>/dev/null | grep -qx sessions && say store-list ok || say store-list refused
echo tmp > "${TMPDIR:-/tmp}/ctrlz-sbx-$$" && rm "${TMPDIR:-/tmp}/ctrlz-sbx-$$" && say tmp ok
"""


def results(stdout: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_writes_inside_succeed_outside_fail_and_secrets_and_store_stay_shut(
        area: Area, mode: str) -> None:
    need(mode)
    before_out = sorted(p.relative_to(area.out) for p in area.out.rglob("*"))
    store = area.store()
    env = {**area.env, "OUT": str(area.out), "STORE": str(store)}
    proc = subprocess.run(area.command("run", f"--sandbox={mode}", "--", "sh", "-c", SCRIPT),
                          cwd=area.ws, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    got = results(proc.stdout)
    assert got == {
        "write-inside": "ok", "write-outside": "refused", "mv-out": "refused",
        "rm-rf-outside": "refused", "ln-out": "refused", "symlink-out": "refused",
        "ssh-key": "refused", "aws": "refused", "bashrc": "read",
        "store-read": "refused", "store-write": "refused", "store-rm": "refused",
        # Landlock cannot hide a name inside a readable tree (docs/sandbox.md); bwrap can
        "store-list": "ok" if mode == "landlock" else "refused",
        "tmp": "ok"}, proc.stdout
    assert (area.ws / "in.txt").read_text() == "in\n"
    assert sorted(p.relative_to(area.out) for p in area.out.rglob("*")) == before_out
    assert (store / "catalog.db").is_file() and not (store / "planted").exists()
    # the session saw it all: the exec log goes on inside the sandbox
    show = json.loads(area.ctrlz("trace", "--json").stdout or "[]")
    assert any(p.get("command") == "cat" for p in show), show


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_exit_code_stdio_and_signals_pass_through(area: Area, mode: str) -> None:
    need(mode)
    proc = area.ctrlz("run", f"--sandbox={mode}", "--", "sh", "-c",
                      'read line; echo "got $line"; echo oops >&2; exit 7', input="hello\n")
    assert proc.returncode == 7
    assert proc.stdout == "got hello\n"
    assert "oops" in proc.stderr
    killed = area.ctrlz("run", f"--sandbox={mode}", "--", "sh", "-c", "kill -TERM $$")
    assert killed.returncode == -signal.SIGTERM, killed.stderr


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_dev_tty_works_under_script(area: Area, mode: str) -> None:
    need(mode)
    if shutil.which("script") is None:
        pytest.skip("script (util-linux) is not installed")
    inner = " ".join(f"'{a}'" for a in area.command(
        "run", f"--sandbox={mode}", "--", "sh", "-c", "echo via-tty > /dev/tty; tty"))
    proc = subprocess.run(["script", "-qec", inner, "/dev/null"], cwd=area.ws, env=area.env,
                          capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "via-tty" in proc.stdout and "/dev/pts/" in proc.stdout


@pytest.mark.parametrize("hook", ["door", "python"])
def test_a_confined_hook_still_captures(area: Area, hook: str,
                                        request: pytest.FixtureRequest) -> None:
    """The agent's hook runs inside, where the store is shut. The native door hands the
    payload to the workspace daemon through its socket; the Python hook (no door, or
    ``CTRLZ_DOOR=0``) leaves its capture in the inbox, the one part of the store opened for
    writing then. Either way ``ctrlz rewind`` brings the file back."""
    door = Path(sys.executable).parent / "ctrlz-hook"
    env = {**area.env}
    if hook == "door":
        if area.user is not None:  # the door built for that user's interpreter, beside it
            stack = ExitStack()
            request.addfinalizer(stack.close)
            stack.enter_context(area.user.native_door())
            stack.enter_context(area.user.native_launcher())
            door = Path(area.user.python).parent / "ctrlz-hook"
        elif not door.is_file() or door.read_bytes()[:4] != b"\x7fELF":
            pytest.skip("no native ctrlz-hook door was built (no C compiler?)")
        command = str(door)
        env["PATH"] = f"{door.parent}:{env['PATH']}"
    else:
        python = sys.executable if area.user is None else area.user.python
        command = f"{python} -m ctrlz.hooks"
        env["CTRLZ_DOOR"] = "0"
    modes = [m for m in ("landlock", "bwrap") if not getattr(INFO, f"{m}_reason")]
    if not modes:
        pytest.skip("neither Landlock nor bwrap here")
    for n, mode in enumerate(modes):
        (area.ws / "README.md").write_text("# demo\n")
        os.chown(area.ws / "README.md", area.uid, area.uid)
        payload = json.dumps({
            "session_id": "s1", "transcript_path": str(area.ws / ".t.jsonl"),
            "cwd": str(area.ws), "hook_event_name": "PreToolUse", "permission_mode": "default",
            "tool_name": "Edit", "tool_use_id": f"toolu_0{n}",
            "tool_input": {"file_path": str(area.ws / "README.md"), "old_string": "x",
                           "new_string": "y", "replace_all": False}})
        script = f"{command} claude <<'EOF'\n{payload}\nEOF\necho edited-{n} > README.md"
        proc = subprocess.run(area.command("run", f"--sandbox={mode}", "--", "sh", "-c",
                                           script),
                              cwd=area.ws, env=env, capture_output=True, text=True,
                              timeout=180)
        assert proc.returncode == 0, proc.stderr
        assert (area.ws / "README.md").read_text() == f"edited-{n}\n"
        rewind = subprocess.run(area.command("rewind", f"toolu_0{n}"), cwd=area.ws, env=env,
                                capture_output=True, text=True, timeout=120)
        assert rewind.returncode == 0, (mode, rewind.stderr)
        assert (area.ws / "README.md").read_text() == "# demo\n", mode


def test_landlock_refused_by_enosys_falls_back_to_bwrap(area: Area) -> None:
    """A seccomp wrapper answers ENOSYS to landlock_create_ruleset (a kernel or container
    without Landlock): auto takes bwrap, and the sandbox still holds."""
    need("bwrap")
    wrap = [sys.executable if area.user is None else area.user.python, "-m",
            "ctrlz.sandbox.seccomp", "--deny", "landlock_create_ruleset:ENOSYS", "--"]
    check = subprocess.run(wrap + area.command("sandbox", "check", "--json"), cwd=area.ws,
                           env=area.env, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    info = json.loads(check.stdout)
    assert info["landlock_abi"] == 0 and info["auto"] == "bwrap"
    env = {**area.env, "OUT": str(area.out), "STORE": str(area.store())}
    proc = subprocess.run(wrap + area.command("run", "--sandbox", "--", "sh", "-c", SCRIPT),
                          cwd=area.ws, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    got = results(proc.stdout)
    assert got["write-inside"] == "ok" and got["write-outside"] == "refused"
    assert got["store-list"] == "refused"  # bwrap's tmpfs: the tell-tale of the fallback


def test_no_landlock_and_no_user_namespaces_is_refused(area: Area) -> None:
    need("bwrap")
    wrap = [sys.executable if area.user is None else area.user.python, "-m",
            "ctrlz.sandbox.seccomp", "--deny", "landlock_create_ruleset:ENOSYS", "--deny",
            "userns", "--"]
    marker = area.ws / "ran"
    proc = subprocess.run(wrap + area.command("run", "--sandbox", "--", "touch", str(marker)),
                          cwd=area.ws, env=area.env, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Landlock" in lines[0] and "bwrap" in lines[0], lines
    assert not marker.exists()
    check = subprocess.run(wrap + area.command("sandbox", "check"), cwd=area.ws,
                           env=area.env, capture_output=True, text=True, timeout=120)
    assert check.returncode == 2


def test_bwrap_as_root_cannot_remount_the_root_read_write() -> None:
    """The root pitfall: bwrap without --unshare-user lets real root remount / rw."""
    if not is_root():
        pytest.skip("the pitfall is root's")
    need("bwrap")
    area = make_area(0, None)
    try:
        probe = Path("/etc") / f"ctrlz-sbx-{os.getpid()}"
        proc = area.ctrlz("run", "--sandbox=bwrap", "--", "sh", "-c",
                          f"mount -o remount,rw / 2>/dev/null && echo remounted; "
                          f"touch {probe} 2>/dev/null && echo wrote; echo done")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "done\n"
        assert not probe.exists()
    finally:
        subprocess.run(area.command("daemon", "stop"), cwd=area.ws, env=area.env,
                       capture_output=True, timeout=60)
        shutil.rmtree(area.base, ignore_errors=True)


def test_a_store_inside_a_writable_tree_takes_bwrap(tmp_path: Path) -> None:
    """Landlock cannot carve an unreadable store out of a writable /tmp: auto takes bwrap,
    and --sandbox=landlock says why and what to do."""
    need("bwrap")
    need("landlock")
    ws = tmp_path / "ws"  # tmp_path is under the temp dir; so is CTRLZ_HOME (conftest)
    ws.mkdir()
    env = {**os.environ}
    assert subprocess.run([*CTRLZ, "init"], cwd=ws, env=env, capture_output=True).returncode == 0
    store_home = os.environ["CTRLZ_HOME"]
    proc = subprocess.run([*CTRLZ, "run", "--sandbox", "--", "sh", "-c",
                           f"ls {store_home}/workspaces/* 2>/dev/null | grep -qx sessions "
                           "&& echo listed; echo done"],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n"
    refused = subprocess.run([*CTRLZ, "run", "--sandbox=landlock", "--", "true"], cwd=ws,
                             env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "--sandbox=bwrap" in refused.stderr


BAD = {
    "unknown mode": (["--sandbox=jail"], None),
    "missing --allow-write": (["--sandbox", "--allow-write", "/nonexistent/ctrlz-sbx"], None),
    "--allow-write in the store": (["--sandbox", "--allow-write", "{store}"], None),
    "--allow-write holding the store": (["--sandbox", "--allow-write", "{base}"], None),
    "malformed --allow-host": (["--sandbox", "--allow-host", "exa mple.com"], None),
    "--allow-host port": (["--sandbox", "--allow-host", "example.com:99999"], None),
    "--allow-host URL": (["--sandbox", "--allow-host", "https://example.com/"], None),
    "--net value": (["--sandbox", "--net", "maybe"], None),
    "--net off with --allow-host": (["--sandbox", "--net", "off", "--allow-host",
                                     "example.com"], None),
    "options without --sandbox": (["--net", "off"], None),
    "config list type": (["--sandbox"], '[sandbox]\nallow_write = "/tmp"\n'),
    "config net type": (["--sandbox"], "[sandbox]\nnet = 3\n"),
    "config mode value": (["--sandbox"], '[sandbox]\nmode = "vm"\n'),
    "config table type": (["--sandbox"], 'sandbox = "yes"\n'),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_starts_nothing(area: Area, case: str) -> None:
    options, config = BAD[case]
    if config is not None:
        (area.ws / ".ctrlz.toml").write_text(config)
        os.chown(area.ws / ".ctrlz.toml", area.uid, area.uid)
    marker = area.ws / "started"
    args = [o.format(store=area.store(), base=area.base) for o in options]
    proc = area.ctrlz("run", *args, "--", "touch", str(marker))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in proc.stderr
    assert not marker.exists()
    if config is None:  # a bad config file fails every command, `sessions` too
        sessions = area.ctrlz("sessions", "--json")
        assert sessions.returncode == 0 and json.loads(sessions.stdout) == [], sessions.stdout


NET_PROBE = r"""
import os, socket, sys, urllib.request
port = int(sys.argv[1])
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
        print("proxied", r.status)
except Exception as exc:
    print("proxied", getattr(exc, "code", type(exc).__name__))
for name, kind in (("tcp", socket.SOCK_STREAM), ("udp", socket.SOCK_DGRAM)):
    try:
        s = socket.socket(socket.AF_INET, kind)
        s.settimeout(5)
        s.connect(("127.0.0.1", port))
        if kind == socket.SOCK_DGRAM:
            s.send(b"x")
        print(name, "direct ok")
    except OSError:
        print(name, "direct refused")
"""


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_net_off_and_allow_host_under_each_mechanism(area: Area, mode: str) -> None:
    """Loopback only: a local HTTP server; --allow-host names it exactly, so the proxy lets
    it through (200), while a direct TCP connection and UDP fail; --net off refuses every
    inet socket, and the proxy is not there to ask."""
    need(mode)
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = str(server.server_address[1])
    python = sys.executable if area.user is None else area.user.python
    try:
        allowed = area.ctrlz("run", f"--sandbox={mode}", "--allow-host", f"127.0.0.1:{port}",
                             "--", python, "-c", NET_PROBE, port)
        assert allowed.returncode == 0, allowed.stderr
        assert results_of(allowed.stdout) == {"proxied": "200", "tcp": "direct refused",
                                              "udp": "direct refused"}, allowed.stdout
        off = area.ctrlz("run", f"--sandbox={mode}", "--net", "off", "--", python, "-c",
                         NET_PROBE, port)
        assert off.returncode == 0, off.stderr
        got = results_of(off.stdout)
        assert got["tcp"] == got["udp"] == "direct refused" and got["proxied"] != "200"
    finally:
        server.shutdown()
        server.server_close()


def results_of(stdout: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)


def test_the_sandbox_section_of_the_config(area: Area) -> None:
    """``[sandbox] enabled = true`` sandboxes a plain ``ctrlz run``; ``allow_write`` opens one
    more path, ``deny_read`` shuts one more; the command line adds to the lists."""
    need("landlock")
    extra, cli_extra = area.out / "extra", area.out / "cli-extra"
    for d in (extra, cli_extra):
        d.mkdir()
        os.chown(d, area.uid, area.uid)
    (area.home / "notes.txt").write_text("private\n")
    (area.ws / ".ctrlz.toml").write_text(
        f'[sandbox]\nenabled = true\nallow_write = ["{extra}"]\n'
        f'deny_read = ["{area.home / "notes.txt"}"]\n')
    os.chown(area.ws / ".ctrlz.toml", area.uid, area.uid)
    script = (f"touch {extra}/a && echo extra ok; touch {cli_extra}/b && echo cli ok; "
              f"touch {area.out}/c 2>/dev/null || echo out refused; "
              f"cat {area.home}/notes.txt 2>/dev/null || echo notes refused")
    proc = area.ctrlz("run", "--allow-write", str(cli_extra), "--", "sh", "-c", script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:4] == ["extra ok", "cli ok", "out refused",
                                           "notes refused"], proc.stdout


def launcher_of(area: Area) -> str:
    """What the last run's tracer saw exec'd first: the sandbox's launcher."""
    events = json.loads(area.ctrlz("trace", "--json").stdout or "[]")
    assert events, "no exec events"
    first = events[0]
    return " ".join([first["command"], *first["args"][:3]])


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_either_launcher_confines_the_same(area: Area, native: bool,
                                           request: pytest.FixtureRequest) -> None:
    """``ctrlz-sandbox`` (C, beside the interpreter when setup.py could build it) and its
    Python twin (no compiler, ``CTRLZ_SANDBOX_NATIVE=0``, portable mode) apply the same spec:
    a write inside lands, one outside is refused, the exit status passes through."""
    need("landlock")
    if native and area.user is not None:  # a copy beside that user's interpreter
        stack = ExitStack()
        request.addfinalizer(stack.close)
        stack.enter_context(area.user.native_launcher())
    elif native and not (Path(sys.executable).parent / "ctrlz-sandbox").is_file():
        pytest.skip("no native launcher was built (no C compiler?)")
    env = {**area.env, "OUT": str(area.out)}
    if not native:
        env["CTRLZ_SANDBOX_NATIVE"] = "0"
    proc = subprocess.run(area.command("run", "--sandbox=landlock", "--", "sh", "-c",
                                       'echo in > in.txt; echo x > "$OUT/new.txt"; exit 7'),
                          cwd=area.ws, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 7, proc.stderr
    assert (area.ws / "in.txt").read_text() == "in\n"
    assert not (area.out / "new.txt").exists()
    launcher = launcher_of(area)
    if native:
        assert launcher.startswith("ctrlz-sandbox "), launcher
    else:
        assert "-m ctrlz.sandbox.launcher" in launcher, launcher
