"""A failed agent hook reaches the service: its status (the API, and the dashboard's problems
drawn from it) and its event stream (issue 41, section 5). The agent is never told (a hook
exits 0 whatever happens), so these and the CLI are where the user hears of it."""

from __future__ import annotations

import json
import subprocess

from .conftest import CTRLZ, Service
from .test_events import Listener


def test_a_failed_hook_is_in_the_workspace_status_and_the_event_stream(svc: Service) -> None:
    root, wid = svc.workspace("hooky")
    listener = Listener(svc)
    try:
        payload = {"hook_event_name": "PreToolUse", "cwd": str(root), "tool_name": "Bash"}
        hook = subprocess.run([CTRLZ, "hook", "codex"], input=json.dumps(payload), cwd=root,
                              env=svc.env, capture_output=True, text=True, timeout=60)
        assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")
        event = listener.wait(lambda e: e["type"] == "hooks" and e["workspace"] == wid,
                              "hooks")
    finally:
        listener.stop = True
    assert event["hooks"]["failures"] == 1
    assert event["hooks"]["last"]["agent"] == "codex"
    status = svc.ok("GET", f"/v1/workspaces/{wid}")
    assert status["hooks"] == event["hooks"]
    [problem] = [p for p in status["problems"] if "agent hook" in p]
    assert problem.startswith("1 agent hook error(s) since ")
    assert problem.endswith(f"; see {status['hooks']['log']}")
    [overview] = [w for w in svc.ok("GET", "/v1/workspaces") if w["id"] == wid]
    assert problem in overview["status"]["problems"]
