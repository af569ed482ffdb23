"""Session benchmarks: what ``ctrlz run`` costs a command, and what a watcher-fed snapshot costs.

1. ``ctrlz run`` overhead, end to end, as a ratio to running the same command bare, in a scratch
   workspace (``ctrlz init``, CTRLZ_HOME in a temporary directory outside it):
   - ``write``: a Python script writing 10,000 x 1 KiB files in 100 directories (target <= 1.3x);
   - ``procs``: ``sh -c 'for i in $(seq 1000); do /bin/true; done'`` (target <= 2x).
   Each is timed bare, under ``ctrlz run --no-trace`` (pre-run snapshot + watcher + post-run
   snapshot) and under ``ctrlz run`` (all that + strace), and ``ctrlz run [--no-trace] -- true``
   gives the fixed cost of a session (start-up, two snapshots, watcher and tracer set-up).
2. ``dirty``: in one process, on a copy of the 100,000-file tree, a snapshot taken after 100
   edits using the watcher's dirty set (what a session does), vs git's no-change snapshot
   (``add -A && commit``) on the same tree in the same run (target <= 0.1x).

Run it with the venv's interpreter: ``.venv/bin/python bench/session.py [--quick] [--repeat N]
[--only run|dirty]``; results go to ``bench/out/session.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import Git, run  # noqa: E402
from trees import small_tree, walk  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CTRLZ = str(Path(sys.executable).with_name("ctrlz"))

WRITE_SCRIPT = """\
import os, sys
root, n, rep = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pad = b"x" * 1024
for d in range(100):
    os.makedirs(os.path.join(root, f"d{d:02d}"), exist_ok=True)
for i in range(n):
    body = (f"file {i} rep {rep} ".encode() + pad)[:1024]
    with open(os.path.join(root, f"d{i % 100:02d}", f"f{i}.txt"), "wb") as fh:
        fh.write(body)
"""
PROCS_CMD = ["sh", "-c", "for i in $(seq 1000); do /bin/true; done"]
TARGETS = {"write": 1.3, "procs": 2.0, "dirty": 0.1}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def commit() -> str:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"],
                           capture_output=True, text=True).stdout.strip()
    return head + (" + uncommitted src/ changes" if dirty else "")


def ctrlz_env(home: Path) -> dict[str, str]:
    """The environment for a ctrlz under test: its own store and no user config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTRLZ_")}
    env["CTRLZ_HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / "xdg")
    return env


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def verdict(ratio: float, limit: float) -> str:
    return "PASS" if ratio <= limit else "MISS"


def big_tree(out: Path) -> Path:
    """A private copy of bench/run.py's 100,000-file tree (built by bench/trees.py if needed):
    this benchmark edits files, and run.py's tree must stay pristine. Existence means complete
    (the copy is renamed into place)."""
    dest = out / "session" / "tree100k"
    if dest.is_dir():
        return dest
    src = small_tree(out, 100_000).root
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(src), str(tmp)], check=True)
    tmp.rename(dest)
    return dest


def git_nochange(tree: Path, work: Path, repeat: int) -> list[float]:
    """git's no-change snapshot on ``tree``: the git dir is kept between runs (the first commit
    of 100k files takes ~40 s); one untimed catch-up commit, then ``repeat`` timed ones."""
    git = Git(tree, work)
    if not (git.work / "git" / "HEAD").is_file():
        git.reset()
    git.snapshot()  # catch up with whatever changed since the last run (untimed)
    os.sync()
    return [git.snapshot() for _ in range(repeat)]


# -- 1. ctrlz run overhead ---------------------------------------------------------------------


def bench_run(args: argparse.Namespace, work: Path) -> dict[str, object]:
    n_files = 1_000 if args.quick else 10_000
    with tempfile.TemporaryDirectory(prefix="ctrlz-bench-home-") as tmp:
        home = Path(tmp)
        ws = work / "ws"
        shutil.rmtree(ws, ignore_errors=True)
        ws.mkdir(parents=True)
        (ws / "README.md").write_text("scratch workspace for bench/session.py\n")
        env = ctrlz_env(home)
        run([CTRLZ, "init", str(ws)], env=env)
        script = work / "write_files.py"
        script.write_text(WRITE_SCRIPT)
        outdir = ws / "out"
        rep = 0
        # each run writes into a new directory name (the previous one is removed first, untimed,
        # then the disk is synced and left to settle): re-creating 10,000 files right where
        # 10,000 were just deleted was bimodally slow (0.4 s vs 3 s) on this ext4 volume

        def write_cmd() -> list[str]:
            return [sys.executable, "-S", str(script), str(outdir), str(n_files), str(rep)]

        modes: dict[str, list[str]] = {
            "bare": [],
            "ctrlz run --no-trace": [CTRLZ, "run", "--no-trace", "--"],
            "ctrlz run": [CTRLZ, "run", "--"],
        }
        results: dict[str, dict[str, list[float]]] = {}
        workloads = {"write": write_cmd, "procs": lambda: PROCS_CMD, "true": lambda: ["true"]}
        for _ in range(args.repeat):
            # interleave modes within a repetition, so load changes hit all of them alike
            for wname, cmd in workloads.items():
                for mname, prefix in modes.items():
                    if wname == "true" and mname == "bare":
                        continue
                    rep += 1
                    if outdir.exists():
                        shutil.rmtree(outdir)
                    outdir = ws / f"out{rep}"
                    os.sync()
                    time.sleep(args.settle)
                    dt, _ = run([*prefix, *cmd()], env=env, cwd=ws)
                    results.setdefault(wname, {}).setdefault(mname, []).append(dt)
        shutil.rmtree(outdir, ignore_errors=True)
        sessions = subprocess.run([CTRLZ, "sessions", "--json"], env=env, cwd=ws,
                                  capture_output=True, text=True).stdout
    return {"n_files": n_files, "times": results,
            "sessions": len(json.loads(sessions)) if sessions.strip().startswith("[") else None}


def print_run(res: dict[str, object]) -> list[dict[str, object]]:
    times: dict[str, dict[str, list[float]]] = res["times"]  # type: ignore[assignment]
    rows = []
    label = {"write": f"write {res['n_files']:,} x 1 KiB files",
             "procs": "1,000 x /bin/true", "true": "`true` (fixed session cost)"}
    print(f"\n{'workload':32} {'mode':22} {'median s':>9} {'min s':>7} {'max s':>7} "
          f"{'vs bare':>8} {'target':>7}")
    for wname, modes in times.items():
        bares = modes.get("bare", [])
        for mname, xs in modes.items():
            m = med(xs)
            # the median of per-repetition ratios: each case runs right after its bare twin, so
            # a noisy neighbour's burst (kernel time for file creation here varies 0.3-4 s for
            # the same 10,000 files) hits both sides of most ratios alike
            ratio = (med([x / b for x, b in zip(xs, bares, strict=True)])
                     if wname != "true" and bares else None)
            limit = TARGETS.get(wname) if mname == "ctrlz run" else None
            status = verdict(ratio, limit) if (ratio is not None and limit) else ""
            rows.append({"workload": label[wname], "mode": mname, "median_s": m,
                         "ratio": ratio, "target": limit, "status": status, "n": len(xs)})
            print(f"{label[wname]:32} {mname:22} {m:9.3f} {min(xs):7.3f} {max(xs):7.3f} "
                  f"{(f'{ratio:.2f}x' if ratio is not None else ''):>8} "
                  f"{(f'<={limit}x {status}' if limit else ''):>7}")
    return rows


# -- 2. dirty-set snapshot in the 100k tree ---------------------------------------------------


def bench_dirty(args: argparse.Namespace, work: Path) -> dict[str, object]:
    from ctrlz import Workspace
    from ctrlz.sources.watch import Watcher

    tree = big_tree(args.out)
    files = sorted(os.path.relpath(e.path, tree) for e in walk(tree) if e.is_file())
    originals: dict[str, bytes] = {}
    rng = random.Random(20260421)
    res: dict[str, object] = {"files": len(files)}
    with tempfile.TemporaryDirectory(prefix="ctrlz-bench-home-") as tmp:
        home = Path(tmp)
        os.environ.update(ctrlz_env(home))
        ws = Workspace.init(tree, home=home)
        watcher = None
        try:
            t0 = time.perf_counter()
            ws.snapshot(type="auto")
            res["first_s"] = time.perf_counter() - t0
            full = []
            for _ in range(max(1, min(args.repeat, 3))):
                os.sync()
                t0 = time.perf_counter()
                ws.snapshot(type="auto")
                full.append(time.perf_counter() - t0)
            res["full_nochange_s"] = full
            t0 = time.perf_counter()
            watcher = Watcher(tree, lambda rel, is_dir: False, lambda events: None)
            watcher.start()
            res["watch_start_s"] = time.perf_counter() - t0
            res["watched_dirs"] = watcher.watched_dirs
            watcher.take_dirty()  # whatever the snapshots above touched (nothing, normally)
            # as `ctrlz run` does: the stat cache stays in memory, written once at the end
            ws.repo.defer_statcache_writes = True
            dirty_t, dirty_n, hashed, rescans = [], [], [], 0
            full_after, full_hashed = [], []
            for r in range(args.repeat + 1):  # round 0 is a warm-up
                for rel in rng.sample(files, 100):
                    p = tree / rel
                    old = originals.setdefault(rel, p.read_bytes())
                    p.write_bytes(old + f"\n// session bench edit round {r} {time.time_ns()}\n"
                                  .encode())
                os.sync()
                t0 = time.perf_counter()
                dirty = watcher.take_dirty()
                ws.snapshot(type="auto", dirty=None if dirty.rescan_all else set(dirty.dirs))
                dt = time.perf_counter() - t0
                if r == 0:
                    continue
                dirty_t.append(dt)
                dirty_n.append(len(dirty.dirs))
                hashed.append(ws.last_scan.hashed)
                rescans += dirty.rescan_all
            # for comparison: the same 100 edits without a dirty set (a full stat walk, as a
            # separate process would take it: the stat cache written every time)
            ws.repo.flush_statcache()
            for r in range(max(1, min(args.repeat, 3))):
                for rel in rng.sample(files, 100):
                    p = tree / rel
                    old = originals.setdefault(rel, p.read_bytes())
                    p.write_bytes(old + f"\n// session bench full round {r}\n".encode())
                os.sync()
                t0 = time.perf_counter()
                ws.snapshot(type="auto")
                full_after.append(time.perf_counter() - t0)
                full_hashed.append(ws.last_scan.hashed)
                watcher.take_dirty()
            res.update(dirty_s=dirty_t, dirty_dirs=dirty_n, hashed=hashed, rescan_all=rescans,
                       full_after_edits_s=full_after, full_after_edits_hashed=full_hashed)
        finally:
            if watcher is not None:
                watcher.stop()
            ws.close()
            for rel, data in originals.items():  # put the copy back as it was
                (tree / rel).write_bytes(data)
    res["git_nochange_s"] = git_nochange(tree, work / "git100k", args.repeat)
    return res


def print_dirty(res: dict[str, object]) -> list[dict[str, object]]:
    git = med(res["git_nochange_s"])  # type: ignore[arg-type]
    rows = [
        ("git no-change snapshot (add -A + commit)", res["git_nochange_s"], None, ""),
        ("ctrlz first snapshot (in-process)", [res["first_s"]], None, ""),
        ("ctrlz no-change snapshot, full stat walk", res["full_nochange_s"], None, ""),
        ("ctrlz after 100 edits, full stat walk", res["full_after_edits_s"], None,
         f"hashed {med(res['full_after_edits_hashed']):.0f}"),
        ("ctrlz after 100 edits, watcher dirty set", res["dirty_s"], TARGETS["dirty"],
         f"{med(res['dirty_dirs']):.0f} dirty dirs, hashed {med(res['hashed']):.0f}, "
         f"rescan_all {res['rescan_all']}x"),
    ]
    out = []
    print(f"\n100k tree: {res['files']:,} files, {res['watched_dirs']:,} watched dirs "
          f"(watcher start {res['watch_start_s']:.1f} s, untimed)")
    print(f"{'operation':44} {'median s':>9} {'vs git':>8} {'target':>12}  notes")
    for name, xs, limit, note in rows:
        m = med(xs)  # type: ignore[arg-type]
        ratio = m / git
        status = verdict(ratio, limit) if limit else ""
        out.append({"operation": name, "median_s": m, "ratio": ratio, "target": limit,
                    "status": status, "n": len(xs), "notes": note})  # type: ignore[arg-type]
        print(f"{name:44} {m:9.3f} {ratio:7.3f}x "
              f"{(f'<={limit}x {status}' if limit else ''):>12}  {note}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="1,000 files instead of 10,000 in the write workload, 1 repetition")
    p.add_argument("--repeat", type=int, default=None, help="repetitions (default 5, quick 1)")
    p.add_argument("--only", choices=("run", "dirty"), action="append")
    p.add_argument("--settle", type=float, default=1.0,
                   help="seconds to wait after syncing, before each timed `ctrlz run` case")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = p.parse_args(argv)
    args.repeat = args.repeat or (1 if args.quick else 5)
    work = args.out / "session"
    work.mkdir(parents=True, exist_ok=True)
    which = args.only or ["run", "dirty"]
    report: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit(),
        "loadavg_start": loadavg(), "repeat": args.repeat, "quick": args.quick}
    print(f"ctrlz {report['commit']}, load average {report['loadavg_start']}, "
          f"repeat {args.repeat}", flush=True)
    if "run" in which:
        res = bench_run(args, work)
        report["run"] = res
        report["run_rows"] = print_run(res)
        print(f"sessions recorded: {res['sessions']}", flush=True)
    if "dirty" in which:
        res = bench_dirty(args, work)
        report["dirty"] = res
        report["dirty_rows"] = print_dirty(res)
    report["loadavg_end"] = loadavg()
    print(f"\nload average at the end: {report['loadavg_end']}")
    dest = args.out / "session.json"
    if dest.is_file():  # keep the other part's latest results when run with --only
        old = json.loads(dest.read_text())
        report = {**{k: v for k, v in old.items() if k.split("_")[0] in ("run", "dirty")
                     and k.split("_")[0] not in which}, **report}
    dest.write_text(json.dumps(report, indent=2))
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
