#!/usr/bin/env python3
"""The service under load, and the dashboard's timeline with a long history.

1. Load: starts a real service (temp home and run directory, any free gateway port), registers
   two workspaces of 40 files each, and runs N API clients over the Unix socket for S seconds
   with E event streams open (tests/service/load.py, the same driver the load test uses):
   p50/p95 latency of snapshot, list, diff, patch and status requests.
2. Timeline: a workspace with ``--timeline`` snapshots (default 5,000; a month of history made
   through the real library by tests/service/history.py), then the median time of the API
   requests the dashboard makes for it (over one kept-alive socket connection) and their sizes,
   and, when Playwright and Chromium are installed, of loading the dashboard in headless
   Chromium until the table is filled and the timeline's chart holds every snapshot.

Prints tables, or one JSON document with ``--json``. Usage:

    .venv/bin/python bench/service.py                    # 50 clients, 60 s, 5 streams; 5,000
    .venv/bin/python bench/service.py --quick --json     # 10 clients, 5 s, 2 streams; 1,000
    .venv/bin/python bench/service.py --no-load --timeline 10000   # the timeline alone
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.service.conftest import CHROMIUM, Service  # noqa: E402
from tests.service.history import make_history  # noqa: E402
from tests.service.load import OPS, run_load  # noqa: E402

REPEAT = 5
#: the chart holds every snapshot (the dashboard's timeline lanes' points)
CHART_FULL_JS = """(n) => { const c = window.echarts && echarts.getInstanceByDom(
  document.getElementById("chart")); if (!c) return false; const o = c.getOption();
  return (o.series || []).filter((s) => String(s.id).startsWith("lane:"))
    .reduce((a, s) => a + s.data.length, 0) >= n; }"""


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


def _median_ms(fn: Any, repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1000, 1)


def _page_load(svc: Service, ws: str, count: int) -> dict[str, Any]:
    """Median ms from navigation to (a) the table's first rows, (b) every snapshot in the
    chart, over REPEAT loads of the dashboard in headless Chromium."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"error": "playwright is not installed"}
    if not os.path.exists(CHROMIUM):
        return {"error": f"no Chromium at {CHROMIUM}"}
    table, chart = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(svc.ok("POST", "/v1/ui/login")["url"])
            for i in range(REPEAT + 1):  # the first load warms caches and is not counted
                t = time.perf_counter()
                page.goto(f"{svc.url}/?load={i}#{ws}")
                page.wait_for_selector("#snap-table tbody tr", timeout=120_000)
                t_table = time.perf_counter() - t
                page.wait_for_function(CHART_FULL_JS, arg=count, timeout=120_000)
                t_chart = time.perf_counter() - t
                if i:
                    table.append(t_table)
                    chart.append(t_chart)
        finally:
            browser.close()
    return {"table_ms": round(statistics.median(table) * 1000), "chart_ms":
            round(statistics.median(chart) * 1000)}


def measure_timeline(count: int) -> dict[str, Any]:
    """The timeline's figures with ``count`` snapshots (see the module docstring)."""
    import httpx2

    base = Path(tempfile.mkdtemp(prefix="ctrlz-bench-timeline-"))
    svc = Service(base)
    try:
        svc.start()
        t = time.perf_counter()
        make_history(base / "webapp", svc.home, count)
        made = time.perf_counter() - t
        ws = svc.ok("GET", "/v1/workspaces")[0]["id"]
        paths = {"timeline": f"/v1/workspaces/{ws}/timeline",
                 "table page": f"/v1/workspaces/{ws}/snapshots?limit=200",
                 "one snapshot": None,
                 "status": f"/v1/workspaces/{ws}",
                 "workspaces": "/v1/workspaces",
                 "full list": f"/v1/workspaces/{ws}/snapshots"}
        api: dict[str, dict[str, float]] = {}
        with httpx2.Client(transport=httpx2.HTTPTransport(uds=svc.socket),
                           base_url="http://ctrlz", timeout=120) as c:
            middle = c.get(paths["timeline"]).json()["rows"][count // 2][0]
            paths["one snapshot"] = f"/v1/workspaces/{ws}/snapshots/{middle}"
            for name, path in paths.items():
                size = len(c.get(path).content)
                api[name] = {"ms": _median_ms(lambda path=path: c.get(path)), "bytes": size}
        return {"snapshots": count, "make_seconds": round(made, 1), "api": api,
                "page": _page_load(svc, ws, count)}
    finally:
        svc.stop()
        shutil.rmtree(base, ignore_errors=True)


def print_timeline(t: dict[str, Any]) -> None:
    print(f"the dashboard's timeline with {t['snapshots']} snapshots (made in "
          f"{t['make_seconds']} s), median of {REPEAT}")
    print(f"{'request':<16}{'ms':>9}{'bytes':>11}")
    for name, a in t["api"].items():
        print(f"{name:<16}{a['ms']:>9}{a['bytes']:>11}")
    page = t["page"]
    if "error" in page:
        print(f"page load: not measured ({page['error']})")
    else:
        print(f"page load in Chromium: table {page['table_ms']} ms, every snapshot in the "
              f"chart {page['chart_ms']} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--streams", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="10 clients, 5 s, 2 streams; a timeline of 1,000")
    parser.add_argument("--timeline", type=int, default=None, metavar="N",
                        help="snapshots in the timeline workspace (default 5000; 0: skip)")
    parser.add_argument("--no-load", action="store_true", help="the timeline figures only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.seconds, args.streams = 10, 5.0, 2
    if args.timeline is None:
        args.timeline = 1000 if args.quick else 5000
    out: dict[str, Any] = {} if args.no_load else measure(args.clients, args.seconds,
                                                           args.streams)
    if args.timeline:
        out["timeline"] = measure_timeline(args.timeline)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    if args.no_load:
        print_timeline(out["timeline"])
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
    if "timeline" in out:
        print()
        print_timeline(out["timeline"])


if __name__ == "__main__":
    main()
