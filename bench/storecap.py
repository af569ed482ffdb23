"""Snapshot cost in a store that sits at its byte cap (``store_cap``): its steady state once full.

A private copy of the source tree, one snapshot, then ``store_cap`` set to ``--cap`` times the
store's size; then ``--snapshots`` snapshots, each after rewriting 10 of the same 100 files with
30 KB of random bytes (a workspace that churns without growing), each timed in-process with the
daemon off. The first ``--warmup`` fill the store up to its cap and are not counted. Prints the
median, the mean and the slowest of the rest, how many took over 100 ms (the passes that
collect garbage), and how many snapshots the store keeps at the end.

Run alone: ``.venv/bin/python bench/storecap.py`` (about a minute). Not part of ``make bench``:
its medians hide the passes, which is why it prints the mean and the count of slow ones.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def storecap_bench(tree: Path, work: Path, snapshots: int = 150, warmup: int = 50,
                   cap: float = 2.5) -> dict[str, float]:
    os.environ["CTRLZ_DAEMON"] = "0"
    from ctrlz import Workspace
    from ctrlz.session.config import Config
    from ctrlz.state.store.usage import store_usage

    ws_dir, home = work / "storecap-ws", work / "storecap-home"
    for p in (ws_dir, home):
        shutil.rmtree(p, ignore_errors=True)
    shutil.copytree(tree, ws_dir, symlinks=True)
    config = Config()
    config.set("manual_max", 1_000_000, "bench")
    ws = Workspace.init(ws_dir, home=home, config=config)
    ws.snapshot()
    config.set("store_cap", int(store_usage(ws.repo) * cap), "bench")
    ws = Workspace.open(ws_dir, home=home, config=config)
    files = sorted(p for p in ws_dir.rglob("*") if p.is_file() and not p.is_symlink())[:100]
    rng = random.Random(1)
    times = []
    for _ in range(snapshots):
        for p in rng.sample(files, 10):
            p.write_bytes(os.urandom(30_000))
        t0 = time.perf_counter()
        ws.snapshot()
        times.append(time.perf_counter() - t0)
    late = times[warmup:]
    out = {"median_s": statistics.median(late), "mean_s": statistics.mean(late),
           "max_s": max(late), "over_100ms": sum(t > 0.1 for t in late),
           "counted": len(late), "kept": len(ws.snapshots())}
    ws.close()
    for p in (ws_dir, home):
        shutil.rmtree(p, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--snapshots", type=int, default=150)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--cap", type=float, default=2.5,
                   help="store_cap as a multiple of the store after its first snapshot")
    p.add_argument("--out", type=Path, default=HERE / "out")
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from trees import source_tree

    work = Path(tempfile.mkdtemp(prefix="storecap-", dir=args.out))
    try:
        res = storecap_bench(source_tree(args.out).root, work, args.snapshots, args.warmup,
                             args.cap)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"snapshots {args.warmup + 1}-{args.snapshots} at store_cap: median "
          f"{res['median_s'] * 1000:.0f} ms, mean {res['mean_s'] * 1000:.0f} ms, slowest "
          f"{res['max_s'] * 1000:.0f} ms, {res['over_100ms']} of {res['counted']} over 100 ms; "
          f"{res['kept']} snapshots kept")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
