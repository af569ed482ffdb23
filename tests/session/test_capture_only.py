"""Capture-only peers: a process of a sandboxed session may snapshot through the workspace
daemon's socket and the service's, and is refused rollback, delete, gc, stop and the rest.

Real processes and real sockets: a child process is registered as a sandboxed run exactly as
the sandbox's launcher registers itself (``<store>/sandboxed/<session>.json`` with its pid and
start time), and asks from itself, from a grandchild, and (under real strace, as a sandboxed
run is traced) from an orphan that double-forked and was re-parented away from it. The test
process, which is no sandboxed run's, is still served everything.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.session import daemon_client
from ctrlz.session.daemon.confined import RECORDS, Record, confined_by, service_allows
from tests.service.conftest import Service

#: What a process inside asks, as JSON on stdout. argv: STORE SERVICE_SOCKET WS_ID MODE.
#: MODE ``self``: this process asks; ``child``: a child asks; ``orphan``: a grandchild asks
#: once its parent has exited (it is re-parented to init or a subreaper).
INSIDE = r'''
import http.client, json, os, socket, sys, time
store, service, wid, mode = sys.argv[1:5]
print(os.getpid(), flush=True)
sys.stdin.readline()  # the record is written


class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(service)


def api(method, path, body=None):
    c = Unix("ctrlz", timeout=60)
    c.request(method, path, body=None if body is None else json.dumps(body),
              headers={"content-type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read() or b"null")
    return [r.status, data.get("error") if isinstance(data, dict) else None]


def ask():
    from ctrlz.errors import CaptureOnly
    from ctrlz.session import daemon_client, restore_wire, served
    out = {"ppid": os.getppid()}
    try:
        served.ask_restore(store, {}, restore_wire.encode_rollback("base", [], "rollback"),
                           "rollback")
        out["restore"] = "ran"
    except CaptureOnly as exc:
        out["restore"] = "CaptureOnly: " + str(exc)
    for op in ({"op": "gc"}, {"op": "stop"},
               {"op": "door", "version": 1, "argv": ["rollback", "base"]},
               {"op": "door", "version": 1, "argv": ["list", "--json"]}):
        try:
            daemon_client.request(store, op)
            out[op["op"] + " " + " ".join(op.get("argv", []))] = "served"
        except daemon_client.DaemonUnavailable as exc:
            out[op["op"] + " " + " ".join(op.get("argv", []))] = str(exc)
    out["snapshot"] = daemon_client.snapshot(store, type="tool", label="inside")["ok"]
    base = f"/v1/workspaces/{wid}"
    out["api"] = {
        "snapshot": api("POST", base + "/snapshots", {"label": "inside"}),
        "rollback": api("POST", base + "/rollback", {"to": "base"}),
        "gc": api("POST", base + "/gc"),
        "delete": api("DELETE", base + "/snapshots/base"),
        "prune": api("POST", base + "/prune", {"keep": 1}),
        "register": api("POST", "/v1/workspaces", {"path": "/tmp"}),
        "list": api("GET", base + "/snapshots"),
        "stop": api("POST", "/v1/service/stop"),
        "service": api("GET", "/v1/service"),
    }
    return out


if mode == "self":
    print(json.dumps(ask()), flush=True)
elif mode == "child":
    pid = os.fork()
    if pid == 0:
        print(json.dumps(ask()), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
elif mode == "late":  # the orphan asks once this process is gone; it prints itself
    anchor = os.getpid()
    if os.fork() == 0:
        if os.fork() == 0:
            while os.path.exists(f"/proc/{anchor}"):  # until strace has reaped it
                time.sleep(0.01)
            print(json.dumps(ask()), flush=True)
            os._exit(0)
        os._exit(0)
else:
    r, w = os.pipe()
    if os.fork() == 0:
        middle = os.getpid()
        if os.fork() == 0:
            while os.getppid() == middle:  # until the middle process is gone
                time.sleep(0.01)
            os.write(w, json.dumps(ask()).encode())
            os._exit(0)
        os._exit(0)  # the middle process: the grandchild is now an orphan
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    print(data.decode(), flush=True)
'''


def start_time(pid: int) -> int | None:
    """Field 22 of ``/proc/PID/stat``, as the launcher records it."""
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return int(data[data.rindex(b")") + 2:].split()[19])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Path, str]]:
    """A service and a workspace with its daemon, in one home."""
    svc = Service(tmp_path_factory.mktemp("capture")).start()
    try:
        root, wid = svc.workspace("w")
        svc.ctrlz("snapshot", "-m", "base", cwd=root)
        store = next((svc.home / "workspaces").iterdir())
        env = {**svc.env, "CTRLZ_DAEMON": "1"}
        subprocess.run([sys.executable, "-c", "import sys; from ctrlz.session import "
                        "daemon_client as d; sys.exit(0 if d.start(sys.argv[1], sys.argv[2], "
                        "wait=True, timeout=60)['ready'] else 1)", str(root), str(store)],
                       env=env, check=True, timeout=120)
        yield svc, store, wid
        daemon_client.stop(store)
    finally:
        svc.stop()


def inside(served: tuple[Service, Path, str], mode: str, *, traced: bool = False,
           name_tracer: bool = False) -> dict[str, object]:
    """Run INSIDE as a registered sandboxed process; what it was answered."""
    svc, store, wid = served
    argv = [sys.executable, "-c", INSIDE, str(store), svc.socket, wid, mode]
    if traced:
        strace = shutil.which("strace")
        if strace is None:
            pytest.skip("strace is not installed")
        argv = [strace, "-f", "-qq", "-o", os.devnull, "--", *argv]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=svc.env)
    assert proc.stdout is not None and proc.stdin is not None
    pid = int(proc.stdout.readline())
    (store / RECORDS).mkdir(exist_ok=True)
    record = store / RECORDS / "sess_test.json"
    data = {"pid": pid, "start": start_time(pid), "self": True, "mode": "landlock",
            "session": "sess_test"}
    if name_tracer:  # as a launcher would, from its own status before it confines itself
        status = Path(f"/proc/{pid}/status").read_text()
        tracer = int(status.split("TracerPid:")[1].split()[0])
        data.update(tracer=tracer, tracer_start=start_time(tracer))
    record.write_text(json.dumps(data))
    try:
        out, err = proc.communicate("go\n", timeout=120)
    finally:
        record.unlink()
    assert proc.returncode == 0, err
    return {**json.loads(out.strip().splitlines()[-1]), "anchor": pid}


def check_refused(seen: dict[str, object]) -> None:
    assert str(seen["restore"]).startswith("CaptureOnly: refused: a rollback comes from a "
                                           "sandboxed session"), seen
    for op in ("gc ", "stop ", "door rollback base", "door list --json"):
        assert "sandboxed session" in str(seen[op]), (op, seen[op])
    assert seen["snapshot"] is True
    api = seen["api"]
    assert isinstance(api, dict)
    assert api["snapshot"][0] == 201 and api["service"][0] == 200
    for name in ("rollback", "gc", "delete", "prune", "register", "list", "stop"):
        assert api[name] == [403, "CaptureOnly"], (name, api[name])


def test_the_sandboxed_process_itself_may_only_capture(served) -> None:  # noqa: ANN001
    check_refused(inside(served, "self"))


def test_its_descendants_may_only_capture(served) -> None:  # noqa: ANN001
    check_refused(inside(served, "child"))


def test_an_orphan_it_left_may_only_capture_while_traced(served) -> None:  # noqa: ANN001
    seen = inside(served, "orphan", traced=True)
    assert seen["ppid"] != seen["anchor"]  # re-parented: its ancestry no longer says so
    check_refused(seen)


def test_an_orphan_outliving_it_may_only_capture_when_the_record_names_the_tracer(
        served) -> None:  # noqa: ANN001
    seen = inside(served, "late", traced=True, name_tracer=True)
    assert seen["ppid"] != seen["anchor"]
    check_refused(seen)


def test_outside_the_sandbox_everything_is_served(served) -> None:  # noqa: ANN001
    svc, store, wid = served
    (store / RECORDS).mkdir(exist_ok=True)
    # a live record that names another process (this test's parent) changes nothing here
    ppid = os.getppid()
    (store / RECORDS / "sess_other.json").write_text(json.dumps(
        {"pid": os.getpid(), "start": start_time(os.getpid()), "self": False,
         "session": "sess_other"}))
    try:
        assert svc.api("POST", f"/v1/workspaces/{wid}/gc").status_code == 200
        assert svc.api("GET", f"/v1/workspaces/{wid}/snapshots").status_code == 200
        reply = daemon_client.request(store, {"op": "ping"})
        assert reply["ok"] is True
    finally:
        (store / RECORDS / "sess_other.json").unlink()
    assert ppid > 0


def test_the_rules_alone() -> None:
    assert service_allows("POST", "/v1/workspaces/w-1/snapshots")
    assert not service_allows("POST", "/v1/workspaces/w-1/snapshots/x/pin")
    assert not service_allows("DELETE", "/v1/workspaces/w-1/snapshots")
    assert not service_allows("GET", "/v1/workspaces")
    me = os.getpid()
    start = start_time(me)
    assert start is not None
    assert confined_by(me, [Record(me, start, True, "s")]) is not None
    assert confined_by(me, [Record(me, start, False, "s")]) is None  # only its descendants
    assert confined_by(me, [Record(me, start + 1, True, "s")]) is None  # a recycled pid
    assert confined_by(me, [Record(os.getppid(), start_time(os.getppid()) or 0, False,
                                   "s")]) is not None
