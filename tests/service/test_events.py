"""Changes made outside the service reach the event stream: by inotify on the stores'
database files, and by the once-a-second look where inotify is not used.

To show that inotify alone delivers, the first service looks at the stores only once an hour
(``CTRLZ_SERVICE_POLL_SECONDS``): a CLI snapshot that reaches its stream within the (generous)
timeout can only have been found because inotify woke it. The second service has inotify off
(``CTRLZ_SERVICE_INOTIFY=0``) and must still deliver, by its look. No timing is asserted
beyond the timeouts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from ..conftest import inotify_watched
from .conftest import Service


class Listener:
    """One open ``GET /v1/events`` stream over the socket, read by a thread."""

    def __init__(self, svc: Service) -> None:
        self.svc = svc
        self.events: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self.stop = False
        self._lock = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(20), "the event stream did not open"

    def _run(self) -> None:
        with httpx2.Client(transport=httpx2.HTTPTransport(uds=self.svc.socket),
                           base_url="http://ctrlz", timeout=None) as c, \
                c.stream("GET", "/v1/events") as r:
            for line in r.iter_lines():
                if self.stop:
                    return
                if line.startswith("data:"):
                    with self._lock:
                        self.events.append(json.loads(line[5:]))
                        self._lock.notify_all()
                    self.ready.set()

    def wait(self, match: Callable[[dict[str, Any]], bool], what: str,
             timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                found = next((e for e in self.events if match(e)), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                assert left > 0, f"no {what} event in {timeout} s: {self.events}"
                self._lock.wait(left)


@pytest.fixture
def inotify_only(tmp_path: Path) -> Iterator[Service]:
    s = Service(tmp_path / "s", extra_env={"CTRLZ_SERVICE_POLL_SECONDS": "3600"}).start()
    try:
        yield s
    finally:
        s.stop()


def _snapshot_events(svc: Service, listener: Listener, name: str) -> None:
    """``ctrlz init``, snapshot, pin, rm in the CLI: each reaches the open stream."""
    root = svc.base / name
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("x = 1\n")
    svc.ctrlz("init", str(root))
    ws = listener.wait(lambda e: e["type"] == "workspace" and e["workspace_info"]
                       and e["workspace_info"]["root"] == str(root), "workspace")["workspace"]
    svc.ctrlz("snapshot", "-m", "from the terminal", cwd=root)
    snap = listener.wait(lambda e: e["type"] == "snapshot" and e["workspace"] == ws
                         and e["snapshot"]["label"] == "from the terminal", "snapshot")
    sid = snap["snapshot"]["id"]
    svc.ctrlz("pin", sid, cwd=root)
    listener.wait(lambda e: e["type"] == "snapshot-updated" and e["snapshot"]["id"] == sid
                  and e["snapshot"]["pinned"], "snapshot-updated")
    (root / "src" / "app.py").write_text("x = 2\n")
    svc.ctrlz("snapshot", "-m", "second", cwd=root)
    second = listener.wait(lambda e: e["type"] == "snapshot"
                           and e["snapshot"]["label"] == "second", "second snapshot")
    svc.ctrlz("rm", second["snapshot"]["id"], cwd=root)
    listener.wait(lambda e: e["type"] == "snapshot-removed"
                  and second["snapshot"]["id"] in e["ids"], "snapshot-removed")
    labels = [e["snapshot"]["label"] for e in listener.events if e["type"] == "snapshot"]
    assert labels.count("from the terminal") == 1 and labels.count("second") == 1  # once each


@inotify_watched
def test_cli_changes_arrive_by_inotify(inotify_only: Service) -> None:
    svc = inotify_only
    assert svc.ok("GET", "/v1/service")["events"]["source"] == "inotify"
    listener = Listener(svc)
    try:
        _snapshot_events(svc, listener, "webapp")
        # an agent hook's tool call too (it writes the tool-call catalog)
        root = svc.base / "webapp"
        payload = {"session_id": "s1", "cwd": str(root), "hook_event_name": "PreToolUse",
                   "tool_name": "Bash", "tool_input": {"command": "rm -rf src"},
                   "tool_use_id": "toolu_01"}
        svc.ctrlz("hook", "claude", cwd=root, input=json.dumps(payload))
        listener.wait(lambda e: e["type"] == "toolcall"
                      and e["tool_call"]["tool_use_id"] == "toolu_01", "toolcall")
        # a file tool's capture lands in the tool-call inbox, not the catalog: it arrives too
        edit = payload | {"tool_name": "Edit", "tool_use_id": "toolu_02",
                          "tool_input": {"file_path": str(root / "notes.txt")}}
        svc.ctrlz("hook", "claude", cwd=root, input=json.dumps(edit))
        listener.wait(lambda e: e["type"] == "toolcall"
                      and e["tool_call"]["tool_use_id"] == "toolu_02", "toolcall")
        assert svc.ok("GET", "/v1/service")["events"]["wakeups"] > 0
    finally:
        listener.stop = True


def test_without_inotify_the_look_still_delivers(tmp_path: Path) -> None:
    svc = Service(tmp_path / "s", extra_env={"CTRLZ_SERVICE_INOTIFY": "0"}).start()
    try:
        assert svc.ok("GET", "/v1/service")["events"]["source"] == "poll"
        listener = Listener(svc)
        try:
            _snapshot_events(svc, listener, "webapp")
        finally:
            listener.stop = True
    finally:
        svc.stop()
