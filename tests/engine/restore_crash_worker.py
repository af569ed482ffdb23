"""Run one in-place restore in a child process, with a fault point armed (used by
test_restore_crash and test_restore_faults).

    restore_crash_worker.py HOME ROOT OP MODE [POINT AFTER [ERRNO]]

OP is one of rollback, revert, undo, redo, rewind, fs_restore, or ``cli:ARGS...`` (the CLI's
``main`` run in this process, so that a fault point armed here applies to it). MODE is

* ``kill``: SIGKILL at the (AFTER+1)-th pass of POINT;
* ``error``: OSError(ERRNO) raised there;
* ``count``: nothing armed; prints how many times each point was passed, as JSON, on stdout;
* ``ready``: nothing armed; prints ``ready`` just before the restore starts (for a kill from
  outside);
* ``write-then-kill``: at the first pass of POINT, a concurrent writer appends a line to the one
  temp file taken aside (``…-a<n>``: after ``restore-exchanged``, the inode just replaced; the
  batch's other temp files wait to be placed), then the process is SIGKILLed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path

from ctrlz.state import failpoints

SESSION = "crash-session"
CONCURRENT = b"written by someone else during the restore\n"


def write_then_kill(root: str) -> None:
    temps = [os.path.join(d, n) for d, _, files in os.walk(root) for n in files
             if n.startswith(".ctrlz-tmp-") and n.rpartition("-")[2].startswith("a")]
    assert len(temps) == 1, temps
    with open(temps[0], "ab") as f:
        f.write(CONCURRENT)
        f.flush()
        os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


def run_op(home: Path, root: str, op: str, ready: bool = False) -> None:
    if op.startswith("cli:"):
        from ctrlz.cli import main

        try:
            main(op[4:].split())
        except SystemExit as exc:
            code = exc.code
            sys.exit(code if isinstance(code, int) else 1)
        return
    from ctrlz import Workspace

    ws = Workspace.open(root, home=home)
    if ready:
        print("ready", flush=True)
    if op == "rollback":
        ws.rollback("base")
    elif op == "revert":
        ws.revert("lib")
    elif op == "undo":
        ws.undo()
    elif op == "redo":
        ws.redo()
    elif op == "rewind":
        from ctrlz import toolcalls as tc

        tc.rewind(ws, "t1", session_id=SESSION)
    elif op == "fs_restore":
        from ctrlz import toolcalls as tc

        tc.fs_restore(SESSION, "t1", workspace=ws)
    else:
        raise SystemExit(f"unknown op {op}")
    ws.close()


def main() -> None:
    home, root, op, mode = sys.argv[1:5]
    rest = sys.argv[5:]
    counts: Counter[str] = Counter()
    if mode == "kill":
        failpoints.arm(rest[0], after=int(rest[1]))
    elif mode == "error":
        failpoints.arm_error(rest[0], int(rest[2]), after=int(rest[1]))
    elif mode == "write-then-kill":
        failpoints.arm_call(rest[0], lambda: write_then_kill(root))
    elif mode == "count":
        real_hit = failpoints.hit

        def counting_hit(name: str) -> None:
            counts[name] += 1
            real_hit(name)

        failpoints.hit = counting_hit  # type: ignore[assignment]
    run_op(Path(home), root, op, ready=mode == "ready")
    if mode == "count":
        print(json.dumps(counts))


if __name__ == "__main__":
    main()
