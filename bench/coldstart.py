"""Cold start and hook latency: what a person or an agent waits for on every call.

Each row is a whole process, timed from spawn to exit, many times (hyperfine-style: median and
p95 of ``runs`` runs after one warm-up), on the source tree of ``make bench``:

- ``ctrlz --version`` and ``ctrlz --help`` (targets: <= 40 ms);
- ``ctrlz list`` in that tree with a few snapshots (target: <= 60 ms);
- the Claude Code ``PreToolUse`` hook for an ``Edit``, run exactly as ``ctrlz install claude``
  registers it (``sh -c`` the installed command, ``ctrlz-hook`` found on PATH), with the
  workspace daemon running and without it (``CTRLZ_DAEMON=0``) (target: <= 60 ms p95). The
  edited file is rewritten (untimed) before each call, so each call captures new bytes;
- ``python -c pass``: the interpreter's own start-up, the floor under all of them.

Every call must exit 0 and leave no hook error in the store. Run alone with
``.venv/bin/python bench/coldstart.py [--runs N] [--tree DIR]``; ``bench/run.py`` calls
:func:`coldstart_bench` and prints :func:`coldstart_table`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
CTRLZ = str(BIN / "ctrlz")
TARGETS = {"ctrlz --version": 0.040, "ctrlz --help": 0.040, "ctrlz list": 0.060,
           "Edit hook, daemon running": 0.060, "Edit hook, no daemon": 0.060}


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[18] if len(xs) > 1 else xs[0]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTRLZ_")}
    return env | {"CTRLZ_HOME": str(home), "PATH": f"{BIN}:{env.get('PATH', '')}"} | extra


def _time(cmd: list[str], env: dict[str, str], cwd: Path, runs: int,
          before: object = None, stdin: object = None) -> list[float]:
    """``runs`` timings of ``cmd`` after one untimed warm-up; ``before(i)`` runs untimed
    before each call and ``stdin(i)`` gives its input."""
    times = []
    for i in range(runs + 1):
        if before:
            before(i)  # type: ignore[operator]
        data = stdin(i) if stdin else None  # type: ignore[operator]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, cwd=cwd, input=data, capture_output=True)
        dt = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd} exited {proc.returncode}: {proc.stderr[-400:]!r}")
        if i:
            times.append(dt)
    return times


def _hook_errors(home: Path) -> int:
    return sum(sum(1 for line in p.read_text().splitlines() if line.strip())
               for p in home.rglob("hook-errors.jsonl"))


def coldstart_bench(tree: Path, work: Path, runs: int = 40) -> dict[str, object]:
    """The rows of the module docstring, on a private copy of ``tree``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from ctrlz.installers.specs import hook_command

    ws = work / "coldstart-ws"
    shutil.rmtree(ws, ignore_errors=True)
    shutil.copytree(tree, ws, symlinks=True)
    src = Path(__file__).resolve().parent.parent / "src"  # byte-compiled, as a wheel install is
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=False)
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="ctrlz-bench-cold-") as tmp:
        home = Path(tmp)
        env = _env(home)
        for cmd in (["init"], ["snapshot", "-m", "one"], ["snapshot", "-m", "two"]):
            subprocess.run([CTRLZ, *cmd], env=env, cwd=ws, check=True, capture_output=True)
        times["python -c pass (floor)"] = _time([sys.executable, "-c", "pass"], env, ws, runs)
        for args in (["--version"], ["--help"], ["list"]):
            times["ctrlz " + " ".join(args)] = _time([CTRLZ, *args], env, ws, runs)
        # a source file agents edit: README.md wherever the tree keeps it (git's tarball
        # unpacks into git-2.39.5/), else the first regular file
        target = next(iter(sorted(ws.rglob("README.md"))), None) or next(
            p for p in sorted(ws.rglob("*")) if p.is_file() and not p.is_symlink())
        original = target.read_bytes()

        def rewrite(i: int) -> None:
            target.write_bytes(original + f"\nedit {i} {time.time_ns()}\n".encode())

        def edit(i: int) -> bytes:
            return json.dumps({
                "session_id": "bench-cold-0001", "transcript_path": str(ws / ".t.jsonl"),
                "cwd": str(ws), "permission_mode": "default", "hook_event_name": "PreToolUse",
                "tool_name": "Edit", "tool_use_id": f"toolu_cold{i:05d}{time.time_ns()}",
                "tool_input": {"file_path": str(target), "old_string": "edit",
                               "new_string": "change"}}).encode()

        hook = ["sh", "-c", hook_command("claude")]
        session = json.dumps({"session_id": "bench-cold-0001", "cwd": str(ws),
                              "transcript_path": str(ws / ".t.jsonl"),
                              "hook_event_name": "SessionStart", "source": "startup"}).encode()
        subprocess.run(hook, input=session, env=env, cwd=ws, check=True, capture_output=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            out = subprocess.run([CTRLZ, "daemon", "status", "--json"], env=env, cwd=ws,
                                 capture_output=True, text=True).stdout
            if out and json.loads(out).get("running"):
                break
            time.sleep(0.2)
        times["Edit hook, daemon running"] = _time(hook, env, ws, runs, rewrite, edit)
        subprocess.run([CTRLZ, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
        times["Edit hook, no daemon"] = _time(hook, _env(home, CTRLZ_DAEMON="0"), ws, runs,
                                              rewrite, edit)
        errors = _hook_errors(home)
    shutil.rmtree(ws, ignore_errors=True)
    return {"runs": runs, "times": times, "hook_errors": errors,
            "median": {k: statistics.median(v) for k, v in times.items()},
            "p95": {k: p95(v) for k, v in times.items()}}


def coldstart_table(res: dict[str, object]) -> str:
    med: dict[str, float] = res["median"]  # type: ignore[assignment]
    q95: dict[str, float] = res["p95"]  # type: ignore[assignment]
    lines = ["### cold start and hook latency (source tree)", "",
             f"Whole processes, {res['runs']} runs each after a warm-up; milliseconds.", "",
             "| command | median | p95 | target | |", "|---|---:|---:|---:|---|"]
    for name in med:
        limit = TARGETS.get(name)
        # the hook target is on the p95; the commands' on the typical (median) run
        value = q95[name] if name.startswith("Edit hook") else med[name]
        verdict = "" if limit is None else ("**PASS**" if value <= limit else "**MISS**")
        lines.append(f"| `{name}` | {med[name] * 1000:.1f} | {q95[name] * 1000:.1f} | "
                     + (f"{limit * 1000:.0f}" if limit else "") + f" | {verdict} |")
    lines += ["", f"Hook errors recorded: {res['hook_errors']}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--tree", type=Path, default=None,
                   help="the tree to run in (default: make bench's source tree)")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = p.parse_args(argv)
    tree = args.tree
    if tree is None:
        from trees import source_tree

        tree = source_tree(args.out).root
    res = coldstart_bench(tree, args.out, args.runs)
    (args.out / "coldstart.json").write_text(json.dumps(res, indent=2))
    print(coldstart_table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
