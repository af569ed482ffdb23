"""A rollback that meets a folder it may not enter (issue 40, section 5): for real, through
the CLI, in-process (``CTRLZ_DAEMON=0``) and through a real workspace daemon.

``nox`` has mode 600: it can be listed but not searched, so neither the capture nor the plan
can look at ``nox/a``. What the restore cannot see it cannot capture, so it leaves it alone
and says so, and restores the rest. A path the user asked for by name that lies there cannot
be restored at all: that fails before anything is written, with one line that names the path
and says nothing was changed. Both doors give the same outcome: before the fix, one answered
``Permission denied (b'a')`` (exit 1) and the other ``the workspace daemon's restore failed:
PermissionError...`` (exit 7).

As root, the CLI runs as uid 65534 (``nobody``) in a workspace of its own, through the
``other_user`` fixture (whose interpreter that user can reach, so the daemon the CLI starts runs
as that user too); as any other user, as that user itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import NOBODY, OtherUser, is_root, make_tree, needs_watcher

MAIN = "import sys; del sys.argv[0]; from ctrlz.cli import main; sys.exit(main())"


class Cli:
    """The ``ctrlz`` command line in a workspace, as a user that permission bits bind."""

    def __init__(self, root: Path, base: Path, daemon: bool, user: OtherUser | None) -> None:
        self.root = root
        self.daemon = daemon
        self.prefix = (user.ctrlz_command() if user is not None
                       else [sys.executable, "-P", "-c", MAIN, "ctrlz"])
        self.env = {**os.environ, "CTRLZ_DAEMON": "1" if daemon else "0",
                    "CTRLZ_HOME": str(base / "home"), "HOME": str(base),
                    "XDG_CONFIG_HOME": str(base / "config"),
                    "XDG_DATA_HOME": str(base / "data")}

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix, *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=120)

    def daemon_log(self) -> str:
        [log] = self.root.parent.glob("home/workspaces/*/daemon.log")
        return log.read_text()


@pytest.fixture(params=["in-process", "daemon"])
def cli(request: pytest.FixtureRequest) -> Iterator[Cli]:
    """A workspace with snapshot S1 (``nox/a`` is "a1"), then ``nox/a`` and ``top`` edited
    and ``nox`` made unsearchable (600); with the daemon running for the ``daemon`` case."""
    user = request.getfixturevalue("other_user") if is_root() else None
    base = Path(tempfile.mkdtemp(prefix="ctrlz-nox-"))  # tmp_path is root's alone
    os.chmod(base, 0o755)
    root = base / "ws"
    make_tree(root, {"nox": {"a": "a1\n"}, "top": "t1\n"})
    if user is not None:
        for dirpath, dirnames, filenames in os.walk(base):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.lchown(name, NOBODY, NOBODY)
    if request.param == "daemon":
        needs_watcher()
    run = Cli(root, base, daemon=request.param == "daemon", user=user)
    try:
        for args in (("init",), ("snapshot", "-m", "S1")):
            done = run(*args)
            assert done.returncode == 0, done.stderr
        if run.daemon:
            done = run("daemon", "start", "--wait")
            assert done.returncode == 0, done.stderr
        (root / "nox" / "a").write_text("a2\n")
        (root / "top").write_text("t2\n")
        os.chmod(root / "nox", 0o600)
        yield run
    finally:
        if run.daemon:
            run("daemon", "stop")
        if (root / "nox").exists():
            os.chmod(root / "nox", 0o755)
        shutil.rmtree(base, ignore_errors=True)


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
    if cli.daemon:  # the daemon ran it
        assert "restore to snap_" in cli.daemon_log()
    os.chmod(cli.root / "nox", 0o700)
    assert (cli.root / "nox" / "a").read_text() == "a2\n"  # never written blind


def test_rollback_of_a_path_it_cannot_reach_names_it_and_changes_nothing(cli: Cli) -> None:
    done = cli("rollback", "S1", "nox/a", "top")
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr)
    [line] = _stderr_lines(done)
    assert line.startswith("ctrlz: error: nox/a: "), line
    assert "permission denied" in line and "nothing was changed" in line, line
    assert (cli.root / "top").read_text() == "t2\n"
    if cli.daemon:  # the daemon ran it
        assert f"restore failed: {line.removeprefix('ctrlz: error: ')}" in cli.daemon_log()
    os.chmod(cli.root / "nox", 0o700)
    assert (cli.root / "nox" / "a").read_text() == "a2\n"
