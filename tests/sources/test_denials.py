"""Writes a sandbox refused, from the tracer: recorded lines, then real strace over a real
bubblewrap sandbox and a real Landlock one (a few lines of ctypes here, so that the test does
not depend on the sandbox's own launcher), as root and as another user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz.sources.trace import Denial, StraceParser, Tracer, strace_available
from ctrlz.sources.trace.denials import denial, split_args

# Recorded from `strace -f -q -ttt -y -e trace=<exec set + write set>` (strace 6.1) over
# `bwrap --unshare-user --ro-bind / / --bind WS WS` and over a Landlock launcher, trimmed.
RECORDED = r"""
9 1795863502.100000 execve("/bin/sh", ["sh", "-c", "..."], 0x7ffd /* 20 vars */) = 0
9 1795863502.101000 chdir("/tmp/dz/a\76b") = 0
9 1795863502.101500 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 10
10 1795863502.101800 execve("/usr/bin/touch", ["touch", "x"], 0x55 /* 20 vars */) = 0
10 1795863502.101900 openat(AT_FDCWD</tmp/dz/a\76b>, "/usr/lib/locale/locale-archive", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)
10 1795863502.101950 openat(AT_FDCWD</tmp/dz/a\76b>, "/etc/passwd", O_RDONLY|O_CLOEXEC) = -1 EACCES (Permission denied)
10 1795863502.102455 openat(AT_FDCWD</tmp/dz/a\76b>, "x", O_WRONLY|O_CREAT|O_NOCTTY|O_NONBLOCK, 0666) = -1 EROFS (Read-only file system)
10 1795863502.102500 openat(AT_FDCWD</tmp/dz/ws>, "ok", O_WRONLY|O_CREAT, 0666) = 3</tmp/dz/ws/ok>
10 1795863502.102600 +++ exited with 1 +++
9 1795863502.115783 renameat2(AT_FDCWD</tmp/dz/a\76b>, "/tmp/dz/ws/ok", AT_FDCWD</tmp/dz/a\76b>, "/tmp/dz/out/moved", RENAME_NOREPLACE) = -1 EXDEV (Invalid cross-device link)
9 1795863502.116127 unlinkat(AT_FDCWD</tmp/dz/a\76b>, "/tmp/dz/out/moved", 0) = -1 EROFS (Read-only file system)
9 1795863502.122555 symlinkat("/x", AT_FDCWD</tmp/dz/a\76b>, "/tmp/dz/out/l") = -1 EROFS (Read-only file system)
9 1795863502.128388 mkdir("../out/d", 0777) = -1 EROFS (Read-only file system)
9 1795863502.128400 mkdir("/tmp/dz/ws/exists", 0777) = -1 EEXIST (File exists)
9 1795863502.128500 mkdir("/tmp/dz/ws/mode", 0777) = -1 EACCES (Permission denied)
9 1795863502.150756 fchmodat(AT_FDCWD</tmp/dz/a\76b>, "/tmp/dz/out", 0600) = -1 EROFS (Read-only file system)
9 1795863502.155890 utimensat(4</etc/hostname>, NULL, [UTIME_NOW, UTIME_NOW], 0) = -1 EROFS (Read-only file system)
9 1795863559.066212 renameat2(AT_FDCWD</tmp/dz>, "/tmp/dz/ws/f", AT_FDCWD</tmp/dz>, "/tmp/dz/out/g", RENAME_NOREPLACE) = -1 EACCES (Permission denied)
9 1795863559.085750 linkat(AT_FDCWD</tmp/dz>, "/tmp/dz/ws/x", AT_FDCWD</tmp/dz>, "/tmp/dz/out/h", 0) = -1 EACCES (Permission denied)
9 1795863559.086000 openat2(AT_FDCWD</tmp/dz>, "/etc/y", {flags=O_RDWR|O_CREAT, mode=0644, resolve=0}, 24) = -1 EACCES (Permission denied)
9 1795863559.086500 mkdir("/tmp/dz/out/n\377x", 0777) = -1 EACCES (Permission denied)
9 1795863559.087000 openat(3</tmp/dz/out>, "z", O_RDONLY|O_CREAT, 0644 <unfinished ...>
11 1795863559.087100 +++ exited with 0 +++
9 1795863559.087200 <... openat resumed>) = -1 EACCES (Permission denied)
9 1795863559.090000 +++ exited with 1 +++
"""  # noqa: E501 -- recorded strace lines are kept verbatim


def test_recorded_lines_give_the_refused_writes_only() -> None:
    found: list[Denial] = []
    parser = StraceParser(root_cwd="/tmp/dz", on_denial=found.append,
                          writable=("/tmp/dz/ws",))
    events = parser.feed_lines(RECORDED.splitlines()) + parser.finish()
    assert [e.command for e in events] == ["touch", "sh"]  # the exec trace is intact
    assert [(d.pid, d.exe, d.syscall, d.path, d.errno) for d in found] == [
        (10, "touch", "openat", "/tmp/dz/a>b/x", "EROFS"),
        (9, "sh", "unlinkat", "/tmp/dz/out/moved", "EROFS"),
        (9, "sh", "symlinkat", "/tmp/dz/out/l", "EROFS"),
        (9, "sh", "mkdir", "/tmp/dz/out/d", "EROFS"),
        (9, "sh", "fchmodat", "/tmp/dz/out", "EROFS"),
        (9, "sh", "utimensat", "/etc/hostname", "EROFS"),
        (9, "sh", "renameat2", "/tmp/dz/out/g", "EACCES"),
        (9, "sh", "linkat", "/tmp/dz/out/h", "EACCES"),
        (9, "sh", "openat2", "/etc/y", "EACCES"),
        (9, "sh", "mkdir", "/tmp/dz/out/n\udcffx", "EACCES"),
        (9, "sh", "openat", "/tmp/dz/out/z", "EACCES"),
    ]
    assert found[-2].to_json()["path"] == "/tmp/dz/out/n\\xffx"  # as file events store it
    assert found[0].to_json() == {"timestamp": "2026-11-28T10:58:22.102455+00:00", "pid": 10,
                                  "exe": "touch", "syscall": "openat",
                                  "path": "/tmp/dz/a>b/x", "errno": "EROFS", "kind": "fs"}


def test_without_on_denial_nothing_is_looked_at() -> None:
    parser = StraceParser(root_cwd="/tmp/dz")
    assert [e.command for e in parser.feed_lines(RECORDED.splitlines()) + parser.finish()] \
        == ["touch", "sh"]


def test_argument_splitting_keeps_quotes_fds_and_structs_whole() -> None:
    assert split_args(r'3</a,b\76c>, "x, \"y\"", {flags=O_RDWR|O_CREAT, mode=0644}, 24') \
        == [r"3</a,b\76c>", r'"x, \"y\""', "{flags=O_RDWR|O_CREAT, mode=0644}", "24"]
    assert denial(1, 0.0, "open", '"rel", O_RDONLY', "-1 EACCES (Permission denied)",
                  cwd="/", exe=None) is None  # a read
    assert denial(1, 0.0, "creat", '"rel", 0644', "-1 EPERM (Operation not permitted)",
                  cwd=None, exe=None) == Denial(0.0, 1, None, "creat", "rel", "EPERM")


# ---------------------------------------------------------------- real strace, real sandboxes

needs_strace = pytest.mark.skipif(strace_available() is None, reason="strace is not installed")

#: Landlock by hand: read and execute everywhere, everything in argv[1] and /dev/null, then
#: exec argv[2:]. The ruleset attribute is passed at its ABI 1 size, which every ABI accepts.
LANDLOCK = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
abi = libc.syscall(444, None, 0, 1)
if abi < 2:
    sys.exit(77)
handled = (1 << 16) - 1 if abi >= 5 else (1 << 15) - 1 if abi >= 3 else (1 << 14) - 1
class Attr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64)]
class Beneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]
attr = Attr(handled)
ruleset = libc.syscall(444, ctypes.byref(attr), ctypes.sizeof(attr), 0)
def allow(path, rights):
    fd = os.open(path, os.O_PATH)
    if libc.syscall(445, ruleset, 1, ctypes.byref(Beneath(rights, fd)), 0) != 0:
        sys.exit(77)
    os.close(fd)
allow("/", 1 | 4 | 8)
allow(sys.argv[1], handled)
allow("/dev/null", 2 | 4)
if ruleset < 0 or libc.prctl(38, 1, 0, 0, 0) != 0 or libc.syscall(446, ruleset, 0) != 0:
    sys.exit(77)
os.execvp(sys.argv[2], sys.argv[2:])
"""

#: Writes out of the workspace every way the issue names: a file, mv out, ln out, a symlink,
#: mkdir (relative, after cd), rm -rf, and a read that must not count.
WRITES = """
echo inside > "$WS/in.txt"
echo outside > "$OUT/x" 2>/dev/null
mv "$WS/in.txt" "$OUT/moved" 2>/dev/null
ln "$WS/in.txt" "$OUT/hard" 2>/dev/null
ln -s /x "$OUT/sym" 2>/dev/null
cd "$OUT" && mkdir rel 2>/dev/null
rm -rf "$OUT/keep" 2>/dev/null
cat "$OUT/keep/file" >/dev/null
ls /nonexistent 2>/dev/null
exit 0
"""

EXPECTED = {("x", "EX"), ("moved", "EX"), ("hard", "EX"), ("sym", "EX"), ("rel", "EX"),
            ("keep/file", "EX")}


def _layout(tmp: Path) -> tuple[Path, Path]:
    ws, out = tmp / "ws", tmp / "out"
    ws.mkdir()
    (out / "keep").mkdir(parents=True)
    (out / "keep" / "file").write_text("kept\n")
    return ws, out


def _check(result_denials: list[Denial], out: Path, errno: str) -> None:
    got = {(os.path.relpath(d.path, out), d.errno) for d in result_denials}
    expected = {(path, errno) for path, _ in EXPECTED}
    assert expected <= got, got
    assert all(d.path.startswith(str(out)) for d in result_denials), result_denials
    assert all(d.kind == "fs" and d.errno in ("EACCES", "EPERM", "EROFS")
               for d in result_denials)
    assert (out / "keep" / "file").read_text() == "kept\n"


def _bwrap_works() -> str | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    probe = subprocess.run([bwrap, "--unshare-user", "--ro-bind", "/", "/", "true"],
                           capture_output=True)
    return bwrap if probe.returncode == 0 else None


@needs_strace
def test_real_strace_over_bubblewrap(tmp_path: Path) -> None:
    bwrap = _bwrap_works()
    if bwrap is None:
        pytest.skip("bubblewrap is missing or cannot make a user namespace here")
    ws, out = _layout(tmp_path)
    tracer = Tracer.detect(denials=True, writable=[ws])
    if not tracer.enabled:
        pytest.skip(f"tracing unavailable here: {tracer.reason}")
    seen: list[Denial] = []
    result = tracer.run([bwrap, "--unshare-user", "--ro-bind", "/", "/", "--bind", str(ws),
                         str(ws), "--dev", "/dev", "--proc", "/proc", "--", "sh", "-c", WRITES],
                        cwd=ws, env={**os.environ, "WS": str(ws), "OUT": str(out)},
                        on_denial=seen.append)
    assert result.returncode == 0
    assert (ws / "in.txt").exists()
    _check(result.denials, out, "EROFS")
    assert seen == result.denials
    assert {"sh", "mv", "ln", "mkdir", "rm"} <= {e.command for e in result.events}
    assert {d.exe for d in result.denials} >= {"mv", "ln", "mkdir", "rm"}


def _landlock_run(python: str, tmp: Path, wrap: list[str],
                  made: bool = False) -> dict[str, object]:
    """Trace WRITES under the Landlock script, through ``wrap`` (another user), and return
    what the tracer saw, as JSON from that process."""
    ws, out = (tmp / "ws", tmp / "out") if made else _layout(tmp)
    (tmp / "landlock.py").write_text(LANDLOCK)
    (tmp / "landlock.py").chmod(0o644)
    driver = (
        "import json, os, sys\n"
        "from ctrlz.sources.trace import Tracer\n"
        "ws, out, script = sys.argv[1:4]\n"
        "t = Tracer.detect(denials=True, writable=[ws])\n"
        "if not t.enabled:\n"
        "    print(json.dumps({'skip': t.reason})); sys.exit(0)\n"
        "r = t.run([sys.executable, script, ws, 'sh', '-c', sys.argv[4]], cwd=ws,\n"
        "          env={**os.environ, 'WS': ws, 'OUT': out})\n"
        "print(json.dumps({'code': r.returncode, 'denials': [d.to_json() for d in r.denials],\n"
        "                  'execs': [e.command for e in r.events]}))\n")
    proc = subprocess.run([*wrap, python, "-c", driver, str(ws), str(out),
                           str(tmp / "landlock.py"), WRITES],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _check_landlock(seen: dict[str, object], tmp: Path) -> None:
    if "skip" in seen:
        pytest.skip(f"tracing unavailable here: {seen['skip']}")
    if seen["code"] == 77:
        pytest.skip("Landlock (ABI 2 or later) is not available here")
    assert seen["code"] == 0
    denials = [Denial(0.0, d["pid"], d["exe"], d["syscall"], d["path"], d["errno"])
               for d in seen["denials"]]  # type: ignore[attr-defined]
    _check(denials, tmp / "out", "EACCES")
    assert "sh" in seen["execs"]  # type: ignore[operator]


@needs_strace
def test_real_strace_over_landlock(tmp_path: Path) -> None:
    _check_landlock(_landlock_run(sys.executable, tmp_path, []), tmp_path)


@needs_strace
def test_real_strace_over_landlock_as_another_user(other_user) -> None:  # noqa: ANN001
    """uid 65534 runs the tracer, the sandbox and the writes, and owns the directory outside,
    so file modes cannot be the refusal's cause. pytest's own temp dir is root's (0700)."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="ctrlz-denials-", dir="/tmp"))
    try:
        base.chmod(0o755)
        _layout(base)
        for path in [base, *base.rglob("*")]:
            os.chown(path, 65534, 65534)
        seen = _landlock_run(other_user.python, base, other_user.command(), made=True)
        _check_landlock(seen, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@needs_strace
def test_a_write_refused_in_a_loop_is_kept_up_to_the_cap_and_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctrlz.cli.sessions import refused_line
    from ctrlz.sources.trace import tracer as tracer_module

    bwrap = _bwrap_works()
    if bwrap is None:
        pytest.skip("bubblewrap is missing or cannot make a user namespace here")
    ws, out = _layout(tmp_path)
    monkeypatch.setattr(tracer_module, "MAX_DENIALS", 5)
    tracer = Tracer.detect(denials=True, writable=[ws])
    if not tracer.enabled:
        pytest.skip(f"tracing unavailable here: {tracer.reason}")
    loop = f'i=0; while [ $i -lt 30 ]; do echo x 2>/dev/null > {out}/x; i=$((i+1)); done'
    result = tracer.run([bwrap, "--unshare-user", "--ro-bind", "/", "/", "--dev", "/dev", "--",
                         "sh", "-c",
                         loop], cwd=ws)
    assert result.returncode == 0
    assert len(result.denials) == 5 and result.denials_dropped == 25
    line = refused_line([d.to_json() for d in result.denials], "sess_x",
                        result.denials_dropped)
    assert line.startswith(f"ctrlz: the sandbox refused 30 writes outside the workspace "
                           f"(1 path: {out}/x; 25 more not kept)")
