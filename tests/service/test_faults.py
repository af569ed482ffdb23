"""Faults: the service killed mid-rollback, a watcher killed, the service killed under its
watchers, a workspace deleted under the service."""

from __future__ import annotations

import os
import shutil
import signal

import httpx2

from ..conftest import tree_state, watched
from .conftest import Service, wait_for


def _watcher(svc: Service, ws: str, state: str = "running") -> dict:
    return wait_for(lambda: (lambda w: w["watcher"] if w.get("watcher") and
                             w["watcher"]["state"] == state else None)(
        svc.ok("GET", f"/v1/workspaces/{ws}")), what=f"the watcher to be {state}")


def test_kill9_mid_rollback_recovers_through_the_journal(fresh_svc: Service) -> None:
    files = {f"d{i % 7}/f{i}.txt": f"v1 {i}\n" for i in range(60)}
    svc = fresh_svc
    # the service dies by SIGKILL at the 5th file the rollback puts in place
    svc.start(env={"CTRLZ_FAILPOINT": "restore-place:4"})
    root, ws = svc.workspace("crash", files)
    base = f"/v1/workspaces/{ws}"
    snap = svc.ok("POST", f"{base}/snapshots", {"label": "v1"})
    for rel in files:
        (root / rel).write_text(f"v2 {rel}\n")
    before = tree_state(root)
    try:
        svc.api("POST", f"{base}/rollback", {"snapshot": snap["id"]})
        raise AssertionError("the service should have died mid-rollback")
    except httpx2.TransportError:
        pass
    assert svc.proc is not None and svc.proc.wait(10) == -signal.SIGKILL
    store = svc.home / "workspaces" / ws
    # interrupted between journal and commit: the journal is there, unless the dead service's
    # watcher, until the kernel stops it too, opened the workspace and recovered it already
    # (any process that opens it does); the checks below hold either way
    svc.start()  # a new service; opening the workspace runs the journal's recovery
    # (whoever opens it first does: this request, or the watcher the new service starts; a
    # reader that comes while another process recovers sees the state before, so wait)
    ops = wait_for(lambda: (lambda o: o if o["operations"] else None)(
        svc.ok("GET", f"{base}/operations")), what="the recovered undo entry")
    assert ops["operations"][-1]["status"] == "interrupted"
    assert not (store / "restore-journal").exists()
    leftovers = [p for p in root.rglob("*") if ".ctrlz-tmp-" in p.name]
    assert not leftovers
    svc.ok("POST", f"{base}/undo")  # back to exactly the state before the rollback
    assert tree_state(root) == before
    assert svc.ok("POST", f"{base}/verify")["ok"]
    done = svc.ok("POST", f"{base}/rollback", {"snapshot": snap["id"]})
    assert done["counts"]["modified"] == 60
    assert all((root / rel).read_text() == text for rel, text in files.items())


@watched
def test_killed_watcher_is_restarted(svc: Service) -> None:
    _, ws = svc.workspace("restarted")
    first = _watcher(svc, ws)
    os.kill(first["pid"], signal.SIGKILL)
    again = wait_for(lambda: (lambda w: w if w["pid"] not in (None, first["pid"])
                              and w["state"] == "running" else None)(
        svc.ok("GET", f"/v1/workspaces/{ws}")["watcher"]), what="a new watcher")
    assert again["restarts"] == first["restarts"] + 1 and again["last_exit"] == -signal.SIGKILL


@watched
def test_watchers_stop_with_the_service_and_outlive_no_killed_one(fresh_svc: Service) -> None:
    svc = fresh_svc.start()
    _, ws1 = svc.workspace("one")
    _, ws2 = svc.workspace("two")
    pids = [_watcher(svc, ws1)["pid"], _watcher(svc, ws2)["pid"]]
    svc.kill9()  # no clean stop: each watcher must notice by itself

    def gone() -> bool:
        for pid in pids:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            try:  # a zombie (exited, not reaped by its dead parent's reaper yet) is gone too
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(") ", 1)[1].startswith("Z"):
                        continue
            except OSError:
                continue
            return False
        return True

    wait_for(gone, timeout=15, what="orphaned watchers to exit")
    pids_left = pids
    svc.start()  # a new service starts them again
    new = _watcher(svc, ws1)["pid"]
    assert new not in pids
    svc.stop()  # a clean stop takes them down with it
    pids = [new]
    wait_for(gone, timeout=15, what="the watcher to stop with the service")
    assert pids_left


@watched
def test_workspace_deleted_under_the_service(svc: Service) -> None:
    root, ws = svc.workspace("doomed")
    _, other = svc.workspace("survivor")
    _watcher(svc, ws)
    svc.ok("POST", f"/v1/workspaces/{ws}/snapshots", {})
    shutil.rmtree(root)
    w = wait_for(lambda: (lambda x: x if x["watcher"] and x["watcher"]["state"] == "missing"
                          else None)(next(x for x in svc.ok("GET", "/v1/workspaces")
                                          if x["id"] == ws)), what="the workspace to be missing")
    assert w["present"] is False and "gone" in w["problem"]
    r = svc.api("GET", f"/v1/workspaces/{ws}/snapshots")
    assert r.status_code == 404 and "gone" in r.json()["message"]
    assert svc.ok("GET", f"/v1/workspaces/{other}/snapshots") == []
    svc.ok("POST", f"/v1/workspaces/{other}/snapshots", {})
    assert svc.gw("GET", "/status").status_code == 200


def test_a_workspace_whose_root_became_a_symlink_to_another_is_refused_not_acted_on(
        svc: Service) -> None:
    """``mv X X.old && ln -s Y X``: X's id must not reach Y (opening X follows the link to
    Y's store), neither for a read nor for a rollback."""
    x_root, x = svc.workspace("swapped-x", {"x.txt": "x\n"})
    y_root, y = svc.workspace("swapped-y", {"y.txt": "y1\n"})
    svc.ok("POST", f"/v1/workspaces/{y}/snapshots", {"label": "y-base"})
    (y_root / "y.txt").write_text("y2, newer work\n")
    x_root.rename(x_root.with_name("swapped-x.old"))
    x_root.symlink_to(y_root)

    r = svc.api("POST", f"/v1/workspaces/{x}/rollback", {"snapshot": "0"})
    assert r.status_code == 404, r.text
    msg = r.json()["message"]
    assert "now opens as" in msg and str(y_root) in msg and "\n" not in msg
    assert (y_root / "y.txt").read_text() == "y2, newer work\n"
    assert svc.api("GET", f"/v1/workspaces/{x}/snapshots").status_code == 404
    w = next(w for w in svc.ok("GET", "/v1/workspaces") if w["id"] == x)
    assert w["status"] is None and "now opens as" in w["problem"]
    assert [s["label"] for s in svc.ok("GET", f"/v1/workspaces/{y}/snapshots")] == ["y-base"]


def test_a_workspace_whose_store_another_process_holds_does_not_freeze_the_service(
        svc: Service) -> None:
    """45 changes queued behind a store lock another process holds (a long CLI command)
    parked every worker thread of the service, and every other request hung: they wait
    their turn without a worker now, and the service and other workspaces keep answering."""
    import fcntl
    import threading

    _, busy = svc.workspace("busy", {"a.txt": "a\n"})
    _, calm = svc.workspace("calm", {"b.txt": "b\n"})
    answers: list[int] = []
    fd = os.open(svc.home / "workspaces" / busy / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # stands for a long command on "busy"

        def change() -> None:
            r = svc.api("POST", f"/v1/workspaces/{busy}/snapshots", {"type": "auto"},
                        timeout=120)
            answers.append(r.status_code)

        queued = [threading.Thread(target=change, daemon=True) for _ in range(45)]
        for t in queued:
            t.start()
        # let them reach the service (the check below cannot pass wrongly if they have not)
        threading.Event().wait(2)
        assert svc.api("GET", "/v1/service", timeout=20).status_code == 200
        assert svc.api("GET", f"/v1/workspaces/{calm}/snapshots", timeout=20).status_code \
            == 200
        assert svc.api("POST", f"/v1/workspaces/{calm}/snapshots", {},
                       timeout=20).status_code == 201
    finally:
        os.close(fd)  # the "command" ends: the queued changes go through, one at a time
    for t in queued:
        t.join(120)
    assert sorted(set(answers)) == [201] and len(answers) == 45
