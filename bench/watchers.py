"""The file watchers side by side on one large tree: ctrlz's own inotify watcher
(``sources/watch.py``) against watchdog's observers behind ``sources/observe.py``.

What the daemon pays per request is its watcher's ``take_dirty`` (a sync, then the dirty set)
plus the snapshot of what it names; the snapshot costs the same for every watcher that names
the same folders, so the watcher's part is what is timed here: starting (watches placed, or
polling's first walk), a take with no change, and a take after 10 edits. Rounds are
interleaved, medians reported (the machine is shared; expect noise).

    python bench/watchers.py [--files 100000] [--rounds 5] [--dir /tmp/ctrlz-watchers]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def make_tree(root: Path, files: int, per_dir: int = 100) -> None:
    marker = root / f".made-{files}"
    if marker.exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    for i in range(files):
        d = root / f"d{i // (per_dir * 50)}" / f"s{(i // per_dir) % 50}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text(f"{i}\n")
    marker.touch()


def watchers() -> dict[str, Callable[[Path], Any]]:
    from ctrlz.sources.observe import ObserverWatcher
    from ctrlz.sources.watch import Watcher

    def none(rel: bytes, is_dir: bool) -> bool:
        return rel.startswith(b".made-")

    return {
        "ctrlz inotify": lambda r: Watcher(r, none, lambda e: None),
        "watchdog inotify": lambda r: ObserverWatcher(r, none, lambda e: None,
                                                      backend="inotify"),
        "watchdog polling": lambda r: ObserverWatcher(r, none, lambda e: None,
                                                      backend="polling", poll_seconds=3600),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/ctrlz-watchers")
    args = ap.parse_args()
    root = Path(args.dir)
    make_tree(root, args.files)
    edits = sorted(root.rglob("f*7.txt"))[:10]
    times: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.rounds):
        for name, make in watchers().items():
            row = times.setdefault(name, {"start": [], "no-change": [], "10 edits": []})
            w = make(root)
            t = time.perf_counter()
            w.start()
            row["start"].append(time.perf_counter() - t)
            try:
                w.take_dirty()
                t = time.perf_counter()
                taken = w.take_dirty()
                row["no-change"].append(time.perf_counter() - t)
                assert not taken.dirs and not taken.rescan_all, (name, taken)
                for p in edits:
                    p.write_text(p.read_text() + "x\n")
                t = time.perf_counter()
                taken = w.take_dirty()
                row["10 edits"].append(time.perf_counter() - t)
                assert len(taken.dirs) >= 1 and not taken.rescan_all, (name, taken)
            finally:
                w.stop()
    print(f"{args.files:,} files, median of {args.rounds} interleaved rounds, seconds")
    print("| watcher | start | take, no change | take, 10 edits |")
    print("|---|---|---|---|")
    for name, row in times.items():
        cells = " | ".join(f"{statistics.median(v):.4f}" for v in row.values())
        print(f"| {name} | {cells} |")


if __name__ == "__main__":
    os.environ.pop("CTRLZ_PLATFORM", None)
    main()
