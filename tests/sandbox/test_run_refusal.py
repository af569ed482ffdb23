"""What the launcher does before the agent runs: find out that the sandbox cannot be made (one
line, exit 2, nothing run), and exec the command the agent's PATH names.

``ctrlz run --sandbox`` does not probe bwrap before the run (docs/sandbox.md, "Start-up"): the
native launcher gives bwrap's stderr to a memfd until the launcher inside has made its filter,
and if bwrap dies first, its first line is the cause. Whatever else the launcher refuses for
(Landlock, seccomp) takes the same way. Simulated with the seccomp wrapper, as root and as uid
65534 (with the native launcher copied into its venv: the ``native`` fixture), in the areas
of ``test_run_sandbox``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.sandbox.test_run_sandbox import Area, area, need  # noqa: F401


def wrapped(area: Area, *deny: str) -> list[str]:  # noqa: F811
    python = sys.executable if area.user is None else area.user.python
    return [python, "-m", "ctrlz.sandbox.seccomp",
            *[a for d in deny for a in ("--deny", d)], "--"]


def refused_run(area: Area, deny: list[str], mode: str) -> str:  # noqa: F811
    """Run ``touch ran`` sandboxed under the wrapper; the one line ctrlz said (exit 2)."""
    marker = area.ws / "ran"
    proc = subprocess.run([*wrapped(area, *deny), *area.command(
        "run", f"--sandbox={mode}", "--", "touch", str(marker))], cwd=area.ws, env=area.env,
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctrlz: error: ctrlz run --sandbox "
                                                   "refused: "), lines
    assert proc.stdout == "" and not marker.exists()
    show = area.ctrlz("session", "show", "--json")
    assert show.returncode == 0, show.stderr
    session = json.loads(show.stdout)
    assert session["ended"] is not None and session["exit_code"] == 127, session
    return lines[0]


def test_bwrap_without_user_namespaces_is_refused_by_the_run(area: Area,  # noqa: F811
                                                             native: None) -> None:
    """No probe ran before: bwrap's own first line names the cause, in the words a probe's
    answer has, and the agent never started."""
    need("bwrap")
    line = refused_run(area, ["userns"], "bwrap")
    assert "bwrap cannot make a sandbox here: bwrap: " in line, line
    assert line.endswith("try --sandbox=landlock"), line
    check = subprocess.run([*wrapped(area, "userns"), *area.command("sandbox", "check",
                                                                    "--json")],
                           cwd=area.ws, env=area.env, capture_output=True, text=True,
                           timeout=120)
    assert check.stdout, (check.returncode, check.stderr)
    info = json.loads(check.stdout)  # the check still probes, and says the same cause
    assert info["bwrap_reason"] and info["bwrap_reason"] in line, (info, line)


@pytest.mark.parametrize("mode,deny,cause", [
    ("landlock", "landlock_restrict_self", "landlock restrict_self"),
    ("landlock", "seccomp", "seccomp: the kernel refused the filter"),
    ("bwrap", "seccomp", "seccomp: the kernel refused the filter")])
def test_a_launcher_refusal_is_one_line_and_exit_2(area: Area, mode: str,  # noqa: F811
                                                   deny: str, cause: str,
                                                   native: None) -> None:
    """The launcher could not confine itself: it writes the cause for ctrlz (not on the
    agent's stderr) and runs nothing; an exit status alone would read as the agent's 126."""
    need(mode)
    line = refused_run(area, [deny], mode)
    assert f"the sandbox could not be made: {cause}" in line, line


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_a_command_that_exits_126_is_no_refusal(area: Area, mode: str,  # noqa: F811
                                                native: None) -> None:
    need(mode)
    proc = area.ctrlz("run", f"--sandbox={mode}", "--", "sh", "-c", "echo ran; exit 126")
    assert proc.returncode == 126 and proc.stdout == "ran\n", proc.stderr
    assert "refused" not in proc.stderr


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_the_command_is_the_one_its_path_names(area: Area, mode: str,  # noqa: F811
                                               native: None) -> None:
    """``ctrlz run`` finds the command on the agent's PATH (a missing entry skipped, the
    first match taken, as a shell does) and the launcher execs that file once, with the
    command's own argv[0] (a search of its own was one traced ``execve`` per PATH entry)."""
    need(mode)
    first = area.base / "bin"
    first.mkdir()
    (first / "hello").write_text("#!/bin/sh\necho mine\n")
    (first / "hello").chmod(0o755)
    for path in (first, first / "hello"):
        os.chown(path, area.uid, area.uid)
    env = {**area.env, "PATH": f"{area.base / 'missing'}:{first}:{area.env['PATH']}"}
    for argv, want in ((["hello"], "mine\n"),
                       (["cat", "/proc/self/cmdline"], "cat\0/proc/self/cmdline\0")):
        proc = subprocess.run(area.command("run", f"--sandbox={mode}", "--", *argv),
                              cwd=area.ws, env=env, capture_output=True, text=True,
                              timeout=180)
        assert (proc.returncode, proc.stdout) == (0, want), proc.stderr
