"""Hooks that fail are heard of (issue 41, section 5).

An agent hook must never fail the agent, so it exits 0 and prints nothing whatever happens.
That made two silent failures possible: the JSON fast path (CPython's private ``_json``,
called positionally) changing shape in a later Python would have broken every hook, and the
log of that failure was written through the same codec; and a failure that was logged was
shown only by ``ctrlz status``. Now the fast path is checked once per process and ``json``
takes over, the log does not use it, and the next ctrlz command says once on stderr that
hooks failed, besides ``ctrlz status`` (text, ``--json``) and the service's status.

Hooks run as the agents run them: a subprocess with the documented JSON on stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.workspace import Workspace
from tests.conftest import served_workspace

CTRLZ = str(Path(sys.executable).parent / "ctrlz")

#: ``ctrlz-hook claude`` or ``ctrlz ARGS`` (as their ``main`` runs them) in a process in which
#: one of ``_json``'s functions misbehaves. ``json`` is imported first: it takes ``_json``'s
#: functions as it loads, as a later Python's ``json`` would take functions of that Python's
#: shape.
BROKEN = """
import json, sys, _json
name, how, face = sys.argv[1:4]

def raises(*args, **kwargs):
    raise TypeError(f"{name}() takes exactly 3 positional arguments")

def wrong(*args, **kwargs):  # a scanner that reads nothing, an encoder that writes null
    return lambda *a: (None, 0) if name == "make_scanner" else ["null"]

if how == "missing":
    delattr(_json, name)
else:
    setattr(_json, name, raises if how == "raises" else wrong)
sys.argv = [face, *sys.argv[4:]]
if face == "ctrlz-hook":
    from ctrlz.hooks.runner import main
else:
    from ctrlz.cli import main
main()
"""


def claude(event: str, ws: Path, **fields: object) -> dict:
    return {"session_id": "s-broken-json", "transcript_path": str(ws / ".t.jsonl"),
            "cwd": str(ws), "hook_event_name": event, "permission_mode": "default", **fields}


def bash_without_command(ws: Path) -> dict:
    """A Codex Bash call that names no command: the hook fails (and exits 0)."""
    return {"hook_event_name": "PreToolUse", "cwd": str(ws), "tool_name": "Bash"}


def hook(payload: dict | bytes, cwd: Path, *prefix: str,
         env: dict[str, str] | None = None) -> None:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    cmd = list(prefix) or [CTRLZ, "hook", "claude"]
    proc = subprocess.run(cmd, input=data, cwd=cwd, capture_output=True, timeout=60, env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b""), proc.stderr


def ctrlz(*args: str, cwd: Path, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def ws(ws_dir: Path) -> Path:
    (ws_dir / "README.md").write_text("# demo\n")
    Workspace.init(ws_dir).close()
    return ws_dir


@pytest.mark.parametrize(("name", "how"), [
    ("make_scanner", "raises"), ("make_encoder", "raises"), ("make_scanner", "wrong"),
    ("make_encoder", "wrong"), ("encode_basestring", "missing")])
def test_a_private_json_codec_that_misbehaves_does_not_stop_the_captures(
        ws: Path, name: str, how: str) -> None:
    """Each way ``_json`` could change under ctrlz (a new signature, a function gone, a
    result of another shape): the hook still reads the payload and records the call's
    pre-image, with no error logged, and a rewind puts the file back; and ``--json`` output
    (which the hooks' payloads never need encoded) is still ``json``'s, byte for byte."""
    broken = (sys.executable, "-c", BROKEN, name, how)
    edit = {"file_path": str(ws / "README.md"), "old_string": "# demo",
            "new_string": "# édité"}
    hook(claude("PreToolUse", ws, tool_name="Edit", tool_input=edit, tool_use_id="toolu_j1"),
         ws, *broken, "ctrlz-hook", "claude")
    (ws / "README.md").write_text("# édité\n")
    hook(claude("PostToolUse", ws, tool_name="Edit", tool_input=edit, tool_use_id="toolu_j1",
                tool_response={"success": True}), ws, *broken, "ctrlz-hook", "claude")
    from ctrlz.hooks import recent_hook_errors

    with Workspace.open(ws) as w:
        assert recent_hook_errors(w) == []
    listing = ctrlz("rewind", "--list", "--json", cwd=ws).stdout
    calls = json.loads(listing)["tool_calls"]
    assert [(c["tool_use_id"], c["captured_paths"]) for c in calls] == [
        ("toolu_j1", ["README.md"])]
    there = subprocess.run([*broken, "ctrlz", "rewind", "--list", "--json"], cwd=ws,
                           capture_output=True, text=True, timeout=120)
    assert (there.returncode, there.stdout, there.stderr) == (0, listing, "")
    ctrlz("rewind", "toolu_j1", cwd=ws)
    assert (ws / "README.md").read_text() == "# demo\n"


def test_a_failed_hook_is_told_once_by_the_next_command_and_kept_in_status(ws: Path) -> None:
    """Two hooks fail (a payload that is not JSON, logged in the home's log as no store
    could be found from it; a Codex Bash call without its command, logged in the store). The
    agent hears nothing; the next command says so on stderr, once; ``ctrlz status`` keeps
    saying it for a day, with the count, the last error and the log with the traceback."""
    hook(b"{this is not json", ws)
    hook(bash_without_command(ws), ws, CTRLZ, "hook", "codex")
    first = ctrlz("list", "--json", cwd=ws)
    [line] = [x for x in first.stderr.splitlines() if "agent hook" in x]
    assert line.startswith("ctrlz: warning: 2 agent hook error(s) since ")
    assert "(codex PreToolUse Bash, " in line
    log = Path(line.split("; see ")[1].split()[0])
    assert log.name == "hooks.log" and "Traceback" in log.read_text()
    assert json.loads(first.stdout) == json.loads(ctrlz("list", "--json", cwd=ws).stdout)
    again = ctrlz("list", "--json", cwd=ws)
    assert again.stderr == ""  # told once
    status = ctrlz("status", cwd=ws)
    assert status.stderr == ""
    [problem] = [x for x in status.stdout.splitlines() if "agent hook" in x]
    assert problem.startswith("Problem:   2 agent hook error(s) since ")
    assert f"; see {log}" in problem
    data = json.loads(ctrlz("status", "--json", cwd=ws).stdout)
    assert data["hooks"]["failures"] == 2
    assert data["hooks"]["log"] == str(log)
    assert (data["hooks"]["last"]["agent"], data["hooks"]["last"]["tool"]) == ("codex", "Bash")
    assert data["hooks"]["since"] <= data["hooks"]["last"]["at"]
    # a new failure is news again, and only it
    hook(bash_without_command(ws), ws, CTRLZ, "hook", "codex")
    third = ctrlz("snapshot", cwd=ws)
    assert "ctrlz: warning: 1 agent hook error(s) since " in third.stderr
    assert json.loads(ctrlz("status", "--json", cwd=ws).stdout)["hooks"]["failures"] == 3


def test_a_hook_failure_in_another_workspace_is_not_told_here(ws: Path,
                                                             tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    Workspace.init(other).close()
    hook(b"{not json", other)
    assert ctrlz("list", "--json", cwd=ws).stderr == ""
    assert json.loads(ctrlz("status", "--json", cwd=ws).stdout)["hooks"] is None
    assert "1 agent hook error(s)" in ctrlz("list", "--json", cwd=other).stderr


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A workspace whose daemon serves ``ctrlz list`` through the native door."""
    monkeypatch.delenv("CTRLZ_DAEMON")
    monkeypatch.setenv("LANG", "C.UTF-8")
    root = tmp_path / "served"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    yield from served_workspace(root)


def test_the_workspace_daemon_leaves_the_telling_to_the_cli(served: Workspace) -> None:
    """A command the daemon would serve without Python goes to the Python CLI while a hook
    failure is untold, so that it is told there too; then the daemon serves again."""
    with open(CTRLZ, "rb") as f:
        if f.read(4) != b"\x7fELF":
            pytest.skip("ctrlz is not the native door here")
    env = {**os.environ, "CTRLZ_DOOR_TRACE": "1"}
    root = served.root
    hook(bash_without_command(root), root, CTRLZ, "hook", "codex",
         env={**os.environ, "CTRLZ_DAEMON": "0"})
    told = ctrlz("list", "--json", cwd=root, env=env)
    assert "ctrlz: warning: 1 agent hook error(s) since " in told.stderr
    assert "an agent hook failed since the last command" in told.stderr
    quiet = ctrlz("list", "--json", cwd=root, env=env)
    assert "warning" not in quiet.stderr and "ctrlz door: served by" in quiet.stderr
    assert json.loads(quiet.stdout) == json.loads(told.stdout)
