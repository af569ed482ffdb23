"""What ``ctrlz run --sandbox`` costs over a plain ``ctrlz run`` (issue 42's benchmarks).

Three workloads, each run through ``ctrlz run`` plain, ``--sandbox=landlock`` and
``--sandbox=bwrap`` in turn, with the tracer and without it (``--no-trace``), and
``--sandbox=landlock`` through the Python launcher (``landlock-py``: where no C compiler built
``ctrlz-sandbox``, refusals are then the tracer's), all interleaved so that a busy machine
slows them alike, median of ``--repeat`` rounds:

- start-up: ``true`` (the target: at most 30 ms over plain);
- build-like: copy four stdlib packages into the workspace and byte-compile them;
- ``git status`` twenty times in a small repository.

The build-like and git ratios are the target of at most 1.1x. Each ``ctrlz run`` includes its
pre-run and post-run snapshots, the same for all three. The workspace daemon (which a
sandboxed run starts, for the hooks) is started once beforehand, so that no row pays for it.

``--path N`` also times, in this process, what a sandboxed start differs in (the policy, the
daemon's answer, the spec, the launcher chain under strace, reading the refusals) against a
plain ``strace true``, N interleaved rounds: whole runs move by more than that on a busy
machine.

Run: ``.venv/bin/python bench/sandbox.py [--repeat N] [--traced-only] [--only WORKLOAD]
[--path N]``
(``make bench`` runs it after ``bench/run.py``). The load average is printed before and after:
on a shared machine, a figure taken under a higher load is worth less.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

CTRLZ = [sys.executable, "-P", "-c", "import sys; del sys.argv[0]; from ctrlz.cli import main; "
         "sys.exit(main())", "ctrlz"]
MODES = {"plain": [], "landlock": ["--sandbox=landlock"], "bwrap": ["--sandbox=bwrap"],
         "landlock-py": ["--sandbox=landlock"]}
#: the same without the tracer, to tell the sandbox's own cost from the tracer's
UNTRACED = {"plain-nt": ["--no-trace"], "landlock-nt": ["--no-trace", "--sandbox=landlock"],
            "bwrap-nt": ["--no-trace", "--sandbox=bwrap"]}
#: the environment a mode adds: landlock-py starts the Python launcher
ENV = {"landlock-py": {"CTRLZ_SANDBOX_NATIVE": "0"}}
STDLIB = Path(sysconfig.get_paths()["stdlib"])
PACKAGES = ("json", "email", "http", "logging")
BUILD = ("rm -rf build && mkdir build && "
         + " && ".join(f"cp -r {STDLIB / p} build/" for p in PACKAGES)
         + f" && {sys.executable} -m compileall -q build")
GIT = "for i in $(seq 20); do git status --short >/dev/null; done"


def load() -> str:
    return " ".join(f"{n:.2f}" for n in os.getloadavg())


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds (user + system) of the processes ``ctrlz run`` waited
    for: itself, strace, the launcher, bwrap and the command (not the daemon's snapshots,
    the same in every mode). On a busy machine the CPU figure is the steadier one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[-4:])} failed: {proc.stderr.strip()[-400:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def sandbox_path(ws: Path, rounds: int) -> None:
    """Median and best wall time and median CPU time (this process and its children) of the
    sandbox's own start-up path, over a plain ``strace true``, per mechanism."""
    from ctrlz.cli.listing import open_here
    from ctrlz.session import daemon_client
    from ctrlz.session.run.sandboxing import SandboxOptions, prepare
    from ctrlz.sources.trace.tracer import TRACED_SYSCALLS

    os.chdir(ws)
    workspace = open_here()
    strace = [shutil.which("strace") or "strace", "-f", "--seccomp-bpf", "-q", "-e",
              f"trace={TRACED_SYSCALLS}", "-o", os.devnull]

    def clock() -> tuple[float, float]:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.perf_counter(), me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    def once(mode: str) -> tuple[float, float]:
        wall, cpu = clock()
        if mode == "plain":
            subprocess.run([*strace, "true"], check=True)
        else:
            plan = prepare(workspace, ["true"], SandboxOptions(mode=mode))
            daemon_client.wait_ready(workspace.store_path, 30)
            plan.start("bench")
            subprocess.run([*strace, *plan.wrap(["true"])], check=True)
            plan.refusal()
            plan.refused()
            plan.close()
        wall2, cpu2 = clock()
        return wall2 - wall, cpu2 - cpu

    modes = ["plain", "landlock", "bwrap"]
    for mode in modes:
        once(mode)
    got: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:
            got[mode].append(once(mode))
    def over(mode: str, index: int, pick: Callable[..., float]) -> float:
        return 1000 * (pick(r[index] for r in got[mode]) - pick(r[index] for r in got["plain"]))

    print(f"the sandbox's own start-up path over a plain strace true, {rounds} rounds:")
    for mode in modes[1:]:
        median, best = over(mode, 0, statistics.median), over(mode, 0, min)
        cpu = over(mode, 1, statistics.median)
        print(f"  {mode:<9} wall median +{median:.1f} ms, best +{best:.1f} ms, "
              f"CPU median +{cpu:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--traced-only", action="store_true",
                        help="leave out the --no-trace rows")
    parser.add_argument("--only", choices=["start-up", "build-like", "git"], action="append",
                        help="run only this workload (repeatable)")
    parser.add_argument("--path", type=int, default=0, metavar="N",
                        help="also time the sandbox's own start-up path, N rounds")
    args = parser.parse_args(argv)
    from ctrlz.sandbox.probe import support

    info = support()
    every = {**MODES, **({} if args.traced_only else UNTRACED)}
    modes = {m: a for m, a in every.items()
             if m.startswith("plain") or not getattr(info, f"{m.split('-')[0]}_reason")}
    base = Path(tempfile.mkdtemp(prefix="ctrlz-bench-sbx-", dir="/var/tmp"))
    try:
        ws = base / "ws"
        ws.mkdir()
        env = {**os.environ, "CTRLZ_HOME": str(base / "home"), "TMPDIR": str(base / "tmp")}
        (base / "tmp").mkdir()
        subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
        for n in range(200):
            (ws / f"f{n}.txt").write_text(f"{n}\n")
        subprocess.run(["git", "add", "-A"], cwd=ws, check=True)
        subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm",
                        "base"], cwd=ws, check=True)
        subprocess.run([*CTRLZ, "init"], cwd=ws, env=env, check=True, capture_output=True)
        subprocess.run([*CTRLZ, "daemon", "start", "--wait"], cwd=ws, env=env, capture_output=True)
        workloads = {"start-up (true)": ["true"], "build-like": ["sh", "-c", BUILD],
                     "git status x20": ["sh", "-c", GIT]}
        if args.only:
            workloads = {k: v for k, v in workloads.items()
                         if k.split(" ")[0].startswith(tuple(args.only))}
        print(f"load average {load()}")
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for name, command in workloads.items():
            for mode, extra in modes.items():  # one warm-up each
                timed([*CTRLZ, "run", *extra, "--", *command], ws, {**env, **ENV.get(mode, {})})
            for _ in range(args.repeat):
                for mode, extra in modes.items():
                    times.setdefault((name, mode), []).append(
                        timed([*CTRLZ, "run", *extra, "--", *command], ws,
                              {**env, **ENV.get(mode, {})}))
        for index, what in enumerate(("wall", "cpu (user+sys)")):
            print(f"{what}, median of {args.repeat}")
            print(f"{'workload':<18}" + "".join(f"{m:>12}" for m in modes) + "   over plain")
            for name in workloads:
                medians = {m: statistics.median(t[index] for t in times[(name, m)])
                           for m in modes}
                over = ", ".join(
                    f"{m} +{1000 * (medians[m] - medians[plain]):.0f} ms "
                    f"({medians[m] / medians[plain]:.2f}x)" for m in modes
                    if not m.startswith("plain")
                    for plain in ["plain-nt" if m.endswith("-nt") else "plain"])
                print(f"{name:<18}" + "".join(f"{medians[m]:>11.3f}s" for m in modes)
                      + f"   {over}")
        if args.path:
            os.environ.update(CTRLZ_HOME=env["CTRLZ_HOME"], TMPDIR=env["TMPDIR"])
            sandbox_path(ws, args.path)
        print(f"load average {load()}")
        subprocess.run([*CTRLZ, "daemon", "stop"], cwd=ws, env=env, capture_output=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
