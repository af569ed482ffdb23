"""A load on the real service: API clients mixing snapshots, lists and diffs on several
workspaces, plus open event streams. Used by tests/service/test_load.py (a short slice, and
the full 50 clients x 60 s under ``-m slow``) and by bench/service.py (latencies).

Each client is a thread with its own connection over the Unix socket. What counts as a failure
is anything but a clean answer: a transport error or a 5xx. A 4xx is counted apart (none is
expected: the workspaces' pools are made large enough that no snapshot is refused).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2

OPS = ("snapshot", "list", "diff", "patch", "status")


@dataclass
class LoadResult:
    requests: Counter[str] = field(default_factory=Counter)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    client_errors: list[str] = field(default_factory=list)
    created: dict[str, list[str]] = field(default_factory=dict)  # workspace -> snapshot ids
    streamed: list[list[tuple[str, str]]] = field(default_factory=list)  # per stream
    seconds: float = 0.0

    def percentile(self, op: str, q: float) -> float:
        values = sorted(self.latencies.get(op, []))
        if not values:
            return float("nan")
        return values[min(len(values) - 1, int(q * len(values)))]

    def summary(self) -> dict[str, Any]:
        total = sum(self.requests.values())
        return {"seconds": round(self.seconds, 1), "requests": total,
                "per_second": round(total / self.seconds, 1) if self.seconds else None,
                "failures": len(self.failures), "client_errors": len(self.client_errors),
                "ops": {op: {"count": self.requests[op],
                             "p50_ms": round(self.percentile(op, 0.5) * 1000, 1),
                             "p95_ms": round(self.percentile(op, 0.95) * 1000, 1)}
                        for op in OPS if self.requests[op]}}


def run_load(socket: Callable[[], str], workspaces: list[str], *, clients: int, seconds: float,
             streams: int, settle: float = 3.0) -> LoadResult:
    """Run the load; returns what happened. ``socket()`` gives the socket's address."""
    result = LoadResult(created={w: [] for w in workspaces})
    lock = threading.Lock()
    stop = threading.Event()
    streams_ready = threading.Barrier(streams + 1) if streams else None

    def client(i: int) -> None:
        ws = workspaces[i % len(workspaces)]
        base = f"/v1/workspaces/{ws}"
        n = 0
        with httpx2.Client(transport=httpx2.HTTPTransport(uds=socket()),
                           base_url="http://ctrlz", timeout=120) as c:
            while not stop.is_set():
                op = OPS[(i + n) % len(OPS)]
                n += 1
                if op == "snapshot":
                    req = ("POST", f"{base}/snapshots", {"type": "auto", "label": f"c{i}-{n}"})
                elif op == "list":
                    req = ("GET", f"{base}/snapshots", None)
                elif op == "diff":
                    req = ("GET", f"{base}/diff", None)
                elif op == "patch":
                    req = ("GET", f"{base}/patch?path=f0.txt&old=latest", None)
                else:
                    req = ("GET", base, None)
                started = time.perf_counter()
                try:
                    r = c.request(req[0], req[1], json=req[2])
                except httpx2.TransportError as exc:
                    with lock:
                        result.failures.append(f"{op}: {type(exc).__name__}: {exc}")
                    continue
                took = time.perf_counter() - started
                with lock:
                    result.requests[op] += 1
                    result.latencies.setdefault(op, []).append(took)
                    if r.status_code >= 500:
                        result.failures.append(f"{op}: {r.status_code} {r.text[:200]}")
                    elif r.status_code >= 400 and not (op == "patch" and r.status_code == 404):
                        result.client_errors.append(f"{op}: {r.status_code} {r.text[:200]}")
                    elif op == "snapshot":
                        result.created[ws].append(r.json()["id"])

    def stream(k: int) -> None:
        seen: list[tuple[str, str]] = []
        result.streamed.append(seen)
        try:
            with httpx2.Client(transport=httpx2.HTTPTransport(uds=socket()),
                               base_url="http://ctrlz", timeout=None) as c, \
                    c.stream("GET", "/v1/events") as r:
                first = True
                for line in r.iter_lines():
                    if first:
                        assert streams_ready is not None
                        streams_ready.wait()
                        first = False
                    if line.startswith("data:"):
                        event = json.loads(line[5:])
                        if event["type"] == "snapshot":
                            seen.append((event["workspace"], event["snapshot"]["id"]))
                    if stop.is_set() and settled.is_set():
                        return
        except httpx2.TransportError as exc:
            with lock:
                result.failures.append(f"stream {k}: {exc}")

    settled = threading.Event()
    readers = [threading.Thread(target=stream, args=(k,), daemon=True) for k in range(streams)]
    for t in readers:
        t.start()
    if streams_ready is not None:
        streams_ready.wait(30)
    workers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    began = time.perf_counter()
    for t in workers:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in workers:
        t.join(300)
    result.seconds = time.perf_counter() - began
    time.sleep(settle)  # the poller announces what it has not yet (once a second)
    settled.set()
    # a keep-alive or one more event ends each reader; nudge with a snapshot on the first ws
    with httpx2.Client(transport=httpx2.HTTPTransport(uds=socket()),
                       base_url="http://ctrlz", timeout=60) as c:
        c.post(f"/v1/workspaces/{workspaces[0]}/snapshots", json={"type": "auto",
                                                                  "label": "end"})
    for t in readers:
        t.join(30)
    return result
