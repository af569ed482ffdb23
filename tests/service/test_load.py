"""Load: API clients mixing snapshots, lists and diffs on two workspaces, with event streams
open. No failed request (only clean 4xx would be allowed; none is expected), no lost or
duplicated snapshot (in the store and in every stream), ``ctrlz verify`` clean. The full run
(50 clients, 60 s, 5 streams) is marked slow; ``make test`` runs a slice of a few seconds.
Latencies are measured by bench/service.py, not asserted here."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from .conftest import Service
from .load import run_load

POOLS = "auto_max = 100000\nmax_count = 100000\n"


def _workspaces(svc: Service) -> list[str]:
    ids = []
    for name in ("load-a", "load-b"):
        files = {f"f{i}.txt": f"{name} {i}\n" * 20 for i in range(40)}
        files[".ctrlz.toml"] = POOLS
        _, ws = svc.workspace(name, files)
        svc.ok("POST", f"/v1/workspaces/{ws}/snapshots", {"label": "baseline"})
        ids.append(ws)
    return ids


def _check(svc: Service, workspaces: list[str], clients: int, seconds: float,
           streams: int) -> None:
    result = run_load(lambda: svc.socket, workspaces, clients=clients, seconds=seconds,
                      streams=streams)
    print(json.dumps(result.summary()))
    assert not result.failures, result.failures[:5]
    assert not result.client_errors, result.client_errors[:5]
    assert sum(result.requests.values()) > clients
    for ws in workspaces:
        made = result.created[ws]
        assert made and len(made) == len(set(made))  # no duplicated id
        stored = {s["id"] for s in svc.ok("GET", f"/v1/workspaces/{ws}/snapshots")}
        assert set(made) <= stored  # none lost
        assert svc.ok("POST", f"/v1/workspaces/{ws}/verify")["ok"]
        root = next(w["root"] for w in svc.ok("GET", "/v1/workspaces") if w["id"] == ws)
        assert json.loads(svc.ctrlz("verify", "--json", cwd=Path(root)).stdout)["ok"]
    assert len(result.streamed) == streams
    for seen in result.streamed:
        counts = Counter(seen)
        assert all(n == 1 for n in counts.values()), "an event was sent twice"
        for ws in workspaces:
            assert {(ws, i) for i in result.created[ws]} <= set(counts), "an event was lost"


def test_load_slice(fresh_svc: Service) -> None:
    svc = fresh_svc.start()
    _check(svc, _workspaces(svc), clients=8, seconds=4, streams=2)


@pytest.mark.slow
def test_load_full(fresh_svc: Service) -> None:
    svc = fresh_svc.start()
    _check(svc, _workspaces(svc), clients=50, seconds=60, streams=5)
