"""Process starts without strace (``sources/trace/procs.py``), on real processes: the command
itself always, and with psutil what runs under it. No timing assertions: a test waits (with a
bound) for a process it keeps alive until it has been seen."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ctrlz.sources.trace import ExecEvent, ProcessSampler, Tracer

from .conftest import wait_for

psutil = pytest.importorskip("psutil")


def test_the_command_and_what_runs_under_it_are_recorded(tmp_path: Path) -> None:
    started: list[ExecEvent] = []
    lock = threading.Lock()

    def on_exec(event: ExecEvent) -> None:
        with lock:
            started.append(event)

    gate = tmp_path / "gate"
    argv = ["sh", "-c", f"sleep 30 & while [ ! -e {gate} ]; do sleep 0.01; done; kill $!"]
    proc = subprocess.Popen(argv, cwd=tmp_path)
    sampler = ProcessSampler(proc.pid, argv, str(tmp_path), on_exec=on_exec)
    sampler.start()
    assert wait_for(lambda: any(e.argv[:2] == ["sleep", "30"] for e in list(started)), 30)
    gate.touch()
    events = sampler.stop(proc.wait())
    root = [e for e in events if e.pid == proc.pid]
    assert len(root) == 1 and root[0].argv == argv and root[0].exit_code == 0
    assert root[0].cwd == str(tmp_path) and root[0].command == "sh"
    sleep = [e for e in events if e.argv[:2] == ["sleep", "30"]]
    assert len(sleep) == 1 and sleep[0].ppid == proc.pid and sleep[0].end is not None
    assert sleep[0].exit_code is None  # not our child: its status is not ours to read


def test_a_command_killed_by_a_signal_says_which(tmp_path: Path) -> None:
    proc = subprocess.Popen(["sleep", "30"])
    sampler = ProcessSampler(proc.pid, ["sleep", "30"], str(tmp_path))
    proc.kill()
    [event] = sampler.stop(proc.wait())
    assert event.signal == "SIGKILL" and event.exit_code is None


def test_without_psutil_only_the_command_is_recorded(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['psutil'] = None\n"
            "from ctrlz.sources.trace import Tracer\n"
            "t = Tracer(None, sample=True)\n"
            "assert not t.sampling\n"
            "r = t.run(['sh', '-c', 'true; exit 3'])\n"
            "print(r.returncode, [e.command for e in r.events], r.traced)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path, env=os.environ).stdout
    assert out.strip() == "3 ['sh'] False"


def test_a_tracer_without_strace_samples_and_one_asked_not_to_does_not(tmp_path: Path) -> None:
    sampled = Tracer(None, sample=True)
    assert sampled.sampling and not sampled.enabled
    result = sampled.run(["sh", "-c", "exit 0"], cwd=tmp_path)
    assert not result.traced and [e.command for e in result.events] == ["sh"]
    bare = Tracer(None)  # --no-trace, disable_exec
    assert not bare.sampling and bare.run(["true"], cwd=tmp_path).events == []
