"""``make bench``: time ctrlz against git, tar+zstd and rsync on the same trees in one run.

For each tree (a real source tree, 100k small files, a few GB of large files) and each tool:
first snapshot (fresh store), a second snapshot right after it (ctrlz's daemon, which the first
one started, still starting: the case a new user meets; not on the large tree), no-change
snapshot, snapshot after 10 edits + 10 new files, restore of those 20 paths, and store size
after those three snapshots. It prints one table of
medians per tree with ctrlz's ratio to git (measured in the same run, so machine speed cancels
out), checks the targets, prints the floors (lstat walk, read+BLAKE3), writes
``bench/out/results.json`` and, on a full run, the tables into ``docs/benchmarks.md``.

Run it with the venv's interpreter: ``.venv/bin/python bench/run.py [--quick] [--only small]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import TOOLS, Tool  # noqa: E402
from trees import (  # noqa: E402
    ChangeSet,
    Tree,
    compress_floor,
    durable_write_rate,
    large_tree,
    lstat_floor_find,
    lstat_floor_python,
    read_hash_floor,
    small_tree,
    source_tree,
)

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "benchmarks.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
OPS = ("first", "second", "nochange", "change", "restore")
#: the operations of each no-change + change + restore round
ROUND_OPS = OPS[2:]
OP_LABEL = {
    "first": "first snapshot",
    "second": "second snapshot right after the first",
    "nochange": "no-change snapshot",
    "change": "snapshot after 10 edits + 10 new files",
    "restore": "restore of those 20 paths",
}
# (tree, op, limit as a ratio to git) from the issue; the large tree compares with rsync instead
TARGETS: dict[str, dict[str, float]] = {
    "source": {"first": 0.2, "nochange": 1.5, "change": 1.5, "restore": 1.5},
    "small": {"first": 0.2, "nochange": 1.0, "change": 1.0, "restore": 0.5, "store": 0.4},
    "large": {"nochange": 2.0},
}
LARGE_TARGET = 1.0  # ctrlz first snapshot <= 1.0x rsync --link-dest's first copy
#: sections beside the three trees' tables: cold start and hook latency, snapshot cost against
#: history (both on the source tree), over-the-cap snapshots of the large tree, copy-on-write
EXTRAS = ("coldstart", "history", "overcap", "cow", "service")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="small trees (20,000 files, 200 MB of large files), 1 repetition")
    p.add_argument("--only", choices=("small", "source", "large", *EXTRAS), action="append",
                   help="run only this tree or section (repeatable)")
    p.add_argument("--tools", default=",".join(TOOLS),
                   help=f"comma-separated subset of {', '.join(TOOLS)}")
    p.add_argument("--repeat", type=int, default=None,
                   help="repetitions for the median of no-change/change/restore (default 5, "
                        "as the issue's own figures; quick 1)")
    p.add_argument("--first-repeat", type=int, default=None,
                   help="repetitions of the first snapshot, each on a fresh store (default 1 "
                        "on the small and large trees, where git alone takes ~40 s, and "
                        "--repeat on the source tree)")
    p.add_argument("--small-files", type=int, default=None, help="override the small tree size")
    p.add_argument("--large-bytes", type=int, default=None, help="override the large tree size")
    p.add_argument("--slow", type=float, default=30.0,
                   help="a tool whose first no-change + change + restore round takes longer "
                        "than this many seconds is not repeated (keeps `make bench` < 20 min)")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    p.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    return p.parse_args(argv)


def sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def machine_info(out: Path) -> dict[str, str]:
    mem_kb = int(sh("awk '/MemTotal/ {print $2}' /proc/meminfo") or 0)
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": sh("awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo") or platform.machine(),
        "nproc": sh("nproc"),
        "ram": f"{mem_kb / (1 << 20):.1f} GiB",
        "filesystem": sh(f"df -T {shlex.quote(str(out))} | awk 'NR==2 {{print $2}}'"),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "git": sh("git --version"),
        "tar": sh("tar --version | head -1"),
        "zstd": sh("zstd --version"),
        "rsync": sh("rsync --version | head -1"),
        # the ctrlz under test: the commit, and whether src/ had uncommitted edits at the start
        "ctrlz": sh(f"cd {shlex.quote(str(REPO))} && git rev-parse --short HEAD") + (
            " + uncommitted src/ changes"
            if sh(f"cd {shlex.quote(str(REPO))} && git status --porcelain -- src") else ""),
        "door": _door_kind(),
    }


def _door_kind() -> str:
    """Which ``ctrlz`` the run times: the native door (a C program, see
    docs/decisions/0007-native-door.md) or the Python CLI's script (no C compiler at install)."""
    with open(Path(sys.executable).with_name("ctrlz"), "rb") as f:
        native = f.read(4) == b"\x7fELF"
    return ("the native door (ctrlz snapshot served without Python)" if native
            else "the Python CLI's script (no native door)")


def build_trees(args: argparse.Namespace) -> list[Tree]:
    which = [w for w in args.only or ["source", "small", "large"] if w not in EXTRAS]
    if args.only and {"coldstart", "history"} & set(args.only) and "source" not in which:
        which.append("source")
    if args.only and "overcap" in args.only and "large" not in which:
        which.append("large")
    small_n = args.small_files or (20_000 if args.quick else 100_000)
    large_b = args.large_bytes or (200_000_000 if args.quick else 2_000_000_000)
    builders: dict[str, Callable[[], Tree]] = {
        "source": lambda: source_tree(args.out),
        "small": lambda: small_tree(args.out, small_n),
        "large": lambda: large_tree(args.out, large_b),
    }
    trees = []
    for name in ("source", "small", "large"):
        if name in which:
            t0 = time.perf_counter()
            tree = builders[name]()
            print(f"[{name}] {tree.files:,} files, {tree.bytes / 1e6:,.0f} MB "
                  f"(ready in {time.perf_counter() - t0:.1f} s) at {tree.root}", flush=True)
            trees.append(tree)
    return trees


def floors(tree: Tree, stores: Path) -> dict[str, float]:
    """The lower bounds a snapshot cannot beat; the first pass also warms the page cache.
    For the large tree, also the rate at which the stores' disk makes bytes durable."""
    read_hash_floor(tree.root)  # warm-up, untimed
    found = {
        "lstat_python": min(lstat_floor_python(tree.root) for _ in range(3)),
        "lstat_find": min(lstat_floor_find(tree.root) for _ in range(3)),
        "read_hash": min(read_hash_floor(tree.root) for _ in range(2)),
        "read_hash_1thread": read_hash_floor(tree.root, threads=False),
    }
    if tree.name == "large":
        found["compress"] = min(compress_floor(tree.root) for _ in range(2))
        found["write_rate"] = max(durable_write_rate(stores) for _ in range(2))
    return found


def timed(fn: Callable[[], float]) -> float:
    """Flush earlier writes (untimed) so one operation's writeback is not billed to the next."""
    os.sync()
    return fn()


def bench_tool(tool: Tool, cs: ChangeSet, first_repeat: int, repeat: int, slow: float,
               second: bool = True) -> dict[str, object]:
    times: dict[str, list[float]] = {op: [] for op in OPS if second or op != "second"}
    for _ in range(first_repeat):
        tool.reset()
        times["first"].append(timed(tool.first))
        if second:
            # right after, with no sync between: whatever the first left running (ctrlz's
            # daemon starting up, the first's writeback) runs during it, as for a user
            times["second"].append(tool.second())
        tool.settle()  # untimed, as after any other operation
        if times["first"][-1] > slow:
            break  # git's first commit of the large trees: once is enough to compare
    first_size = tool.store_size()[0]  # untimed: what the last first snapshot stored
    after_gc = None
    squeeze = getattr(tool, "gc", None)
    if squeeze is not None and cs.root.name == "large":
        # the large objects the snapshot stored uncompressed (the disk was waiting for them)
        # are compressed by `ctrlz gc`: how long that takes, and what the store is then
        gc_time = timed(squeeze)
        after_gc = (gc_time, tool.store_size()[0])
    size: tuple[int, int] | None = None
    restore_ok = True
    for r in range(repeat):
        if r:
            # the previous round ended with a restore, which changed the tree since the last
            # snapshot; capture that (untimed) so "no-change" really means no change
            timed(tool.snapshot)
        times["nochange"].append(timed(tool.nochange))
        base = tool.snaps[-1]
        cs.apply(r)
        times["change"].append(timed(tool.change))
        if size is None:  # three snapshots so far: first, no-change, change
            size = tool.store_size()
        times["restore"].append(timed(lambda b=base: tool.restore(b)))
        if not cs.is_pristine():
            restore_ok = False
            cs.undo()
        if sum(times[op][-1] for op in ROUND_OPS) > slow:
            break  # one round already took long: a median of one beats a 20-minute run
    assert size is not None
    result = {"times": times, "median": {op: statistics.median(v) for op, v in times.items()},
              "store_apparent": size[0], "store_allocated": size[1], "restore_ok": restore_ok,
              "store_first": first_size}
    if after_gc is not None:
        result["gc_after_first"], result["store_after_gc"] = after_gc
    flush = getattr(tool, "first_flush", None)
    if flush:  # rsync: the first copy made durable, as a ctrlz snapshot is when it returns
        result["first_durable"] = statistics.median(
            t + f for t, f in zip(times["first"], flush, strict=True))
    return result


def bench_tree(tree: Tree, tools: list[str], args: argparse.Namespace) -> dict[str, object]:
    repeat = args.repeat or (1 if args.quick else 5)
    # a first snapshot of the 2 GB tree is bound by the disk, which varies from run to run
    # as much as the tools differ: a median of 3 there (tools over `slow` run it once)
    first_repeat = args.first_repeat or {"source": repeat, "large": min(repeat, 3)}.get(
        tree.name, 1)
    print(f"[{tree.name}] floors...", flush=True)
    fl = floors(tree, args.out / "stores")
    cs = ChangeSet.choose(tree.root)
    results: dict[str, object] = {}
    for name in tools:
        t0 = time.perf_counter()
        tool = TOOLS[name](tree.root, args.out / "stores" / tree.name)
        load_before = os.getloadavg()[0]
        # the large tree's few big files: no start-up to speak of, and its firsts are long
        res = bench_tool(tool, cs, first_repeat, repeat, args.slow, tree.name != "large")
        # other work on the machine skews everything; record it so a noisy run can be spotted
        res["load_avg_1min"] = [load_before, os.getloadavg()[0]]
        tool.reset()  # free the disk space
        results[name] = res
        med = res["median"]
        print(f"[{tree.name}] {name:9s} " + "  ".join(f"{op} {med[op]:.3f}s" for op in OPS
                                                     if op in med)
              + f"  store {res['store_apparent'] / 1e6:.1f} MB"
              + ("" if res["restore_ok"] else "  RESTORE WRONG")
              + f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    return {"files": tree.files, "bytes": tree.bytes, "repeat": repeat,
            "first_repeat": first_repeat, "floors": fl, "tools": results,
            "changed_paths": cs.paths()}


# -- reporting ---------------------------------------------------------------------------------


def _fmt_s(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _verdict(ratio: float, limit: float) -> str:
    return "PASS" if ratio <= limit else "MISS"


def table(name: str, data: dict[str, object]) -> str:
    """A markdown table of medians plus the floors and target verdicts for one tree."""
    tools: dict[str, dict[str, object]] = data["tools"]  # type: ignore[assignment]
    names = list(tools)
    # ctrlz as it ships (its daemon started by the first command) and with the daemon off
    variants = [v for v in ("ctrlz", "ctrlz-nodaemon") if v in tools] if "git" in tools else []
    runs = ", ".join(f"{t} {len(tools[t]['times']['restore'])}" for t in names)
    firsts = ", ".join(f"{t} {len(tools[t]['times']['first'])}" for t in names)
    head = ["operation", *names] + [f"{v} / git" for v in variants]
    lines = [f"### {name} tree: {data['files']:,} files, {data['bytes'] / 1e6:,.0f} MB",
             "",
             f"Median seconds of up to {data['repeat']} runs. First snapshots, each on a "
             f"fresh store, up to {data['first_repeat']} per tool (once for a tool whose "
             f"first took over 30 s): {firsts}. No-change + change + restore rounds (once "
             f"for a tool whose first round took over 30 s): {runs}. Store sizes in MB.",
             "",
             "| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    targets = TARGETS.get(name, {})
    for op in OPS:
        if any(op not in tools[t]["median"] for t in names):
            continue  # not measured on this tree (or a run from before it was)
        row = [OP_LABEL[op]] + [_fmt_s(tools[t]["median"][op]) for t in names]
        for v in variants:
            row.append(f"{tools[v]['median'][op] / tools['git']['median'][op]:.2f}x")
        lines.append("| " + " | ".join(row) + " |")
    for key, label in (("store_apparent", "store after 3 snapshots (du -sb)"),
                       ("store_allocated", "store after 3 snapshots (on disk)")):
        row = [label] + [f"{tools[t][key] / 1e6:,.1f}" for t in names]
        for v in variants:
            row.append(f"{tools[v][key] / tools['git'][key]:.2f}x")
        lines.append("| " + " | ".join(row) + " |")
    fl: dict[str, float] = data["floors"]  # type: ignore[assignment]
    lines += ["",
              f"Floors (warm cache): lstat walk {fl['lstat_python']:.3f} s (Python scandir), "
              f"{fl['lstat_find']:.3f} s (find); read + BLAKE3 {fl['read_hash']:.3f} s "
              f"(multi-threaded), {fl['read_hash_1thread']:.3f} s (one thread).", ""]
    loads = [x for t in names for x in tools[t].get("load_avg_1min", [])]
    if loads and max(loads) > 1.5:
        lines += [f"1-minute load average around the tools' runs: {min(loads):.1f} to "
                  f"{max(loads):.1f} (the benchmark itself adds about 1): other work was "
                  "running, so treat these figures as noisy.", ""]
    wrong = [t for t in names if not tools[t]["restore_ok"]]
    if wrong:
        lines += [f"Restore left the tree wrong for: {', '.join(wrong)}.", ""]
    for v in variants if targets else ():
        for op, limit in targets.items():
            if op == "store":
                if v != "ctrlz":
                    continue  # the same store
                ratio = tools[v]["store_apparent"] / tools["git"]["store_apparent"]
                label = "store size after three snapshots"
            else:
                ratio = tools[v]["median"][op] / tools["git"]["median"][op]
                label = OP_LABEL[op]
            extra = ""
            if op == "nochange" and v == "ctrlz-nodaemon":
                extra = (f" (lstat floor {fl['lstat_python']:.3f} s Python, "
                         f"{fl['lstat_find']:.3f} s find)")
            lines.append(f"- {label}: {v} {ratio:.2f}x git, target <= {limit}x: "
                         f"**{_verdict(ratio, limit)}**{extra}")
            if op == "store":
                ratio = tools[v]["store_allocated"] / tools["git"]["store_allocated"]
                lines.append(f"- {label}, counting allocated blocks (du -B1): {v} {ratio:.2f}x "
                             f"git, target <= {limit}x: **{_verdict(ratio, limit)}**")
        lines.append("")
    lines += _second_verdict(tools)
    if name == "large" and "ctrlz" in tools and "rsync" in tools:
        c, r = tools["ctrlz"]["median"]["first"], tools["rsync"]["median"]["first"]
        lines += [f"- first snapshot: ctrlz {c:.2f} s vs rsync --link-dest first copy {r:.2f} s "
                  f"= {c / r:.2f}x, target <= {LARGE_TARGET}x: **{_verdict(c / r, LARGE_TARGET)}** "
                  f"(read + BLAKE3 floor {fl['read_hash']:.2f} s)"]
        d = tools["rsync"].get("first_durable")
        if d:
            lines.append(f"- first snapshot, both on disk when they end: ctrlz {c:.2f} s vs "
                         f"rsync then `sync -f` {d:.2f} s = {c / d:.2f}x, target <= "
                         f"{LARGE_TARGET}x: **{_verdict(c / d, LARGE_TARGET)}** (a ctrlz "
                         "snapshot is fsynced before it is reported; rsync's copy is not)")
        stored = tools["ctrlz"].get("store_first")
        if stored and "store_after_gc" in tools["ctrlz"]:
            lines.append(f"- the store after the first snapshot: {stored / 1e9:.2f} GB (large "
                         "objects whose reads the disk was waiting for are stored "
                         f"uncompressed); after `ctrlz gc`, which compresses them in "
                         f"{tools['ctrlz']['gc_after_first']:.2f} s: "
                         f"{tools['ctrlz']['store_after_gc'] / 1e9:.2f} GB")
        rate = fl.get("write_rate")
        if rate and stored and "compress" in fl:
            w, k = stored / rate, fl["compress"]
            lines.append(f"- what this machine allows: reading, hashing and compressing the tree "
                         f"on every core, writing nothing, takes {k:.2f} s ({k / r:.2f}x "
                         f"rsync's copy); making the {stored / 1e9:.2f} GB ctrlz stores durable, "
                         f"computing nothing, takes {w:.2f} s (direct writes + fsync at "
                         f"{rate / 1e6:.0f} MB/s). ctrlz took {c / max(k, w):.2f}x the larger "
                         f"and {c / (k + w):.2f}x their sum")
        lines.append("")
    return "\n".join(lines)


def _second_verdict(tools: dict[str, dict[str, object]]) -> list[str]:
    """A command issued while the daemon is still starting is never slower than no daemon:
    ctrlz's second snapshot right after its first, against the same with the daemon off."""
    meds = [tools[v]["median"].get("second") for v in ("ctrlz", "ctrlz-nodaemon")
            if v in tools]  # type: ignore[attr-defined]
    if len(meds) < 2 or None in meds:
        return []
    d, n = meds
    return [f"- second snapshot right after the first (the daemon the first started is "
            f"starting): ctrlz {d:.3f} s vs ctrlz-nodaemon {n:.3f} s = {d / n:.2f}x, target "
            f"<= 1.0x (never slower than no daemon): **{_verdict(d / n, 1.0)}**", ""]


def report(results: dict[str, object], info: dict[str, str], command: str, total: float) -> str:
    trees: dict[str, dict[str, object]] = results["trees"]  # type: ignore[assignment]
    parts = [f"Run {info['date']} with `{command}` in {total / 60:.1f} min.",
             "",
             f"Machine: {info['cpu']}, {info['nproc']} cores, {info['ram']} RAM, "
             f"{info['filesystem']} filesystem, Linux {info['kernel']}; Python {info['python']}, "
             f"{info['git']}, {info['tar']}, {info['zstd']}, {info['rsync']}; "
             f"ctrlz at {info.get('ctrlz', '?')}, its command {info.get('door', '?')}.",
             ""]
    for name, data in trees.items():
        parts.append(table(name, data))
    parts.append(extras_tables(results.get("extras", {})))  # type: ignore[arg-type]
    return "\n".join(parts)


def run_extras(tree: Tree, wanted: list[str], args: argparse.Namespace) -> dict[str, object]:
    """The extra sections that run on ``tree``."""
    out: dict[str, object] = {}
    if tree.name == "source" and "coldstart" in wanted:
        from coldstart import coldstart_bench

        print("[coldstart] cold start and hook latency...", flush=True)
        out["coldstart"] = coldstart_bench(tree.root, args.out, 10 if args.quick else 40)
    if tree.name == "source" and "history" in wanted:
        from history import REPEAT, history_bench

        n = 100 if args.quick else 1000
        print(f"[history] 1 vs {n} snapshots kept...", flush=True)
        out["history"] = history_bench(tree.root, args.out, n, 1 if args.quick else REPEAT)
    if tree.name == "large" and "overcap" in wanted:
        from overcap import overcap_bench

        print("[overcap] a snapshot over max_bytes...", flush=True)
        out["overcap"] = overcap_bench(tree, args.out)
    return out


def extras_tables(extras: dict[str, object]) -> str:
    parts = []
    if "coldstart" in extras:
        from coldstart import coldstart_table

        parts.append(coldstart_table(extras["coldstart"]))  # type: ignore[arg-type]
    if "history" in extras:
        from history import history_table

        parts.append(history_table(extras["history"]))  # type: ignore[arg-type]
    if "overcap" in extras:
        from overcap import overcap_table

        parts.append(overcap_table(extras["overcap"]))  # type: ignore[arg-type]
    if "cow" in extras:
        from cow import cow_table

        parts.append(cow_table(extras["cow"]))  # type: ignore[arg-type]
    if "service" in extras:
        parts.append(service_table(extras["service"]))  # type: ignore[arg-type]
    return "\n".join(parts)


def service_table(res: dict[str, object]) -> str:
    """bench/service.py's figures: the API on its Unix socket under concurrent clients."""
    if "error" in res:
        return f"### the service under load\n\nnot measured: {res['error']}\n"
    ops: dict[str, dict[str, object]] = res["ops"]  # type: ignore[assignment]
    lines = ["### the service under load (bench/service.py)", "",
             f"{res['clients']} API clients over the Unix socket for {res['seconds']} s, "
             f"{res['streams']} event streams open, two workspaces: {res['requests']} requests "
             f"({res['per_second']}/s), {res['failures']} failed, {res['client_errors']} 4xx, "
             f"{res['lost_or_duplicated']} snapshots lost or duplicated, verify "
             f"{'ok' if res['verify_ok'] else 'FAILED'}.", "",
             "| request | count | p50 ms | p95 ms |", "|---|---:|---:|---:|"]
    for op, o in ops.items():
        lines.append(f"| {op} | {o['count']} | {o['p50_ms']} | {o['p95_ms']} |")
    return "\n".join(lines) + "\n"


def write_doc(body: str) -> None:
    text = DOC.read_text() if DOC.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text or END not in text:
        text = text.rstrip() + f"\n\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(f"{head}{START}\n{body}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    # the bytecode an installed ctrlz has (pip compiles it): without it, under
    # PYTHONDONTWRITEBYTECODE, every ctrlz process would compile the modules edited last
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src" / "ctrlz")],
                   check=False)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = set(tools) - set(TOOLS)
    if unknown:
        raise SystemExit(f"unknown tools: {', '.join(sorted(unknown))}")
    info = machine_info(args.out)
    results: dict[str, object] = {"machine": info, "argv": sys.argv[1:], "trees": {}}
    wanted = args.only or ["source", "small", "large", *EXTRAS]
    extras: dict[str, object] = {}
    results["extras"] = extras
    for tree in build_trees(args):
        if tree.name in wanted:
            results["trees"][tree.name] = bench_tree(tree, tools, args)  # type: ignore[index]
        extras.update(run_extras(tree, wanted, args))
    if "cow" in wanted:
        from cow import cow_bench

        print("[cow] XFS and btrfs loop images...", flush=True)
        extras["cow"] = cow_bench(args.out / "cow", quick=args.quick)
    if "service" in wanted:
        print("[service] the API under load...", flush=True)
        proc = subprocess.run([sys.executable, str(REPO / "bench" / "service.py"), "--json",
                               *(["--quick"] if args.quick else [])],
                              capture_output=True, text=True)
        extras["service"] = (json.loads(proc.stdout) if proc.returncode == 0
                             else {"error": proc.stderr[-500:]})
    total = time.perf_counter() - t_start
    command = ("make bench" if not sys.argv[1:]
               else f"python bench/run.py {shlex.join(sys.argv[1:])}")
    results["total_seconds"] = total
    body = report(results, info, command, total)
    full = not (args.quick or args.only or args.tools != ",".join(TOOLS))
    # a quick or partial run must not overwrite the raw data behind docs/benchmarks.md
    raw = args.out / ("results.json" if full else "results-partial.json")
    raw.write_text(json.dumps(results, indent=2))
    print()
    print(body)
    if full and not args.no_docs:
        write_doc(body)
        print(f"\nwrote {DOC.relative_to(REPO)}")
    print(f"\ntotal {total:.0f} s; raw results in {raw}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
