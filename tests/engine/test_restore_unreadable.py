"""A rollback that meets a folder it may not enter (issue 40, section 5): for real, through
the CLI, in-process (``CTRLZ_DAEMON=0``) and through a real workspace daemon.

``nox`` has mode 600: it can be listed but not searched, so neither the capture nor the plan
can look at ``nox/a``. What the restore cannot see it cannot capture, so it leaves it alone
and says so, and restores the rest. A path the user asked for by name that lies there cannot
be restored at all: that fails before anything is written, with one line that names the path
and says nothing was changed. Both doors give the same outcome: before the fix, one answered
``Permission denied (b'a')`` (exit 1) and the other ``the workspace daemon's restore failed:
PermissionError...`` (exit 7).

As root, permission bits bite only without ``CAP_DAC_OVERRIDE``: the CLI (and the daemon it
starts, which inherits the bounding set) runs under ``setpriv`` without it, as root still,
so the interpreter under root's 0700 home stays reachable for the daemon's own exec (a
``setpriv --reuid`` to another user could not start the daemon from this checkout).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import is_root, make_tree

CAPS = "-dac_override,-dac_read_search"
MAIN = "import sys; del sys.argv[0]; from ctrlz.cli import main; sys.exit(main())"


def _prefix() -> list[str]:
    if not is_root():
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to drop CAP_DAC_OVERRIDE as root")
    return [setpriv, f"--bounding-set={CAPS}", f"--inh-caps={CAPS}"]


class Cli:
    """The ``ctrlz`` command line in a workspace, without the power to ignore permissions."""

    def __init__(self, root: Path, daemon: bool) -> None:
        self.root = root
        self.prefix = [*_prefix(), sys.executable, "-P", "-c", MAIN, "ctrlz"]
        self.env = {**os.environ, "CTRLZ_DAEMON": "1" if daemon else "0"}
        self.daemon = daemon

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix, *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=120)


@pytest.fixture(params=["in-process", "daemon"])
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cli]:
    """A workspace with snapshot S1 (``nox/a`` is "a1"), then ``nox/a`` and ``top`` edited
    and ``nox`` made unsearchable (600); with the daemon running for the ``daemon`` case."""
    root = tmp_path / "ws"
    make_tree(root, {"nox": {"a": "a1\n"}, "top": "t1\n"})
    run = Cli(root, daemon=request.param == "daemon")
    for args in (("init",), ("snapshot", "-m", "S1")):
        done = run(*args)
        assert done.returncode == 0, done.stderr
    if request.param == "daemon":
        done = run("daemon", "start")
        assert done.returncode == 0, done.stderr
    (root / "nox" / "a").write_text("a2\n")
    (root / "top").write_text("t2\n")
    os.chmod(root / "nox", 0o600)
    try:
        yield run
    finally:
        os.chmod(root / "nox", 0o755)
        if request.param == "daemon":
            run("daemon", "stop")
    if request.param == "daemon":  # the daemon ran the rollback: its log says how it ended
        [log] = (tmp_path / "ctrlz-home" / "workspaces").glob("*/daemon.log")
        assert "restore to snap_" in log.read_text() or "restore failed: " in log.read_text()


def _stderr_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in done.stderr, done.stderr
    return [line for line in done.stderr.splitlines() if line.strip()]


def test_rollback_leaves_an_unreadable_folder_alone_and_says_so(cli: Cli) -> None:
    done = cli("rollback", "S1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Rolled back to "), done.stdout
    assert "1 modified" in done.stdout
    left = [line for line in _stderr_lines(done) if line.startswith("left alone: nox/a: ")]
    assert len(left) == 1 and "cannot be entered (permission denied)" in left[0], done.stderr
    assert (cli.root / "top").read_text() == "t1\n"
    os.chmod(cli.root / "nox", 0o700)
    assert (cli.root / "nox" / "a").read_text() == "a2\n"  # never written blind


def test_rollback_of_a_path_it_cannot_reach_names_it_and_changes_nothing(cli: Cli) -> None:
    done = cli("rollback", "S1", "nox/a", "top")
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr)
    [line] = _stderr_lines(done)
    assert line.startswith("ctrlz: error: nox/a: "), line
    assert "permission denied" in line and "nothing was changed" in line, line
    assert (cli.root / "top").read_text() == "t2\n"
    if cli.daemon:
        [log] = cli.root.parent.glob("ctrlz-home/workspaces/*/daemon.log")
        assert f"restore failed: {line.removeprefix('ctrlz: error: ')}" in log.read_text()
    os.chmod(cli.root / "nox", 0o700)
    assert (cli.root / "nox" / "a").read_text() == "a2\n"
