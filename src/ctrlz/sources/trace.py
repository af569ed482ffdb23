"""Exec tracing for ``ctrlz run``: every process a command starts, recorded through strace.

Why strace: on Linux, ptrace is the only unprivileged way to see every exec of a process
tree (eBPF and the audit subsystem need root). A tracer may trace its own child without
privileges, so ``strace -f -- CMD`` works for any user. ``--seccomp-bpf`` installs a filter
in the tracee so that only the few syscalls we ask for stop it; everything else runs at
full speed, which keeps the overhead low.

The pieces, smallest first:

* :class:`ExecEvent` -- one exec, Moat's ExecEvent plus the exit signal.
* :class:`StraceParser` -- pure, line-at-a-time state machine over strace's ``-o`` output
  (no I/O), so it is unit-tested with recorded lines.
* :class:`TraceFollower` -- a thread tailing the ``-o`` file while the command runs.
* :class:`Tracer` -- probes strace once, builds the wrapped command line, and
  :meth:`Tracer.run` wires the three together. Without strace (or where ptrace is
  forbidden) it reports why in :attr:`Tracer.reason` and runs the command bare.

Why a regular file for ``-o`` rather than a FIFO: strace writes a line at a time, so a
file that we tail sees events promptly, and a file can never block strace (and with it the
traced command) if the reader is slow or has died. A FIFO could.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "ExecEvent",
    "StraceParser",
    "TraceFollower",
    "TraceResult",
    "Tracer",
    "strace_available",
    "unescape_c_string",
]

ExecCallback = Callable[["ExecEvent"], None]

#: Syscalls that matter for an exec log. ``?`` makes strace skip names this architecture
#: lacks (arm64 has no fork/vfork) instead of refusing to start.
TRACED_SYSCALLS = "execve,?execveat,clone,?clone3,?fork,?vfork,chdir,fchdir"

_CLONES = frozenset({"clone", "clone3", "fork", "vfork"})
_EXECS = frozenset({"execve", "execveat"})


def strace_available() -> str | None:
    """Path of the ``strace`` binary on PATH, or None."""
    return shutil.which("strace")


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class ExecEvent:
    """One successful exec, and how it ended.

    ``timestamp`` is when the exec syscall was entered (epoch seconds). An event ends when
    its process exits (``exit_code`` or ``signal`` set) or when the same process execs
    again: then ``end`` is the time of the next exec and ``exit_code``/``signal`` stay None,
    because the process lived on under a new program. ``ppid`` is the process that created
    this one (0 when unknown); it does not follow re-parenting to init after the parent
    dies. ``cwd`` is None when it could not be tracked.
    """

    timestamp: float
    pid: int
    ppid: int
    command: str
    args: list[str]
    argv: list[str]
    cwd: str | None
    exit_code: int | None = None
    signal: str | None = None
    end: float | None = None
    duration: float | None = None

    @property
    def running(self) -> bool:
        return self.end is None

    def ended(self, end: float | None, exit_code: int | None = None,
              signal: str | None = None) -> ExecEvent:
        """A copy closed at ``end``; ``end`` None means the trace stopped first."""
        duration = None if end is None else max(0.0, end - self.timestamp)
        return dataclasses.replace(self, end=end, exit_code=exit_code, signal=signal,
                                   duration=duration)

    def to_json(self) -> dict[str, Any]:
        """Stable keys for logs and the CLI (``argv`` added so :meth:`from_json` is lossless)."""
        return {
            "timestamp": _iso(self.timestamp),
            "pid": self.pid,
            "ppid": self.ppid,
            "command": self.command,
            "args": list(self.args),
            "argv": list(self.argv),
            "cwd": self.cwd,
            "exit_code": self.exit_code,
            "duration": self.duration,
            "signal": self.signal,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExecEvent:
        ts = datetime.fromisoformat(data["timestamp"]).timestamp()
        args = list(data.get("args") or [])
        argv = list(data.get("argv") or [data["command"], *args])
        duration = data.get("duration")
        return cls(timestamp=ts, pid=int(data["pid"]), ppid=int(data["ppid"]),
                   command=data["command"], args=args, argv=argv, cwd=data.get("cwd"),
                   exit_code=data.get("exit_code"), signal=data.get("signal"),
                   end=None if duration is None else ts + duration, duration=duration)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds")


# --------------------------------------------------------------------------- strings


_SIMPLE_ESCAPES = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "a": 7, "b": 8,
                   "\\": 92, '"': 34, "'": 39, "?": 63, "e": 27}
_OCTAL = frozenset("01234567")
_HEX = frozenset("0123456789abcdefABCDEF")


def unescape_c_string(body: str) -> str:
    """Decode the inside of one of strace's C string literals into text.

    strace prints unprintable bytes as ``\\n``-style escapes, octal (``\\377``, ``\\1``) or,
    with ``-x``, hex (``\\xff``). The bytes are decoded as UTF-8 with ``surrogateescape`` so
    non-UTF-8 arguments survive and ``os.fsencode`` gives the original bytes back.
    """
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch != "\\" or i + 1 >= n:
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _OCTAL:
            j = i + 1
            while j < n and j < i + 4 and body[j] in _OCTAL:
                j += 1
            out.append(int(body[i + 1:j], 8) & 0xFF)
            i = j
        elif nxt == "x" and i + 2 < n and body[i + 2] in _HEX:
            j = i + 2
            while j < n and j < i + 4 and body[j] in _HEX:
                j += 1
            out.append(int(body[i + 2:j], 16))
            i = j
        else:
            out.append(_SIMPLE_ESCAPES.get(nxt, ord(nxt) if nxt.isascii() else 63))
            i += 2
    return out.decode("utf-8", "surrogateescape")


def _read_string(text: str, start: int) -> tuple[str, int]:
    """Parse the C string literal whose opening quote is at ``start``.

    Returns the decoded string and the index just past it, skipping strace's ``...``
    truncation marker (the argument was longer than ``-s``; we keep the prefix).
    """
    i = start + 1
    n = len(text)
    while i < n and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    value = unescape_c_string(text[start + 1:i])
    i += 1
    if text.startswith("...", i):
        i += 3
    return value, i


def _exec_target(args: str) -> tuple[str, list[str]] | None:
    """Executable path and argv from the argument text of ``execve``/``execveat``."""
    q = args.find('"')
    if q < 0:
        return None
    path, i = _read_string(args, q)
    argv: list[str] = []
    n = len(args)
    while i < n and args[i] in ", ":
        i += 1
    if i < n and args[i] == "[":
        i += 1
        while i < n:
            c = args[i]
            if c == '"':
                value, i = _read_string(args, i)
                argv.append(value)
            elif c == "]":
                break
            else:
                i += 1  # separators, and the "..." strace prints for an abbreviated array
    return path, argv


# --------------------------------------------------------------------------- parser


_LINE = re.compile(r"(\d+)\s+(\d+(?:\.\d+)?)\s+(.*)")
_EXITED = re.compile(r"\+\+\+ exited with (\d+) \+\+\+")
_KILLED = re.compile(r"\+\+\+ killed by (SIG\w+|\d+)")
_RESUMED = re.compile(r"<\.\.\. (\w+) resumed>(.*)")
_CALL = re.compile(r"(\w+)\((.*)")
_FD_PATH = re.compile(r"\d+<(.*)>")
_CLONE_THREAD = re.compile(r"\bCLONE_THREAD\b")
_CLONE_PARENT = re.compile(r"\bCLONE_PARENT\b")


@dataclass
class _Process:
    ppid: int
    cwd: str | None
    current: ExecEvent | None = None


@dataclass
class _Pending:
    name: str
    timestamp: float
    text: str


@dataclass
class StraceParser:
    """Turns strace ``-f -ttt`` output into :class:`ExecEvent` records, one line at a time.

    :meth:`feed` returns the events that completed with that line. ``on_exec`` is called
    as soon as an exec succeeds (the event has ``end`` None), ``on_exit`` when it ends --
    so a caller can react to "git commit started" and to the tree going idle.

    What is tracked, and how:

    * The first pid seen is the traced command; its parent is ``root_ppid`` and its working
      directory ``root_cwd``.
    * ``clone``/``clone3``/``fork``/``vfork`` returning a pid create a process whose parent
      is the caller's thread group (``CLONE_PARENT``: the caller's parent) and whose cwd is
      copied. ``CLONE_THREAD`` creates a thread: its lines count for its thread group.
    * With ``-f`` a child's first lines may arrive before its parent's clone returns. Lines
      of a pid nobody has created yet are held back and replayed once the clone returns.
    * A successful ``chdir`` updates the cwd (relative paths are joined and normalised
      lexically); ``fchdir`` uses the path strace prints with ``-y``, or else marks the cwd
      unknown. Working directory is per thread group; ``CLONE_FS`` sharing between separate
      processes is not modelled.
    * A failed exec is not an event (shells try each PATH entry in turn).
    """

    root_cwd: str | None = None
    root_ppid: int = 0
    on_exec: ExecCallback | None = None
    on_exit: ExecCallback | None = None
    _root: int | None = None
    _procs: dict[int, _Process] = field(default_factory=dict)
    _thread_group: dict[int, int] = field(default_factory=dict)
    _pending: dict[int, _Pending] = field(default_factory=dict)
    _unclaimed: dict[int, list[tuple[float, str]]] = field(default_factory=dict)

    # -- public

    def feed(self, line: str) -> list[ExecEvent]:
        """Consume one line of strace output; return the exec events it completed."""
        m = _LINE.match(line.strip())
        if not m:
            return []  # strace's own notices, blank lines
        pid, ts, body = int(m[1]), float(m[2]), m[3]
        done: list[ExecEvent] = []
        self._dispatch(pid, ts, body, done)
        return done

    def feed_lines(self, lines: Iterable[str]) -> list[ExecEvent]:
        done: list[ExecEvent] = []
        for line in lines:
            done += self.feed(line)
        return done

    def finish(self) -> list[ExecEvent]:
        """Close out the trace: processes still running end with ``end`` None.

        Lines of processes whose creation was never seen (their parent was killed inside
        ``clone``) are replayed with an unknown parent first.
        """
        done: list[ExecEvent] = []
        for pid, lines in list(self._unclaimed.items()):
            del self._unclaimed[pid]
            self._procs[pid] = _Process(ppid=0, cwd=None)
            for ts, body in lines:
                self._dispatch(pid, ts, body, done)
        for proc in self._procs.values():
            if proc.current is not None:
                done.append(self._close(proc, None, None, None))
        self._procs.clear()
        self._pending.clear()
        return done

    @property
    def running(self) -> list[ExecEvent]:
        """Exec events that have started and not yet ended."""
        return [p.current for p in self._procs.values() if p.current is not None]

    # -- machinery

    def _known(self, pid: int) -> bool:
        return pid in self._procs or pid in self._thread_group

    def _dispatch(self, pid: int, ts: float, body: str, done: list[ExecEvent]) -> None:
        if self._root is None:
            self._root = pid
            self._procs[pid] = _Process(ppid=self.root_ppid, cwd=self.root_cwd)
        if not self._known(pid):
            self._unclaimed.setdefault(pid, []).append((ts, body))
            return
        if body.startswith("+++"):
            self._exited(pid, ts, body, done)
        elif body.startswith("---"):
            return  # signal delivery
        elif body.startswith("<..."):
            m = _RESUMED.match(body)
            if m:
                pending = self._take_pending(pid, m[1])
                if pending is not None:
                    self._syscall(pid, pending.timestamp, pending.name, pending.text + m[2],
                                  done)
        else:
            m = _CALL.match(body)
            if not m:
                return
            if body.endswith("<unfinished ...>"):
                text = body[: -len("<unfinished ...>")].rstrip()
                self._pending[pid] = _Pending(m[1], ts, text)
            else:
                self._syscall(pid, ts, m[1], body, done)

    def _take_pending(self, pid: int, name: str) -> _Pending | None:
        pending = self._pending.pop(pid, None)
        if pending is not None:
            return pending
        # A non-leader thread that execs takes over the leader's pid; strace then reports
        # the resumed execve under the leader. Find the thread's half by thread group.
        group = self._group(pid)
        for tid, p in list(self._pending.items()):
            if p.name == name and self._group(tid) == group:
                return self._pending.pop(tid)
        return None

    def _group(self, pid: int) -> int:
        return self._thread_group.get(pid, pid)

    def _syscall(self, pid: int, ts: float, name: str, text: str,
                 done: list[ExecEvent]) -> None:
        cut = text.rfind(" = ")
        if cut < 0:
            return
        result = text[cut + 3:].split(None, 1)
        if not result:
            return
        try:
            ret = int(result[0], 0)
        except ValueError:
            return  # "= ?": the call did not return
        if ret < 0:
            return  # failed: no exec, no child, no chdir
        call = text[:cut].rstrip()
        args = call[call.find("(") + 1:]
        group = self._group(pid)
        proc = self._procs.get(group)
        if proc is None:
            return
        if name in _EXECS:
            self._exec(group, proc, ts, args, done)
        elif name in _CLONES:
            if ret > 0:
                self._cloned(group, proc, ret, args, done)
        elif name == "chdir":
            q = args.find('"')
            if q >= 0:
                path, _ = _read_string(args, q)
                base = proc.cwd
                if posixpath.isabs(path):
                    proc.cwd = posixpath.normpath(path)
                else:
                    proc.cwd = None if base is None else posixpath.normpath(
                        posixpath.join(base, path))
        elif name == "fchdir":
            m = _FD_PATH.match(args.rstrip(")").strip())
            proc.cwd = unescape_c_string(m[1]) if m else None

    def _exec(self, pid: int, proc: _Process, ts: float, args: str,
              done: list[ExecEvent]) -> None:
        target = _exec_target(args)
        if target is None:
            return
        path, argv = target
        if proc.current is not None:  # exec chain: the previous program ends here
            done.append(self._close(proc, ts, None, None))
        name = argv[0] if argv and argv[0] else path
        event = ExecEvent(timestamp=ts, pid=pid, ppid=proc.ppid,
                          command=posixpath.basename(name) or name,
                          args=argv[1:], argv=argv, cwd=proc.cwd)
        proc.current = event
        if self.on_exec is not None:
            self.on_exec(event)

    def _cloned(self, parent: int, proc: _Process, child: int, args: str,
                done: list[ExecEvent]) -> None:
        if _CLONE_THREAD.search(args):
            self._thread_group[child] = parent
        else:
            ppid = proc.ppid if _CLONE_PARENT.search(args) else parent
            self._procs[child] = _Process(ppid=ppid, cwd=proc.cwd)
        for ts, body in self._unclaimed.pop(child, []):
            self._dispatch(child, ts, body, done)

    def _exited(self, pid: int, ts: float, body: str, done: list[ExecEvent]) -> None:
        self._pending.pop(pid, None)
        if pid in self._thread_group:  # a thread ended, or was superseded by an exec
            del self._thread_group[pid]
            return
        exited = _EXITED.match(body)
        killed = _KILLED.match(body)
        if not exited and not killed:
            return  # "+++ superseded by execve ..." and the like
        proc = self._procs.pop(pid, None)
        if proc is None:
            return
        for tid in [t for t, g in self._thread_group.items() if g == pid]:
            del self._thread_group[tid]
        if proc.current is not None:
            if exited:
                done.append(self._close(proc, ts, int(exited[1]), None))
            else:
                done.append(self._close(proc, ts, None, killed[1] if killed else None))

    def _close(self, proc: _Process, ts: float | None, code: int | None,
               sig: str | None) -> ExecEvent:
        assert proc.current is not None
        event = proc.current.ended(ts, code, sig)
        proc.current = None
        if self.on_exit is not None:
            self.on_exit(event)
        return event


# --------------------------------------------------------------------------- follower


class TraceFollower(threading.Thread):
    """Tails strace's output file while the command runs and feeds the parser.

    Reads whatever is new, sleeps ``poll`` seconds at end of file, and after :meth:`stop`
    reads to the end once more, so nothing strace wrote before exiting is lost. Completed
    events accumulate in :attr:`events`. An exception from a callback stops the follower
    and is re-raised by :meth:`stop`.
    """

    def __init__(self, path: str | os.PathLike[str], parser: StraceParser,
                 poll: float = 0.05) -> None:
        super().__init__(name="ctrlz-trace-follower", daemon=True)
        self.path = Path(path)
        self.parser = parser
        self.poll = poll
        self.events: list[ExecEvent] = []
        self._stop_requested = threading.Event()
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._follow()
        except BaseException as exc:  # surfaced by stop()
            self._error = exc

    def _follow(self) -> None:
        tail = b""
        with open(self.path, "rb") as f:
            while True:
                stopping = self._stop_requested.is_set()
                chunk = f.read(1 << 16)
                if not chunk:
                    if stopping:
                        break
                    self._stop_requested.wait(self.poll)
                    continue
                lines = (tail + chunk).split(b"\n")
                tail = lines.pop()
                for raw in lines:
                    self.events += self.parser.feed(raw.decode("utf-8", "surrogateescape"))
        if tail:
            self.events += self.parser.feed(tail.decode("utf-8", "surrogateescape"))

    def stop(self) -> list[ExecEvent]:
        """Drain, close out still-running processes, and return every completed event."""
        self._stop_requested.set()
        self.join()
        if self._error is not None:
            raise self._error
        self.events += self.parser.finish()
        return self.events


# --------------------------------------------------------------------------- tracer


@dataclass(frozen=True)
class TraceResult:
    """What :meth:`Tracer.run` saw. ``returncode`` is as :class:`subprocess.Popen` reports
    it (negative: killed by that signal). ``events`` is empty when ``traced`` is False."""

    returncode: int
    events: list[ExecEvent]
    traced: bool
    reason: str | None = None


@functools.cache
def _probe(strace: str) -> tuple[tuple[str, ...] | None, str | None]:
    """Which flags work here: try ``--seccomp-bpf``, then plain ptrace, once per binary.

    Returns (flags, None) or (None, reason). Containers often forbid ptrace entirely, and
    old kernels or strace builds lack seccomp-bpf filtering.
    """
    true = shutil.which("true")
    probe_cmd = [true] if true else [sys.executable, "-c", "pass"]
    reason = "strace did not run"
    for extra in (("--seccomp-bpf",), ()):
        flags = ("-f", *extra)
        cmd = [strace, *flags, "-q", "-e", f"trace={TRACED_SYSCALLS}", "-o", os.devnull,
               "--", *probe_cmd]
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=10)
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"strace could not be started: {exc}"
        if proc.returncode == 0:
            return flags, None
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        reason = lines[0] if lines else f"strace exited with {proc.returncode}"
    return None, f"strace cannot trace here: {reason}"


class Tracer:
    """Launches a command under strace, or bare when tracing is impossible.

    ``Tracer.detect()`` finds strace on PATH. Probing happens once, lazily, and is cached
    per strace binary. When :attr:`enabled` is False, :attr:`reason` is a one-line
    explanation for the caller to print once, and :meth:`wrap` returns the argv unchanged.
    """

    def __init__(self, strace: str | None, *, max_string: int = 4096) -> None:
        self.strace = strace
        self.max_string = max_string

    @classmethod
    def detect(cls, *, max_string: int = 4096) -> Tracer:
        return cls(strace_available(), max_string=max_string)

    def _state(self) -> tuple[tuple[str, ...] | None, str | None]:
        if self.strace is None:
            return None, "strace not found; install strace to record the commands run"
        return _probe(self.strace)

    @property
    def enabled(self) -> bool:
        return self._state()[0] is not None

    @property
    def reason(self) -> str | None:
        """Why tracing is off, or None when it is on."""
        return self._state()[1]

    @property
    def seccomp(self) -> bool:
        """Whether the seccomp-bpf filter is in use (only traced syscalls stop the tracee)."""
        flags = self._state()[0]
        return flags is not None and "--seccomp-bpf" in flags

    def wrap(self, argv: Sequence[str], output: str | os.PathLike[str]) -> list[str]:
        """The command line to exec: ``argv`` under strace writing to ``output``.

        stdin, stdout and stderr are left to the command (strace's record goes only to
        ``output``); strace exits with the command's status, or re-raises the signal that
        killed it. ``-q`` rather than ``-qq``: ``-qq`` would drop the "exited with" lines.
        Signal lines are suppressed for SIGCHLD only, because strace prints "killed by SIGX"
        only for signals it is asked to show.
        """
        flags = self._state()[0]
        if flags is None:
            return list(argv)
        assert self.strace is not None
        return [self.strace, *flags, "-q", "-ttt", "-y", "-s", str(self.max_string),
                "-e", f"trace={TRACED_SYSCALLS}", "-e", "signal=!SIGCHLD",
                "-o", os.fspath(output), "--", *argv]

    def run(self, argv: Sequence[str], *, cwd: str | os.PathLike[str] | None = None,
            env: dict[str, str] | None = None, on_exec: ExecCallback | None = None,
            on_exit: ExecCallback | None = None,
            trace_file: str | os.PathLike[str] | None = None) -> TraceResult:
        """Run ``argv`` to completion on this terminal, recording every exec.

        Callbacks run on the follower thread. Ctrl-C reaches the command through the
        terminal's process group; we keep waiting so its exit is recorded. Note that strace
        (and so this call) returns only once every traced process has exited, including
        background processes the command left behind. ``trace_file`` keeps the raw strace
        output at that path; by default a temporary file is used and removed.
        """
        workdir = os.fspath(cwd) if cwd is not None else os.getcwd()
        if not self.enabled:
            return TraceResult(_wait(subprocess.Popen(list(argv), cwd=workdir, env=env)),
                               [], traced=False, reason=self.reason)
        if trace_file is None:
            fd, path = tempfile.mkstemp(prefix="ctrlz-trace-", suffix=".log")
            os.close(fd)
        else:
            path = os.fspath(trace_file)
            Path(path).touch()
        try:
            parser = StraceParser(root_cwd=os.path.abspath(workdir), on_exec=on_exec,
                                  on_exit=on_exit)
            proc = subprocess.Popen(self.wrap(argv, path), cwd=workdir, env=env)
            parser.root_ppid = proc.pid  # strace is the command's parent
            follower = TraceFollower(path, parser)
            follower.start()
            try:
                returncode = _wait(proc)
            finally:
                events = follower.stop()
        finally:
            if trace_file is None:
                os.unlink(path)
        events.sort(key=lambda e: (e.timestamp, e.pid))
        return TraceResult(returncode, events, traced=True)


def _wait(proc: subprocess.Popen[bytes]) -> int:
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue  # the command got the same SIGINT; its exit decides
