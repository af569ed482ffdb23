"""One ctrlz operation as its own process, so timings include interpreter start-up and imports.

Usage: ``ctrlz_op.py snapshot TREE HOME LABEL`` (prints the snapshot id; the first call on a
fresh HOME creates the store) or ``ctrlz_op.py restore TREE HOME SNAPSHOT_ID`` (in-place rollback,
which takes ctrlz's safety snapshot first, then plans, applies and verifies). Through the
Python API, so it never starts the workspace daemon (``bench/cow.py`` times the store, not the
watcher); ``bench/tools.py`` drives the ``ctrlz`` command instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ctrlz import Workspace


def main(argv: list[str]) -> int:
    op, tree, home, arg = argv
    ws = Workspace.init(tree, home=Path(home))
    try:
        if op == "snapshot":
            print(ws.snapshot(label=arg).id)
        elif op == "restore":
            ws.restore(arg)
        else:
            raise SystemExit(f"unknown op {op!r}")
    finally:
        ws.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
