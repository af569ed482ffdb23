"""The exec tracer: the pure parser on recorded strace lines, then real strace runs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ctrlz.sources.trace import (
    ExecEvent,
    StraceParser,
    Tracer,
    strace_available,
    unescape_c_string,
)

# ---------------------------------------------------------------- parser, recorded lines

# Recorded from `strace -f --seccomp-bpf -q -ttt -y ...` on Linux 6.x, strace 6.1, trimmed.
SCRIPT_TRACE = """\
100 1700000000.000100 execve("/usr/bin/sh", ["sh", "s.sh"], 0x7fff52601950 /* 39 vars */) = 0
100 1700000000.001000 vfork( <unfinished ...>
101 1700000000.001100 execve("/usr/local/bin/git", ["git", "commit", "-m", "fix bug"], 0x5 /* 39 vars */) = -1 ENOENT (No such file or directory)
101 1700000000.001200 execve("/usr/bin/git", ["git", "commit", "-m", "fix bug"], 0x5 /* 39 vars */ <unfinished ...>
100 1700000000.001300 <... vfork resumed>) = 101
101 1700000000.001400 <... execve resumed>) = 0
101 1700000000.501200 +++ exited with 0 +++
100 1700000000.502000 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=101} ---
100 1700000000.600000 chdir("sub")   = 0
100 1700000000.600100 chdir("missing") = -1 ENOENT (No such file or directory)
100 1700000000.601000 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f04) = 102
102 1700000000.602000 execve("/bin/sh", ["sh", "-c", "kill -9 $$"], 0x5 /* 39 vars */) = 0
102 1700000000.603000 +++ killed by SIGKILL +++
100 1700000000.700000 chdir("../other/./x") = 0
100 1700000000.700100 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD, child_tidptr=0x7f04) = 103
103 1700000000.700200 execve("/bin/true", ["true"], 0x5 /* 39 vars */) = 0
103 1700000000.700300 +++ exited with 3 +++
100 1700000000.800000 +++ exited with 0 +++
"""  # noqa: E501 -- recorded strace lines are kept verbatim


def parse(text: str, **kw) -> tuple[list[ExecEvent], StraceParser]:
    parser = StraceParser(**kw)
    events = parser.feed_lines(text.splitlines())
    return events + parser.finish(), parser


def by_command(events: list[ExecEvent]) -> dict[str, ExecEvent]:
    return {e.command: e for e in events}


def test_parser_script_trace() -> None:
    events, _ = parse(SCRIPT_TRACE, root_cwd="/w", root_ppid=99)
    assert [e.command for e in events] == ["git", "sh", "true", "sh"]
    ev = by_command(events)
    git = ev["git"]
    assert (git.pid, git.ppid, git.argv, git.args) == (
        101, 100, ["git", "commit", "-m", "fix bug"], ["commit", "-m", "fix bug"])
    assert git.timestamp == 1700000000.0012  # the successful exec, not the ENOENT attempt
    assert (git.exit_code, git.signal, git.cwd) == (0, None, "/w")
    assert git.duration == pytest.approx(0.5)
    killed = next(e for e in events if e.pid == 102)
    assert (killed.exit_code, killed.signal, killed.cwd, killed.ppid) == (
        None, "SIGKILL", "/w/sub", 100)
    true = ev["true"]
    assert (true.exit_code, true.cwd) == (3, "/w/other/x")
    root = events[-1]
    assert (root.pid, root.ppid, root.argv, root.exit_code, root.cwd) == (
        100, 99, ["sh", "s.sh"], 0, "/w")


def test_child_lines_before_parent_clone_returns_are_replayed() -> None:
    """With -f a child's exec and exit can be printed before the parent's fork returns."""
    text = """\
1 10.0 execve("/bin/sh", ["sh"], 0x1 /* 1 vars */) = 0
1 10.1 chdir("/tmp") = 0
1 10.2 fork( <unfinished ...>
2 10.3 execve("/bin/ls", ["ls"], 0x1 /* 1 vars */) = 0
2 10.4 +++ exited with 2 +++
1 10.5 <... fork resumed>) = 2
1 10.6 +++ exited with 0 +++
"""
    events, _ = parse(text, root_cwd="/w")
    ls = by_command(events)["ls"]
    assert (ls.ppid, ls.cwd, ls.exit_code) == (1, "/tmp", 2)


def test_threads_and_clone3() -> None:
    """A thread's children belong to the thread group; CLONE_PARENT makes a sibling."""
    text = """\
10 1.0 execve("/usr/bin/python3", ["python3", "x.py"], 0x1 /* 1 vars */) = 0
10 1.1 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, child_tid=0x7f, exit_signal=0} => {parent_tid=[11]}, 88) = 11
11 1.2 vfork( <unfinished ...>
12 1.3 execve("/usr/bin/true", ["true"], 0x7 /* 1 vars */ <unfinished ...>
11 1.4 <... vfork resumed>) = 12
12 1.5 <... execve resumed>) = 0
12 1.6 +++ exited with 0 +++
11 1.7 clone3({flags=CLONE_VM|CLONE_PARENT|CLONE_VFORK, exit_signal=SIGCHLD, stack=0x1}, 88) = 13
13 1.8 execve("/bin/echo", ["echo"], 0x7 /* 1 vars */) = 0
13 1.9 +++ exited with 0 +++
11 2.0 +++ exited with 0 +++
10 2.1 +++ exited with 0 +++
"""  # noqa: E501 -- recorded strace lines are kept verbatim
    events, _ = parse(text, root_cwd="/w", root_ppid=9)
    ev = by_command(events)
    assert ev["true"].ppid == 10
    assert ev["echo"].ppid == 9
    assert ev["python3"].exit_code == 0


def test_exec_chain_and_finish() -> None:
    """Each exec of the same pid ends the previous program; finish() closes the rest."""
    text = """\
5 1.0 execve("/usr/bin/env", ["env", "python3", "-V"], 0x1 /* 1 vars */) = 0
5 1.5 execve("/usr/bin/python3", ["python3", "-V"], 0x1 /* 1 vars */) = 0
5 2.0 fchdir(3</srv/data>) = 0
5 2.1 clone(child_stack=NULL, flags=SIGCHLD) = 6
6 2.2 execveat(3</usr/bin>, "", ["sleep", "100"], 0x1 /* 1 vars */, AT_EMPTY_PATH) = 0
"""
    started: list[ExecEvent] = []
    ended: list[ExecEvent] = []
    parser = StraceParser(root_cwd="/w", on_exec=started.append, on_exit=ended.append)
    done = parser.feed_lines(text.splitlines())
    assert [e.command for e in done] == ["env"]
    env = done[0]
    assert (env.end, env.exit_code, env.signal) == (1.5, None, None)
    assert [e.command for e in started] == ["env", "python3", "sleep"]
    assert {e.command for e in parser.running} == {"python3", "sleep"}
    rest = parser.finish()
    assert {e.command for e in rest} == {"python3", "sleep"}
    assert all(e.end is None and e.duration is None for e in rest)
    sleep = by_command(rest)["sleep"]
    assert (sleep.argv, sleep.cwd, sleep.ppid) == (["sleep", "100"], "/srv/data", 5)
    assert [e.command for e in ended][0] == "env"
    assert sorted(e.command for e in ended) == ["env", "python3", "sleep"]


def test_orphan_lines_survive_finish() -> None:
    """If the parent's clone never returns, the child's exec is still reported."""
    text = """\
1 1.0 execve("/bin/sh", ["sh"], 0x1 /* 1 vars */) = 0
1 1.1 clone( <unfinished ...>
2 1.2 execve("/bin/x", ["x"], 0x1 /* 1 vars */) = 0
1 1.3 +++ killed by SIGKILL +++
2 1.4 +++ exited with 0 +++
"""
    events, _ = parse(text, root_cwd="/w")
    x = by_command(events)["x"]
    assert (x.ppid, x.exit_code, x.cwd) == (0, 0, None)


def test_strace_string_escapes() -> None:
    line = ('7 1.0 execve("/bin/echo", ["echo", "a\\"b\\\\c\\nd\\te\\377f\\1g7", '
            '"\\0017", "\\x41\\xff", "long"...], 0x1 /* 1 vars */) = 0')
    events, _ = parse(line)
    assert events[0].args == ['a"b\\c\nd\te\udcfff\x01g7', "\x017", "A\udcff", "long"]
    assert os.fsencode(events[0].args[0]) == b'a"b\\c\nd\te\xfff\x01g7'
    assert unescape_c_string("\\303\\251") == "é"


def test_noise_is_ignored() -> None:
    text = """\
strace: Process 3 attached
1 1.0 execve("/bin/sh", ["sh"], 0x1 /* 1 vars */) = 0
1 1.1 --- SIGINT {si_signo=SIGINT, si_code=SI_KERNEL} ---
1 1.2 execve("/nope", ["x"], 0x1 /* 1 vars */) = -1 EACCES (Permission denied)
1 1.3 clone(child_stack=NULL, flags=SIGCHLD) = -1 EAGAIN (Resource temporarily unavailable)

1 1.4 +++ exited with 130 +++
"""
    events, _ = parse(text)
    assert [(e.command, e.exit_code) for e in events] == [("sh", 130)]


def test_json_round_trip() -> None:
    events, _ = parse(SCRIPT_TRACE, root_cwd="/w")
    for event in events:
        data = event.to_json()
        assert set(data) >= {"timestamp", "pid", "ppid", "command", "args", "cwd",
                             "exit_code", "duration", "signal"}
        assert data["timestamp"].endswith("+00:00")
        back = ExecEvent.from_json(data)
        assert back.argv == event.argv and back.signal == event.signal
        assert back.timestamp == pytest.approx(event.timestamp, abs=1e-6)
        assert back.duration == event.duration


def test_without_strace_the_command_runs_bare(tmp_path: Path) -> None:
    tracer = Tracer(None)
    assert not tracer.enabled and "strace" in (tracer.reason or "")
    argv = [sys.executable, "-c", "raise SystemExit(4)"]
    assert tracer.wrap(argv, tmp_path / "t") == argv
    result = tracer.run(argv)
    assert (result.returncode, result.events, result.traced) == (4, [], False)


# ---------------------------------------------------------------- real strace

needs_strace = pytest.mark.skipif(strace_available() is None, reason="strace is not installed")


@pytest.fixture(scope="module")
def tracer() -> Tracer:
    t = Tracer.detect()
    if not t.enabled:
        pytest.skip(f"tracing unavailable here: {t.reason}")
    return t


SCRIPT = r"""
/bin/true
sh -c 'exit 3'
cd sub && /bin/pwd >/dev/null
/bin/echo "a b \"q\" 'x'
nl" "$(printf 'z\377y')" >/dev/null
/bin/echo background >/dev/null &
wait
if command -v git >/dev/null; then git --version >/dev/null; fi
sh -c 'kill -9 $$'
exit 0
"""


@needs_strace
def test_real_trace_of_a_shell_script(tracer: Tracer, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "s.sh").write_text(SCRIPT)
    started: list[ExecEvent] = []
    ended: list[ExecEvent] = []
    result = tracer.run(["sh", "s.sh"], cwd=tmp_path, on_exec=started.append,
                        on_exit=ended.append)
    assert result.traced and result.returncode == 0
    events = result.events
    assert len(started) == len(ended) == len(events)

    root = events[0]
    assert root.argv == ["sh", "s.sh"] and root.cwd == str(tmp_path)
    assert root.exit_code == 0 and root.ppid > 0
    children = events[1:]
    assert all(e.ppid == root.pid for e in children), [(e.argv, e.ppid) for e in children]
    # `sh -c 'exit 3'` runs as the shell's child, `kill -9 $$` likewise
    got = [(e.argv, e.cwd, e.exit_code, e.signal) for e in children if e.command != "git"]
    sub = str(tmp_path / "sub")
    assert got == [
        (["/bin/true"], str(tmp_path), 0, None),
        (["sh", "-c", "exit 3"], str(tmp_path), 3, None),
        (["/bin/pwd"], sub, 0, None),
        (["/bin/echo", "a b \"q\" 'x'\nnl", "z\udcffy"], sub, 0, None),
        (["/bin/echo", "background"], sub, 0, None),
        (["sh", "-c", "kill -9 $$"], sub, None, "SIGKILL"),
    ]
    if shutil.which("git"):
        git = next(e for e in children if e.command == "git")
        assert (git.args, git.exit_code) == (["--version"], 0)
    for e in events:
        assert e.end is not None and e.duration is not None and e.duration >= 0


@needs_strace
def test_exit_status_passes_through_strace(tracer: Tracer, tmp_path: Path) -> None:
    out = tmp_path / "trace.log"
    code = subprocess.run(tracer.wrap(["sh", "-c", "exit 3"], out)).returncode
    assert code == 3
    assert "exited with 3" in out.read_text()
    killed = tracer.run(["sh", "-c", "kill -9 $$"])
    assert killed.returncode == -signal.SIGKILL
    assert [(e.signal, e.exit_code) for e in killed.events] == [("SIGKILL", None)]


@needs_strace
def test_terminal_streams_stay_with_the_command(tracer: Tracer, tmp_path: Path) -> None:
    """stdin/stdout/stderr are the command's own; strace's record goes to the file only."""
    argv = tracer.wrap(["sh", "-c", "cat; echo err >&2"], tmp_path / "t.log")
    proc = subprocess.run(argv, input=b"hello\n", capture_output=True)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"hello\n", b"err\n")
    assert "execve(" in (tmp_path / "t.log").read_text()
