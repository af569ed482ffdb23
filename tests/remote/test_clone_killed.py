"""A clone killed with SIGKILL part-way (it cannot clean up) can simply be run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from ..conftest import tree_state
from .conftest import ctrlz, make_ws

#: a child process that arms a kill point, then clones (kill points act in-process only)
CHILD = """
import sys
from ctrlz.state import failpoints
failpoints.arm(sys.argv[1])
from ctrlz.session.cloning import clone
clone(sys.argv[2], sys.argv[3])
"""


def _source(tmp_path: Path) -> tuple[Path, str]:
    home = tmp_path / "home-a"
    ws = make_ws(tmp_path / "a", {"one.txt": "1\n", "d/two.txt": "2\n" * 100,
                                  "big.bin": os.urandom(300_000)}, home)
    ctrlz("snapshot", cwd=ws, home=home)
    url = f"file://{tmp_path}/rem"
    ctrlz("remote", "add", "origin", url, cwd=ws, home=home)
    ctrlz("push", cwd=ws, home=home)
    return ws, url


def _killed_clone(point: str, url: str, dest: Path, home: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD, point, url, str(dest)],
                          env={**os.environ, "CTRLZ_HOME": str(home)}, capture_output=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


def test_a_clone_killed_during_its_pull_can_be_run_again_into_the_same_directory(
        tmp_path: Path) -> None:
    ws, url = _source(tmp_path)
    home, dest = tmp_path / "home-c", tmp_path / "c"
    _killed_clone("pack-append", url, dest, home)
    ctrlz("clone", url, str(dest), cwd=tmp_path, home=home)
    assert tree_state(dest) == tree_state(ws)
    assert len(list((home / "workspaces").iterdir())) == 1
    ctrlz("verify", cwd=dest, home=home)
    ctrlz("push", cwd=dest, home=home)  # the remote is registered once, as origin


def test_a_clone_killed_during_its_restore_can_be_run_again_once_the_directory_is_removed(
        tmp_path: Path) -> None:
    ws, url = _source(tmp_path)
    home, dest = tmp_path / "home-c", tmp_path / "c"
    _killed_clone("restore-place", url, dest, home)
    r = ctrlz("clone", url, str(dest), cwd=tmp_path, home=home, ok=False)
    assert "interrupted clone" in r.err
    subprocess.run(["rm", "-rf", str(dest)], check=True)
    ctrlz("clone", url, str(dest), cwd=tmp_path, home=home)
    assert tree_state(dest) == tree_state(ws)
    assert len(list((home / "workspaces").iterdir())) == 1
