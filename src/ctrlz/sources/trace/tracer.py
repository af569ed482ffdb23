"""Running a command under strace: probing what works here, the command line, the run.

Why strace: on Linux, ptrace is the only unprivileged way to see every exec of a process
tree (eBPF and the audit subsystem need root). A tracer may trace its own child without
privileges, so ``strace -f -- CMD`` works for any user. ``--seccomp-bpf`` installs a filter
in the tracee so that only the few syscalls we ask for stop it; everything else runs at
full speed, which keeps the overhead low.

Under ``ctrlz run --sandbox`` (``denials=True``) the write-intent syscalls are traced too, and
the ones a sandbox refused become :class:`~.denials.Denial` records (:mod:`.denials` says why
without strace's ``-Z``). That costs a stop per open, so it is on only when asked for.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ... import platform
from .denials import WRITE_SYSCALLS, Denial
from .events import ExecCallback, ExecEvent
from .follower import TraceFollower
from .parser import StraceParser
from .procs import ProcessSampler, psutil_module

#: Syscalls that matter for an exec log. ``?`` makes strace skip names this architecture
#: lacks (arm64 has no fork/vfork) instead of refusing to start.
TRACED_SYSCALLS = "execve,?execveat,clone,?clone3,?fork,?vfork,chdir,fchdir"


#: Refused writes kept per run: an agent retrying a refused write in a loop must not grow
#: the run's memory and the session database without end; the rest are counted.
MAX_DENIALS = 10_000


def strace_available() -> str | None:
    """Path of the ``strace`` binary on PATH, or None (also where :mod:`ctrlz.platform` says
    there is no exec tracing: not Linux, or ``CTRLZ_PLATFORM=portable``)."""
    return platform.tracer()


@dataclass(frozen=True)
class TraceResult:
    """What :meth:`Tracer.run` saw. ``returncode`` is as :class:`subprocess.Popen` reports
    it (negative: killed by that signal). When ``traced`` is False, ``events`` holds what
    :mod:`.procs` saw (the command, and what psutil found under it), or nothing."""

    returncode: int
    events: list[ExecEvent]
    traced: bool
    reason: str | None = None
    #: the writes a sandbox refused, in order (only with ``Tracer(..., denials=True)``), the
    #: first :data:`MAX_DENIALS` of them; how many more there were
    denials: list[Denial] = field(default_factory=list)
    denials_dropped: int = 0


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

    ``denials``: also record the writes a sandbox refuses (the module docstring);
    ``writable``: the roots the sandbox lets the command write, whose refusals (a file mode)
    are not the sandbox's and are left out.
    """

    def __init__(self, strace: str | None, *, max_string: int = 4096, denials: bool = False,
                 writable: Sequence[str | os.PathLike[str]] = (), sample: bool = False) -> None:
        self.strace = strace
        #: where strace cannot run, record the command and, with psutil, the processes seen
        #: under it (:mod:`.procs`); off for a run asked not to trace
        self.sample = sample
        self.max_string = max_string
        self.denials = denials
        self.writable = tuple(os.path.realpath(p) for p in writable)

    @classmethod
    def detect(cls, *, max_string: int = 4096, denials: bool = False,
               writable: Sequence[str | os.PathLike[str]] = ()) -> Tracer:
        return cls(strace_available(), max_string=max_string, denials=denials,
                   writable=writable, sample=True)

    @property
    def syscalls(self) -> str:
        """strace's ``trace=`` set: the exec log's, and the write-intent calls with denials."""
        return f"{TRACED_SYSCALLS},{WRITE_SYSCALLS}" if self.denials else TRACED_SYSCALLS

    def _state(self) -> tuple[tuple[str, ...] | None, str | None]:
        if self.strace is None:
            return None, platform.no_tracer_reason()
        return _probe(self.strace)

    @property
    def enabled(self) -> bool:
        return self._state()[0] is not None

    @property
    def reason(self) -> str | None:
        """Why tracing is off, or None when it is on."""
        return self._state()[1]

    @property
    def sampling(self) -> bool:
        """Whether, tracing being off, process starts are looked for with psutil."""
        return not self.enabled and self.sample and psutil_module() is not None

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
                "-e", f"trace={self.syscalls}", "-e", "signal=!SIGCHLD",
                "-o", os.fspath(output), "--", *argv]

    def run(self, argv: Sequence[str], *, cwd: str | os.PathLike[str] | None = None,
            env: dict[str, str] | None = None, on_exec: ExecCallback | None = None,
            on_exit: ExecCallback | None = None,
            trace_file: str | os.PathLike[str] | None = None,
            on_denial: Callable[[Denial], None] | None = None) -> TraceResult:
        """Run ``argv`` to completion on this terminal, recording every exec.

        Callbacks run on the follower thread. Ctrl-C reaches the command through the
        terminal's process group; we keep waiting so its exit is recorded. Note that strace
        (and so this call) returns only once every traced process has exited, including
        background processes the command left behind. ``trace_file`` keeps the raw strace
        output at that path; by default a temporary file is used and removed. With
        ``denials``, each refused write is also handed to ``on_denial`` as it is read.
        """
        workdir = os.fspath(cwd) if cwd is not None else os.getcwd()
        if not self.enabled:
            proc = subprocess.Popen(list(argv), cwd=workdir, env=env)
            if not self.sample:
                return TraceResult(_wait(proc), [], traced=False, reason=self.reason)
            sampler = ProcessSampler(proc.pid, argv, workdir, on_exec=on_exec, on_exit=on_exit)
            sampler.start()
            returncode = -1
            try:
                returncode = _wait(proc)
            finally:
                events = sampler.stop(returncode)
            return TraceResult(returncode, events, traced=False, reason=self.reason)
        if trace_file is None:
            fd, path = tempfile.mkstemp(prefix="ctrlz-trace-", suffix=".log")
            os.close(fd)
        else:
            path = os.fspath(trace_file)
            Path(path).touch()
        try:
            refused: list[Denial] = []
            dropped = [0]

            def denied(found: Denial) -> None:
                if len(refused) >= MAX_DENIALS:
                    dropped[0] += 1
                    return
                refused.append(found)
                if on_denial is not None:
                    on_denial(found)

            parser = StraceParser(root_cwd=os.path.abspath(workdir), on_exec=on_exec,
                                  on_exit=on_exit, on_denial=denied if self.denials else None,
                                  writable=self.writable)
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
        return TraceResult(returncode, events, traced=True, denials=refused,
                           denials_dropped=dropped[0])


def _wait(proc: subprocess.Popen[bytes]) -> int:
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue  # the command got the same SIGINT; its exit decides
