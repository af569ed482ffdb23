#!/usr/bin/env python3
"""The service under load: p50/p95 latency of snapshot, list, diff, patch and status requests.

Starts a real service (temp home and run directory, any free gateway port), registers two
workspaces of 40 files each, and runs N API clients over the Unix socket for S seconds with E
event streams open (tests/service/load.py, the same driver the load test uses). Prints a table,
or one JSON document with ``--json``. Usage:

    .venv/bin/python bench/service.py                    # 50 clients, 60 s, 5 streams
    .venv/bin/python bench/service.py --quick --json     # 10 clients, 5 s, 2 streams
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.service.conftest import Service  # noqa: E402
from tests.service.load import OPS, run_load  # noqa: E402


def measure(clients: int, seconds: float, streams: int) -> dict:
    base = Path(tempfile.mkdtemp(prefix="ctrlz-bench-service-"))
    svc = Service(base)
    try:
        svc.start()
        workspaces = []
        for name in ("bench-a", "bench-b"):
            files = {f"f{i}.txt": f"{name} {i}\n" * 20 for i in range(40)}
            files[".ctrlz.toml"] = "auto_max = 100000\nmax_count = 100000\n"
            _, ws = svc.workspace(name, files)
            svc.ok("POST", f"/v1/workspaces/{ws}/snapshots", {"label": "baseline"})
            workspaces.append(ws)
        result = run_load(lambda: svc.socket, workspaces, clients=clients, seconds=seconds,
                          streams=streams)
        out = result.summary()
        out.update(clients=clients, streams=streams,
                   verify_ok=all(svc.ok("POST", f"/v1/workspaces/{w}/verify")["ok"]
                                 for w in workspaces),
                   lost_or_duplicated=sum(len(v) - len(set(v)) for v in result.created.values()))
        return out
    finally:
        svc.stop()
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--streams", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="10 clients, 5 s, 2 streams")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.seconds, args.streams = 10, 5.0, 2
    out = measure(args.clients, args.seconds, args.streams)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"service under load: {out['clients']} clients, {out['streams']} event streams, "
          f"{out['seconds']} s, {out['requests']} requests ({out['per_second']}/s), "
          f"{out['failures']} failed, {out['client_errors']} 4xx, verify "
          f"{'ok' if out['verify_ok'] else 'FAILED'}")
    print(f"{'op':<10}{'count':>8}{'p50 ms':>10}{'p95 ms':>10}")
    for op in OPS:
        if op in out["ops"]:
            o = out["ops"][op]
            print(f"{op:<10}{o['count']:>8}{o['p50_ms']:>10}{o['p95_ms']:>10}")


if __name__ == "__main__":
    main()
