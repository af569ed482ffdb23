"""A clone killed with SIGKILL part-way (it cannot clean up) can simply be run again."""

from __future__ import annotations

import json
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
from ctrlz.session.remotes.cloning import clone
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


def test_a_clone_run_again_over_a_killed_clone_someone_has_used_keeps_its_snapshots(
        tmp_path: Path) -> None:
    """Issue 40 §3: the store of a killed clone is usable, and once someone has taken a
    snapshot in it, it is theirs: running the clone again is refused, and removes nothing
    (it used to clear the whole store before it looked at the directory)."""
    _, url = _source(tmp_path)
    home, dest = tmp_path / "home-c", tmp_path / "c"
    _killed_clone("pack-append", url, dest, home)
    (dest / "w").write_text("work\n")
    made = ctrlz("snapshot", "-m", "my work", "--json", cwd=dest, home=home)
    mine = json.loads(made.out)["id"]
    r = ctrlz("clone", url, str(dest), cwd=tmp_path, home=home, ok=False)
    assert "snapshot" in r.err and mine in r.err, r.err
    assert mine in ctrlz("list", cwd=dest, home=home).out
    # emptied by hand, the directory is no invitation either: the store holds "my work"
    (dest / "w").unlink()
    ctrlz("clone", url, str(dest), cwd=tmp_path, home=home, ok=False)
    ctrlz("rollback", mine, cwd=dest, home=home)
    assert (dest / "w").read_text() == "work\n"
    assert len(list((home / "workspaces").iterdir())) == 1


def test_a_killed_clone_whose_directory_was_emptied_is_run_again_when_nothing_else_is_there(
        tmp_path: Path) -> None:
    """What the clone made (and only that) still goes when it is run again: the mark lists
    the snapshots it was about to pull."""
    ws, url = _source(tmp_path)
    home, dest = tmp_path / "home-c", tmp_path / "c"
    _killed_clone("pack-append", url, dest, home)
    ctrlz("status", cwd=dest, home=home, ok=None)  # looking is not using
    ctrlz("clone", url, str(dest), cwd=tmp_path, home=home)
    assert tree_state(dest) == tree_state(ws)
    assert not any((home / "workspaces").glob("*/cloning"))


def test_a_killed_clone_restored_from_since_is_not_started_over(tmp_path: Path) -> None:
    """A restore in the killed clone's store (its undo history) makes it someone's too."""
    _, url = _source(tmp_path)
    home, dest = tmp_path / "home-c", tmp_path / "c"
    _killed_clone("restore-place", url, dest, home)
    ctrlz("rollback", "latest", cwd=dest, home=home)
    subprocess.run(["rm", "-rf", str(dest)], check=True)
    dest.mkdir()
    r = ctrlz("clone", url, str(dest), cwd=tmp_path, home=home, ok=False)
    assert "workspace now" in r.err
    ctrlz("undo", cwd=dest, home=home)  # the store, and what undo needs, are still there


#: a clone held once it has pulled (no lock held), whose restore then fails with EIO
HELD_THEN_FAILS = """
import errno, sys
from ctrlz.state import failpoints
failpoints.arm_pause("clone-pulled", sys.argv[1])
failpoints.arm_error("restore-place", errno.EIO)
from ctrlz.session.remotes.cloning import clone
clone(sys.argv[2], sys.argv[3])
"""


def test_a_failed_clone_keeps_a_store_someone_took_a_snapshot_in_meanwhile(
        tmp_path: Path) -> None:
    """A failed clone removes the store it made, but not once it holds a snapshot the clone
    did not pull: someone took it in DIR while the clone ran, and it is theirs."""
    import time

    _, url = _source(tmp_path)
    home, dest, go = tmp_path / "home-c", tmp_path / "c", tmp_path / "go"
    child = subprocess.Popen([sys.executable, "-c", HELD_THEN_FAILS, str(go), url, str(dest)],
                             env={**os.environ, "CTRLZ_HOME": str(home)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        while not Path(f"{go}.held").exists():  # pulled, not restored yet
            assert child.poll() is None, child.communicate()
            time.sleep(0.01)
        (dest / "w").write_text("work\n")
        made = ctrlz("snapshot", "-m", "my work", "--json", cwd=dest, home=home)
        mine = json.loads(made.out)["id"]
        go.touch()
        _, err = child.communicate(timeout=120)
    finally:
        go.touch()
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode not in (0, -signal.SIGKILL), err.decode()
    assert mine in ctrlz("list", cwd=dest, home=home).out
    assert not any((home / "workspaces").glob("*/cloning"))
    ctrlz("rollback", mine, cwd=dest, home=home)
    assert (dest / "w").read_text() == "work\n"
