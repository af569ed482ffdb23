"""Run one ctrlz operation with a crash point armed, in a child process (test_cow_crash)."""

from __future__ import annotations

import sys
from pathlib import Path

from ctrlz import Workspace
from ctrlz.state import failpoints


def main() -> None:
    home, root, point, op = sys.argv[1:5]
    failpoints.arm(point)
    ws = Workspace.open(root, home=Path(home))
    if op == "snapshot":
        ws.snapshot(label="doomed")
    elif op == "restore":
        ws.restore("base")


if __name__ == "__main__":
    main()
