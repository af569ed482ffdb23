"""ctrlz.sandbox's Python API, the one nono-py users know: data first, then real Landlock.

The data tests hold the answers to nono-py's documented shapes (query dicts, the state's JSON,
the error types). The enforcement tests confine real child processes with the kernel's own
Landlock and seccomp, as root and as uid 65534, and check what they can and cannot do, in
directories the confined user owns, so that file permissions are never the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.sandbox import (
    AccessMode,
    CapabilitySet,
    CapabilitySource,
    ExecResult,
    QueryContext,
    SandboxState,
    SupportInfo,
    is_supported,
    sandboxed_exec,
    support_info,
)
from tests.conftest import NOBODY

needs_landlock = pytest.mark.skipif(not is_supported(), reason="no Landlock ABI >= 2 here")

# -- the data layer ------------------------------------------------------------------------------


def test_access_mode_words_and_coverage() -> None:
    assert [str(m) for m in AccessMode] == ["read", "write", "read+write"]
    assert repr(AccessMode.READ_WRITE) == "AccessMode.READ_WRITE"
    assert len({AccessMode.READ, AccessMode.READ, AccessMode.WRITE}) == 2


def test_grants_are_canonical_and_checked(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "f").write_text("x")
    (tmp_path / "link").symlink_to(real)
    caps = CapabilitySet()
    caps.allow_path(str(tmp_path / "link"), AccessMode.READ)
    caps.allow_file(str(real / "f"), AccessMode.WRITE)
    caps.allow_file("/dev/null", AccessMode.READ_WRITE)  # a device is a file here
    d, f, dev = caps.fs_capabilities()
    assert (d.original, d.resolved, d.is_file) == (str(tmp_path / "link"), str(real), False)
    assert (f.access, f.is_file, str(f.source)) == (AccessMode.WRITE, True, "user")
    assert dev.resolved == "/dev/null"
    assert repr(d) == f"FsCapability(path='{real}', access=read, is_file=False)"
    with pytest.raises(FileNotFoundError):
        caps.allow_path(str(tmp_path / "missing"), AccessMode.READ)
    with pytest.raises(FileNotFoundError):
        caps.allow_file(str(tmp_path / "missing"), AccessMode.READ)
    with pytest.raises(ValueError):
        caps.allow_path(str(real / "f"), AccessMode.READ)
    with pytest.raises(ValueError):
        caps.allow_file(str(real), AccessMode.READ)
    with pytest.raises(TypeError):
        caps.allow_path(str(real), "read")  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):  # not the working directory
        caps.allow_path("", AccessMode.READ)
    assert len(caps.fs_capabilities()) == 3  # a refused grant adds nothing


def test_deduplicate_merges_and_keeps_the_user_choice(tmp_path: Path) -> None:
    from ctrlz.sandbox.capabilities import FsCapability

    caps = CapabilitySet()
    caps.allow_path(str(tmp_path), AccessMode.READ)
    caps.allow_path(str(tmp_path), AccessMode.WRITE)
    caps.deduplicate()
    (merged,) = caps.fs_capabilities()
    assert merged.access is AccessMode.READ_WRITE

    # a user's READ survives a system READ_WRITE on the same path, in either order
    for system_first in (True, False):
        caps = CapabilitySet()
        system = FsCapability.new(tmp_path, AccessMode.READ_WRITE, is_file=False,
                                  source=CapabilitySource.system())
        if system_first:
            caps._add(system)
        caps.allow_path(str(tmp_path), AccessMode.READ)
        if not system_first:
            caps._add(system)
        caps.deduplicate()
        (kept,) = caps.fs_capabilities()
        assert (kept.access, kept.source) == (AccessMode.READ, CapabilitySource.user())


def test_path_covered_compares_whole_components(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "file").write_text("")
    caps = CapabilitySet()
    caps.allow_path(str(tmp_path / "home"), AccessMode.READ)
    caps.allow_file(str(tmp_path / "file"), AccessMode.READ)
    assert caps.path_covered(str(tmp_path / "home"))
    assert caps.path_covered(str(tmp_path / "home" / "a" / "b"))
    assert not caps.path_covered(str(tmp_path / "homeevil"))
    assert not caps.path_covered(str(tmp_path / "file"))  # only directory grants cover


def test_summary_and_repr(tmp_path: Path) -> None:
    caps = CapabilitySet()
    assert caps.summary() == "(no capabilities granted)\nNetwork:\n  outbound: allowed"
    caps.allow_path(str(tmp_path), AccessMode.READ_WRITE)
    caps.block_network()
    assert caps.summary() == (f"Filesystem:\n  {tmp_path} [read+write] (dir)\n"
                              "Network:\n  outbound: blocked")
    assert repr(caps) == "CapabilitySet(fs=1, network=blocked)"
    assert caps.is_network_blocked


def test_platform_rules_are_checked_as_nono_checks_them() -> None:
    caps = CapabilitySet()
    caps.platform_rule('(allow mach-lookup (global-name "com.apple.x"))')
    for bad in ["allow", "(allow file-read*", '(allow file-read* (subpath "/"))',
                '(allow #| hidden |# file-write* (subpath\n "/"))']:
        with pytest.raises(ValueError):
            caps.platform_rule(bad)


def test_query_path_answers_in_nono_py_shapes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    single = tmp_path / "single.txt"
    single.write_text("")
    (tmp_path / "alias").symlink_to(data)
    caps = CapabilitySet()
    caps.allow_path(str(tmp_path / "alias"), AccessMode.READ)
    caps.allow_file(str(single), AccessMode.READ_WRITE)
    ctx = QueryContext(caps)
    assert ctx.query_path(str(data / "x"), AccessMode.READ) == {
        "status": "allowed", "reason": "granted_path", "granted_path": str(data),
        "access": "read"}
    assert ctx.query_path(str(data / "x"), AccessMode.WRITE) == {
        "status": "denied", "reason": "insufficient_access", "granted": "read",
        "requested": "write"}
    # a file yet to be made, named through the symlink it was granted by
    assert ctx.query_path(str(tmp_path / "alias" / "new"), AccessMode.READ)["status"] == \
        "allowed"
    assert ctx.query_path(str(single), AccessMode.WRITE)["access"] == "read+write"
    assert ctx.query_path(str(tmp_path / "sibling.txt"), AccessMode.READ) == {
        "status": "denied", "reason": "path_not_granted"}
    assert ctx.query_network() == {"status": "allowed", "reason": "network_allowed"}
    caps.block_network()  # the context saw the set as it was
    assert ctx.query_network()["status"] == "allowed"
    assert QueryContext(caps).query_network() == {"status": "denied",
                                                  "reason": "network_blocked"}


def test_sandbox_state_round_trips_through_nono_json(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    gone = tmp_path / "gone.txt"
    gone.write_text("")
    odd = tmp_path / os.fsdecode(b"caf\xe9")  # a name that is not UTF-8
    odd.mkdir()
    caps = CapabilitySet()
    caps.allow_path(str(keep), AccessMode.READ_WRITE)
    caps.allow_path(str(odd), AccessMode.READ)
    caps.allow_file(str(gone), AccessMode.READ)
    caps.block_network()
    state = SandboxState.from_caps(caps)
    assert repr(state) == "SandboxState(fs=3, net_blocked=True)"
    text = state.to_json()
    doc = json.loads(text)
    assert doc["fs"][0] == {"original": str(keep), "resolved": str(keep),
                            "access": "read+write", "is_file": False}
    assert doc["net_blocked"] is True
    assert text.startswith('{\n  "fs": [\n    {\n      "original": ')  # serde's layout
    restored = SandboxState.from_json(text)
    assert restored.net_blocked and restored.to_json() == text
    back = restored.to_caps()
    assert [(c.resolved, c.access, c.is_file) for c in back.fs_capabilities()] == \
        [(c.resolved, c.access, c.is_file) for c in caps.fs_capabilities()]
    assert back.is_network_blocked

    gone.unlink()
    with pytest.raises(FileNotFoundError):
        restored.to_caps()
    for bad in ["not json", "{}", '{"fs": [], "net_blocked": 1}', '{"fs": [{}], '
                '"net_blocked": false}', "[]"]:
        with pytest.raises(ValueError):
            SandboxState.from_json(bad)
    with pytest.raises(ValueError):  # an unknown access word fails when the caps are made
        SandboxState.from_json(json.dumps({"fs": [{
            "original": str(keep), "resolved": str(keep), "access": "root",
            "is_file": False}], "net_blocked": False})).to_caps()
    # the shorter form nono-py's documentation shows
    short = SandboxState.from_json(json.dumps({"fs": [{
        "path": str(keep), "access": "ReadWrite", "is_file": False}], "net_blocked": True}))
    assert short.to_caps().fs_capabilities()[0].access is AccessMode.READ_WRITE


def test_support_info_matches_is_supported() -> None:
    info = support_info()
    assert isinstance(info, SupportInfo)
    assert info.is_supported is is_supported()
    assert repr(info) == f"SupportInfo(supported={info.is_supported}, platform='{info.platform}')"
    if sys.platform == "linux" and info.is_supported:
        assert info.details.startswith("Landlock available (Landlock V")


def test_importing_the_api_is_light() -> None:
    code = ("import sys, ctrlz.sandbox; from ctrlz.sandbox import CapabilitySet; "
            "print(sorted(m for m in sys.modules if m.startswith('ctrlz')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['ctrlz', 'ctrlz.sandbox', 'ctrlz.sandbox.capabilities']"


#: Every call of the surface, with nono-py's parameter names and defaults (from its type stub,
#: python/nono_py/_nono_py.pyi): a caller that passes them by keyword must keep working.
_SIGNATURES = {
    "CapabilitySet.__init__": "(self)",
    "CapabilitySet.allow_path": "(self, path, mode)",
    "CapabilitySet.allow_file": "(self, path, mode)",
    "CapabilitySet.block_network": "(self)",
    "CapabilitySet.platform_rule": "(self, rule)",
    "CapabilitySet.deduplicate": "(self)",
    "CapabilitySet.path_covered": "(self, path)",
    "CapabilitySet.fs_capabilities": "(self)",
    "CapabilitySet.summary": "(self)",
    "CapabilitySource.user": "()",
    "CapabilitySource.group": "(name)",
    "CapabilitySource.system": "()",
    "QueryContext.__init__": "(self, caps)",
    "QueryContext.query_path": "(self, path, mode)",
    "QueryContext.query_network": "(self)",
    "SandboxState.from_caps": "(caps)",
    "SandboxState.to_json": "(self)",
    "SandboxState.from_json": "(json)",
    "SandboxState.to_caps": "(self)",
    "sandboxed_exec": "(caps, command, cwd=None, timeout_secs=None, env=None, "
                      "inherit_env=False)",
    "apply": "(caps)",
    "is_supported": "()",
    "support_info": "()",
}
_PROPERTIES = {
    "CapabilitySet": ["is_network_blocked"],
    "FsCapability": ["original", "resolved", "access", "is_file", "source"],
    "SandboxState": ["net_blocked"],
    "SupportInfo": ["is_supported", "platform", "details"],
    "ExecResult": ["stdout", "stderr", "exit_code"],
}


def test_signatures_match_nono_py() -> None:
    import inspect

    import ctrlz.sandbox as api

    for dotted, expected in _SIGNATURES.items():
        owner, _, attr = dotted.rpartition(".")
        target = getattr(getattr(api, owner), attr) if owner else getattr(api, attr)
        params = [p.replace(annotation=inspect.Parameter.empty)
                  for p in inspect.signature(target).parameters.values()]
        assert str(inspect.Signature(params)) == expected, dotted
    for owner, names in _PROPERTIES.items():
        for name in names:
            assert isinstance(inspect.getattr_static(getattr(api, owner), name), property)
    assert api.__all__ == sorted(api._EXPORTS)
    for name in api.__all__:
        assert getattr(api, name).__module__.startswith("ctrlz.sandbox."), name


# -- real confinement ------------------------------------------------------------------------------

#: A child that confines itself with ``apply`` and reports each attempt's outcome: "ok" or the
#: exception's name. argv: inside (read-write), outside (not granted), block ("1" or "0"),
#: port of a local TCP server.
_CHILD = r"""
import json, os, socket, sys
from ctrlz.sandbox import AccessMode, CapabilitySet, apply
inside, outside, block, port = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
caps = CapabilitySet()
caps.allow_path("/", AccessMode.READ)
caps.allow_path(inside, AccessMode.READ_WRITE)
if block:
    caps.block_network()
apply(caps)
out = {}
def attempt(name, action):
    try:
        action()
        out[name] = "ok"
    except OSError as e:
        out[name] = type(e).__name__
def write(path):
    with open(path, "w") as f:
        f.write("x")
attempt("write_inside", lambda: write(os.path.join(inside, "new")))
attempt("rename_inside", lambda: os.rename(os.path.join(inside, "new"),
                                           os.path.join(inside, "renamed")))
attempt("read_outside", lambda: open(os.path.join(outside, "old")).read())
attempt("write_outside", lambda: write(os.path.join(outside, "new")))
attempt("append_outside", lambda: open(os.path.join(outside, "old"), "a").close())
attempt("unlink_outside", lambda: os.unlink(os.path.join(outside, "old")))
attempt("mkdir_outside", lambda: os.mkdir(os.path.join(outside, "dir")))
attempt("link_out", lambda: os.link(os.path.join(inside, "renamed"),
                                    os.path.join(outside, "linked")))
attempt("connect", lambda: socket.create_connection(("127.0.0.1", port), timeout=5).close())
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
print(json.dumps(out))
"""

_CONFINED = {"write_inside": "ok", "rename_inside": "ok", "read_outside": "ok",
             "write_outside": "PermissionError", "append_outside": "PermissionError",
             "unlink_outside": "PermissionError", "mkdir_outside": "PermissionError"}


@pytest.fixture
def tcp_server() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 that accepts and closes; yields its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        server.close()


@pytest.fixture
def shared_dirs() -> Iterator[tuple[Path, Path]]:
    """(inside, outside): two directories owned by uid 65534 under a directory every user
    can pass, each with a file ``old`` in ``outside``."""
    base = Path(tempfile.mkdtemp(prefix="ctrlz-sandbox-api-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        inside, outside = base / "inside", base / "outside"
        for d in (inside, outside):
            d.mkdir()
        (outside / "old").write_text("old")
        if os.geteuid() == 0:
            for p in (inside, outside, outside / "old"):
                os.chown(p, NOBODY, NOBODY)
        yield inside, outside
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run_child(python: list[str], inside: Path, outside: Path, block: bool,
               port: int) -> dict[str, str]:
    proc = subprocess.run([*python, "-c", _CHILD, str(inside), str(outside),
                           "1" if block else "0", str(port)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@needs_landlock
@pytest.mark.parametrize("block", [False, True], ids=["net-open", "net-blocked"])
def test_apply_confines_a_child(shared_dirs: tuple[Path, Path], tcp_server: int,
                                block: bool) -> None:
    inside, outside = shared_dirs
    out = _run_child([sys.executable], inside, outside, block, tcp_server)
    assert {k: out[k] for k in _CONFINED} == _CONFINED
    assert out["link_out"] in ("PermissionError", "OSError")  # EACCES or EXDEV
    assert out["connect"] == ("PermissionError" if block else "ok")
    assert out["udp"] == ("PermissionError" if block else "ok")
    assert sorted(p.name for p in outside.iterdir()) == ["old"]
    assert (outside / "old").read_text() == "old"
    assert (inside / "renamed").read_text() == "x"


@needs_landlock
def test_apply_confines_another_user(other_user, shared_dirs: tuple[Path, Path],
                                     tcp_server: int) -> None:
    """As uid 65534, which owns both directories: only Landlock can refuse the writes."""
    inside, outside = shared_dirs
    python = other_user.python_command("-I")
    out = _run_child(python, inside, outside, True, tcp_server)
    assert {k: out[k] for k in _CONFINED} == _CONFINED
    assert out["connect"] == "PermissionError"
    assert sorted(p.name for p in outside.iterdir()) == ["old"]


@needs_landlock
def test_sandboxed_exec_as_another_user(other_user, shared_dirs: tuple[Path, Path]) -> None:
    """uid 65534 calls sandboxed_exec: its command writes inside and is refused outside, in
    directories that user owns; the caller itself stays free to write outside."""
    inside, outside = shared_dirs
    code = ("import sys\n"
            "from ctrlz.sandbox import AccessMode, CapabilitySet, sandboxed_exec\n"
            "caps = CapabilitySet()\n"
            "caps.allow_path('/', AccessMode.READ)\n"
            "caps.allow_path(sys.argv[1], AccessMode.READ_WRITE)\n"
            "script = 'echo a > \"$1/a\" && echo b > \"$2/b\"'\n"
            "r = sandboxed_exec(caps, ['sh', '-c', script, 'sh', sys.argv[1], sys.argv[2]])\n"
            "open(sys.argv[2] + '/c', 'w').close()\n"
            "print(r.exit_code, r.stderr.decode().strip())\n")
    proc = subprocess.run(other_user.python_command("-I", "-c", code, str(inside),
                                                    str(outside)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    status, _, message = proc.stdout.strip().partition(" ")
    assert status != "0" and "Permission denied" in message
    assert (inside / "a").read_text() == "a\n"
    assert sorted(p.name for p in outside.iterdir()) == ["c", "old"]
    assert (outside / "c").stat().st_uid == NOBODY


def test_apply_without_landlock_raises_runtime_error(tmp_path: Path) -> None:
    """A kernel without Landlock (simulated: its syscalls answer ENOSYS) is refused, and the
    API says so: is_supported() False, support_info() with the cause, apply RuntimeError."""
    code = ("from ctrlz.sandbox import CapabilitySet, apply, is_supported, support_info\n"
            "print(is_supported(), support_info().details)\n"
            "try:\n    apply(CapabilitySet())\nexcept RuntimeError as e:\n"
            "    print('RuntimeError', e)\n")
    proc = subprocess.run([sys.executable, "-m", "ctrlz.sandbox.seccomp", "--deny",
                           "landlock:ENOSYS", "--", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode == 2:
        pytest.skip(f"no seccomp filter here: {proc.stderr.strip()}")
    first, second = proc.stdout.splitlines()
    assert first.startswith("False Landlock not available")
    assert second.startswith("RuntimeError Landlock not available")


# -- sandboxed_exec ------------------------------------------------------------------------------


def _base_caps(*writable: Path) -> CapabilitySet:
    caps = CapabilitySet()
    caps.allow_path("/", AccessMode.READ)
    for path in writable:
        caps.allow_path(str(path), AccessMode.READ_WRITE)
    return caps


@needs_landlock
def test_sandboxed_exec_confines_the_command_only(shared_dirs: tuple[Path, Path]) -> None:
    inside, outside = shared_dirs
    script = f"echo in > {inside}/a; echo out > {outside}/b; echo done"
    result = sandboxed_exec(_base_caps(inside), ["sh", "-c", script], cwd=str(outside))
    assert isinstance(result, ExecResult)
    assert (inside / "a").read_text() == "in\n"
    assert not (outside / "b").exists()
    assert b"Permission denied" in result.stderr and result.stdout == b"done\n"
    assert result.exit_code == 0
    (outside / "c").write_text("the caller is not confined")


@needs_landlock
def test_sandboxed_exec_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    caps = _base_caps(tmp_path)
    monkeypatch.setenv("CTRLZ_TEST_PARENT", "secret")
    py = sys.executable
    show = "import os; print(os.environ.get('CTRLZ_TEST_PARENT'), os.environ.get('V'))"
    assert sandboxed_exec(caps, [py, "-c", show], env=[("V", "1")]).stdout == b"None 1\n"
    inherited = sandboxed_exec(caps, [py, "-c", show], env=[("V", "2")], inherit_env=True)
    assert inherited.stdout == b"secret 2\n"
    # more than one argument may hold (128 KiB): the request to the child is cut in pieces
    big = [(f"BIG{i}", "v" * 60_000) for i in range(5)]
    count = "import os; print(sum(len(v) for k, v in os.environ.items() if k[:3] == 'BIG'))"
    assert sandboxed_exec(caps, [py, "-c", count], env=big).stdout == b"300000\n"
    assert sandboxed_exec(caps, [py, "-c", "raise SystemExit(7)"]).exit_code == 7
    odd = tmp_path / os.fsdecode(b"caf\xe9")  # a name that is not UTF-8, granted and used
    odd.mkdir()
    made = sandboxed_exec(_base_caps(odd), ["sh", "-c", 'echo x > "$1/f"', "sh", str(odd)])
    assert made.exit_code == 0 and (odd / "f").read_text() == "x\n"
    killed = sandboxed_exec(caps, [py, "-c", "import os; os.kill(os.getpid(), 9)"])
    assert killed.exit_code == -signal.SIGKILL
    slow = sandboxed_exec(caps, ["sleep", "30"], timeout_secs=0.3)
    assert slow.exit_code == 124
    assert repr(slow) == "ExecResult(exit_code=124, stdout_len=0, stderr_len=0)"
    with pytest.raises(ValueError, match="command must not be empty"):
        sandboxed_exec(caps, [])
    with pytest.raises(ValueError, match="timeout_secs must be non-negative"):
        sandboxed_exec(caps, ["true"], timeout_secs=-1)
    with pytest.raises(ValueError, match="LD_PRELOAD"):
        sandboxed_exec(caps, ["true"], env=[("LD_PRELOAD", "x.so")])
    with pytest.raises(RuntimeError, match="Program not found in PATH"):
        sandboxed_exec(caps, ["no-such-program-ctrlz"])
    with pytest.raises(RuntimeError, match="Cannot resolve working directory"):
        sandboxed_exec(caps, ["true"], cwd=str(tmp_path / "missing"))


@needs_landlock
def test_sandboxed_exec_reports_what_kept_the_command_from_starting(tmp_path: Path) -> None:
    """127 when the program may not be executed (nothing granted), 126 when the sandbox
    cannot be built (a granted directory vanished before the child confined itself)."""
    (tmp_path / "work").mkdir()
    nothing = CapabilitySet()
    nothing.allow_path(str(tmp_path / "work"), AccessMode.READ_WRITE)
    denied = sandboxed_exec(nothing, ["true"])
    assert denied.exit_code == 127 and b"exec failed" in denied.stderr
    vanishing = tmp_path / "vanishing"
    vanishing.mkdir()
    caps = _base_caps(vanishing)
    vanishing.rmdir()
    broken = sandboxed_exec(caps, ["true"])
    assert broken.exit_code == 126 and b"no longer exists" in broken.stderr


@needs_landlock
def test_sandboxed_exec_blocks_the_network(tmp_path: Path, tcp_server: int) -> None:
    caps = _base_caps(tmp_path)
    code = ("import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', "
            f"{tcp_server}), timeout=5).close()\n    print('connected')\n"
            "except OSError as e:\n    print(type(e).__name__)")
    assert sandboxed_exec(caps, [sys.executable, "-c", code]).stdout == b"connected\n"
    caps.block_network()
    assert sandboxed_exec(caps, [sys.executable, "-c", code]).stdout == b"PermissionError\n"


@needs_landlock
def test_sandboxed_exec_returns_while_a_grandchild_holds_its_output(tmp_path: Path) -> None:
    """The command ended; a background process it left still holds stdout. The call returns
    what was written (after a short drain), rather than waiting for the grandchild."""
    result = sandboxed_exec(_base_caps(tmp_path), ["sh", "-c", "sleep 600 & echo $!"])
    pid = int(result.stdout)
    try:
        assert result.exit_code == 0
    finally:
        os.kill(pid, signal.SIGKILL)


@needs_landlock
def test_sandboxed_exec_does_not_leak_descriptors(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s")
    fd = os.open(secret, os.O_RDONLY)
    os.set_inheritable(fd, True)
    try:
        code = f"import os\ntry:\n    os.fstat({fd}); print('leaked')\nexcept OSError: " \
               "print('closed')"
        result = sandboxed_exec(_base_caps(tmp_path), [sys.executable, "-c", code])
    finally:
        os.close(fd)
    assert result.stdout == b"closed\n"
