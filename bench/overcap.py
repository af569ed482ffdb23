"""A snapshot of a workspace that outgrew ``max_bytes``: it must still be taken.

On a private copy of the large tree, with ``max_bytes`` set to the tree's own size: a first
snapshot, then one 10 MB file added and a snapshot timed (as its own process). Expected: the
snapshot succeeds, the new file is left out and listed in ``skipped``, everything else is
captured; git's ``add -A && commit`` of the same change is timed beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OP = """
import json, sys
from pathlib import Path
from ctrlz import Workspace
from ctrlz.session.config import Config
c = Config()
c.set("max_bytes", int(sys.argv[3]), "bench")
ws = Workspace.init(sys.argv[1], home=Path(sys.argv[2]), config=c)
snap = ws.snapshot(label="x")
print(json.dumps([k.to_json() for k in snap.shown_skipped()]))
"""


def overcap_bench(tree: object, work: Path) -> dict[str, object]:
    root: Path = tree.root  # type: ignore[attr-defined]
    cap = int(tree.bytes)  # type: ignore[attr-defined]
    ws = work / "overcap-ws"
    shutil.rmtree(ws, ignore_errors=True)
    subprocess.run(["cp", "-a", "--reflink=auto", str(root), str(ws)], check=True)
    res: dict[str, object] = {"max_bytes": cap}
    with tempfile.TemporaryDirectory(prefix="ctrlz-bench-overcap-", dir=work) as tmp:
        home, git_dir = Path(tmp) / "home", Path(tmp) / "git"
        subprocess.run([sys.executable, "-c", OP, str(ws), str(home), str(cap)], check=True,
                       capture_output=True)
        genv = {**os.environ, "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(ws)}
        git = ["git", "-c", "user.name=b", "-c", "user.email=b@x", "-c", "gc.auto=0"]
        subprocess.run([*git, "init", "-q"], env=genv, check=True)
        subprocess.run([*git, "add", "-A"], env=genv, check=True)
        subprocess.run([*git, "commit", "-qm", "1"], env=genv, check=True)
        (ws / "added-10MB.bin").write_bytes(os.urandom(10 << 20))
        os.sync()
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", OP, str(ws), str(home), str(cap)],
                              capture_output=True, text=True)
        res["ctrlz_seconds"] = time.perf_counter() - t0
        res["ctrlz_ok"] = proc.returncode == 0
        res["skipped"] = json.loads(proc.stdout) if proc.returncode == 0 else proc.stderr[-300:]
        os.sync()
        t0 = time.perf_counter()
        subprocess.run([*git, "add", "-A"], env=genv, check=True)
        subprocess.run([*git, "commit", "-qm", "2"], env=genv, check=True)
        res["git_seconds"] = time.perf_counter() - t0
    shutil.rmtree(ws, ignore_errors=True)
    return res


def overcap_table(res: dict[str, object]) -> str:
    skipped = res["skipped"]
    listed = (", ".join(k["path"] for k in skipped) if isinstance(skipped, list)  # type: ignore[index]
              else f"refused: {skipped}")
    ok = res["ctrlz_ok"] and isinstance(skipped, list) and len(skipped) == 1
    return "\n".join([
        f"### over max_bytes (large tree, max_bytes = its {res['max_bytes']:,} bytes)", "",
        "| operation | ctrlz | git | result |", "|---|---:|---:|---|",
        f"| add one 10 MB file, snapshot | {res['ctrlz_seconds']:.3f} s | "
        f"{res['git_seconds']:.3f} s | {'**works**' if ok else '**broken**'}: skipped "
        f"{listed} |", ""])
