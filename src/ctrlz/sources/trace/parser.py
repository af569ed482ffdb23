"""Parsing strace's ``-f -ttt -y`` output into :class:`~.events.ExecEvent` records.

Pure: no I/O and no processes, one line at a time, so it is unit-tested with recorded lines.
:mod:`.cstrings` decodes strace's C string literals (exec paths, argv, chdir targets);
:class:`StraceParser` is the state machine over processes, threads, clones, execs and exits,
and hands each failed write-intent call to :func:`.denials.denial` when asked to.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .cstrings import unescape_c_string
from .denials import Denial, denial, is_write_syscall
from .events import ExecCallback, ExecEvent

_CLONES = frozenset({"clone", "clone3", "fork", "vfork"})
_EXECS = frozenset({"execve", "execveat"})


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


# -- the parser -------------------------------------------------------------------------


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
    * With ``on_denial`` set, a write-intent call that a sandbox refused (:mod:`.denials`)
      is handed to it, with the program the process runs and its cwd; ``writable`` roots
      are the places whose refusals are not the sandbox's.
    """

    root_cwd: str | None = None
    root_ppid: int = 0
    on_exec: ExecCallback | None = None
    on_exit: ExecCallback | None = None
    on_denial: Callable[[Denial], None] | None = None
    writable: tuple[str, ...] = ()
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
        call = text[:cut].rstrip()
        args = call[call.find("(") + 1:]
        group = self._group(pid)
        proc = self._procs.get(group)
        if ret < 0:  # failed: no exec, no child, no chdir; perhaps a refused write
            if self.on_denial is not None and is_write_syscall(name):
                self._denied(pid, ts, name, args, text[cut + 3:], proc)
            return
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

    def _denied(self, pid: int, ts: float, name: str, args: str, result: str,
                proc: _Process | None) -> None:
        assert self.on_denial is not None
        if args.endswith(")"):
            args = args[:-1]
        exe = proc.current.command if proc is not None and proc.current is not None else None
        found = denial(pid, ts, name, args, result, cwd=proc.cwd if proc else None, exe=exe,
                       writable=self.writable)
        if found is not None:
            self.on_denial(found)

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
