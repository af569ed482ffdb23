"""Run one ctrlz operation in a child process with a crash point armed (used by test_crash)."""

from __future__ import annotations

import sys
from pathlib import Path

from ctrlz import Workspace
from ctrlz.state import failpoints


def main() -> None:
    home, root, point, op = sys.argv[1:5]
    if point != "none":
        failpoints.arm(point)
    ws = Workspace.open(root, home=Path(home))
    if op == "snapshot":
        ws.snapshot(label="doomed")
    elif op == "restore":
        ws.restore("base")
    elif op == "gc":
        ws.remove(["doomed-ok"])
        ws.gc()
    elif op == "loop":
        i = 0
        while True:  # killed from outside at a random moment
            for n in range(30):
                (Path(root) / f"loop{n}.txt").write_text(f"iteration {i} file {n}\n" * (n + 1))
            ws.snapshot(type="auto")
            i += 1


if __name__ == "__main__":
    main()
