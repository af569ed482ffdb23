"""One ctrlz operation as its own process, so timings include interpreter start-up and imports.

Usage: ``ctrlz_op.py snapshot TREE HOME LABEL`` (prints the snapshot id; the first call on a
fresh HOME creates the store) or ``ctrlz_op.py restore TREE HOME SNAPSHOT_ID`` (in-place rollback,
which takes ctrlz's safety snapshot first, then plans, applies and verifies). When the
workspace daemon runs, both use it, as any ctrlz process does: ``daemon-start`` and
``daemon-stop`` (untimed) start it and stop it, as ``ctrlz daemon start|stop`` would.
"""

from __future__ import annotations

import os
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
        elif op in ("daemon-start", "daemon-stop"):
            from ctrlz.session import daemon_client

            os.environ["CTRLZ_HOME"] = home  # the daemon opens the workspace by its root
            if op == "daemon-stop":
                daemon_client.stop(ws.store_path)
            elif not daemon_client.start(ws.root, ws.store_path).get("ready"):
                raise SystemExit("the daemon did not start; see its log in the store")
        else:
            raise SystemExit(f"unknown op {op!r}")
    finally:
        ws.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
