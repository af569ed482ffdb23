#!/usr/bin/env python3
"""Remote benchmark: ctrlz push / clone / incremental push against restic's S3 backend, both
talking to one local S3 server (moto's server mode, in its own process) in the same run.

Per tree (the 100,000-file tree and the 2 GB tree of bench/trees.py):

* full push: ``ctrlz push`` of a fresh snapshot vs ``restic backup`` (restic's time includes
  its own scan; ctrlz's snapshot time is shown beside it);
* incremental push after 10 edits + 10 new files (bench/trees.py's ChangeSet): ``ctrlz
  snapshot`` + ``ctrlz push`` (each timed, as two commands) vs a second ``restic backup``;
* clone: ``ctrlz clone`` (pull + restore into a new directory) vs ``restic restore latest``.

Ratios are ctrlz / restic (below 1.0 means ctrlz is faster). restic always encrypts; ctrlz
pushes unencrypted unless ``--encrypt``. Without ``restic`` on PATH (``make bench-remote``
installs Debian's), the restic columns are skipped with a message.

    .venv/bin/python bench/remote.py --quick            # 10,000 files and 200 MB
    .venv/bin/python bench/remote.py                    # 100,000 files and 2 GB
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from trees import ChangeSet, large_tree, small_tree  # noqa: E402

BIN = Path(sys.executable).parent
CTRLZ = str(BIN / "ctrlz")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """moto_server in its own process: memory is returned when it stops."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        exe = BIN / "moto_server"
        self.proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("moto_server did not start")

    def bucket(self, name: str) -> None:
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                     aws_access_key_id="bench", aws_secret_access_key="bench").create_bucket(
            Bucket=name)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


#: CPU seconds (user + system) of each timed command, by the label its wall time has
CPU: dict[str, float] = {}


def timed(cmd: list[str] | str, cwd: Path, env: dict[str, str], label: str = "") -> float:
    """Seconds ``cmd`` took; its CPU seconds (the command's own, not the S3 server's) go to
    ``CPU[label]``: on a shared machine the wall times move 2-3x between runs, the CPU far
    less. Dirty pages are flushed first: restic never fsyncs, so without this the writeback
    of its restore (or of ctrlz's own earlier steps) lands in whichever command runs next,
    and ctrlz's fsyncs wait for it."""
    os.sync()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str),
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{cmd} failed: {r.stderr.decode(errors='replace')[-2000:]}")
    CPU[label] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall


def bench_tree(name: str, root: Path, work: Path, server: Server, encrypt: bool,
               restic: str | None) -> dict[str, float | None]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTRLZ_", "AWS_"))}
    env.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
               AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL_S3=server.endpoint,
               CTRLZ_DAEMON="0", RESTIC_PASSWORD="bench", CTRLZ_HOME=str(work / "home-a"))
    bucket = f"bench-{name}"
    server.bucket(bucket)
    out: dict[str, float | None] = {}
    subprocess.run([CTRLZ, "init"], cwd=root, env=env, check=True, capture_output=True)
    out["ctrlz snapshot"] = timed([CTRLZ, "snapshot"], root, env, "ctrlz snapshot")
    add = [CTRLZ, "remote", "add", "origin", f"s3://{bucket}/ctrlz"]
    if encrypt:
        (work / "key").write_text("bench key")
        add += ["--encrypt", "--key-file", str(work / "key")]
    subprocess.run(add, cwd=root, env=env, check=True, capture_output=True)
    out["ctrlz full push"] = timed([CTRLZ, "push"], root, env, "ctrlz full push")
    changes = ChangeSet.choose(root)
    changes.apply(1)
    out["ctrlz incr snapshot"] = timed([CTRLZ, "snapshot"], root, env,
                                       "ctrlz incr snapshot")
    out["ctrlz incr push"] = timed([CTRLZ, "push"], root, env, "ctrlz incr push")
    out["ctrlz incr snapshot+push"] = out["ctrlz incr snapshot"] + out["ctrlz incr push"]
    out["ctrlz snapshot+push"] = out["ctrlz snapshot"] + out["ctrlz full push"]
    clone_env = dict(env, CTRLZ_HOME=str(work / "home-b"))
    out["ctrlz clone"] = timed([CTRLZ, "clone", f"s3://{bucket}/ctrlz", str(work / "clone")]
                               + (["--encrypt", "--key-file", str(work / "key")]
                                  if encrypt else []), work, clone_env, "ctrlz clone")
    changes.undo()
    shutil.rmtree(work / "clone", ignore_errors=True)
    if restic is None:
        return _with_cpu(out)
    repo = ["-r", f"s3:{server.endpoint}/{bucket}/restic"]
    subprocess.run([restic, *repo, "init"], env=env, check=True, capture_output=True)
    out["restic full backup"] = timed([restic, *repo, "backup", "-q", "."], root, env,
                                      "restic full backup")
    changes.apply(2)
    out["restic incr backup"] = timed([restic, *repo, "backup", "-q", "."], root, env,
                                      "restic incr backup")
    out["restic restore"] = timed([restic, *repo, "restore", "latest", "-q", "--target",
                                   str(work / "restic-restore")], work, env,
                                  "restic restore")
    changes.undo()
    shutil.rmtree(work / "restic-restore", ignore_errors=True)
    return _with_cpu(out)


def _with_cpu(out: dict[str, float | None]) -> dict[str, float | None]:
    """``out`` and, under "<label> cpu", the CPU seconds of each timed command."""
    out.update({f"{k} cpu": CPU.pop(k) for k in list(CPU)})
    out["ctrlz incr snapshot+push cpu"] = (out["ctrlz incr snapshot cpu"] or 0) + (
        out["ctrlz incr push cpu"] or 0)
    out["ctrlz snapshot+push cpu"] = (out["ctrlz snapshot cpu"] or 0) + (
        out["ctrlz full push cpu"] or 0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10,000 files and 200 MB")
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--large-bytes", type=int, default=None)
    ap.add_argument("--encrypt", action="store_true", help="push to an encrypted remote")
    ap.add_argument("--out", type=Path, default=HERE / "out")
    ap.add_argument("--json", dest="as_json", action="store_true")
    args = ap.parse_args()
    files = args.files or (10_000 if args.quick else 100_000)
    large = args.large_bytes or (200_000_000 if args.quick else 2_000_000_000)
    # the bytecode an installed ctrlz has (pip compiles it): without it, under
    # PYTHONDONTWRITEBYTECODE, every ctrlz command compiles its modules again (0.3-0.5 s of
    # CPU here), which restic's columns do not pay. The package the commands will import:
    import ctrlz

    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(ctrlz.__file__)],
                   check=False)
    restic = shutil.which("restic")
    if restic is None:
        print("restic is not installed (make bench-remote installs Debian's); its columns are "
              "skipped", file=sys.stderr)
    trees_dir = args.out / "trees"
    trees_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    server = Server()
    try:
        for name, make in ((f"small-{files}", lambda d: small_tree(d, files)),
                           (f"large-{large // 1_000_000}MB",
                            lambda d: large_tree(d, large, 20))):
            with tempfile.TemporaryDirectory(dir=args.out) as tmp:
                work = Path(tmp)
                tree = make(trees_dir / name)
                root = work / "ws"
                shutil.copytree(tree.root, root, symlinks=True)
                print(f"{name}: {tree.files} files, {tree.bytes / 1e6:.0f} MB", file=sys.stderr)
                results[name] = bench_tree(name.split("-")[0], root, work, server,
                                           args.encrypt, restic)
    finally:
        server.stop()
    if args.as_json:
        print(json.dumps(results, indent=2))
        return
    print("| tree | step | ctrlz s | restic s | ctrlz / restic | ctrlz CPU s | restic CPU s "
          "| CPU ratio | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        for label, mine, theirs in PAIRS:
            target = TARGETS.get((name.split("-")[0], label))
            cells = [name, label]
            for suffix in ("", " cpu"):
                a, b = r.get(mine + suffix), r.get(theirs + suffix)
                cells += [f"{a:.2f}" if a is not None else "-",
                          f"{b:.2f}" if b is not None else "-",
                          f"{a / b:.2f}" if a is not None and b else "-"]
            cells.append(f"<= {target}" if target is not None else "")
            print("| " + " | ".join(cells) + " |")


#: (label, ctrlz's figure, restic's figure) of each row
PAIRS = [("full push", "ctrlz full push", "restic full backup"),
         ("full: snapshot + push", "ctrlz snapshot+push", "restic full backup"),
         ("incremental: push alone", "ctrlz incr push", "restic incr backup"),
         ("incremental: snapshot + push", "ctrlz incr snapshot+push", "restic incr backup"),
         ("clone / restore", "ctrlz clone", "restic restore")]
#: the targets of issue 14 (docs/remote.md, Benchmark), as ratios to restic: a full push at
#: most restic's time, an incremental push at most half of it, a clone of the small tree at
#: most restic's restore
TARGETS = {("small", "full push"): 1.0, ("large", "full push"): 1.0,
           ("small", "incremental: push alone"): 0.5, ("large", "incremental: push alone"): 0.5,
           ("small", "clone / restore"): 1.0}


if __name__ == "__main__":
    main()
