"""The core of the sandbox on its own: landlock.py's rules in a real child process, the
policy's JSON, the bwrap command line, ``ctrlz sandbox check``, and the ``sandboxed`` record
a run leaves for the daemon and the service."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz import platform
from ctrlz.sandbox import landlock
from ctrlz.sandbox.bwrap import bwrap_argv
from ctrlz.sandbox.policy import SandboxPolicy, start_time
from ctrlz.sandbox.probe import support

ABI = landlock.abi()
CLI = [sys.executable, "-P", "-c", "import sys; del sys.argv[0]; from ctrlz.cli import main; "
       "sys.exit(main())", "ctrlz"]
needs_landlock = pytest.mark.skipif(ABI < landlock.MIN_ABI,
                                    reason=f"Landlock ABI {ABI} (2 or later needed)")


@pytest.fixture
def tree() -> Iterator[Path]:
    """Outside the temp dir (which a policy makes writable), so that "outside" is outside."""
    base = Path(tempfile.mkdtemp(prefix="ctrlz-core-", dir="/var/tmp"))
    for d in ("ws", "out", "home/.ssh", "home/.config"):
        (base / d).mkdir(parents=True)
    (base / "out" / "f.txt").write_text("f\n")
    (base / "home" / ".ssh" / "id").write_text("key\n")
    (base / "home" / ".config" / "app.toml").write_text("x = 1\n")
    (base / "home" / "link-to-ssh").symlink_to(base / "home" / ".ssh")
    try:
        yield base
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


CHILD = r"""
import os, sys
sys.path[:0] = [{src!r}]
from ctrlz.sandbox import landlock
base = {base!r}
rules = landlock.path_rules(landlock.abi(), [base + "/ws"], [base + "/home/.ssh"])
rs = landlock.Ruleset()
for path, rights in rules:
    rs.allow_path(path, rights)
rs.restrict_self()
def attempt(name, fn):
    try:
        fn()
        print(name, "ok")
    except OSError as exc:
        print(name, exc.__class__.__name__)
attempt("write-ws", lambda: open(base + "/ws/n", "w").close())
attempt("write-out", lambda: open(base + "/out/n", "w").close())
attempt("unlink-out", lambda: os.unlink(base + "/out/f.txt"))
attempt("rename-out", lambda: os.rename(base + "/ws/n", base + "/out/n"))
attempt("read-config", lambda: open(base + "/home/.config/app.toml").read())
attempt("read-ssh", lambda: open(base + "/home/.ssh/id").read())
attempt("read-ssh-by-link", lambda: open(base + "/home/link-to-ssh/id").read())
attempt("chmod-out", lambda: os.chmod(base + "/out/f.txt", 0o600))
attempt("utime-out", lambda: os.utime(base + "/out/f.txt", (1, 1)))
attempt("signal-out", lambda: os.kill(os.getppid(), 0))
import socket
attempt("abstract-out", lambda: socket.socket(socket.AF_UNIX).connect({abstract!r}))
"""


@needs_landlock
def test_landlock_rules_in_a_real_child(tree: Path) -> None:
    """Writes only under the writable path; the unreadable one stays shut, through a
    symlink too; chmod and utimes outside go through (Landlock has no right for them:
    docs/sandbox.md says so, and this keeps the claim honest)."""
    import socket

    src = str(Path(landlock.__file__).parents[2])
    listener = socket.socket(socket.AF_UNIX)  # an abstract socket outside the sandbox
    abstract = f"\0ctrlz-core-{os.getpid()}"
    listener.bind(abstract)
    listener.listen(1)
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD.format(
            src=src, base=str(tree), abstract=abstract)], capture_output=True, text=True,
            timeout=60)
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr
    got = dict(line.split() for line in proc.stdout.splitlines())
    # scopes (ABI 6): no signal, no abstract socket to a process outside the sandbox
    scoped = "PermissionError" if ABI >= 6 else "ok"
    assert got == {"write-ws": "ok", "write-out": "PermissionError",
                   "unlink-out": "PermissionError", "rename-out": "PermissionError",
                   "read-config": "ok", "read-ssh": "PermissionError",
                   "read-ssh-by-link": "PermissionError", "chmod-out": "ok",
                   "utime-out": "ok", "signal-out": scoped, "abstract-out": scoped}
    assert (tree / "out" / "f.txt").exists() and not (tree / "out" / "n").exists()


@needs_landlock
def test_a_writable_path_holding_an_unreadable_one_cannot_be_expressed(tree: Path) -> None:
    with pytest.raises(ValueError, match="must stay unreadable"):
        landlock.path_rules(ABI, [str(tree / "home")], [str(tree / "home" / ".ssh")])
    with pytest.raises(ValueError):
        landlock.path_rules(ABI, ["/"], [str(tree / "home" / ".ssh")])


def test_rights_follow_the_abi() -> None:
    assert landlock.handled_fs(2) & landlock.FS["refer"]
    assert not landlock.handled_fs(2) & landlock.FS["truncate"]
    assert landlock.handled_fs(3) & landlock.FS["truncate"]
    assert not landlock.handled_fs(4) & landlock.FS["ioctl_dev"]
    assert landlock.handled_fs(5) & landlock.FS["ioctl_dev"]


def test_policy_json_round_trip() -> None:
    policy = SandboxPolicy(mode="bwrap", writable=["/w"], net="off", proxy=("127.0.0.1", 9))
    back = SandboxPolicy.from_json(json.loads(json.dumps(policy.to_json())))
    assert back == policy and back.proxy == ("127.0.0.1", 9) and back.net_mode == "off"
    assert SandboxPolicy(allow_hosts=["a.example"]).net_mode == "proxy"
    with pytest.raises(TypeError):
        SandboxPolicy(nonsense=1)


def test_bwrap_argv_always_unshares_the_user_and_mounts_parent_first(tree: Path) -> None:
    home = tree / "home"
    policy = SandboxPolicy(writable=[str(home / ".config"), str(tree / "ws")],
                           unreadable=[str(home / ".ssh"), str(home),
                                       str(home / ".config" / "app.toml")],
                           net="off")
    argv = bwrap_argv(policy, ["true"], bwrap="/usr/bin/bwrap")
    assert argv[:5] == ["/usr/bin/bwrap", "--ro-bind", "/", "/", "--dev"]
    for flag in ("--unshare-user", "--unshare-pid", "--die-with-parent", "--unshare-net"):
        assert flag in argv
    assert argv[argv.index("--proc") + 1] == "/proc"
    order = [argv[i + 1] for i, a in enumerate(argv) if a in ("--bind", "--tmpfs")]
    # the home's tmpfs before the binds beneath it, or it would hide them
    assert order.index(str(home)) < order.index(str(home / ".config"))
    assert argv[argv.index(str(home / ".config" / "app.toml")) - 2:][:2] == [
        "--ro-bind", "/dev/null"]
    assert argv[-2:] == ["--", "true"]


def test_sandbox_check_says_what_this_machine_offers() -> None:
    proc = subprocess.run([*CLI, "sandbox", "check", "--json"], capture_output=True,
                          text=True, timeout=120)
    info = json.loads(proc.stdout)
    assert info["landlock_abi"] == ABI
    assert info["auto"] == support().auto
    assert proc.returncode == (0 if info["auto"] else 2)
    text = subprocess.run([*CLI, "sandbox", "check"], capture_output=True, text=True,
                          timeout=120)
    assert text.stdout.startswith("landlock: ") and "auto:" in text.stdout


def parent_of(pid: int) -> int:
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return int(data[data.rindex(b")") + 2:].split()[1])


@needs_landlock
def test_a_running_sandboxed_session_names_its_process(tmp_path: Path) -> None:
    """``<store>/sandboxed/<session>.json`` holds the confined process's pid and start time
    while the run lives (the daemon and the service look there), and is gone after."""
    base = Path(tempfile.mkdtemp(prefix="ctrlz-core-", dir="/var/tmp"))
    try:
        ws = base / "ws"
        ws.mkdir()
        env = {**os.environ, "CTRLZ_HOME": str(base / "home")}
        cli = CLI
        subprocess.run([*cli, "init"], cwd=ws, env=env, check=True, capture_output=True)
        script = "echo $$ > pid; while [ ! -e go ]; do sleep 0.05; done"
        run = subprocess.Popen([*cli, "run", "--sandbox=landlock", "--", "sh", "-c", script],
                               cwd=ws, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        try:
            while not (ws / "pid").exists() or not (ws / "pid").read_text().strip():
                assert run.poll() is None, run.communicate()
                time.sleep(0.05)
            pid = int((ws / "pid").read_text())
            records = list((base / "home" / "workspaces").glob("*/sandboxed/*.json"))
            assert len(records) == 1
            record = json.loads(records[0].read_text())
            if platform.native_launcher() is None:  # the launcher exec'd the command
                assert record["pid"] == pid and record["self"] is True
            else:  # the native launcher forked it, and observes from outside: its parent
                assert record["pid"] == parent_of(pid) and record["self"] is False
            assert record["start"] == start_time(record["pid"])
            assert record["mode"] == "landlock" and records[0].stem == record["session"]
        finally:
            (ws / "go").touch()
            out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert not list((base / "home" / "workspaces").glob("*/sandboxed/*.json"))
        subprocess.run([*cli, "daemon", "stop"], cwd=ws, env=env, capture_output=True)
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)
